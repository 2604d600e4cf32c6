#pragma once

// One float agreed by every rank: the loss scaler's found-inf flag and the FP8 amax are both
// "the largest value any rank saw", so both are one allreduce(Max) of a single float. Max
// propagates NaN (see ReduceOp), which is what both callers want: a NaN anywhere is seen
// everywhere. A world of one returns its own value without communicating.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>

#include <chrono>
#include <optional>
#include <span>

namespace cohort::train {

/// max over the ranks of `comm` of `local` (NaN if any rank passed NaN). Collective unless
/// comm.size() == 1. `timeout` unset: the communicator's default.
inline float agree_max(Communicator& comm, float local,
                       std::optional<std::chrono::milliseconds> timeout) {
  if (comm.size() == 1) return local;
  CollectiveOptions options;
  options.timeout = timeout;
  comm.allreduce(Buffer::view(&local, 1, DType::Float32), ReduceOp::Max, options);
  return local;
}

/// Element-wise max over the ranks of `comm` of `words`, in place: a value and flags that ride
/// with it in the same allreduce. Collective unless comm.size() == 1.
inline void agree_max(Communicator& comm, std::span<float> words,
                      std::optional<std::chrono::milliseconds> timeout) {
  if (comm.size() == 1) return;
  CollectiveOptions options;
  options.timeout = timeout;
  comm.allreduce(Buffer::view(words.data(), words.size(), DType::Float32), ReduceOp::Max, options);
}

}  // namespace cohort::train
