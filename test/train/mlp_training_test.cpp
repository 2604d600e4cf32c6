// End to end: a tiny MLP trained data-parallel with cohort's training layer, read top to bottom
// as a user's first example. No framework: the "engine" is forty lines of plain C++ below, with
// float32 master weights and gradients kept in f32, f16 or bf16.
//
// Every run trains 50 SGD steps on the same synthetic data with a global batch of 24 samples,
// split over `world` ranks and `accumulation` micro-steps per rank. Because every micro-batch has
// the same size, averaging the micro-batch gradients over micro-steps and ranks gives exactly
// the full-batch gradient, so every run must end with the weights of one process training on the
// whole batch. That reference is computed here in plain double precision, sharing nothing with
// cohort. At step 20 the last rank's gradients overflow (an inf is injected): the loss scaler
// sees it on every rank and every rank skips that step; the reference skips it too. (bf16
// gradients have float32's range and run without a loss scaler, as with torch.amp, so their runs
// have no overflow to skip.)
//
// Tolerances (relative to max(1, |w|)): f32 gradients within 1e-5 (measured: 2e-7); f16
// gradients (11-bit significand, loss-scaled) within 3e-4 (measured: up to 6e-5); bf16 (8-bit
// significand) within 2e-3 (measured: up to 4.5e-4). They bound the rounding of the gradient
// storage format accumulated over 50 steps; skipping one step moves the weights by 4e-5, which
// the f32 runs would see, and step_was_skipped() is checked on every rank of every run.

#include <cohort/train.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "comm/rank_checks.hpp"

namespace {

using namespace cohort;

constexpr int kInputs = 4, kHidden = 16, kSteps = 50, kGlobalBatch = 24, kOverflowStep = 20;
constexpr int kSamples = 96;  // the data set; step s uses samples [24 s, 24 s + 24) mod 96
constexpr double kLearningRate = 0.2;
constexpr double kMaxNorm = 5.0;

// Synthetic regression data: y = sin(x0 + 2 x1) - x2 x3, inputs in [-1, 1].
double input(int sample, int j) {
  return std::sin(0.7 * sample + 1.3 * j + 0.1);
}
double target(int sample) {
  return std::sin(input(sample, 0) + 2 * input(sample, 1)) - input(sample, 2) * input(sample, 3);
}

// Parameters in registration order: w1 [hidden x inputs], b1 [hidden], w2 [hidden], b2 [1].
constexpr int kSizes[] = {kHidden * kInputs, kHidden, kHidden, 1};
double initial_weight(int tensor, int i) {
  return 0.3 * std::cos(1.7 * i + tensor);
}

// ---- The engine: forward and backward of y = w2 . tanh(w1 x + b1) + b2, loss 0.5 (y - t)^2.
// Adds d(mean loss over `samples`)/d(param) * `multiplier` to grads[tensor][i].
template <class Real>
void backward(const std::vector<std::vector<Real>>& w, const std::vector<int>& samples,
              double multiplier, std::vector<std::vector<double>>& grads) {
  for (int s : samples) {
    double h[kHidden], out = w[3][0];
    for (int k = 0; k < kHidden; ++k) {
      double z = w[1][k];
      for (int j = 0; j < kInputs; ++j) z += w[0][k * kInputs + j] * input(s, j);
      h[k] = std::tanh(z);
      out += w[2][k] * h[k];
    }
    const double e = (out - target(s)) * multiplier / static_cast<double>(samples.size());
    grads[3][0] += e;
    for (int k = 0; k < kHidden; ++k) {
      grads[2][k] += e * h[k];
      const double dz = e * w[2][k] * (1 - h[k] * h[k]);
      grads[1][k] += dz;
      for (int j = 0; j < kInputs; ++j) grads[0][k * kInputs + j] += dz * input(s, j);
    }
  }
}

std::vector<int> batch_samples(int step, int first, int count) {
  std::vector<int> samples;
  for (int i = 0; i < count; ++i) samples.push_back((step * kGlobalBatch + first + i) % kSamples);
  return samples;
}

// ---- The reference: one process, the whole batch, double precision, the overflow step skipped
// when the run has a loss scaler to skip it.
std::vector<std::vector<double>> reference_weights(bool overflow_skipped) {
  std::vector<std::vector<double>> w;
  for (int t = 0; t < 4; ++t) {
    w.emplace_back(kSizes[t]);
    for (int i = 0; i < kSizes[t]; ++i) w[t][i] = initial_weight(t, i);
  }
  for (int step = 0; step < kSteps; ++step) {
    if (overflow_skipped && step == kOverflowStep) continue;
    std::vector<std::vector<double>> g;
    for (int t = 0; t < 4; ++t) g.emplace_back(kSizes[t], 0.0);
    backward(w, batch_samples(step, 0, kGlobalBatch), 1.0, g);
    double squares = 0;
    for (auto& t : g)
      for (double x : t) squares += x * x;
    const double coef = std::min(1.0, kMaxNorm / (std::sqrt(squares) + 1e-6));
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < kSizes[t]; ++i) w[t][i] -= kLearningRate * coef * g[t][i];
  }
  return w;
}

// ---- One rank of the data-parallel run, as an engine would write it.
void train_rank(const Environment& env, DType grad_dtype, int accumulation,
                const std::vector<std::vector<double>>& expected, double tolerance) {
  auto comm = cohort::test::world(env);
  const int world = comm->size(), rank = comm->rank();

  // Master weights (f32) and gradient buffers (grad_dtype), one Buffer per tensor.
  std::vector<std::vector<float>> weights;
  std::vector<Buffer> weight_buffers, grads;
  for (int t = 0; t < 4; ++t) {
    weights.emplace_back(kSizes[t], 0.0f);
    if (rank == 0)  // only rank 0 initialises; broadcast_parameters gives everyone its weights
      for (int i = 0; i < kSizes[t]; ++i) weights[t][i] = static_cast<float>(initial_weight(t, i));
    weight_buffers.push_back(Buffer::view(weights[t].data(), kSizes[t], DType::Float32));
    grads.push_back(Buffer::allocate(kSizes[t], grad_dtype));
  }
  train::broadcast_parameters(*comm, weight_buffers, /*root=*/0);

  // Small buckets so that the four tensors travel in several allreduces.
  train::GradientSyncOptions sync_options;
  sync_options.accumulation_steps = accumulation;
  sync_options.first_bucket_cap_bytes = 16;
  sync_options.bucket_cap_bytes = 64;
  train::GradientSynchronizer sync(comm, grads, sync_options);

  // A power-of-two loss scale keeps f32 results bit-identical to unscaled training. bf16
  // gradients need no scaling (float32's exponent range): the scaler disables itself for them.
  train::GradScalerOptions scaler_options;
  scaler_options.init_scale = 256.0f;
  scaler_options.gradient_dtype = grad_dtype;
  train::GradScaler scaler(comm, scaler_options);

  const int per_micro_batch = kGlobalBatch / (world * accumulation);
  for (int step = 0; step < kSteps; ++step) {
    for (auto& g : grads) std::fill_n(static_cast<unsigned char*>(g.data()), g.nbytes(), 0);
    for (int micro = 0; micro < accumulation; ++micro) {
      const bool sync_step = sync.begin_micro_step();
      RANK_CHECK(sync_step == (micro == accumulation - 1), "micro-step " << micro);

      // Backward of this rank's micro-batch in f64, scaled by the loss scale and the loss
      // multiplier, accumulated into the gradient buffers (read, add, round back to grad_dtype).
      // Gradients are produced last tensor first; each is handed over as soon as it is final.
      std::vector<std::vector<double>> local;
      for (int t = 0; t < 4; ++t) local.emplace_back(kSizes[t], 0.0);
      std::vector<std::vector<float>> w32(weights.begin(), weights.end());
      backward(
          w32,
          batch_samples(step, (rank * accumulation + micro) * per_micro_batch, per_micro_batch),
          scaler.scale() * sync.loss_multiplier(), local);
      if (step == kOverflowStep && rank == world - 1 && scaler.enabled()) local[0][3] = HUGE_VAL;
      for (int t = 3; t >= 0; --t) {
        Buffer as_f32 = train::cast_to(grads[t], DType::Float32);
        for (int i = 0; i < kSizes[t]; ++i)
          as_f32.data_as<float>()[i] += static_cast<float>(local[t][i]);
        train::cast(as_f32, grads[t]);
        sync.mark_ready(t);
      }
    }
    // The optimizer step: averaged gradients, unscaled, clipped, applied unless they overflowed.
    sync.finish();
    scaler.unscale(grads);
    const double norm = train::clip_grad_norm(grads, kMaxNorm);
    if (scaler.step(grads)) {
      for (int t = 0; t < 4; ++t) {
        const Buffer g = train::to_fp32(grads[t]);
        for (int i = 0; i < kSizes[t]; ++i)
          weights[t][i] -= static_cast<float>(kLearningRate) * g.data_as<float>()[i];
      }
    }
    scaler.update();
    const bool expect_skip = step == kOverflowStep && scaler.enabled();
    RANK_CHECK(scaler.step_was_skipped() == expect_skip, "step " << step << " norm " << norm);
  }

  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < kSizes[t]; ++i) {
      const double want = expected[t][i], got = weights[t][i];
      RANK_CHECK(std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want)),
                 "tensor " << t << "[" << i << "] = " << got << ", single-process reference "
                           << want << " (world " << world << ", accumulation " << accumulation
                           << ", " << dtype_name(grad_dtype) << ")");
    }
}

}  // namespace

TEST_CASE("an MLP trained data-parallel ends with the single-process full-batch weights") {
  const auto with_skip = reference_weights(true), without_skip = reference_weights(false);
  struct Case {
    DType dtype;
    double tolerance;
  };
  for (const Case c :
       {Case{DType::Float32, 1e-5}, Case{DType::Float16, 3e-4}, Case{DType::BFloat16, 2e-3}}) {
    for (int world : {1, 2, 3, 4}) {
      for (int accumulation : {1, 2}) {
        SECTION(std::string(dtype_name(c.dtype)) + " world " + std::to_string(world) +
                " accumulation " + std::to_string(accumulation)) {
          REQUIRE_NOTHROW(cohort::test::run_ranks(world, [&](const Environment& env) {
            const bool scaled = c.dtype != DType::BFloat16;
            train_rank(env, c.dtype, accumulation, scaled ? with_skip : without_skip, c.tolerance);
          }));
        }
      }
    }
  }
}
