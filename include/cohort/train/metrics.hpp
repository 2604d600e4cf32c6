#pragma once

/// Metrics and data sharding for data-parallel training and evaluation: which samples each rank
/// reads, and how per-rank results become one result seen by every rank.
///
/// The step this header serves, an evaluation loop (Accelerate's prepare + gather_for_metrics):
///
///     BatchShard shard = batch_shard(dataset_size, 8, comm.size(), comm.rank());
///     for (std::int64_t round = 0; round < shard.rounds(); ++round) {
///       Buffer predictions = model(load(shard.batch(round)));            // engine
///       Buffer all = gather_for_metrics(comm, predictions,
///                                       {round + 1 == shard.rounds(), shard.remainder()});
///       metric.update(all);                       // every rank sees every sample exactly once
///     }
///     Buffer mean_loss = reduce(comm, loss, ReduceOp::Avg);
///
/// Buffers here are host memory (CPU, pinned or managed), row-major contiguous, of any dtype and
/// any number of dimensions; device memory is Error(Unsupported).
///
/// Collectives: every function taking a Communicator must be called by all of its ranks in the
/// same order. An error decided from exchanged data (shapes, dtypes, arguments that must agree)
/// is thrown on every rank. The gathering functions exchange each rank's shape before any data,
/// and that exchange also carries whether the rank's own arguments were usable: a rank passing
/// device or non-contiguous memory throws its own error, and the other ranks throw the same
/// ErrorCode naming it, instead of waiting for it. A world of one communicates nothing and
/// returns the same results.
///
/// Deliberate differences from the references, each marked "cohort:" below:
/// - Accelerate's `Accelerator.reduce` defaults to "sum" and its free `reduce` to "mean", and
///   "none" still runs a SUM allreduce. cohort's reduce has no default and no "none": the
///   operator is always stated, and it is the one applied.
/// - Accelerate's `gather` needs the same shape on every rank (all_gather_into_tensor), which is
///   why its users pad first; gather_rows takes any number of rows per rank (allgatherv).
/// - Accelerate's `pad_across_processes` returns without communicating when `dim` is out of range
///   for the local tensor, so ranks whose tensors differ in rank hang; cohort always exchanges
///   shapes and reports the disagreement on every rank.
/// - Accelerate's `split_between_processes` hands a rank past the end of the input the input's
///   last item even without padding (a silent duplicate); cohort gives it nothing.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>

#include <cstdint>
#include <vector>

namespace cohort::train {

// ---- Reducing and gathering results.

/// A new buffer of in's shape and dtype holding `op` over every rank's `in`; `in` is untouched
/// (Accelerate's reduce clones before its allreduce; Fabric's all_reduce works in place, which
/// Communicator::allreduce already covers). Avg divides the sum by the world size in the
/// accumulate type, truncating for integers: int32 [r] on 3 ranks gives [1].
/// cohort: the operator has no default and every ReduceOp the dtype supports is accepted.
/// Throws Unsupported for device memory, InvalidArgument for a non-contiguous input or an
/// operator the dtype does not support (ReduceOp's rules), before communicating; these checks
/// are local, as they are for Communicator::allreduce. All ranks pass equal counts and dtypes.
/// Cost: one allreduce of in.nbytes().
Buffer reduce(Communicator& comm, const Buffer& in, ReduceOp op);

/// Every rank's `in` concatenated along dim 0 in rank order, on every rank (an all-gather, as
/// Accelerate's `gather` is whatever its docs say). Ranks may contribute different numbers of
/// rows, including none; the other dimensions and the dtype must match. A 0-d buffer counts as
/// one row of shape [1]. The shapes are exchanged first: if the dtypes or the trailing dimensions
/// differ, every rank throws InvalidArgument naming each rank's dtype or shape.
/// cohort: Accelerate's gather requires equal shapes; this one does not.
/// Cost: an allgather of 40 bytes per rank, an allgatherv of the dimensions (8 bytes each), an
/// allgatherv of the data.
Buffer gather_rows(Communicator& comm, const Buffer& in);

/// torch.distributed.all_gather then stack: a new buffer of shape {world, in.shape...} whose
/// slice r is rank r's `in` (a 0-d input gives {world}). Every rank must pass the same shape and
/// dtype; otherwise every rank throws InvalidArgument naming each rank's shape or dtype.
/// Cost: as gather_rows, with an allgather of the data.
Buffer all_gather_stacked(Communicator& comm, const Buffer& in);

/// Accelerate's pad_across_processes: extends dimension `dim` of `in` to the largest extent any
/// rank has there, filling new entries with `fill` (converted to the dtype), after the data or,
/// with pad_first, before it. Returns `in` itself (the same memory) on a rank already at the
/// largest extent, and when `dim` is out of range (negative `dim` counts from the end, as in
/// Python), which includes every 0-d input. Other dimensions may differ between ranks and are
/// kept. Example, int32 shapes [1,2], [3,2], [2,2] with fill -100: rank 0 gets
/// [[a,b],[-100,-100],[-100,-100]], rank 1 its own buffer, rank 2 with pad_first
/// [[-100,-100],[x,y],[z,w]].
/// cohort: the shapes are exchanged even when `dim` is out of range, so every rank throws
/// InvalidArgument naming each rank's shape when the ranks' buffers differ in number of
/// dimensions, and naming each rank's `dim` when the ranks passed different ones.
/// Cost: an allgather of 40 bytes per rank and an allgatherv of the dimensions.
Buffer pad_across(Communicator& comm, const Buffer& in, int dim = 0, double fill = 0.0,
                  bool pad_first = false);

struct GatherForMetricsOptions {
  /// This is the last batch of the data (Accelerate's gradient_state.end_of_dataloader).
  bool last_batch = false;
  /// Samples of the last gathered batch that are real data, the rest being the wrap-around
  /// duplicates that even batches add (BatchShard::remainder()). -1 means unknown and 0 means
  /// none were added; both keep every row, as Accelerate does.
  std::int64_t remainder = -1;
};

/// Accelerate's gather_for_metrics: gather_rows(comm, in), keeping only the first `remainder`
/// rows on the last batch, which drops the samples BatchShard repeated to even out the last
/// round. Example: n = 10, batch 2, world 3: the last round's batches [6,7], [8,9], [0,1] gather
/// to [6,7,8,9] with remainder 4. On other batches, or with remainder -1 or 0, it is gather_rows.
/// Ranks without a batch in the last round (even_batches off) must still call it, with zero rows.
/// Throws InvalidArgument on the rank passing remainder < -1 (the others name that rank), and on
/// every rank when the ranks disagree on last_batch or remainder (naming each rank's values) or
/// when remainder exceeds the rows gathered. Cost: as gather_rows.
Buffer gather_for_metrics(Communicator& comm, const Buffer& in,
                          const GatherForMetricsOptions& options = {});

// ---- Sharding data across ranks. Pure functions of their arguments: no communication, the same
// answer on every rank.

/// One rank's share of `len` items from split_between().
struct SplitRange {
  std::int64_t begin = 0;    ///< the first item of this rank
  std::int64_t end = 0;      ///< one past this rank's last item
  std::int64_t padding = 0;  ///< copies of `pad_item` that follow [begin, end) when padded
  /// The item padding repeats: len - 1, the last of the whole input (-1 when len is 0, which is
  /// never padded).
  std::int64_t pad_item = 0;

  /// Number of items this rank gets: end - begin + padding.
  std::int64_t size() const noexcept { return end - begin + padding; }
  /// The items in order: begin .. end - 1, then `padding` copies of pad_item.
  std::vector<std::int64_t> indices() const;
};

/// Accelerate's split_between_processes over item indices: per, extra = divmod(len, world); rank
/// r gets [r·per + min(r, extra), that + per + (r < extra)), so the first `extra` ranks get one
/// more. With `pad`, every rank is padded to per + (extra > 0) items by repeating the last item of
/// the whole input (Accelerate's tensor path; its list path repeats the rank's own last item).
/// Examples: 7 items on 3 ranks are [0,3), [3,5), [5,7); 2 items on 3 ranks are [0], [1], []
/// ([1] padded). cohort: a rank past the end gets nothing unless padded (Accelerate: the last
/// item). Throws InvalidArgument for len < 0, world < 1 or rank outside [0, world).
SplitRange split_between(std::int64_t len, int world, int rank, bool pad = false);

struct BatchShardOptions {
  /// Drop the last incomplete batch, and the last round unless every rank has a full batch in it
  /// (torch's BatchSampler drop_last, as Accelerate applies it per round).
  bool drop_last = false;
  /// Complete the last round by wrapping around to the start of the data, so every rank has the
  /// same number of full batches (Accelerate's default). Off: the last round is what is left,
  /// some ranks get a short batch or none.
  bool even_batches = true;
  /// `batch` is the global batch, split among the ranks (it must divide by the world size);
  /// otherwise each rank reads `batch` samples per step.
  bool split_batches = false;
};

/// One rank's batches of sample indices under Accelerate's BatchSamplerShard over a sequential
/// sampler of n samples. Computed on demand (O(1) memory), so it suits datasets of any size.
///
/// The samples are read in rounds of G = batch · world samples (G = batch with split_batches),
/// each rank taking its consecutive slice of batch samples (batch / world with split_batches)
/// in rank order. With even_batches (and no drop_last) the last round continues past the end with
/// sample (j − n) mod min(G, n) at position j — the start of the data, repeated when the data is
/// shorter than a round. Examples, with rounds in order:
/// - n = 10, batch 2, world 3: rank 0 [[0,1],[6,7]], rank 1 [[2,3],[8,9]], rank 2 [[4,5],[0,1]];
///   without even_batches rank 2 gets [[4,5]] only; with drop_last one round [[0,1]], [[2,3]],
///   [[4,5]].
/// - n = 9, batch 5, world 2: [[0,1,2,3,4]] and [[5,6,7,8,0]].
class BatchShard {
 public:
  /// No samples: zero rounds.
  BatchShard() = default;

  /// Rounds of batches: the same on every rank. Each round is one step of every rank (and one
  /// gather_for_metrics call).
  std::int64_t rounds() const noexcept { return rounds_; }
  /// This rank's sample indices in `round`. Empty only in the last round without even_batches,
  /// on a rank the data ran out before; shorter than the others only on the rank it ran out in.
  /// Throws InvalidArgument unless 0 <= round < rounds().
  std::vector<std::int64_t> batch(std::int64_t round) const;
  /// Every non-empty batch of this rank in order: what Accelerate's sampler yields.
  std::vector<std::vector<std::int64_t>> batches() const;
  /// What gather_for_metrics keeps of the last round: n mod G (0 when n divides into rounds, and
  /// 0 with drop_last, where nothing is repeated; Accelerate reports -1 there, which keeps every
  /// row too).
  std::int64_t remainder() const noexcept { return remainder_; }

 private:
  friend BatchShard batch_shard(std::int64_t n, std::int64_t batch, int world, int rank,
                                const BatchShardOptions& options);

  std::int64_t n_ = 0;
  std::int64_t round_size_ = 0;  // G: samples per round, over all ranks
  std::int64_t rank_size_ = 0;   // samples per rank per round
  std::int64_t offset_ = 0;      // this rank's first position in a round: rank · rank_size_
  std::int64_t rounds_ = 0;
  std::int64_t remainder_ = 0;
  bool wrap_ = false;  // even batches: positions past n wrap to the start of the data
};

/// This rank's BatchShard (see above). Throws InvalidArgument for n < 0, batch < 1, world < 1,
/// rank outside [0, world), a round size overflowing int64, or, with split_batches, a batch not
/// divisible by world (Accelerate's ValueError).
BatchShard batch_shard(std::int64_t n, std::int64_t batch, int world, int rank,
                       const BatchShardOptions& options = {});

}  // namespace cohort::train
