// Gradient clipping: torch.nn.utils.clip_grad_norm_ / clip_grad_value_, with the norm of
// sharded gradients agreed across a shard group.
//
// How it works: each rank sums |g|^p over its gradients in f64 (max |g| for the infinity norm),
// which is the p-th power of torch's norm of per-tensor norms. With a shard group, one
// allgather of each rank's part and arguments makes the sum global (added, or the max for the
// infinity norm, NaN kept, in rank order), so every rank computes the same total, takes the same
// error_if_nonfinite decision and the same coefficient, and ranks whose arguments differ are
// named. The coefficient min(1, max_norm / (total + 1e-6)) is applied in place, skipped when it
// is 1: to f64 gradients in f64, to the others rounded to float by the kernels' convert (a
// multiply rounded once to the gradient's dtype).
//
// Device gradients (cuda, or managed memory on a device the runtime sees) take the same passes
// on their device: their parts accumulate into one device double per device, read back (the
// only wait before the decision), and the coefficient is applied by the device's scale, waited
// for before returning.
// The sum of a device's parts is added in another order than the host's, so a device norm may
// differ from a host norm of the same values in the last bits; max |g| and the clipped values
// for a given coefficient are identical.
//
// Cost: one read pass over the gradients, one write pass when clipping, one 40-byte-per-rank
// allgather with a shard group.

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <vector>

#include "train/buffer_checks.hpp"
#include "train/device_placement.hpp"
#include "train/kernels/float_kernels.hpp"
#include "train/timeout_option.hpp"

namespace cohort::train {
namespace {

// Σ |g|^p over one gradient, or max |g| for the infinity norm (NaN if g holds a NaN).
double local_part(const Buffer& grad, double p) {
  using kernels::NormPart;
  if (std::isinf(p))
    return kernels::norm_part(grad.dtype(), grad.data(), grad.count(), NormPart::MaxAbs);
  if (p == 2.0)
    return kernels::norm_part(grad.dtype(), grad.data(), grad.count(), NormPart::SumSquares);
  if (p == 1.0)
    return kernels::norm_part(grad.dtype(), grad.data(), grad.count(), NormPart::SumAbs);
  return kernels::sum_abs_pow(grad.dtype(), grad.data(), grad.count(), p);
}

// std::max drops a NaN in its first argument; a norm must not.
double max_keeping_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  return a > b ? a : b;
}

// The device kernels compute the parts of the 1-, 2- and infinity norms only.
void require_device_norm(double p, std::size_t index, const Buffer& grad) {
  if (!on_device(grad) || std::isinf(p) || p == 1.0 || p == 2.0) return;
  throw Error(ErrorCode::Unsupported,
              fmt::format("clip_grad_norm: gradient {} is on device {}, where norm_type {} is not "
                          "offered (device gradients take norm_type 1, 2 or kInfinityNorm)",
                          index, grad.device().to_string(), p));
}

// Σ |g|^p (or max |g|) over the device gradients of `grads`: per device, every gradient's part
// accumulates into one device double, read back once.
double device_part(std::span<const Buffer> grads, double p) {
  using gpu::DeviceNormPart;
  const DeviceNormPart part = std::isinf(p) ? DeviceNormPart::MaxAbs
                              : p == 1.0    ? DeviceNormPart::SumAbs
                                            : DeviceNormPart::SumSquares;
  double accumulated = 0.0;
  for (int device : devices_of(grads)) {
    gpu::DeviceRuntime& runtime = *gpu::device_runtime();  // check_gradient saw it
    DeviceScope scope(runtime, device);
    DeviceScalar<double> sum(runtime, device);
    for (const Buffer& g : grads) {
      if (!on_device(g) || g.device().id != device || g.count() == 0) continue;
      runtime.norm_part(g.dtype(), g.data(), g.count(), part, sum.get(), gpu::StreamHandle{});
    }
    const double value = sum.read();
    accumulated = std::isinf(p) ? max_keeping_nan(accumulated, value) : accumulated + value;
  }
  return accumulated;
}

// Multiplies the device gradients by `factor` in place (rounded to float for all but f64, as
// the host path does) and waits for it.
void scale_on_devices(std::span<const Buffer> grads, double factor) {
  for (int device : devices_of(grads)) {
    gpu::DeviceRuntime& runtime = *gpu::device_runtime();
    DeviceScope scope(runtime, device);
    for (const Buffer& g : grads) {
      if (!on_device(g) || g.device().id != device || g.count() == 0) continue;
      runtime.scale(g.dtype(), g.data(), g.count(), factor, gpu::StreamHandle{});
    }
    runtime.synchronize_stream(gpu::StreamHandle{});
  }
}

// The shard group's total: one allgather of each rank's [part, rejected, norm_type, max_norm,
// error_if_nonfinite], combined by every rank in rank order (so every rank gets the same bits).
// Carrying the arguments costs nothing more than an allreduce of the part would, and a rank
// with another norm_type (summing where the others take the max) or another max_norm would
// otherwise clip its shards by another coefficient without anyone noticing.
double combine_across_shards(Communicator& group, double part, double p, double max_norm,
                             bool error_if_nonfinite, bool rejected,
                             std::optional<std::chrono::milliseconds> timeout) {
  constexpr std::size_t kFields = 5;
  const double mine[kFields] = {part, rejected ? 1.0 : 0.0, p, max_norm,
                                error_if_nonfinite ? 1.0 : 0.0};
  const auto ranks = static_cast<std::size_t>(group.size());
  Buffer all = Buffer::allocate(kFields * ranks, DType::Float64);
  CollectiveOptions collective;
  collective.timeout = timeout;
  group.allgather(Buffer::view(static_cast<const void*>(mine), kFields, DType::Float64), all,
                  collective);
  const double* const fields = all.data_as<double>();
  std::vector<int> refused, differing;
  int reference = -1;  // the first rank that accepted its arguments
  for (std::size_t r = 0; r < ranks; ++r) {
    const double* const theirs = fields + r * kFields;
    if (theirs[1] != 0.0) {
      refused.push_back(static_cast<int>(r));
      continue;
    }
    if (reference < 0) {
      reference = static_cast<int>(r);
      continue;
    }
    const double* const first = fields + static_cast<std::size_t>(reference) * kFields;
    // Accepted arguments hold no NaN, so == compares them.
    if (theirs[2] != first[2] || theirs[3] != first[3] || theirs[4] != first[4])
      differing.push_back(static_cast<int>(r));
  }
  if (rejected) return part;  // this rank throws its own error
  if (!refused.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("clip_grad_norm: rank(s) {} of the shard group rejected their "
                            "arguments (their errors say why); no gradient was modified",
                            fmt::join(refused, ", ")));
  }
  if (!differing.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("clip_grad_norm: rank(s) {} of the shard group passed another "
                            "norm_type, max_norm or error_if_nonfinite than rank {}; no "
                            "gradient was modified",
                            fmt::join(differing, ", "), reference));
  }
  const bool infinity_norm = std::isinf(p);
  double total = 0.0;
  for (std::size_t r = 0; r < ranks; ++r) {
    const double value = fields[r * kFields];
    total = infinity_norm ? max_keeping_nan(total, value) : total + value;
  }
  return total;
}

}  // namespace

double clip_grad_norm(std::span<const Buffer> grads, double max_norm, const ClipOptions& options) {
  const double p = options.norm_type;
  // Arguments are checked locally, but with a shard group the verdict travels with the norm, so
  // a rank with bad arguments makes every rank of the group throw instead of leaving it waiting.
  std::exception_ptr local_error;
  try {
    if (!(p > 0.0)) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("clip_grad_norm: norm_type {} must be > 0 (or kInfinityNorm)", p));
    }
    if (!(max_norm >= 0.0)) {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("clip_grad_norm: max_norm {} must be >= 0", max_norm));
    }
    check_timeout_option("clip_grad_norm", options.timeout);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      check_gradient("clip_grad_norm", i, grads[i]);
      require_device_norm(p, i, grads[i]);
    }
  } catch (const Error&) {
    local_error = std::current_exception();
  }

  const bool infinity_norm = std::isinf(p);
  double accumulated = 0.0;  // Σ |g|^p, or max |g|
  bool any_on_device = false;
  for (const Buffer& grad : grads) {
    if (local_error || grad.count() == 0) continue;
    if (on_device(grad)) {
      any_on_device = true;
      continue;
    }
    const double part = local_part(grad, p);
    accumulated = infinity_norm ? max_keeping_nan(accumulated, part) : accumulated + part;
  }
  if (any_on_device) {
    const double part = device_part(grads, p);
    accumulated = infinity_norm ? max_keeping_nan(accumulated, part) : accumulated + part;
  }
  if (options.shard_group && options.shard_group->size() > 1)
    accumulated = combine_across_shards(*options.shard_group, accumulated, p, max_norm,
                                        options.error_if_nonfinite, local_error != nullptr,
                                        usable_timeout(options.timeout));  // a rejected one joins
  if (local_error) std::rethrow_exception(local_error);
  double total = accumulated;
  if (!infinity_norm && p == 2.0) {
    total = std::sqrt(accumulated);
  } else if (!infinity_norm && p != 1.0) {
    total = std::pow(accumulated, 1.0 / p);
  }

  // Decided from the agreed total, so every rank of the shard group throws together.
  if (options.error_if_nonfinite && !std::isfinite(total)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("clip_grad_norm: the total norm of order {} is {}, and "
                            "error_if_nonfinite is set; the gradients were not modified",
                            p, total));
  }
  // NaN fails the comparison, so a NaN total makes every gradient NaN, as in torch.
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return total;
  // f64 gradients are multiplied by the coefficient in f64, as torch multiplies them by an f64
  // coefficient; the others by its float rounding (torch's coefficient has their own dtype).
  const auto factor = static_cast<float>(coef);
  for (const Buffer& grad : grads) {
    if (grad.count() == 0 || on_device(grad)) continue;
    if (grad.dtype() == DType::Float64) {
      // Host gradients need not be aligned (a buffer-protocol view at any offset): each element
      // is loaded and stored bytewise, which compilers turn into plain moves.
      auto* const bytes = static_cast<std::byte*>(grad.data());
      for (std::size_t i = 0; i < grad.count(); ++i) {
        double value;
        std::memcpy(&value, bytes + i * sizeof(double), sizeof(double));
        value *= coef;
        std::memcpy(bytes + i * sizeof(double), &value, sizeof(double));
      }
      continue;
    }
    kernels::convert(grad.dtype(), grad.data(), grad.dtype(), grad.data(), grad.count(), factor);
  }
  if (any_on_device) scale_on_devices(grads, coef);
  return total;
}

void clip_grad_value(std::span<const Buffer> grads, double value) {
  if (!(value >= 0.0)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("clip_grad_value: value {} must be >= 0", value));
  }
  for (std::size_t i = 0; i < grads.size(); ++i) {
    check_gradient("clip_grad_value", i, grads[i]);
    if (!grads[i].device().host_accessible())
      throw Error(ErrorCode::Unsupported,
                  fmt::format("clip_grad_value: gradient {} is on device {}; clamping is offered "
                              "for host gradients only (clip_grad_norm takes device gradients)",
                              i, grads[i].device().to_string()));
  }
  for (const Buffer& grad : grads) {
    if (grad.count() == 0) continue;
    kernels::clamp(grad.dtype(), grad.data(), grad.count(), value);
  }
}

}  // namespace cohort::train
