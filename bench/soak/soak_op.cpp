#include "soak_op.hpp"

#include <cstring>
#include <numeric>

namespace cohort::soak {
namespace {

// Exclusive prefix sums: where each rank's block starts.
std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> displs(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

std::size_t total(const std::vector<std::size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace

PreparedOp::PreparedOp(const OpSpec& spec, std::uint64_t seed, int rank, int size,
                       std::chrono::milliseconds timeout)
    : spec_(spec),
      source_{seed, spec.index, spec.dtype, spec.op, size},
      rank_(rank),
      size_(size),
      timeout_(timeout) {
  prepare();
}

GuardedRegion PreparedOp::make_region(std::size_t count) const {
  return GuardedRegion(count, spec_.dtype, spec_.misalign);
}

GuardedRegion PreparedOp::make_filled(std::size_t count,
                                      const std::function<void(void*)>& fill) const {
  GuardedRegion region = make_region(count);
  fill(region.data());
  return region;
}

void PreparedOp::expect(const GuardedRegion& region, std::size_t first, std::size_t count,
                        std::function<void(void*)> fill, std::string what) {
  expectations_.push_back({&region, first, count, std::move(fill), std::move(what)});
}

void PreparedOp::expect_unchanged(const GuardedRegion& region, std::function<void(void*)> fill,
                                  std::string what) {
  expect(region, 0, region.count(), std::move(fill), std::move(what) + " (must not be written)");
}

void PreparedOp::expect_untouched(const GuardedRegion& region, std::string what) {
  const std::size_t bytes = region.count() * dtype_size(region.dtype());
  expect(
      region, 0, region.count(),
      [bytes](void* out) { std::memset(out, GuardedRegion::kPoisonByte, bytes); },
      std::move(what) + " (must be ignored)");
}

void PreparedOp::prepare() {
  const int me = rank_;
  const auto n = static_cast<std::size_t>(size_);
  const auto my = static_cast<std::size_t>(me);
  const std::size_t c = spec_.count;
  const bool is_root = me == spec_.root;
  const DataSource s = source_;
  // What rank r's buffer holds at [first, first + count): source data or a reduction input.
  auto source = [s](int r, std::size_t first, std::size_t count) {
    return [s, r, first, count](void* out) { fill_source(s, r, first, count, out); };
  };
  auto contribution = [s](int r, std::size_t first, std::size_t count) {
    return [s, r, first, count](void* out) { fill_contribution(s, r, first, count, out); };
  };
  auto reduction = [s](std::size_t first, std::size_t count) {
    return [s, first, count](void* out) { fill_reduction(s, first, count, out); };
  };

  switch (spec_.collective) {
    case Collective::Allreduce: {
      in_region_ = make_filled(c, contribution(me, 0, c));
      if (spec_.in_place) {
        in_ = out_ = in_region_.view();
        expect(in_region_, 0, c, reduction(0, c), "in-place result");
      } else {
        out_region_ = make_region(c);
        in_ = in_region_.view();
        out_ = out_region_.view();
        expect(out_region_, 0, c, reduction(0, c), "result");
        expect_unchanged(in_region_, contribution(me, 0, c), "input");
      }
      return;
    }
    case Collective::Broadcast: {
      if (spec_.in_place) {
        out_region_ = is_root ? make_filled(c, source(me, 0, c)) : make_region(c);
        in_ = out_ = out_region_.view();
      } else {
        out_region_ = make_region(c);
        out_ = out_region_.view();
        if (is_root || spec_.non_root_buffer) {
          in_region_ = make_filled(c, source(me, 0, c));
          expect_unchanged(in_region_, source(me, 0, c), is_root ? "root input" : "non-root input");
        }
        in_ = in_region_.view();  // empty on a non-root without a buffer
      }
      expect(out_region_, 0, c, source(spec_.root, 0, c), "broadcast data");
      return;
    }
    case Collective::Reduce: {
      in_region_ = make_filled(c, contribution(me, 0, c));
      in_ = in_region_.view();
      expect_unchanged(in_region_, contribution(me, 0, c), "input");
      if (is_root || spec_.non_root_buffer) out_region_ = make_region(c);
      out_ = out_region_.view();
      if (is_root)
        expect(out_region_, 0, c, reduction(0, c), "result at the root");
      else if (out_region_.allocated())
        expect_untouched(out_region_, "non-root output");
      return;
    }
    case Collective::Allgather:
    case Collective::Allgatherv:
    case Collective::Gather:
    case Collective::Gatherv: {
      const bool variable =
          spec_.collective == Collective::Allgatherv || spec_.collective == Collective::Gatherv;
      const bool rooted =
          spec_.collective == Collective::Gather || spec_.collective == Collective::Gatherv;
      counts_ = variable ? spec_.counts : std::vector<std::size_t>(n, c);
      const std::vector<std::size_t> displs = displacements(counts_);
      const std::size_t all = total(counts_);
      const bool receives = !rooted || is_root;
      const bool in_place = spec_.in_place && receives;
      if (receives || spec_.non_root_buffer) out_region_ = make_region(all);
      out_ = out_region_.view();
      if (in_place) {
        source(me, 0, counts_[my])(out_region_.data(displs[my]));
        in_ = out_region_.view(displs[my], counts_[my]);
      } else {
        in_region_ = make_filled(counts_[my], source(me, 0, counts_[my]));
        in_ = in_region_.view();
        expect_unchanged(in_region_, source(me, 0, counts_[my]), "input");
      }
      if (receives) {
        for (std::size_t r = 0; r < n; ++r) {
          expect(out_region_, displs[r], counts_[r], source(static_cast<int>(r), 0, counts_[r]),
                 "block from rank " + std::to_string(r));
        }
      } else if (out_region_.allocated()) {
        expect_untouched(out_region_, "non-root output");
      }
      if (!variable) counts_.clear();  // the call takes no counts
      return;
    }
    case Collective::Scatter:
    case Collective::Scatterv: {
      const bool variable = spec_.collective == Collective::Scatterv;
      counts_ = variable ? spec_.counts : std::vector<std::size_t>(n, c);
      const std::vector<std::size_t> displs = displacements(counts_);
      const std::size_t all = total(counts_);
      const int root = spec_.root;
      if (is_root || spec_.non_root_buffer) {
        // A non-root's buffer holds its own data, which must not be read into anyone's result.
        const int owner = is_root ? root : me;
        in_region_ = make_filled(all, source(owner, 0, all));
        expect_unchanged(in_region_, source(owner, 0, all),
                         is_root ? "root input" : "non-root input");
      }
      in_ = in_region_.view();
      if (is_root && spec_.in_place) {
        // The output is the root's own block of its input, which already holds its data: the
        // input-unchanged expectation covers it.
        out_ = in_region_.view(displs[my], counts_[my]);
      } else {
        out_region_ = make_region(counts_[my]);
        out_ = out_region_.view();
        expect(out_region_, 0, counts_[my], source(root, displs[my], counts_[my]),
               "block from the root");
      }
      if (!variable) counts_.clear();
      return;
    }
    case Collective::ReduceScatter: {
      in_region_ = make_filled(n * c, contribution(me, 0, n * c));
      in_ = in_region_.view();
      if (spec_.in_place) {
        // Only this rank's block is defined afterwards; the rest of the input is scratch.
        out_ = in_region_.view(my * c, c);
        expect(in_region_, my * c, c, reduction(my * c, c), "in-place block");
      } else {
        out_region_ = make_region(c);
        out_ = out_region_.view();
        expect(out_region_, 0, c, reduction(my * c, c), "block");
        expect_unchanged(in_region_, contribution(me, 0, n * c), "input");
      }
      return;
    }
    case Collective::Alltoall: {
      in_region_ = make_filled(n * c, source(me, 0, n * c));
      const GuardedRegion* result = &in_region_;
      if (spec_.in_place) {
        in_ = out_ = in_region_.view();
      } else {
        out_region_ = make_region(n * c);
        in_ = in_region_.view();
        out_ = out_region_.view();
        result = &out_region_;
        expect_unchanged(in_region_, source(me, 0, n * c), "input");
      }
      for (std::size_t j = 0; j < n; ++j) {
        expect(*result, j * c, c, source(static_cast<int>(j), my * c, c),
               "slice from rank " + std::to_string(j));
      }
      return;
    }
    case Collective::Alltoallv: {
      // counts[i * n + j]: elements rank i sends to rank j.
      const std::vector<std::size_t>& m = spec_.counts;
      counts_.assign(m.begin() + static_cast<std::ptrdiff_t>(my * n),
                     m.begin() + static_cast<std::ptrdiff_t>((my + 1) * n));
      recv_counts_.resize(n);
      for (std::size_t j = 0; j < n; ++j) recv_counts_[j] = m[j * n + my];
      in_region_ = make_filled(total(counts_), source(me, 0, total(counts_)));
      out_region_ = make_region(total(recv_counts_));
      in_ = in_region_.view();
      out_ = out_region_.view();
      expect_unchanged(in_region_, source(me, 0, total(counts_)), "input");
      const std::vector<std::size_t> recv_displs = displacements(recv_counts_);
      for (std::size_t j = 0; j < n; ++j) {
        // Where rank j's slice for this rank starts in rank j's input.
        std::size_t sender_offset = 0;
        for (std::size_t t = 0; t < my; ++t) sender_offset += m[j * n + t];
        expect(out_region_, recv_displs[j], recv_counts_[j],
               source(static_cast<int>(j), sender_offset, recv_counts_[j]),
               "slice from rank " + std::to_string(j));
      }
      return;
    }
    case Collective::Send: {
      const int from = (me - spec_.shift + size_) % size_;
      in_region_ = make_filled(c, source(me, 0, c));
      out_region_ = make_region(c);
      in_ = in_region_.view();
      out_ = out_region_.view();
      expect_unchanged(in_region_, source(me, 0, c), "sent buffer");
      expect(out_region_, 0, c, source(from, 0, c), "message from rank " + std::to_string(from));
      return;
    }
    case Collective::Barrier:
    default: return;
  }
}

CollectiveOptions PreparedOp::options() const {
  CollectiveOptions o;
  if (spec_.explicit_timeout) o.timeout = timeout_;
  o.algorithm = spec_.algorithm;
  return o;
}

void PreparedOp::run(Communicator& comm) {
  const CollectiveOptions o = options();
  const OpSpec& s = spec_;
  switch (s.collective) {
    case Collective::Allreduce: comm.allreduce(in_, out_, s.op, o); return;
    case Collective::Broadcast: comm.broadcast(in_, out_, s.root, o); return;
    case Collective::Reduce: comm.reduce(in_, out_, s.op, s.root, o); return;
    case Collective::Allgather: comm.allgather(in_, out_, o); return;
    case Collective::Allgatherv: comm.allgatherv(in_, out_, counts_, o); return;
    case Collective::Gather: comm.gather(in_, out_, s.root, o); return;
    case Collective::Gatherv: comm.gatherv(in_, out_, counts_, s.root, o); return;
    case Collective::Scatter: comm.scatter(in_, out_, s.root, o); return;
    case Collective::Scatterv: comm.scatterv(in_, out_, counts_, s.root, o); return;
    case Collective::ReduceScatter: comm.reduce_scatter(in_, out_, s.op, o); return;
    case Collective::Alltoall: comm.alltoall(in_, out_, o); return;
    case Collective::Alltoallv: comm.alltoallv(in_, counts_, out_, recv_counts_, o); return;
    case Collective::Barrier: comm.barrier(o); return;
    case Collective::Send: {
      // Every rank sends before it receives, so the send must not block: a blocking send would
      // wait for a receive its peer posts only after its own send completes.
      Work sent = comm.send_async(in_, (rank_ + s.shift) % size_, s.tag, o);
      try {
        comm.recv(out_, (rank_ - s.shift + size_) % size_, s.tag, o);
      } catch (...) {
        try {
          sent.wait();  // the send reads in_: it must be over before the buffers go
        } catch (const Error&) {
          // The receive's error is the one to report; the send failed for the same reason.
        }
        throw;
      }
      sent.wait();
      return;
    }
    default: throw std::logic_error("soak: run: unexpected collective");
  }
}

std::vector<Work> PreparedOp::start(Communicator& comm) {
  const CollectiveOptions o = options();
  const OpSpec& s = spec_;
  switch (s.collective) {
    case Collective::Allreduce: return {comm.allreduce_async(in_, out_, s.op, o)};
    case Collective::Broadcast: return {comm.broadcast_async(in_, out_, s.root, o)};
    case Collective::Reduce: return {comm.reduce_async(in_, out_, s.op, s.root, o)};
    case Collective::Allgather: return {comm.allgather_async(in_, out_, o)};
    case Collective::Allgatherv: return {comm.allgatherv_async(in_, out_, counts_, o)};
    case Collective::Gather: return {comm.gather_async(in_, out_, s.root, o)};
    case Collective::Gatherv: return {comm.gatherv_async(in_, out_, counts_, s.root, o)};
    case Collective::Scatter: return {comm.scatter_async(in_, out_, s.root, o)};
    case Collective::Scatterv: return {comm.scatterv_async(in_, out_, counts_, s.root, o)};
    case Collective::ReduceScatter: return {comm.reduce_scatter_async(in_, out_, s.op, o)};
    case Collective::Alltoall: return {comm.alltoall_async(in_, out_, o)};
    case Collective::Alltoallv: return {comm.alltoallv_async(in_, counts_, out_, recv_counts_, o)};
    case Collective::Barrier: return {comm.barrier_async(o)};
    case Collective::Send: {
      std::vector<Work> works;
      works.push_back(comm.send_async(in_, (rank_ + s.shift) % size_, s.tag, o));
      works.push_back(comm.recv_async(out_, (rank_ - s.shift + size_) % size_, s.tag, o));
      return works;
    }
    default: throw std::logic_error("soak: start: unexpected collective");
  }
}

std::string PreparedOp::describe_on(const std::string& where) const {
  return describe(spec_) + " on " + where + " as rank " + std::to_string(rank_) + " of " +
         std::to_string(size_);
}

void PreparedOp::check() const {
  std::vector<std::uint8_t> expected;
  for (const Expectation& e : expectations_) {
    expected.assign(e.count * dtype_size(spec_.dtype), 0);
    e.fill(expected.data());
    const std::string difference =
        first_difference(spec_.dtype, e.region->data(e.first), expected.data(), e.count);
    if (!difference.empty()) throw CheckFailure(e.what + ": " + difference);
  }
  for (const GuardedRegion* region : {&in_region_, &out_region_}) {
    const std::string damage = region->damaged_guard();
    if (!damage.empty())
      throw CheckFailure((region == &in_region_ ? "input: " : "output: ") + damage);
  }
}

}  // namespace cohort::soak
