// cohort-grad-sync-bench: gradient synchronisation as an engine sees it. A simulated backward
// produces a real model's gradients one by one, last layer first; the thread waits between them
// as it would wait for a device to finish each gradient. Two ways to average them across ranks
// are timed step by step:
//
//   (a) after backward: one allreduce over all gradients (a flat buffer, no packing: the best
//       case of "communicate at the end");
//   (b) bucketed overlap: cohort::train::GradientSynchronizer (25 MiB buckets, 1 MiB first
//       bucket), each bucket's allreduce starting while backward goes on, on gradients that
//       are consecutive views of one allocation (train::contiguous_gradients), so every bucket
//       is reduced in place;
//   (c) the same with every gradient in its own allocation (as torch allocates them), so each
//       bucket is copied into a staging buffer and back.
//
// The compute time of one backward is `ratio` times the time of the flat allreduce alone
// (measured first, in the same run), split over the gradients in proportion to their sizes; or
// a fixed --compute-ms, to compare two builds whose allreduces differ at the same compute.
// "exposed" is a step's time beyond its compute: communication the step waited for. "hidden" is
// the share of the flat allreduce's time that a variant did not expose: 1 - exposed / comm.
// Every time is the maximum over ranks of that step; each iteration measures comm alone first
// and sets that iteration's compute from it; the table shows medians over iterations. Compute is
// spread over the gradients in proportion to their sizes (a matmul's backward FLOPs are
// proportional to its weight count); with a tied embedding (GPT-2) the output projection's share
// comes first in backward while the embedding's gradient is final only at its end.
//
// Usage (under cohort-run, mpirun or torchrun):
//   cohort-run -n 2 -- cohort-grad-sync-bench --model vit-b16 --ratio 1.5 --steps 10
//   [--compute-ms MS (instead of --ratio)] [--bucket-mib 25] [--first-bucket-mib 1] [--json
//   results.json]

#include <cohort/cohort.hpp>
#include <cohort/train.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "model_shapes.hpp"

namespace {

constexpr cohort::DType kF32 = cohort::DType::Float32;
using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

struct Options {
  std::string model = "gpt-25m";
  double ratio = 1.5;
  double compute_ms = 0;  // > 0: a fixed compute time instead of `ratio` x comm
  int steps = 10;
  int warmup = 2;
  double bucket_mib = 25;
  double first_bucket_mib = 1;
  std::string json;
};

std::string fmt_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", ms);
  return text;
}

std::string fmt_ratio(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", ratio);
  return text;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The largest of every rank's `seconds`: a step is as slow as its slowest rank.
double max_over_ranks(cohort::Communicator& comm, double seconds) {
  comm.allreduce(cohort::Buffer::view(&seconds, 1, cohort::DType::Float64), cohort::ReduceOp::Max);
  return seconds;
}

struct StepTimes {
  double step = 0;     // seconds from the first gradient's compute to averaged gradients
  double compute = 0;  // seconds of simulated compute inside it
};

// Waits out gradient i's compute slice: deadlines are cumulative from the step's start, so a
// late wake-up does not push every later gradient back.
class SimulatedBackward {
 public:
  SimulatedBackward(const cohort::bench::ModelShape& model, double total_compute)
      : offsets_(model.parameter_counts.size()) {
    const auto& counts = model.parameter_counts;
    const double per_element = total_compute / static_cast<double>(model.total());
    double cumulative = 0;
    // The tied output projection's matmul runs first; its gradient completes last.
    if (model.tied_embedding) cumulative += per_element * static_cast<double>(counts[0]);
    // Backward produces the last registered gradient first.
    for (std::size_t k = counts.size(); k-- > 0;) {
      if (!(model.tied_embedding && k == 0))
        cumulative += per_element * static_cast<double>(counts[k]);
      offsets_[k] = cumulative;
    }
    total_ = cumulative;
  }
  void start() { start_ = Clock::now(); }
  void wait_for_gradient(std::size_t k) const {
    std::this_thread::sleep_until(
        start_ + std::chrono::duration_cast<Clock::duration>(Seconds(offsets_[k])));
  }
  double total() const { return total_; }
  Clock::time_point started() const { return start_; }

 private:
  std::vector<double> offsets_;
  double total_ = 0;
  Clock::time_point start_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"cohort-grad-sync-bench: bucketed, overlapped gradient averaging vs one allreduce",
               "cohort-grad-sync-bench"};
  app.add_option("--model", o.model, "vit-s16, vit-b16, gpt-25m or gpt-125m")
      ->capture_default_str();
  auto* ratio = app.add_option("--ratio", o.ratio, "backward compute time / flat allreduce time")
                    ->check(CLI::PositiveNumber)
                    ->capture_default_str();
  app.add_option("--compute-ms", o.compute_ms,
                 "a fixed backward compute time instead of --ratio: two builds whose flat "
                 "allreduce differs are compared at the same compute")
      ->check(CLI::PositiveNumber)
      ->excludes(ratio);
  app.add_option("--steps", o.steps, "timed steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--bucket-mib", o.bucket_mib, "bucket cap")->capture_default_str();
  app.add_option("--first-bucket-mib", o.first_bucket_mib, "first bucket cap")
      ->capture_default_str();
  app.add_option("--json", o.json, "write the results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  const auto shape = cohort::bench::model_by_name(o.model);
  if (!shape) {
    std::fprintf(stderr, "unknown --model %s (vit-s16, vit-b16, gpt-25m, gpt-125m)\n",
                 o.model.c_str());
    return 2;
  }
  auto comm = cohort::init();
  const bool main_rank = comm->rank() == 0;
  const auto& counts = shape->parameter_counts;

  // Gradients are consecutive views of one allocation: (a) reduces it whole, (b) bucket by
  // bucket in place. (c) gives every gradient its own allocation.
  std::vector<cohort::Buffer> grads = cohort::train::contiguous_gradients(counts, kF32);
  const cohort::Buffer flat = cohort::Buffer::view(grads.front().data(), shape->total(), kF32);
  std::fill_n(flat.data_as<float>(), flat.count(), 1.0f + static_cast<float>(comm->rank()));
  std::vector<cohort::Buffer> separate;
  for (std::size_t n : counts) {
    separate.push_back(cohort::Buffer::allocate(n, kF32));
    std::fill_n(separate.back().data_as<float>(), n, 1.0f);
  }

  // The flat allreduce alone: the communication to hide. This VM's memory bandwidth drifts
  // between two levels for seconds at a time, so it is measured again at the start of every
  // iteration and that iteration's compute is `ratio` times it.
  const auto flat_allreduce = [&] {
    comm->barrier();
    const auto t0 = Clock::now();
    comm->allreduce(flat, cohort::ReduceOp::Sum);
    return max_over_ranks(*comm, Seconds(Clock::now() - t0).count());
  };

  cohort::train::GradientSyncOptions sync_options;
  sync_options.bucket_cap_bytes = static_cast<std::size_t>(o.bucket_mib * 1048576);
  sync_options.first_bucket_cap_bytes = static_cast<std::size_t>(o.first_bucket_mib * 1048576);
  cohort::train::GradientSynchronizer in_place(comm, grads, sync_options);
  cohort::train::GradientSynchronizer staged(comm, separate, sync_options);

  // One step of backward with each gradient handed to `sync` as it is produced.
  const auto bucketed_step = [&](cohort::train::GradientSynchronizer& sync,
                                 SimulatedBackward& backward) {
    comm->barrier();
    backward.start();
    sync.begin_micro_step();
    for (std::size_t k = counts.size(); k-- > 0;) {
      backward.wait_for_gradient(k);
      sync.mark_ready(k);
    }
    sync.finish();
    return max_over_ranks(*comm, Seconds(Clock::now() - backward.started()).count());
  };

  // Per timed iteration: comm alone, and each variant's exposed time (step - compute).
  std::vector<double> comm_runs, computes, exposed_a, exposed_b, exposed_c, hidden_b, hidden_c;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const double alone = flat_allreduce();
    SimulatedBackward backward(*shape, o.compute_ms > 0 ? o.compute_ms / 1e3 : o.ratio * alone);
    // (a) backward, then one allreduce.
    comm->barrier();
    backward.start();
    for (std::size_t k = counts.size(); k-- > 0;) backward.wait_for_gradient(k);
    comm->allreduce(flat, cohort::ReduceOp::Sum);
    const double a = max_over_ranks(*comm, Seconds(Clock::now() - backward.started()).count());
    const double b = bucketed_step(in_place, backward);
    const double c = bucketed_step(staged, backward);
    if (i < o.warmup) continue;
    const double compute = backward.total();
    comm_runs.push_back(alone);
    computes.push_back(compute);
    exposed_a.push_back(std::max(0.0, a - compute));
    exposed_b.push_back(std::max(0.0, b - compute));
    exposed_c.push_back(std::max(0.0, c - compute));
    hidden_b.push_back(std::clamp(1.0 - exposed_b.back() / alone, 0.0, 1.0));
    hidden_c.push_back(std::clamp(1.0 - exposed_c.back() / alone, 0.0, 1.0));
  }
  const double comm_time = median(comm_runs), compute = median(computes);

  if (main_rank) {
    std::printf(
        "# %s: %zu tensors, %.1fM parameters (f32, %.0f MiB), %d ranks, %zu buckets, "
        "compute = %s\n",
        shape->name.c_str(), counts.size(), static_cast<double>(shape->total()) / 1e6,
        static_cast<double>(flat.nbytes()) / 1048576.0, comm->size(), in_place.buckets().size(),
        o.compute_ms > 0 ? fmt_ms(o.compute_ms).c_str() : (fmt_ratio(o.ratio) + " x comm").c_str());
    std::printf(
        "# medians over %d steps (max over ranks per step), ms; hidden = share of comm "
        "not exposed\n",
        o.steps);
    std::printf("%9s %9s | %11s | %11s %7s | %11s %7s\n", "comm", "compute", "exposed(a)",
                "exposed(b)", "hidden", "exposed(c)", "hidden");
    std::printf("%9.2f %9.2f | %11.2f | %11.2f %6.1f%% | %11.2f %6.1f%%\n", comm_time * 1e3,
                compute * 1e3, median(exposed_a) * 1e3, median(exposed_b) * 1e3,
                median(hidden_b) * 100, median(exposed_c) * 1e3, median(hidden_c) * 100);
    if (!o.json.empty()) {
      nlohmann::json j = {
          {"model", shape->name},
          {"parameters", shape->total()},
          {"tensors", counts.size()},
          {"ranks", comm->size()},
          {"buckets", in_place.buckets().size()},
          {"ratio", o.compute_ms > 0 ? nlohmann::json() : nlohmann::json(o.ratio)},
          {"fixed_compute_ms", o.compute_ms > 0 ? nlohmann::json(o.compute_ms) : nlohmann::json()},
          {"steps", o.steps},
          {"comm_ms", comm_time * 1e3},
          {"compute_ms", compute * 1e3},
          {"exposed_flat_ms", median(exposed_a) * 1e3},
          {"exposed_in_place_ms", median(exposed_b) * 1e3},
          {"hidden_in_place", median(hidden_b)},
          {"exposed_staged_ms", median(exposed_c) * 1e3},
          {"hidden_staged", median(hidden_c)}};
      std::ofstream(o.json) << j.dump(2) << "\n";
    }
  }
  return 0;
}
