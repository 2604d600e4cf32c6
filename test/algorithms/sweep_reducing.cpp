// The reducing collectives of the sweep: allreduce, reduce, reduce_scatter, every algorithm,
// in place and out of place, checked bit for bit against sweep_data's reference.

#include "sweep_data.hpp"
#include "sweep_rank.hpp"

#include "algorithms/dispatch.hpp"
#include "algorithms/selection.hpp"

#include <cstring>
#include <vector>

namespace cohort::sweep {
namespace {

Bytes poisoned(std::size_t bytes) {
  return Bytes(bytes, kPoison);
}

}  // namespace

void SweepRank::allreduce(const SweepPlan& plan) {
  const auto cases = reducing_cases(plan);
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Allreduce)) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const bool in_place = i % 2 == 1;  // neighbouring cases alternate
      const std::size_t es = dtype_size(c.dtype);
      auto ctx = context(Collective::Allreduce);
      const std::uint64_t salt = ctx.seq;
      Bytes in(c.count * es), out = poisoned(c.count * es);
      fill_contribution(c.dtype, c.op, rank_, salt, 0, c.count, in.data());
      void* result = in_place ? in.data() : out.data();
      const std::string what =
          describe(Collective::Allreduce, algorithm, c, rank_, size_, in_place ? "in place" : "");
      const Algorithm ran = algorithms::run_collective(
          ctx, staging_, algorithms::AllreduceArgs{in.data(), result, c.count, c.dtype, c.op},
          algorithm);
      check_ran(Collective::Allreduce, algorithm, ran, true, what);
      Bytes expected(c.count * es);
      fill_reference(c.dtype, c.op, size_, salt, 0, c.count, expected.data());
      const auto mismatch = first_mismatch(c.dtype, result, expected.data(), c.count);
      expect(mismatch.empty(), what + ": " + mismatch);
    }
  }
}

void SweepRank::reduce(const SweepPlan& plan) {
  const auto cases = reducing_cases(plan);
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::Reduce)) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const std::size_t es = dtype_size(c.dtype);
      const auto roots = this->roots();
      // Every root for the small counts; one per case (rotating) otherwise.
      for (std::size_t k = 0; k < roots.size(); ++k) {
        if (!plan.layouts && k != i % roots.size()) continue;
        const int root = roots[k];
        const bool in_place = (i + k) % 2 == 1;
        auto ctx = context(Collective::Reduce);
        const std::uint64_t salt = ctx.seq;
        Bytes in(c.count * es), out = poisoned(c.count * es);
        fill_contribution(c.dtype, c.op, rank_, salt, 0, c.count, in.data());
        void* result = rank_ != root ? nullptr : in_place ? in.data() : out.data();
        const std::string what =
            describe(Collective::Reduce, algorithm, c, rank_, size_,
                     "root " + std::to_string(root) + (in_place ? " in place" : ""));
        const Algorithm ran = algorithms::run_collective(
            ctx, staging_, algorithms::ReduceArgs{in.data(), result, c.count, c.dtype, c.op, root},
            algorithm);
        check_ran(Collective::Reduce, algorithm, ran, true, what);
        if (rank_ == root) {
          Bytes expected(c.count * es);
          fill_reference(c.dtype, c.op, size_, salt, 0, c.count, expected.data());
          const auto mismatch = first_mismatch(c.dtype, result, expected.data(), c.count);
          expect(mismatch.empty(), what + ": " + mismatch);
        } else if (!in_place) {
          // A non-root's input is read-only.
          Bytes original(c.count * es);
          fill_contribution(c.dtype, c.op, rank_, salt, 0, c.count, original.data());
          expect(in == original, what + ": input modified on a non-root");
        }
      }
    }
  }
}

void SweepRank::reduce_scatter(const SweepPlan& plan) {
  const auto cases = reducing_cases(plan);
  for (Algorithm algorithm : algorithms::algorithms_for(Collective::ReduceScatter)) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      Case c = cases[i];
      // Per-rank count: keep the whole input near the large count rather than size times it.
      if (c.count == kLargeCount) c.count = kLargeCount / static_cast<std::size_t>(size_) + 1;
      const bool in_place = i % 2 == 1;
      const std::size_t es = dtype_size(c.dtype);
      const std::size_t total = c.count * static_cast<std::size_t>(size_);
      const std::size_t mine = c.count * static_cast<std::size_t>(rank_);
      auto ctx = context(Collective::ReduceScatter);
      const std::uint64_t salt = ctx.seq;
      Bytes in(total * es), out = poisoned(c.count * es);
      fill_contribution(c.dtype, c.op, rank_, salt, 0, total, in.data());
      void* result = in_place ? in.data() + mine * es : out.data();
      const std::string what = describe(Collective::ReduceScatter, algorithm, c, rank_, size_,
                                        in_place ? "in place" : "");
      const Algorithm ran = algorithms::run_collective(
          ctx, staging_, algorithms::ReduceScatterArgs{in.data(), result, c.count, c.dtype, c.op},
          algorithm);
      check_ran(Collective::ReduceScatter, algorithm, ran, true, what);
      Bytes expected(c.count * es);
      fill_reference(c.dtype, c.op, size_, salt, mine, c.count, expected.data());
      const auto mismatch = first_mismatch(c.dtype, result, expected.data(), c.count);
      expect(mismatch.empty(), what + ": " + mismatch);
    }
  }
}

}  // namespace cohort::sweep
