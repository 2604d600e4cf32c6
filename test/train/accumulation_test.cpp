// Gradient accumulation through GradientSynchronizer on real processes: Accelerate's sync rule,
// loss_multiplier, micro-steps that communicate nothing (no_sync windows of different lengths
// per rank), sync_each_batch, exact_final_window. The tests play the engine: each micro-step
// adds micro_grad * loss_multiplier() to its gradient buffer, marks it ready and, on a sync,
// "steps the optimizer" (checks the values) and zeroes the gradient. Expected values are
// TRAINING.md's or worked out by hand in the comments.

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <catch2/catch.hpp>

#include "comm/rank_checks.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using train::GradientSynchronizer;
using train::GradientSyncOptions;

constexpr std::chrono::milliseconds kTimeout{20000};  // a stray allreduce fails, not hangs

// One engine micro-step on a single f32 gradient: grad += micro * multiplier, mark, finish.
// Returns whether the optimizer steps.
bool micro_step(GradientSynchronizer& sync, const Buffer& grad, std::vector<float> micro,
                bool end_of_data = false) {
  const bool steps = sync.begin_micro_step(end_of_data);
  for (std::size_t j = 0; j < micro.size(); ++j) {
    grad.data_as<float>()[j] += micro[j] * sync.loss_multiplier();
  }
  sync.mark_ready(0);
  sync.finish();
  return steps;
}

void expect_grad(const Buffer& grad, std::vector<double> want, const std::string& what) {
  expect_values(
      grad, 0, want.size(), [&](std::size_t j) { return want[j]; }, what);
}

void zero(const Buffer& grad) {
  std::fill_n(grad.data_as<float>(), grad.count(), 0.0f);
}

}  // namespace

TEST_CASE("num_steps 3 over 7 batches syncs F,F,T,F,F,T,T; the next epoch starts with F",
          "[train][accumulation][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    for (bool each_batch : {false, true}) {
      GradientSyncOptions options;
      options.accumulation_steps = 3;
      options.sync_each_batch = each_batch;
      GradientSynchronizer sync(world(env), {}, options);
      RANK_CHECK(sync.loss_multiplier() == 1.0f / 3.0f, "loss multiplier");
      const bool want[] = {false, false, true, false, false, true, true};
      for (int batch = 0; batch < 7; ++batch) {
        const bool got = sync.begin_micro_step(/*end_of_data=*/batch == 6);
        RANK_CHECK(got == want[batch], "batch " << batch << " sync " << got);
        RANK_CHECK(sync.communicates() == (want[batch] || each_batch),
                   "batch " << batch << " communicates " << sync.communicates());
        sync.finish();
      }
      RANK_CHECK(!sync.begin_micro_step(), "the next epoch's first batch does not sync");
      sync.finish();
    }
  }));
}

TEST_CASE("no_sync windows never sync and leave the counter alone",
          "[train][accumulation][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    GradientSyncOptions options;
    options.accumulation_steps = 2;
    options.sync_each_batch = true;
    GradientSynchronizer sync(world(env), {}, options);
    // sync_each_batch communicates on every micro-step outside the windows: finish each.
    const auto step = [&](bool end_of_data = false) {
      const bool steps = sync.begin_micro_step(end_of_data);
      sync.finish();
      return steps;
    };
    RANK_CHECK(!step(), "micro-step 1 of 2");
    RANK_CHECK(sync.communicates(), "sync_each_batch communicates outside the window");
    {
      auto outer = sync.no_sync();
      // Even end_of_data does not sync inside the window, nor does sync_each_batch communicate.
      RANK_CHECK(!step(true), "no_sync with end_of_data");
      RANK_CHECK(!sync.communicates(), "no_sync does not communicate");
      {
        auto inner = sync.no_sync();
        RANK_CHECK(!step(), "nested window");
      }
      RANK_CHECK(!step(), "the outer window is still open");
      RANK_CHECK(!sync.communicates(), "the outer window still does not communicate");
    }
    RANK_CHECK(step(), "micro-step 2 of 2: the window's micro-steps did not count");
    RANK_CHECK(!step(), "a new window");
  }));
}

TEST_CASE("2 ranks, 2 steps, micro-grads x 0.5 -> [4, 5] on both; same with sync_each_batch",
          "[train][accumulation][multiproc]") {
  // TRAINING.md: r0 [1,2],[3,4] and r1 [5,6],[7,8]: r0 sums [2,3], r1 [6,7], mean [4,5].
  // Generalised to rank r: [1+4r, 2+4r], [3+4r, 4+4r] -> [2+4r, 3+4r], mean [2+2(w-1), 3+2(w-1)].
  const int size = GENERATE(1, 2, 3, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const auto r = static_cast<float>(comm->rank());
    const double w = env.world_size;
    for (bool each_batch : {false, true}) {
      const std::string mode = each_batch ? "sync_each_batch" : "sync on the last micro-step";
      Buffer grad = Buffer::allocate(2, DType::Float32);
      GradientSyncOptions options;
      options.accumulation_steps = 2;
      options.sync_each_batch = each_batch;
      options.timeout = kTimeout;
      GradientSynchronizer sync(comm, {grad}, options);
      for (int window = 0; window < 3; ++window) {
        RANK_CHECK(!micro_step(sync, grad, {1 + 4 * r, 2 + 4 * r}), mode << ": step 1 of 2");
        if (each_batch) {
          // Averaged already: mean of 0.5 [1+4r, 2+4r].
          expect_grad(grad, {0.5 + (w - 1), 1 + (w - 1)}, mode + ": after micro-step 1");
        }
        RANK_CHECK(micro_step(sync, grad, {3 + 4 * r, 4 + 4 * r}), mode << ": step 2 of 2");
        expect_grad(grad, {2 + 2 * (w - 1), 3 + 2 * (w - 1)},
                    mode + ": window " + std::to_string(window));
        zero(grad);  // the optimizer stepped; the engine zeroes its gradients
      }
    }
  }));
}

TEST_CASE("micro-steps in a no_sync window communicate nothing (ranks run different numbers)",
          "[train][accumulation][multiproc]") {
  // Rank 0 runs two extra micro-steps in a no_sync window, adding 0.5 [10, 20] twice, and calls
  // mark_ready/finish in them as an engine would; the other ranks run none. Had those calls
  // communicated, the next allreduces would pair up wrongly (wrong values or a timeout).
  // Rank sums: r0 [2,3] + [10,20] = [12,23]; rank r > 0 [2+4r, 3+4r].
  const int size = GENERATE(2, 3, 4);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int rank = comm->rank();
    const auto r = static_cast<float>(rank);
    const int w = env.world_size;
    double sum0 = 12, sum1 = 23;
    for (int q = 1; q < w; ++q) {
      sum0 += 2 + 4 * q;
      sum1 += 3 + 4 * q;
    }
    for (bool each_batch : {false, true}) {
      Buffer grad = Buffer::allocate(2, DType::Float32);
      GradientSyncOptions options;
      options.accumulation_steps = 2;
      options.sync_each_batch = each_batch;
      options.timeout = kTimeout;
      GradientSynchronizer sync(comm, {grad}, options);
      if (rank == 0) {
        auto window = sync.no_sync();
        RANK_CHECK(!micro_step(sync, grad, {10, 20}), "extra micro-step 1");
        RANK_CHECK(!micro_step(sync, grad, {10, 20}, /*end_of_data=*/true), "extra micro-step 2");
        expect_grad(grad, {10, 20}, "no_sync accumulates locally only");
      }
      RANK_CHECK(!micro_step(sync, grad, {1 + 4 * r, 2 + 4 * r}), "step 1 of 2");
      RANK_CHECK(micro_step(sync, grad, {3 + 4 * r, 4 + 4 * r}), "step 2 of 2");
      expect_grad(grad, {sum0 / w, sum1 / w},
                  std::string(each_batch ? "sync_each_batch" : "last micro-step") +
                      ": mean after the extra micro-steps");
      // Still in step: one more window on every rank gives the plain mean.
      zero(grad);
      micro_step(sync, grad, {1 + 4 * r, 2 + 4 * r});
      RANK_CHECK(micro_step(sync, grad, {3 + 4 * r, 4 + 4 * r}), "next window syncs");
      expect_grad(grad, {2 + 2.0 * (w - 1), 3 + 2.0 * (w - 1)}, "next window");
    }
  }));
}

TEST_CASE("exact_final_window rescales a window cut short by the end of the data",
          "[train][accumulation][multiproc]") {
  // accumulation_steps 3, the data ends at the second micro-step. Micro-grads r0 [3], [5]; r1
  // [7], [9]; each x 1/3. Accelerate's way: r0 8/3, r1 16/3, mean 4 (and 8/3 alone). Exact:
  // rescaled by 3/2, the mean of all micro-grads: 6 (and 4 alone).
  const int size = GENERATE(1, 2);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const auto r = static_cast<float>(comm->rank());
    for (bool exact : {false, true}) {
      for (bool each_batch : {false, true}) {
        const std::string mode =
            std::string(exact ? "exact" : "accelerate") + (each_batch ? " sync_each_batch" : "");
        Buffer grad = Buffer::allocate(1, DType::Float32);
        GradientSyncOptions options;
        options.accumulation_steps = 3;
        options.exact_final_window = exact;
        options.sync_each_batch = each_batch;
        options.timeout = kTimeout;
        GradientSynchronizer sync(comm, {grad}, options);
        RANK_CHECK(!micro_step(sync, grad, {3 + 4 * r}), mode << ": micro-step 1");
        RANK_CHECK(micro_step(sync, grad, {5 + 4 * r}, /*end_of_data=*/true),
                   mode << ": the end of the data syncs");
        const double want = env.world_size == 1 ? (exact ? 4.0 : 8.0 / 3) : (exact ? 6.0 : 4.0);
        expect_grad(grad, {want}, mode + ": short window");

        // The next epoch starts a full window: no rescale. Micro-grads 3 x [3 + 4r] / 3 -> 3 + 4r,
        // mean 3 + 2(w - 1).
        zero(grad);
        RANK_CHECK(!micro_step(sync, grad, {3 + 4 * r}), mode << ": next epoch, 1");
        RANK_CHECK(!micro_step(sync, grad, {3 + 4 * r}), mode << ": next epoch, 2");
        RANK_CHECK(micro_step(sync, grad, {3 + 4 * r}), mode << ": next epoch, 3");
        expect_grad(grad, {3 + 2.0 * (env.world_size - 1)}, mode + ": full window");
      }
    }
  }));
}
