#pragma once

// One rank of the algorithm sweep: a real store and UCX transport, and one method per
// collective that runs every algorithm of that collective (forced) over every case of the plan,
// checks the result against sweep_data's reference, and checks the forced algorithm really ran
// (or, where it must decline, that another one did). A failed check throws, which fails the
// rank and so the launch.

#include "algorithms/engines/ring_pipeline.hpp"
#include "algorithms/op_context.hpp"
#include "core/mappable_memory.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/dtype.hpp>
#include <cohort/environment.hpp>
#include <cohort/store.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cohort::sweep {

/// Prime, and larger than a ring chunk for every dtype (more elements than kRingChunkBytes).
inline constexpr std::size_t kLargeCount = 524309;
static_assert(kLargeCount > algorithms::kRingChunkBytes);

/// Where this process's sweep buffers come from: the heap, or mappable memory
/// (core/mappable_memory.hpp), so that the single-copy algorithms map their peers' blocks and
/// the allreduce works on them in place. Set by a launch before its first buffer.
void use_mappable_buffers(bool on) noexcept;
bool mappable_buffers() noexcept;

/// The sweep's byte buffers' allocator: use_mappable_buffers() decides, at each allocation.
template <class T>
struct SweepAllocator {
  using value_type = T;
  SweepAllocator() noexcept = default;
  template <class U>
  SweepAllocator(const SweepAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (!mappable_buffers()) return std::allocator<T>().allocate(n);
    std::size_t rounded = 0;
    void* memory = allocate_mappable(n * sizeof(T), &rounded);
    if (memory == nullptr) throw std::bad_alloc();
    return static_cast<T*>(memory);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    MappableRef ref;
    if (find_mappable(p, n * sizeof(T), &ref) && ref.offset == 0)
      free_mappable(p);
    else
      std::allocator<T>().deallocate(p, n);
  }
  /// Default-initialises: a Bytes(n) is left unwritten (every such buffer is filled or compared
  /// only after a fill), not zeroed. Zeroing was a sixth of the sweep's CPU time.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const SweepAllocator<U>&) const noexcept {
    return true;
  }
};

/// Every byte buffer of the sweep (inputs, outputs, references).
using Bytes = std::vector<unsigned char, SweepAllocator<unsigned char>>;

struct Case {
  std::size_t count;  ///< elements per rank (per block for alltoall: see SweepRank)
  DType dtype;
  ReduceOp op;  ///< ignored by collectives that do not reduce
};

/// Every (count, dtype, op) to sweep: `counts` with every dtype and applicable op, plus
/// kLargeCount with every combination (`large_all`) or a handful (`large_subset`).
struct SweepPlan {
  std::vector<std::size_t> counts;
  bool large_subset = false;
  bool large_all = false;
  /// Also sweep the varied-count layouts (v-collectives) and every root.
  bool layouts = true;
};

std::vector<Case> reducing_cases(const SweepPlan& plan);
/// reducing_cases with the op dropped and duplicates removed.
std::vector<Case> moving_cases(const SweepPlan& plan);

/// Whether `algorithm` must decline these arguments (the rules documented per algorithm).
bool must_decline(Collective collective, Algorithm algorithm, int world_size, bool uniform);

class SweepRank {
 public:
  explicit SweepRank(const Environment& env);
  ~SweepRank();

  void allreduce(const SweepPlan& plan);
  void reduce(const SweepPlan& plan);
  void reduce_scatter(const SweepPlan& plan);
  void broadcast(const SweepPlan& plan);
  void allgather(const SweepPlan& plan);
  void gather(const SweepPlan& plan);
  void scatter(const SweepPlan& plan);
  void alltoall(const SweepPlan& plan);
  void barrier();

  /// Peers' allocations this rank's arena maps now (transport/peer_mappings.hpp).
  std::size_t peer_mappings() const;
  /// Whether the ranks can read each other's memory (single copy runs), once an op has run.
  bool single_copy() const;

  /// Ops run so far.
  std::uint32_t ops() const noexcept { return seq_; }

 private:
  algorithms::OpContext context(Collective collective);
  /// Throws naming the op when `ran` is not what forcing `forced` should have run.
  void check_ran(Collective collective, Algorithm forced, Algorithm ran, bool uniform,
                 const std::string& what) const;
  std::vector<int> roots() const;

  int rank_;
  int size_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::LazyArena> arena_;
  algorithms::ScratchPool scratch_;
  algorithms::ScratchPool staging_;  ///< run_collective's normalisation copies
  std::string what_;                 ///< OpContext::what of the latest context()
  std::uint32_t seq_ = 0;
  int barrier_rounds_ = 0;  ///< store keys of barrier checks are never reused
  mutable bool warned_unreadable_ = false;
};

/// Throws std::runtime_error(message) unless `ok`.
void expect(bool ok, const std::string& message);
/// "allreduce ring f32 sum count 7 root 0 (rank 2 of 5)"-style description of one op.
std::string describe(Collective collective, Algorithm algorithm, const Case& c, int rank, int size,
                     const std::string& extra = {});

}  // namespace cohort::sweep
