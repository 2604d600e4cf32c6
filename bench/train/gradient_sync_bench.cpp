// cohort-grad-sync-bench: gradient synchronisation as an engine sees it. A simulated backward
// produces a real model's gradients one by one, last layer first; the thread waits between them
// as it would wait for a device to finish each gradient. Two ways to average them across ranks
// are timed step by step:
//
//   (a) after backward: one allreduce over all gradients (a flat buffer, no packing: the best
//       case of "communicate at the end");
//   (b) bucketed overlap: cohort::train::GradientSynchronizer (25 MiB buckets, 1 MiB first
//       bucket), each bucket's allreduce starting while backward goes on.
//
// The compute time of one backward is `ratio` times the time of the flat allreduce alone
// (measured first, in the same run), split over the gradients in proportion to their sizes.
// "exposed" is a step's time beyond its compute: communication the step waited for. "hidden" is
// the share of the flat allreduce's time that (b) did not expose: 1 - exposed(b) / comm.
// Every time is the maximum over ranks of that step, then the median over steps.
//
// Usage (under cohort-run, mpirun or torchrun):
//   cohort-run -n 2 -- cohort-grad-sync-bench --model gpt-125m --ratio 1.5 --steps 10
//   [--bucket-mib 25] [--first-bucket-mib 1] [--json results.json]

#include <cohort/cohort.hpp>
#include <cohort/train.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "model_shapes.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

struct Options {
  std::string model = "gpt-25m";
  double ratio = 1.5;
  int steps = 10;
  int warmup = 2;
  double bucket_mib = 25;
  double first_bucket_mib = 1;
  std::string json;
};

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
  SimulatedBackward(const std::vector<std::size_t>& counts, double total_compute)
      : offsets_(counts.size()) {
    std::size_t total = 0;
    for (std::size_t n : counts) total += n;
    double cumulative = 0;
    // Backward produces the last registered gradient first.
    for (std::size_t k = counts.size(); k-- > 0;) {
      cumulative += total_compute * static_cast<double>(counts[k]) / static_cast<double>(total);
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
  app.add_option("--model", o.model, "gpt-25m or gpt-125m")->capture_default_str();
  app.add_option("--ratio", o.ratio, "backward compute time / flat allreduce time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
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
    std::fprintf(stderr, "unknown --model %s (gpt-25m, gpt-125m)\n", o.model.c_str());
    return 2;
  }
  auto comm = cohort::init();
  const bool main_rank = comm->rank() == 0;
  const auto& counts = shape->parameter_counts;

  // Gradients are views into one flat allocation, so (a) needs no packing.
  cohort::Buffer flat = cohort::Buffer::allocate(shape->total(), cohort::DType::Float32);
  std::vector<cohort::Buffer> grads;
  for (std::size_t offset = 0; std::size_t n : counts) {
    grads.push_back(
        cohort::Buffer::view(flat.data_as<float>() + offset, n, cohort::DType::Float32));
    offset += n;
  }
  std::fill_n(flat.data_as<float>(), flat.count(), 1.0f + static_cast<float>(comm->rank()));

  // The flat allreduce alone: the communication to hide.
  std::vector<double> comm_runs;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    comm->barrier();
    const auto t0 = Clock::now();
    comm->allreduce(flat, cohort::ReduceOp::Sum);
    const double t = max_over_ranks(*comm, Seconds(Clock::now() - t0).count());
    if (i >= o.warmup) comm_runs.push_back(t);
  }
  const double comm_time = median(comm_runs);
  SimulatedBackward backward(counts, o.ratio * comm_time);

  cohort::train::GradientSyncOptions sync_options;
  sync_options.bucket_cap_bytes = static_cast<std::size_t>(o.bucket_mib * 1048576);
  sync_options.first_bucket_cap_bytes = static_cast<std::size_t>(o.first_bucket_mib * 1048576);
  cohort::train::GradientSynchronizer synchronizer(comm, grads, sync_options);

  std::vector<double> flat_steps, bucketed_steps, computes;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    // (a) backward, then one allreduce.
    comm->barrier();
    backward.start();
    for (std::size_t k = counts.size(); k-- > 0;) backward.wait_for_gradient(k);
    comm->allreduce(flat, cohort::ReduceOp::Sum);
    const double a = max_over_ranks(*comm, Seconds(Clock::now() - backward.started()).count());

    // (b) backward with each gradient handed to the synchroniser as it is produced.
    comm->barrier();
    backward.start();
    synchronizer.begin_micro_step();
    for (std::size_t k = counts.size(); k-- > 0;) {
      backward.wait_for_gradient(k);
      synchronizer.mark_ready(k);
    }
    synchronizer.finish();
    const double b = max_over_ranks(*comm, Seconds(Clock::now() - backward.started()).count());
    if (i >= o.warmup) {
      flat_steps.push_back(a);
      bucketed_steps.push_back(b);
    }
  }
  const double compute = backward.total();
  const double step_a = median(flat_steps), step_b = median(bucketed_steps);
  const double exposed_a = std::max(0.0, step_a - compute);
  const double exposed_b = std::max(0.0, step_b - compute);
  const double hidden = comm_time > 0 ? std::clamp(1.0 - exposed_b / comm_time, 0.0, 1.0) : 1.0;

  if (main_rank) {
    std::printf("# %s: %zu tensors, %.1fM parameters (f32, %.0f MiB), %d ranks, %zu buckets\n",
                shape->name.c_str(), counts.size(), static_cast<double>(shape->total()) / 1e6,
                static_cast<double>(flat.nbytes()) / 1048576.0, comm->size(),
                synchronizer.buckets().size());
    std::printf("# medians over %d steps (max over ranks per step), milliseconds\n", o.steps);
    std::printf("%10s %10s %12s %10s %12s %10s %8s\n", "comm", "compute", "step(a)", "exposed(a)",
                "step(b)", "exposed(b)", "hidden");
    std::printf("%10.2f %10.2f %12.2f %10.2f %12.2f %10.2f %7.1f%%\n", comm_time * 1e3,
                compute * 1e3, step_a * 1e3, exposed_a * 1e3, step_b * 1e3, exposed_b * 1e3,
                hidden * 100);
    if (!o.json.empty()) {
      nlohmann::json j = {{"model", shape->name},
                          {"parameters", shape->total()},
                          {"tensors", counts.size()},
                          {"ranks", comm->size()},
                          {"buckets", synchronizer.buckets().size()},
                          {"ratio", o.ratio},
                          {"steps", o.steps},
                          {"comm_ms", comm_time * 1e3},
                          {"compute_ms", compute * 1e3},
                          {"step_flat_ms", step_a * 1e3},
                          {"exposed_flat_ms", exposed_a * 1e3},
                          {"step_bucketed_ms", step_b * 1e3},
                          {"exposed_bucketed_ms", exposed_b * 1e3},
                          {"hidden_fraction", hidden}};
      std::ofstream(o.json) << j.dump(2) << "\n";
    }
  }
  return 0;
}
