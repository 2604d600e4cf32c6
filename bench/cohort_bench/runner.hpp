#pragma once

// Times and checks one size of one op for a list of contenders (cohort with an algorithm, or a
// peer library), nccl-tests style: per contender and form (out-of-place, in-place), warm up,
// barrier, time `iters` blocking calls and divide, combine the ranks' times, then run once more
// on fresh data and count wrong elements on every rank, summed over ranks.
//
// Every rank must call run_size() with the same arguments: the barrier, the time combination
// and the wrong-count sum are cohort collectives on `comm`.
//
// With a DeviceMemory (--device cuda) the timed buffers live on that device; the input is
// filled on host staging buffers and copied up, and the checked output copied back down before
// counting, so the check is the host path's, element for element.

#include "device_memory.hpp"
#include "implementation.hpp"
#include "results.hpp"

#include <cohort/communicator.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cohort::bench {

/// How per-rank times become the reported time (nccl-tests' -a).
enum class Averaging { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

struct RunSettings {
  int warmup = 5;
  int iters = 20;
  /// When > 0, raise iters per size so the timed loop lasts about this long (all ranks agree).
  double min_time_s = 0.0;
  /// Rewrite every rank's input before each timed call and time the calls alone, each started
  /// after a barrier. Without it the input stays as the last call left it, and a peer that
  /// reads it (a single copy) may find it still in its own caches, as freshly computed data
  /// would not be. Host buffers only.
  bool fresh_input = false;
  /// cohort's host buffers come from Buffer::allocate_mappable, which ranks of a host map and
  /// work on in place; a peer implementation's stay ordinary memory, so neither is measured on
  /// memory it would not be given.
  bool mappable = false;
  /// Allocate each timed call's buffers (those its form uses; mappable ones with `mappable`)
  /// just before it, write the input, and free them after; the time covers all three, each call
  /// alone after a barrier, after `warmup` calls that allocate alike: a program that allocates
  /// its buffers every step. Host buffers only.
  bool allocate_per_call = false;
  bool check = true;
  Averaging average = Averaging::Mean;
  /// Test-only: this rank corrupts its output after each checked call.
  std::optional<int> inject_wrong_rank;
};

struct Contender {
  Implementation* impl = nullptr;
  Algorithm algorithm = Algorithm::Auto;
};

/// What is swept in one block of the table.
struct BenchCase {
  BenchOp op = BenchOp::Allreduce;
  DType dtype = DType::Float32;
  ReduceOp redop = ReduceOp::Sum;
  int root = 0;
};

/// Upper bound on iterations chosen by --min-time for tiny messages.
inline constexpr std::int64_t kMaxScaledIters = 1000000;

class Runner {
 public:
  /// `device` null: host buffers. Otherwise it must outlive the Runner.
  Runner(Communicator& comm, RunSettings settings, DeviceMemory* device = nullptr);

  /// One row per contender at `requested_bytes` (barrier ignores the size).
  std::vector<ResultRow> run_size(const BenchCase& bench_case, std::uint64_t requested_bytes,
                                  std::span<const Contender> contenders);

 private:
  struct Buffers;
  /// The mean time of the timed calls (warm_up's count), each alone after a barrier on buffers
  /// allocated for it, after warm-up calls that allocate alike.
  double time_allocating_calls(const BenchCase& bench_case, const OpShape& shape,
                               Implementation& impl, OpCall call, bool mappable);
  /// Makes the warm-up calls (`call(i)`, i = 0, 1, ...) and returns how many calls to time:
  /// `iters`, or with --min-time as many as the warm-up says fill it (agreed by all ranks).
  int warm_up(const std::function<void(int)>& call);
  Measurement measure(const BenchCase& bench_case, const OpShape& shape, Buffers& buffers,
                      const Contender& contender, bool in_place);
  int agreed_iters(double warmup_seconds, int warmup_calls);
  double combine_time(double local_us);
  std::uint64_t sum_over_ranks(std::uint64_t value);

  Communicator& comm_;
  RunSettings settings_;
  DeviceMemory* device_;
  int last_iters_ = 0;  ///< what the last warm_up() returned: the calls then timed
};

}  // namespace cohort::bench
