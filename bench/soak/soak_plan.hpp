#pragma once

// The soak's random op sequence. Every rank runs a PlanGenerator seeded identically and draws the
// same steps in the same order, so all ranks agree on every op, its arguments, and which
// sub-communicators exist, without exchanging anything. Each rank then executes the part of each
// step that involves it (a group's ops run only on that group's ranks).
//
// Op indices number every op of the plan, in generation order and across all groups, so a rank
// can name any op (in a failure message, or as the op at which a rank is killed) the same way
// every other rank does.

#include "soak_random.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace cohort::soak {

/// One op as every rank of its communicator calls it. The collective is a cohort::Collective;
/// Collective::Send stands for a ring exchange: every rank sends to rank + shift and receives
/// from rank - shift (mod size) with send_async / recv (Collective::Recv never appears).
struct OpSpec {
  std::uint64_t index = 0;
  Collective collective = Collective::Barrier;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;  ///< reducing collectives only
  /// Elements: of the buffer for allreduce, broadcast, reduce and send; of one rank's block for
  /// allgather, gather, scatter, reduce_scatter (its output) and alltoall (one slice); the bound
  /// the v-forms draw their counts below.
  std::size_t count = 0;
  /// Allgatherv, gatherv, scatterv: counts[r] for each rank. Alltoallv: the size x size matrix,
  /// counts[i * size + j] elements from rank i to rank j.
  std::vector<std::size_t> counts;
  int root = 0;
  int shift = 1;  ///< send: the peer distance
  int tag = 0;    ///< send: the tag
  /// The in-place form where the collective has one (see soak_op.cpp for each collective's).
  bool in_place = false;
  bool async = false;
  /// Pass CollectiveOptions::timeout explicitly (the run's timeout) instead of the default.
  bool explicit_timeout = false;
  Algorithm algorithm = Algorithm::Auto;
  /// Elements by which the buffers start past a 64-byte boundary (unaligned kernels).
  unsigned misalign = 0;
  /// Reduce, gather, broadcast, scatter: non-roots pass a real buffer for the side they do not
  /// use (which must stay untouched) instead of an empty one.
  bool non_root_buffer = false;
};

/// Whether a collective reduces (and so takes a ReduceOp).
bool is_reducing(Collective c) noexcept;
/// "allreduce", ..., "sendrecv" for Collective::Send.
std::string soak_op_name(Collective c);
/// "op #12 allreduce bfloat16 avg count=77 in-place async algo=ring" (no communicator).
std::string describe(const OpSpec& op);

/// Ops issued one after another on one communicator. Async ops are waited for once the last op
/// is issued, in `wait_order` (indices into ops; blocking ops are skipped there).
struct Batch {
  std::vector<OpSpec> ops;
  std::vector<std::size_t> wait_order;
};

/// Collective split of a parent communicator: parent rank r passes colors[r] and keys[r]. Each
/// group runs a batch, and may split again (at most one level deeper).
struct SplitPlan {
  struct Group {
    int color = 0;
    /// Parent ranks in the new communicator's rank order (key, then parent rank).
    std::vector<int> members;
    Batch batch;
    std::vector<SplitPlan> nested;  ///< empty, or the one nested split of this group
    /// With a nested split: destroy this group's communicator before the nested one.
    bool release_parent_first = false;
  };
  std::vector<int> colors;
  std::vector<int> keys;
  std::vector<Group> groups;  ///< by ascending color; kNoColor ranks are in none
};

/// dup() of the world with one op on each, overlapping: the first is async, the second blocking,
/// then the first is waited for.
struct DupPlan {
  OpSpec first;
  OpSpec second;
  bool first_on_dup = true;  ///< the async op runs on the dup (else on the world)
};

using Step = std::variant<Batch, SplitPlan, DupPlan>;

/// The weights and bounds the generator draws from; defaults make the soak's standard mix.
struct PlanShape {
  int world_size = 1;
  /// Largest count drawn (elements; the top 15% of ops draw between 4097 and this).
  std::size_t max_count = 1u << 17;
};

class PlanGenerator {
 public:
  PlanGenerator(std::uint64_t seed, PlanShape shape);

  /// The next step. Op indices continue where the previous step's ended.
  Step next();
  /// Ops generated so far (the next op's index).
  std::uint64_t ops_generated() const noexcept { return next_index_; }

 private:
  OpSpec make_op(int size);
  Batch make_batch(int size, std::size_t max_ops);
  SplitPlan make_split(int parent_size, int depth);
  std::size_t draw_count();

  SoakRandom rng_;
  PlanShape shape_;
  std::uint64_t next_index_ = 0;
};

}  // namespace cohort::soak
