// Fp8Scaling and amax(): Transformer Engine's delayed scaling for one tensor, with the amax
// agreed by every rank.
//
// How it works. Each update():
//  1. agrees the amax: allreduce(Max) of this rank's max |x| (NaN anywhere is NaN everywhere);
//  2. records it, dropping the oldest entry past history_length;
//  3. picks the amax to scale by: the latest (MostRecent), or the largest in the window (Max,
//     NaN entries ignored as TE's fmaxf reduction ignores them);
//  4. if that amax is positive and finite, scale = (fp8_max * 2^-margin) / amax, with an
//     infinite quotient (a subnormal amax) clamped to float's largest value as TE does;
//     otherwise the previous scale stays, so one empty or overflowed step cannot wreck it.
// Every rank runs the same arithmetic on the same agreed values, so the scales agree bitwise.
//
// Cost: one 4-byte allreduce per update (none in a world of one); update(Buffer) adds one read
// of the tensor.

#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "core/invalid_argument.hpp"
#include "train/buffer_checks.hpp"
#include "train/device_placement.hpp"
#include "train/kernels/float_kernels.hpp"
#include "train/scalar_agreement.hpp"
#include "train/timeout_option.hpp"

namespace cohort::train {
namespace {

bool is_fp8(DType dtype) {
  return dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2;
}

// The largest finite value of an fp8 format after the margin: exact, since it is a power-of-two
// scaling of a normal float (the constructor rejects margins that would leave the normal range).
float scaled_max(float fp8_max, int margin) {
  return std::ldexp(fp8_max, -margin);
}

// The largest amax in the window, NaN entries skipped (fmax returns the other operand); NaN
// only when every entry is NaN.
float window_max(const std::deque<float>& history) {
  return std::accumulate(history.begin(), history.end(), std::numeric_limits<float>::quiet_NaN(),
                         [](float a, float b) { return std::fmax(a, b); });
}

}  // namespace

float amax(const Buffer& tensor) {
  require_kernel_access("amax", "the buffer", tensor);
  require_floating("amax", "the buffer", tensor);
  require_contiguous("amax", "the buffer", tensor, /*written=*/false);
  if (on_device(tensor)) {
    // The device's max |x| into one device double, read back (which waits for it).
    gpu::DeviceRuntime& runtime = device_runtime_for("amax", "the buffer", tensor);
    DeviceScope scope(runtime, tensor.device().id);
    DeviceScalar<double> result(runtime, tensor.device().id);
    if (tensor.count() > 0)
      runtime.norm_part(tensor.dtype(), tensor.data(), tensor.count(), gpu::DeviceNormPart::MaxAbs,
                        result.get(), gpu::StreamHandle{});
    return static_cast<float>(result.read());
  }
  return static_cast<float>(
      kernels::norm_part(tensor.dtype(), tensor.data(), tensor.count(), kernels::NormPart::MaxAbs));
}

Fp8Scaling::Fp8Scaling(std::shared_ptr<Communicator> comm, const Fp8ScalingOptions& options)
    : comm_(std::move(comm)), options_(options) {
  if (!comm_) invalid_argument("Fp8Scaling: the communicator is null");
  if (!is_fp8(options_.format))
    invalid_argument(fmt::format("Fp8Scaling: format must be fp8_e4m3 or fp8_e5m2, got {}",
                                 dtype_name(options_.format)));
  if (options_.margin < 0)
    invalid_argument(fmt::format("Fp8Scaling: margin must be >= 0, got {}", options_.margin));
  if (!(scaled_max(fp8_max(), options_.margin) >= std::numeric_limits<float>::min()))
    invalid_argument(
        fmt::format("Fp8Scaling: margin {} is too large: {} / 2^{} is below "
                    "float's normal range",
                    options_.margin, fp8_max(), options_.margin));
  if (options_.history_length == 0)
    invalid_argument("Fp8Scaling: history_length must be >= 1, got 0");
  check_timeout_option("Fp8Scaling", options_.timeout);
}

float Fp8Scaling::fp8_max() const noexcept {
  return options_.format == DType::Float8E4M3 ? 448.0f : 57344.0f;
}

float Fp8Scaling::update(float local_amax) {
  // NaN passes (it is a legitimate "this tensor overflowed" amax); a negative value cannot be a
  // max |x| and would otherwise be silently outvoted by the other ranks.
  std::exception_ptr local_error;
  if (local_amax < 0.0f) {
    try {
      invalid_argument(fmt::format(
          "Fp8Scaling::update: local_amax must be >= 0 (a max |x|), got {}", local_amax));
    } catch (const Error&) {
      local_error = std::current_exception();
    }
  }
  return agree_and_update(local_amax, local_error);
}

float Fp8Scaling::update(const Buffer& tensor) {
  float local_amax = 0.0f;
  std::exception_ptr local_error;
  try {
    local_amax = amax(tensor);
  } catch (const Error&) {
    local_error = std::current_exception();
  }
  return agree_and_update(local_amax, local_error);
}

float Fp8Scaling::agree_and_update(float local_amax, std::exception_ptr local_error) {
  // The verdict rides with the amax, as a second word of the same allreduce(Max): 1 + rank on a
  // rank that refused its argument, 0 elsewhere. So a refusal on one rank makes every rank
  // throw instead of leaving the others waiting in the agreement.
  float words[2] = {local_error ? 0.0f : local_amax,
                    local_error ? 1.0f + static_cast<float>(comm_->rank()) : 0.0f};
  agree_max(*comm_, words, options_.timeout);
  if (local_error) std::rethrow_exception(local_error);
  if (words[1] > 0.0f)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("Fp8Scaling::update: rank {} refused its amax (its error says why)",
                            static_cast<int>(words[1]) - 1));
  const float agreed = words[0];

  history_.push_back(agreed);
  if (history_.size() > options_.history_length) history_.pop_front();

  const float amax =
      options_.amax_compute == AmaxCompute::MostRecent ? agreed : window_max(history_);
  if (std::isfinite(amax) && amax > 0.0f) {
    const float scale = scaled_max(fp8_max(), options_.margin) / amax;
    scale_ = std::isinf(scale) ? std::numeric_limits<float>::max() : scale;
  }
  return scale_;
}

}  // namespace cohort::train
