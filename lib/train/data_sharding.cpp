// Which samples each rank reads (metrics.hpp): split_between and batch_shard. Pure arithmetic,
// identical on every rank, no communication.
//
// batch_shard restates Accelerate's BatchSamplerShard in closed form. Its Python walks torch's
// BatchSampler batch by batch and, for even batches, tops the last round up from a saved copy of
// the first round's indices. Seen as one stream of positions that is:
//   - rounds of G samples (batch · world, or batch with split_batches), rank r taking the slice
//     [round·G + r·s, round·G + (r + 1)·s) of s = G / world samples;
//   - drop_last: only the n / G complete rounds (torch drops the short batch, Accelerate the
//     round it would have completed);
//   - even batches: ceil(n / G) rounds, position j >= n reading sample (j − n) mod min(G, n) —
//     the saved first round (min(G, n) samples, doubled until it covers a round, hence the
//     modulo);
//   - otherwise: ceil(n / G) rounds clipped at n, so the last round's slices are short or empty.
// The test checks this against a line-by-line port of the Python.

#include <cohort/error.hpp>
#include <cohort/train/metrics.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace cohort::train {
namespace {

void check_world(const char* op, int world, int rank) {
  if (world < 1) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: world size {} is invalid; it must be at least 1", op, world));
  }
  if (rank < 0 || rank >= world) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: rank {} is out of range for a world of {}", op, rank, world));
  }
}

}  // namespace

std::vector<std::int64_t> SplitRange::indices() const {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(size()));
  for (std::int64_t i = begin; i < end; ++i) out.push_back(i);
  out.insert(out.end(), static_cast<std::size_t>(padding), pad_item);
  return out;
}

SplitRange split_between(std::int64_t len, int world, int rank, bool pad) {
  if (len < 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("split_between: item count {} is negative", len));
  }
  check_world("split_between", world, rank);
  const std::int64_t per = len / world;
  const std::int64_t extra = len % world;
  SplitRange range;
  range.begin = rank * per + std::min<std::int64_t>(rank, extra);
  range.end = range.begin + per + (rank < extra ? 1 : 0);
  range.pad_item = len - 1;
  // Every rank is padded to the largest share, which the first `extra` ranks hold.
  if (pad) range.padding = per + (extra > 0 ? 1 : 0) - (range.end - range.begin);
  return range;
}

BatchShard batch_shard(std::int64_t n, std::int64_t batch, int world, int rank,
                       const BatchShardOptions& options) {
  constexpr const char* kOp = "batch_shard";
  if (n < 0) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("{}: sample count {} is negative", kOp, n));
  }
  if (batch < 1) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: batch size {} is invalid; it must be at least 1", kOp, batch));
  }
  check_world(kOp, world, rank);
  if (options.split_batches && batch % world != 0) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: with split_batches the batch size {} must be a multiple of the "
                            "world size {}",
                            kOp, batch, world));
  }
  std::int64_t round_size = batch;
  if (!options.split_batches && __builtin_mul_overflow(batch, std::int64_t{world}, &round_size)) {
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("{}: batch size {} times world size {} overflows int64", kOp, batch, world));
  }
  // Positions run up to rounds · G <= n + G − 1; keep them representable.
  if (n > std::numeric_limits<std::int64_t>::max() - round_size) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: sample count {} plus the round size {} overflows int64", kOp, n,
                            round_size));
  }

  BatchShard shard;
  shard.n_ = n;
  shard.round_size_ = round_size;
  shard.rank_size_ = round_size / world;
  shard.offset_ = rank * shard.rank_size_;
  if (options.drop_last) {
    shard.rounds_ = n / round_size;
    // Nothing is repeated, so nothing is to be dropped from the last round.
    shard.remainder_ = 0;
  } else {
    shard.rounds_ = n / round_size + (n % round_size != 0 ? 1 : 0);
    shard.remainder_ = n % round_size;
    shard.wrap_ = options.even_batches;
  }
  return shard;
}

std::vector<std::int64_t> BatchShard::batch(std::int64_t round) const {
  if (round < 0 || round >= rounds_) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("BatchShard::batch: round {} is out of range; this shard has {} "
                            "rounds",
                            round, rounds_));
  }
  const std::int64_t first = round * round_size_ + offset_;
  const std::int64_t wrap_period = std::min(round_size_, n_);
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(rank_size_));
  for (std::int64_t j = first; j < first + rank_size_; ++j) {
    if (j < n_) {
      out.push_back(j);
    } else if (wrap_) {
      out.push_back((j - n_) % wrap_period);
    } else {
      break;  // the data ran out in this rank's slice of the last round
    }
  }
  return out;
}

std::vector<std::vector<std::int64_t>> BatchShard::batches() const {
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t round = 0; round < rounds_; ++round) {
    std::vector<std::int64_t> indices = batch(round);
    if (!indices.empty()) out.push_back(std::move(indices));
  }
  return out;
}

}  // namespace cohort::train
