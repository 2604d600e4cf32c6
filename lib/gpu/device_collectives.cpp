// What each op queues on NCCL. NCCL's own collectives where it has one (their in-place forms
// match cohort's: allgather's input at the rank's block of the output, reduce_scatter's output
// at the rank's block of the input). The v-forms, gather, scatter and alltoall are grouped
// sends and receives (one ncclGroupStart/End, so NCCL schedules them together and no ordering
// between peers can deadlock); this rank's own block is a device copy on the same stream.

#include "gpu/device_backend.hpp"

#include <cohort/error.hpp>

#include <cstddef>

namespace cohort::gpu {
namespace {

const std::byte* at(const void* base, std::size_t elements, DType dtype) {
  return static_cast<const std::byte*>(base) + elements * dtype_size(dtype);
}
std::byte* at(void* base, std::size_t elements, DType dtype) {
  return static_cast<std::byte*>(base) + elements * dtype_size(dtype);
}

/// Copies this rank's own block unless it is already in place.
void copy_own(const Launch& l, void* dst, const void* src, std::size_t count, DType dtype) {
  if (dst != src && count > 0) l.runtime.copy_async(dst, src, count * dtype_size(dtype), l.stream);
}

/// ncclGroupStart/End around `body`, ending the group even when a call inside throws (a group
/// left open would swallow the next op's calls).
template <class F>
void grouped(const Launch& l, F&& body) {
  l.runtime.nccl_group_start();
  try {
    body();
  } catch (...) {
    try {
      l.runtime.nccl_group_end();
    } catch (...) {
      // The first error is the one to report.
    }
    throw;
  }
  l.runtime.nccl_group_end();
}

}  // namespace

void enqueue(const Launch& l, const algorithms::AllreduceArgs& a) {
  l.runtime.nccl_allreduce(a.in, a.out, a.count, a.dtype, a.op, l.comm, l.stream);
}

void enqueue(const Launch& l, const algorithms::BroadcastArgs& a) {
  l.runtime.nccl_broadcast(a.in, a.out, a.count, a.dtype, a.root, l.comm, l.stream);
}

void enqueue(const Launch& l, const algorithms::ReduceArgs& a) {
  l.runtime.nccl_reduce(a.in, a.out, a.count, a.dtype, a.op, a.root, l.comm, l.stream);
}

void enqueue(const Launch& l, const algorithms::AllgatherArgs& a) {
  if (!a.variable) {
    const std::size_t count = a.counts.empty() ? 0 : a.counts[0];
    l.runtime.nccl_allgather(a.in, a.out, count, a.dtype, l.comm, l.stream);
    return;
  }
  const auto me = static_cast<std::size_t>(l.rank);
  grouped(l, [&] {
    for (int peer = 0; peer < l.size; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      if (peer == l.rank) continue;
      if (a.counts[me] > 0)
        l.runtime.nccl_send(a.in, a.counts[me], a.dtype, peer, l.comm, l.stream);
      if (a.counts[p] > 0)
        l.runtime.nccl_recv(at(a.out, a.displs[p], a.dtype), a.counts[p], a.dtype, peer, l.comm,
                            l.stream);
    }
    copy_own(l, at(a.out, a.displs[me], a.dtype), a.in, a.counts[me], a.dtype);
  });
}

void enqueue(const Launch& l, const algorithms::GatherArgs& a) {
  const auto me = static_cast<std::size_t>(l.rank);
  if (l.rank != a.root) {
    if (a.counts[me] > 0)
      l.runtime.nccl_send(a.in, a.counts[me], a.dtype, a.root, l.comm, l.stream);
    return;
  }
  grouped(l, [&] {
    for (int peer = 0; peer < l.size; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      if (peer != l.rank && a.counts[p] > 0)
        l.runtime.nccl_recv(at(a.out, a.displs[p], a.dtype), a.counts[p], a.dtype, peer, l.comm,
                            l.stream);
    }
    copy_own(l, at(a.out, a.displs[me], a.dtype), a.in, a.counts[me], a.dtype);
  });
}

void enqueue(const Launch& l, const algorithms::ScatterArgs& a) {
  const auto me = static_cast<std::size_t>(l.rank);
  if (l.rank != a.root) {
    if (a.counts[me] > 0)
      l.runtime.nccl_recv(a.out, a.counts[me], a.dtype, a.root, l.comm, l.stream);
    return;
  }
  grouped(l, [&] {
    for (int peer = 0; peer < l.size; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      if (peer != l.rank && a.counts[p] > 0)
        l.runtime.nccl_send(at(a.in, a.displs[p], a.dtype), a.counts[p], a.dtype, peer, l.comm,
                            l.stream);
    }
    copy_own(l, a.out, at(a.in, a.displs[me], a.dtype), a.counts[me], a.dtype);
  });
}

void enqueue(const Launch& l, const algorithms::ReduceScatterArgs& a) {
  l.runtime.nccl_reduce_scatter(a.in, a.out, a.count, a.dtype, a.op, l.comm, l.stream);
}

void enqueue(const Launch& l, const algorithms::AlltoallArgs& a) {
  const auto me = static_cast<std::size_t>(l.rank);
  grouped(l, [&] {
    for (int peer = 0; peer < l.size; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      if (peer == l.rank) continue;
      if (a.send_counts[p] > 0)
        l.runtime.nccl_send(at(a.in, a.send_displs[p], a.dtype), a.send_counts[p], a.dtype, peer,
                            l.comm, l.stream);
      if (a.recv_counts[p] > 0)
        l.runtime.nccl_recv(at(a.out, a.recv_displs[p], a.dtype), a.recv_counts[p], a.dtype, peer,
                            l.comm, l.stream);
    }
    copy_own(l, at(a.out, a.recv_displs[me], a.dtype), at(a.in, a.send_displs[me], a.dtype),
             a.send_counts[me], a.dtype);
  });
}

void enqueue(const Launch& l, const algorithms::BarrierArgs&) {
  // A one-element allreduce: it cannot finish on any rank before every rank queued it. The
  // word's value is never read.
  l.runtime.nccl_allreduce(l.barrier_word, l.barrier_word, 1, DType::Int32, ReduceOp::Sum, l.comm,
                           l.stream);
}

void enqueue(const Launch& l, const DeviceSendRecv& a) {
  if (a.is_send) {
    l.runtime.nccl_send(a.data, a.count, a.dtype, a.peer, l.comm, l.stream);
  } else {
    l.runtime.nccl_recv(a.data, a.count, a.dtype, a.peer, l.comm, l.stream);
  }
}

void enqueue(const Launch& l, const DeviceExchange& a) {
  grouped(l, [&] {
    enqueue(l, a.recv);
    enqueue(l, a.send);
  });
}

}  // namespace cohort::gpu
