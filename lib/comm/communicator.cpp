// The public collectives: validate on the caller's thread into the op's Args
// (validated_args.hpp), then run (blocking) or queue (*_async) through the executor; one generic
// path (Impl::run / Impl::submit) leads from there to algorithms::run_collective.

#include <cohort/communicator.hpp>

#include "comm/communicator_impl.hpp"
#include "gpu/device_support.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cohort {

namespace {

std::vector<std::shared_ptr<void>> owners(const Buffer& a, const Buffer& b) {
  std::vector<std::shared_ptr<void>> result;
  if (a.owner()) result.push_back(a.owner());
  if (b.owner() && b.owner() != a.owner()) result.push_back(b.owner());
  return result;
}

/// What an *_async collective reading `in` and writing `out` holds while queued: the buffers'
/// owners, and the memory that later sends and receives must not touch to be posted ahead of it.
comm::Held held(const Buffer& in, const Buffer& out) {
  return {owners(in, out), comm::Footprint{comm::Footprint::of(in.data(), in.nbytes()),
                                           comm::Footprint::of(out.data(), out.nbytes())}};
}

comm::PointToPoint plan_p2p(const Communicator::Impl& impl, bool is_send, const Buffer& buffer,
                            int peer, int tag) {
  const std::string_view op = is_send ? "send" : "recv";
  if (is_send) {
    comm::check_input(op, "input", buffer);
  } else {
    comm::check_output(op, "output", buffer);
  }
  comm::check_peer(op, peer, impl.rank, impl.size);
  comm::check_tag(op, tag);
  return {is_send, peer, tag, buffer.data(), buffer.nbytes(), {}};
}

comm::Placement where(const Communicator::Impl& impl, Collective kind, const Buffer& in,
                      const Buffer& out, int root) {
  return comm::placement_of(kind, impl.rank, root, in, out);
}

/// A send/receive's deadline, checked (the name is a literal: looking it up per call showed in
/// a small send's profile).
std::chrono::milliseconds p2p_timeout(const Communicator::Impl& impl, bool is_send,
                                      const CollectiveOptions& o) {
  comm::check_timeout(is_send ? "send" : "recv", o.timeout);
  return o.timeout.value_or(impl.default_timeout);
}

/// send/recv on device buffers: NCCL point-to-point, matched in call order per pair of ranks.
Work p2p_on_device(Communicator::Impl& impl, const CollectiveOptions& o, bool is_send,
                   const Buffer& buffer, int peer, int tag, comm::Placement at, bool async) {
  const Collective kind = is_send ? Collective::Send : Collective::Recv;
  plan_p2p(impl, is_send, buffer, peer, tag);  // the same argument checks as the host path
  const std::chrono::milliseconds timeout = p2p_timeout(impl, is_send, o);
  // Last: the first GPU op it lets through binds the communicator's device.
  const gpu::DeviceBackend::Prepared prepared =
      impl.gpu->prepare(collective_name(kind), at.cuda_device, buffer.dtype(), std::nullopt);
  const gpu::DeviceSendRecv op{is_send, buffer.data(), buffer.count(), buffer.dtype(), peer};
  const comm::OpInfo info{kind, Algorithm::Auto, timeout, nullptr};
  const comm::DevicePeers peers{{},
                                is_send ? std::optional(peer) : std::nullopt,
                                is_send ? std::nullopt : std::optional(peer),
                                tag};
  return comm::run_device_op(
      *impl.executor, *impl.gpu, info, prepared, o.stream, async,
      [&op](const gpu::Launch& l) { gpu::enqueue(l, op); }, owners(buffer, Buffer()), peers);
}

}  // namespace

Communicator::Impl::ScratchRetirement::~ScratchRetirement() {
  if (!impl->transport) return;
  try {
    impl->transport->retain_until_quiet(
        impl->tag_id, std::make_shared<algorithms::ScratchPool>(std::move(impl->staging)));
    if (impl->host_groups)
      impl->transport->retain_until_quiet(impl->tag_id, impl->host_groups->take_scratch());
  } catch (const std::bad_alloc&) {
    // Out of memory: freed with the communicator, as before there was anything to keep them.
  }
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() {
  // A fork()ed child's copy: its threads are not in the child, and its connections and shared
  // rings are still the parent's and its peers'. Tearing it down would join threads that do not
  // exist and write into rings others use; the child's exit frees its memory.
  if (impl_ && impl_->fork_generation != fork_generation()) (void)impl_.release();
}

int Communicator::rank() const noexcept {
  return impl_->rank;
}
int Communicator::size() const noexcept {
  return impl_->size;
}
std::uint32_t Communicator::id() const noexcept {
  return impl_->id;
}
std::chrono::milliseconds Communicator::default_timeout() const noexcept {
  return impl_->default_timeout;
}

// ---- state ------------------------------------------------------------------------------------

void Communicator::abort(const std::string& reason) noexcept {
  impl_->executor->abort(reason);
  // The GPU path fails with the executor's cause (set just above, or an earlier failure's).
  if (const std::optional<Error> cause = impl_->executor->error()) impl_->gpu->abort(*cause);
}

bool Communicator::is_poisoned() const {
  return impl_->executor->error().has_value();
}

std::optional<Error> Communicator::error() const {
  return impl_->executor->error();
}

std::string Communicator::dump_trace(const std::string& path) const {
  return impl_->executor->recorder().dump(path, comm::DumpReason::Request);
}

// ---- allreduce / broadcast / reduce ---------------------------------------------------------

void Communicator::allreduce(const Buffer& in, const Buffer& out, ReduceOp op,
                             const CollectiveOptions& o) {
  impl_->run(o, comm::allreduce_args(impl_->group(), in, out, op),
             where(*impl_, Collective::Allreduce, in, out, -1), in, out);
}

Work Communicator::allreduce_async(const Buffer& in, const Buffer& out, ReduceOp op,
                                   const CollectiveOptions& o) {
  return impl_->submit(o, comm::allreduce_args(impl_->group(), in, out, op), held(in, out),
                       where(*impl_, Collective::Allreduce, in, out, -1));
}

void Communicator::broadcast(const Buffer& in, const Buffer& out, int root,
                             const CollectiveOptions& o) {
  impl_->run(o, comm::broadcast_args(impl_->group(), in, out, root),
             where(*impl_, Collective::Broadcast, in, out, root), in, out);
}

Work Communicator::broadcast_async(const Buffer& in, const Buffer& out, int root,
                                   const CollectiveOptions& o) {
  return impl_->submit(o, comm::broadcast_args(impl_->group(), in, out, root), held(in, out),
                       where(*impl_, Collective::Broadcast, in, out, root));
}

void Communicator::reduce(const Buffer& in, const Buffer& out, ReduceOp op, int root,
                          const CollectiveOptions& o) {
  impl_->run(o, comm::reduce_args(impl_->group(), in, out, op, root),
             where(*impl_, Collective::Reduce, in, out, root), in, out);
}

Work Communicator::reduce_async(const Buffer& in, const Buffer& out, ReduceOp op, int root,
                                const CollectiveOptions& o) {
  return impl_->submit(o, comm::reduce_args(impl_->group(), in, out, op, root), held(in, out),
                       where(*impl_, Collective::Reduce, in, out, root));
}

// ---- allgather / gather / scatter (uniform and v) -------------------------------------------

void Communicator::allgather(const Buffer& in, const Buffer& out, const CollectiveOptions& o) {
  impl_->run(o, comm::allgather_args(impl_->group(), in, out, nullptr),
             where(*impl_, Collective::Allgather, in, out, -1), in, out);
}

Work Communicator::allgather_async(const Buffer& in, const Buffer& out,
                                   const CollectiveOptions& o) {
  return impl_->submit(o, comm::allgather_args(impl_->group(), in, out, nullptr), held(in, out),
                       where(*impl_, Collective::Allgather, in, out, -1));
}

void Communicator::allgatherv(const Buffer& in, const Buffer& out,
                              std::span<const std::size_t> counts, const CollectiveOptions& o) {
  impl_->run(o, comm::allgather_args(impl_->group(), in, out, &counts),
             where(*impl_, Collective::Allgather, in, out, -1), in, out);
}

Work Communicator::allgatherv_async(const Buffer& in, const Buffer& out,
                                    std::span<const std::size_t> counts,
                                    const CollectiveOptions& o) {
  return impl_->submit(o, comm::allgather_args(impl_->group(), in, out, &counts), held(in, out),
                       where(*impl_, Collective::Allgather, in, out, -1));
}

void Communicator::gather(const Buffer& in, const Buffer& out, int root,
                          const CollectiveOptions& o) {
  impl_->run(o, comm::gather_args(impl_->group(), in, out, nullptr, root),
             where(*impl_, Collective::Gather, in, out, root), in, out);
}

Work Communicator::gather_async(const Buffer& in, const Buffer& out, int root,
                                const CollectiveOptions& o) {
  return impl_->submit(o, comm::gather_args(impl_->group(), in, out, nullptr, root), held(in, out),
                       where(*impl_, Collective::Gather, in, out, root));
}

void Communicator::gatherv(const Buffer& in, const Buffer& out, std::span<const std::size_t> counts,
                           int root, const CollectiveOptions& o) {
  impl_->run(o, comm::gather_args(impl_->group(), in, out, &counts, root),
             where(*impl_, Collective::Gather, in, out, root), in, out);
}

Work Communicator::gatherv_async(const Buffer& in, const Buffer& out,
                                 std::span<const std::size_t> counts, int root,
                                 const CollectiveOptions& o) {
  return impl_->submit(o, comm::gather_args(impl_->group(), in, out, &counts, root), held(in, out),
                       where(*impl_, Collective::Gather, in, out, root));
}

void Communicator::scatter(const Buffer& in, const Buffer& out, int root,
                           const CollectiveOptions& o) {
  impl_->run(o, comm::scatter_args(impl_->group(), in, out, nullptr, root),
             where(*impl_, Collective::Scatter, in, out, root), in, out);
}

Work Communicator::scatter_async(const Buffer& in, const Buffer& out, int root,
                                 const CollectiveOptions& o) {
  return impl_->submit(o, comm::scatter_args(impl_->group(), in, out, nullptr, root), held(in, out),
                       where(*impl_, Collective::Scatter, in, out, root));
}

void Communicator::scatterv(const Buffer& in, const Buffer& out,
                            std::span<const std::size_t> counts, int root,
                            const CollectiveOptions& o) {
  impl_->run(o, comm::scatter_args(impl_->group(), in, out, &counts, root),
             where(*impl_, Collective::Scatter, in, out, root), in, out);
}

Work Communicator::scatterv_async(const Buffer& in, const Buffer& out,
                                  std::span<const std::size_t> counts, int root,
                                  const CollectiveOptions& o) {
  return impl_->submit(o, comm::scatter_args(impl_->group(), in, out, &counts, root), held(in, out),
                       where(*impl_, Collective::Scatter, in, out, root));
}

// ---- reduce_scatter / alltoall / barrier ----------------------------------------------------

void Communicator::reduce_scatter(const Buffer& in, const Buffer& out, ReduceOp op,
                                  const CollectiveOptions& o) {
  impl_->run(o, comm::reduce_scatter_args(impl_->group(), in, out, op),
             where(*impl_, Collective::ReduceScatter, in, out, -1), in, out);
}

Work Communicator::reduce_scatter_async(const Buffer& in, const Buffer& out, ReduceOp op,
                                        const CollectiveOptions& o) {
  return impl_->submit(o, comm::reduce_scatter_args(impl_->group(), in, out, op), held(in, out),
                       where(*impl_, Collective::ReduceScatter, in, out, -1));
}

void Communicator::alltoall(const Buffer& in, const Buffer& out, const CollectiveOptions& o) {
  impl_->run(o, comm::alltoall_args(impl_->group(), in, out, nullptr, nullptr),
             where(*impl_, Collective::Alltoall, in, out, -1), in, out);
}

Work Communicator::alltoall_async(const Buffer& in, const Buffer& out, const CollectiveOptions& o) {
  return impl_->submit(o, comm::alltoall_args(impl_->group(), in, out, nullptr, nullptr),
                       held(in, out), where(*impl_, Collective::Alltoall, in, out, -1));
}

void Communicator::alltoallv(const Buffer& in, std::span<const std::size_t> send_counts,
                             const Buffer& out, std::span<const std::size_t> recv_counts,
                             const CollectiveOptions& o) {
  impl_->run(o, comm::alltoall_args(impl_->group(), in, out, &send_counts, &recv_counts),
             where(*impl_, Collective::Alltoall, in, out, -1), in, out);
}

Work Communicator::alltoallv_async(const Buffer& in, std::span<const std::size_t> send_counts,
                                   const Buffer& out, std::span<const std::size_t> recv_counts,
                                   const CollectiveOptions& o) {
  return impl_->submit(o, comm::alltoall_args(impl_->group(), in, out, &send_counts, &recv_counts),
                       held(in, out), where(*impl_, Collective::Alltoall, in, out, -1));
}

void Communicator::barrier(const CollectiveOptions& o) {
  impl_->run(o, algorithms::BarrierArgs{}, comm::barrier_placement(o));
}

Work Communicator::barrier_async(const CollectiveOptions& o) {
  return impl_->submit(o, algorithms::BarrierArgs{}, {}, comm::barrier_placement(o));
}

// ---- point-to-point -------------------------------------------------------------------------
// A blocking send may complete only once the receiver posted its receive (large messages use a
// rendezvous), so two ranks that both block in send() to each other deadlock until the timeout,
// exactly as in MPI: let one of them use send_async() (or order the calls).

void Communicator::send(const Buffer& in, int peer, int tag, const CollectiveOptions& o) {
  if (const comm::Placement at = comm::placement_of(in); at.on_device()) {
    p2p_on_device(*impl_, o, true, in, peer, tag, at, false);
    return;
  }
  const comm::PointToPoint p2p = plan_p2p(*impl_, true, in, peer, tag);  // checked first
  try {
    impl_->executor->run_p2p(p2p_timeout(*impl_, true, o), p2p);
  } catch (const Error& e) {
    impl_->retain_after(e, in);
    throw;
  }
}

void Communicator::recv(const Buffer& out, int peer, int tag, const CollectiveOptions& o) {
  if (const comm::Placement at = comm::placement_of(out); at.on_device()) {
    p2p_on_device(*impl_, o, false, out, peer, tag, at, false);
    return;
  }
  const comm::PointToPoint p2p = plan_p2p(*impl_, false, out, peer, tag);  // checked first
  try {
    impl_->executor->run_p2p(p2p_timeout(*impl_, false, o), p2p);
  } catch (const Error& e) {
    impl_->retain_after(e, out);
    throw;
  }
}

void Communicator::sendrecv(const Buffer& in, int dest, const Buffer& out, int source, int tag,
                            const CollectiveOptions& o) {
  // Both halves are checked before either is posted (the same checks as send and recv).
  comm::PointToPoint send = plan_p2p(*impl_, true, in, dest, tag);
  comm::PointToPoint recv = plan_p2p(*impl_, false, out, source, tag);
  const std::chrono::milliseconds timeout = p2p_timeout(*impl_, false, o);
  if (comm::overlaps(in.data(), in.nbytes(), out.data(), out.nbytes()))
    throw Error(ErrorCode::InvalidArgument,
                "the input and output buffers overlap (the receive may land in the send before "
                "it left); pass separate buffers",
                ErrorContext{.op = "sendrecv"});
  const comm::Placement in_at = comm::placement_of(in), out_at = comm::placement_of(out);
  if (in_at.cuda_device != out_at.cuda_device)
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("the input is in {} memory and the output in {}; pass both in host memory "
                    "or both on one device",
                    in_at.on_device() ? fmt::format("cuda:{}", in_at.cuda_device) : "host",
                    out_at.on_device() ? fmt::format("cuda:{}", out_at.cuda_device) : "host"),
        ErrorContext{.op = "sendrecv"});
  if (in_at.on_device()) {
    // One NCCL group for both halves; both dtypes checked before it is queued, the output's
    // first: prepare() binds the communicator's device once it lets an op through.
    gpu::check_device_dtype(gpu::require_runtime("sendrecv"), "sendrecv", out.dtype());
    const gpu::DeviceBackend::Prepared prepared =
        impl_->gpu->prepare("sendrecv", in_at.cuda_device, in.dtype(), std::nullopt);
    const gpu::DeviceExchange op{{true, in.data(), in.count(), in.dtype(), dest},
                                 {false, out.data(), out.count(), out.dtype(), source}};
    const comm::OpInfo info{Collective::Send, Algorithm::Auto, timeout, nullptr};
    comm::run_device_op(
        *impl_->executor, *impl_->gpu, info, prepared, o.stream, false,
        [&op](const gpu::Launch& l) { gpu::enqueue(l, op); }, owners(in, out),
        comm::DevicePeers{"sendrecv", dest, source, tag});
    return;
  }
  recv.owner = out.owner();
  send.owner = in.owner();
  try {
    impl_->executor->run_sendrecv(timeout, std::move(recv), std::move(send));
  } catch (const Error& e) {
    impl_->retain_after(e, in, out);
    throw;
  }
}

Work Communicator::send_async(const Buffer& in, int peer, int tag, const CollectiveOptions& o) {
  if (const comm::Placement at = comm::placement_of(in); at.on_device())
    return p2p_on_device(*impl_, o, true, in, peer, tag, at, true);
  comm::PointToPoint p2p = plan_p2p(*impl_, true, in, peer, tag);
  const std::chrono::milliseconds timeout = p2p_timeout(*impl_, true, o);
  p2p.owner = in.owner();
  return impl_->executor->submit_p2p(timeout, std::move(p2p));
}

Work Communicator::recv_async(const Buffer& out, int peer, int tag, const CollectiveOptions& o) {
  if (const comm::Placement at = comm::placement_of(out); at.on_device())
    return p2p_on_device(*impl_, o, false, out, peer, tag, at, true);
  comm::PointToPoint p2p = plan_p2p(*impl_, false, out, peer, tag);
  const std::chrono::milliseconds timeout = p2p_timeout(*impl_, false, o);
  p2p.owner = out.owner();
  return impl_->executor->submit_p2p(timeout, std::move(p2p));
}

}  // namespace cohort
