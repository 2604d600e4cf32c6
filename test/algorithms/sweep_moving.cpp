// The data-moving collectives of the sweep: broadcast, allgather, gather, scatter, alltoall
// (uniform and v-count layouts with gaps that must stay untouched) and barrier.

#include "sweep_data.hpp"
#include "sweep_rank.hpp"

#include "algorithms/dispatch.hpp"
#include "algorithms/selection.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace cohort::sweep {
namespace {

/// Elements left unused between blocks of the varied layouts.
constexpr std::size_t kGap = 3;

/// Where each rank's block sits in a gathered buffer.
struct Layout {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> displs;
  std::size_t extent = 0;  ///< elements spanned, gaps included
  bool uniform = true;
};

Layout uniform_layout(std::size_t count, int size) {
  Layout l;
  for (int r = 0; r < size; ++r) {
    l.counts.push_back(count);
    l.displs.push_back(count * static_cast<std::size_t>(r));
  }
  l.extent = count * static_cast<std::size_t>(size);
  return l;
}

/// Rank 1's block is empty, the others differ in size, blocks sit in reverse rank order with
/// kGap unused elements after each: exercises v-counts, empty blocks and non-contiguous layouts.
Layout varied_layout(std::size_t count, int size) {
  Layout l;
  l.uniform = false;
  l.counts.resize(static_cast<std::size_t>(size));
  l.displs.resize(static_cast<std::size_t>(size));
  for (int r = size - 1; r >= 0; --r) {
    const auto i = static_cast<std::size_t>(r);
    l.counts[i] = r == 1 ? 0 : count + i;
    l.displs[i] = l.extent;
    l.extent += l.counts[i] + kGap;
  }
  return l;
}

std::size_t sum(const std::vector<std::size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

std::size_t total_of(const Layout& l) {
  return sum(l.counts);
}

std::vector<Layout> layouts(const SweepPlan& plan, std::size_t count, int size) {
  std::vector<Layout> result{uniform_layout(count, size)};
  if (plan.layouts) result.push_back(varied_layout(count, size));
  return result;
}

/// A poisoned buffer of the layout's extent holding every rank's block (salt, rank) in place.
Bytes gathered(const Layout& l, DType dtype, std::uint64_t salt) {
  const std::size_t es = dtype_size(dtype);
  Bytes buf(l.extent * es, kPoison);
  for (std::size_t r = 0; r < l.counts.size(); ++r)
    fill_contribution(dtype, ReduceOp::Sum, static_cast<int>(r), salt, 0, l.counts[r],
                      buf.data() + l.displs[r] * es);
  return buf;
}

Bytes block_of(int rank, const Layout& l, DType dtype, std::uint64_t salt) {
  const auto r = static_cast<std::size_t>(rank);
  Bytes block(l.counts[r] * dtype_size(dtype));
  fill_contribution(dtype, ReduceOp::Sum, rank, salt, 0, l.counts[r], block.data());
  return block;
}

std::string layout_name(const Layout& l) {
  return l.uniform ? "uniform" : "varied";
}

/// Elements per rank for the gathering collectives: keep the total near kLargeCount.
std::size_t per_rank(std::size_t count, int size) {
  return count == kLargeCount ? kLargeCount / static_cast<std::size_t>(size) + 1 : count;
}

}  // namespace

void SweepRank::broadcast(const SweepPlan& plan) {
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Broadcast)) {
    std::size_t k = 0;
    for (const Case& c : moving_cases(plan)) {
      for (int root : roots()) {
        // Neighbouring cases alternate: the root's data in its output already (in place), or in
        // an input of its own that the algorithm must also copy into its output.
        const bool in_place = k++ % 2 == 0;
        auto ctx = context(Collective::Broadcast);
        const std::uint64_t salt = ctx.seq;
        Bytes expected(c.count * dtype_size(c.dtype));
        fill_contribution(c.dtype, ReduceOp::Sum, root, salt, 0, c.count, expected.data());
        const Bytes input = expected;
        Bytes buf = rank_ == root && in_place ? expected : Bytes(expected.size(), kPoison);
        const void* in = rank_ != root ? nullptr : in_place ? buf.data() : input.data();
        const std::string what =
            describe(Collective::Broadcast, algorithm, c, rank_, size_,
                     "root " + std::to_string(root) + (in_place ? ", in place" : ""));
        const Algorithm ran = algorithms::run_collective(
            ctx, staging_, algorithms::BroadcastArgs{in, buf.data(), c.count, c.dtype, root},
            algorithm);
        check_ran(Collective::Broadcast, algorithm, ran, true, what);
        const auto mismatch = first_mismatch(c.dtype, buf.data(), expected.data(), c.count);
        expect(mismatch.empty(), what + ": " + mismatch);
        if (in != buf.data() && in != nullptr) {  // only an out-of-place root's input was read
          const auto changed = first_mismatch(c.dtype, input.data(), expected.data(), c.count);
          expect(changed.empty(), what + ": the root's input changed: " + changed);
        }
      }
    }
  }
}

void SweepRank::allgather(const SweepPlan& plan) {
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Allgather)) {
    for (const Case& c : moving_cases(plan)) {
      for (const Layout& l : layouts(plan, per_rank(c.count, size_), size_)) {
        const std::size_t es = dtype_size(c.dtype);
        auto ctx = context(Collective::Allgather);
        const std::uint64_t salt = ctx.seq;
        const auto expected = gathered(l, c.dtype, salt);
        // The caller has already put this rank's block in place.
        Bytes buf(expected.size(), kPoison);
        const auto mine = block_of(rank_, l, c.dtype, salt);
        if (!mine.empty())
          std::memcpy(buf.data() + l.displs[static_cast<std::size_t>(rank_)] * es, mine.data(),
                      mine.size());
        const std::string what =
            describe(Collective::Allgather, algorithm, c, rank_, size_, layout_name(l));
        const Algorithm ran = algorithms::run_collective(
            ctx, staging_,
            algorithms::AllgatherArgs{buf.data() + l.displs[static_cast<std::size_t>(rank_)] * es,
                                      buf.data(), l.counts, l.displs, total_of(l), c.dtype,
                                      !l.uniform},
            algorithm);
        check_ran(Collective::Allgather, algorithm, ran, l.uniform, what);
        const auto mismatch = first_mismatch(c.dtype, buf.data(), expected.data(), l.extent);
        expect(mismatch.empty(), what + ": " + mismatch);
      }
    }
  }
}

void SweepRank::gather(const SweepPlan& plan) {
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Gather)) {
    for (const Case& c : moving_cases(plan)) {
      for (const Layout& l : layouts(plan, per_rank(c.count, size_), size_)) {
        for (int root : roots()) {
          const std::size_t es = dtype_size(c.dtype);
          auto ctx = context(Collective::Gather);
          const std::uint64_t salt = ctx.seq;
          const auto expected = gathered(l, c.dtype, salt);
          const auto mine = block_of(rank_, l, c.dtype, salt);
          // Alternately in place (the root's block already in out, passed as its input) and
          // out of place (the algorithm copies the root's block from its input).
          const bool in_place = ctx.seq % 2 == 1;
          Bytes out;
          const unsigned char* in = mine.data();
          if (rank_ == root) {
            out.assign(expected.size(), kPoison);
            unsigned char* own = out.data() + l.displs[static_cast<std::size_t>(rank_)] * es;
            if (in_place) {
              if (!mine.empty()) std::memcpy(own, mine.data(), mine.size());
              in = own;
            }
          }
          const std::string what = describe(Collective::Gather, algorithm, c, rank_, size_,
                                            layout_name(l) + " root " + std::to_string(root) +
                                                (rank_ == root && in_place ? " in place" : ""));
          const Algorithm ran = algorithms::run_collective(
              ctx, staging_,
              algorithms::GatherArgs{in, rank_ == root ? out.data() : nullptr, l.counts, l.displs,
                                     total_of(l), c.dtype, root, !l.uniform},
              algorithm);
          check_ran(Collective::Gather, algorithm, ran, l.uniform, what);
          if (rank_ == root) {
            const auto mismatch = first_mismatch(c.dtype, out.data(), expected.data(), l.extent);
            expect(mismatch.empty(), what + ": " + mismatch);
          }
        }
      }
    }
  }
}

void SweepRank::scatter(const SweepPlan& plan) {
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Scatter)) {
    for (const Case& c : moving_cases(plan)) {
      for (const Layout& l : layouts(plan, per_rank(c.count, size_), size_)) {
        for (int root : roots()) {
          auto ctx = context(Collective::Scatter);
          const std::uint64_t salt = ctx.seq;
          auto in = rank_ == root ? gathered(l, c.dtype, salt) : Bytes{};
          const auto expected = block_of(rank_, l, c.dtype, salt);
          Bytes out(expected.size(), kPoison);
          // Alternately in place (the root's output is its own block of its input, which the
          // algorithm must leave alone) and out of place (the algorithm copies it).
          const bool in_place = rank_ == root && ctx.seq % 2 == 1;
          unsigned char* into = out.data();
          if (in_place)
            into = in.data() + l.displs[static_cast<std::size_t>(rank_)] * dtype_size(c.dtype);
          const std::string what = describe(
              Collective::Scatter, algorithm, c, rank_, size_,
              layout_name(l) + " root " + std::to_string(root) + (in_place ? " in place" : ""));
          const Algorithm ran = algorithms::run_collective(
              ctx, staging_,
              algorithms::ScatterArgs{rank_ == root ? in.data() : nullptr, into, l.counts, l.displs,
                                      total_of(l), c.dtype, root, !l.uniform},
              algorithm);
          check_ran(Collective::Scatter, algorithm, ran, l.uniform, what);
          const auto mismatch = first_mismatch(c.dtype, into, expected.data(),
                                               l.counts[static_cast<std::size_t>(rank_)]);
          expect(mismatch.empty(), what + ": " + mismatch);
        }
      }
    }
  }
}

void SweepRank::alltoall(const SweepPlan& plan) {
  const auto n = static_cast<std::size_t>(size_);
  const auto me = static_cast<std::size_t>(rank_);
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Alltoall)) {
    int k = 0;
    for (const Case& c : moving_cases(plan)) {
      const std::size_t block = c.count == kLargeCount ? kLargeCount / (n * n) + 1 : c.count;
      ++k;
      for (bool uniform : {true, false}) {
        if (!uniform && !plan.layouts) continue;
        // Neighbouring cases alternate, and a case's two layouts differ: one buffer for input
        // and output (in place: the receive layout is the send layout, so the sizes must be
        // symmetric), or two. Every other varied case with two layouts puts them in one
        // allocation, overlapping, with this rank's own block at the same address in both (the
        // staged exchange then leaves that block where it is).
        const bool in_place = (k + (uniform ? 0 : 1)) % 2 == 1;
        const bool overlapping = !uniform && !in_place && k % 4 == 3;
        // Elements rank `from` sends rank `to`: varied sizes with some empty blocks.
        auto amount = [&](std::size_t from, std::size_t to) {
          if (uniform) return block;
          if (in_place) return (from + to + block) % 4 == 0 ? std::size_t{0} : block + from + to;
          return (from + 2 * to + block) % 4 == 0 ? std::size_t{0} : block + from + to;
        };
        const std::size_t es = dtype_size(c.dtype);
        auto ctx = context(Collective::Alltoall);
        const std::uint64_t salt = ctx.seq;
        // Send blocks packed in rank order; receive blocks in reverse order with gaps, or in
        // place where they were sent from.
        std::vector<std::size_t> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
        std::size_t send_total = 0, recv_extent = 0;
        for (std::size_t j = 0; j < n; ++j) {
          send_counts[j] = amount(me, j);
          send_displs[j] = send_total;
          send_total += send_counts[j];
        }
        for (std::size_t j = n; j-- > 0;) {
          recv_counts[j] = amount(j, me);
          recv_displs[j] = in_place ? send_displs[j] : recv_extent;
          recv_extent += recv_counts[j] + (uniform || in_place ? 0 : kGap);
        }
        // In place and overlapping, one poisoned allocation holds the input at `in_at` and the
        // output at `out_at` bytes, own blocks at one address; otherwise each has its own (so
        // AddressSanitizer sees a write past either).
        const std::size_t own_send = send_displs[me] * es;
        const std::size_t own_recv = recv_displs[me] * es;
        const bool shared = in_place || overlapping;
        const std::size_t in_at = own_recv > own_send ? own_recv - own_send : 0;
        const std::size_t out_at = in_at + own_send - own_recv;
        Bytes memory(shared ? std::max(in_at + send_total * es, out_at + recv_extent * es)
                            : recv_extent * es,
                     kPoison);
        Bytes separate_in(shared ? 0 : send_total * es);
        unsigned char* in = shared ? memory.data() + in_at : separate_in.data();
        unsigned char* result = shared ? memory.data() + out_at : memory.data();
        // Block from `from` to `to` carries (from, salt * 64 + to) data.
        for (std::size_t j = 0; j < n; ++j)
          fill_contribution(c.dtype, ReduceOp::Sum, rank_, salt * 64 + j, 0, send_counts[j],
                            in + send_displs[j] * es);
        // The output's gaps keep what was there before the call, overlapping input included.
        Bytes expected(result, result + recv_extent * es);
        for (std::size_t j = 0; j < n; ++j)
          fill_contribution(c.dtype, ReduceOp::Sum, static_cast<int>(j), salt * 64 + me, 0,
                            recv_counts[j], expected.data() + recv_displs[j] * es);
        const std::string what = describe(Collective::Alltoall, algorithm, c, rank_, size_,
                                          std::string(uniform ? "uniform" : "varied") +
                                              (in_place      ? " in place"
                                               : overlapping ? " overlapping, own block aligned"
                                                             : ""));
        const Algorithm ran = algorithms::run_collective(
            ctx, staging_,
            algorithms::AlltoallArgs{in, result, send_counts, send_displs, recv_counts, recv_displs,
                                     send_total, sum(recv_counts), c.dtype, uniform},
            algorithm);
        check_ran(Collective::Alltoall, algorithm, ran, uniform, what);
        const auto mismatch = first_mismatch(c.dtype, result, expected.data(), recv_extent);
        expect(mismatch.empty(), what + ": " + mismatch);
      }
    }
  }
}

void SweepRank::barrier() {
  // Each rank counts itself in through the store before the barrier; nobody may leave the
  // barrier before every rank has counted itself in.
  for (int i = 0; i < 6; ++i) {
    const Algorithm algorithm = i % 2 ? Algorithm::SharedMemory : Algorithm::Dissemination;
    const int round = barrier_rounds_++;
    const std::string key = "sweep-barrier/" + std::to_string(round);
    store_->add(key, 1);
    auto ctx = context(Collective::Barrier);
    const Algorithm ran =
        algorithms::run_collective(ctx, staging_, algorithms::BarrierArgs{}, algorithm);
    expect(ran == algorithm, "barrier ran " + std::string(algorithm_name(ran)) + " instead of " +
                                 std::string(algorithm_name(algorithm)));
    const auto arrived = store_->add(key, 0);
    expect(arrived == size_, "barrier round " + std::to_string(round) + ": left after only " +
                                 std::to_string(arrived) + " of " + std::to_string(size_) +
                                 " ranks arrived (rank " + std::to_string(rank_) + ")");
  }
}

}  // namespace cohort::sweep
