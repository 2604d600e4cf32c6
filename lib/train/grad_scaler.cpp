// GradScaler: dynamic loss scaling (torch.amp.GradScaler) whose skip decision every rank shares.
//
// How it works. Between two update() calls each optimizer group moves Ready -> Unscaled ->
// Stepped, at most once each; update() (or update(new_scale)) returns every group to Ready.
//  1. unscale() checks every gradient buffer before touching any, then multiplies each one in
//     place by float(1 / double(scale)) in a single kernel pass that also reports whether any
//     value was NaN or infinite *before* the multiplication (torch's
//     _amp_foreach_non_finite_check_and_unscale_).
//  2. The ranks agree on that flag with one allreduce(Max) of one float. A rank whose gradients
//     were finite still skips when another rank's overflowed, so the replicas never diverge.
//  3. step() unscales first if the engine did not, and answers "step the optimizer?".
//  4. update() turns the step's outcome into the next scale: back off on an overflow (once the
//     hysteresis budget is spent), grow after growth_interval clean steps.
//
// Device gradients (cuda, or managed memory on a device the runtime sees) take the same pass on
// their device: one convert per gradient with the fused check writing one int32 flag per device,
// which is read back on the host (the only synchronisation) and agreed like the host flag.
//
// Cost: one read and one write of the gradients plus one 4-byte allreduce per group per step;
// nothing at all when the scaler is disabled or the world has one rank.

#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
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

[[noreturn]] void invalid_usage(const std::string& message) {
  throw Error(ErrorCode::InvalidUsage, message);
}

// bf16 has float32's exponent range, so its gradients do not underflow the way fp16's do, and
// fp8 tensors carry their own per-tensor scales (Fp8Scaling): loss scaling has nothing to add.
bool disables_scaling(std::optional<DType> gradient_dtype) {
  return gradient_dtype == DType::BFloat16 || gradient_dtype == DType::Float8E4M3 ||
         gradient_dtype == DType::Float8E5M2;
}

// The reciprocal unscale() multiplies by: computed in double and rounded once, as torch does.
float reciprocal(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

// A usable scale is positive and finite, and so is its float reciprocal (below about 2^-128 the
// reciprocal overflows and unscaling would turn every gradient into inf or NaN).
bool usable_scale(float scale) {
  return std::isfinite(scale) && scale > 0.0f && std::isfinite(reciprocal(scale));
}

void require_usable_scale(const char* where, const char* what, float value) {
  if (!usable_scale(value))
    invalid_argument(
        fmt::format("{}: {} must be positive and finite with a finite float reciprocal, got {}",
                    where, what, value));
}

void validate(const GradScalerOptions& o) {
  constexpr const char* kWhere = "GradScaler";
  require_usable_scale(kWhere, "init_scale", o.init_scale);
  if (!(o.growth_factor > 1.0f) || !std::isfinite(o.growth_factor))
    invalid_argument(
        fmt::format("{}: growth_factor must be finite and > 1, got {}", kWhere, o.growth_factor));
  if (!(o.backoff_factor > 0.0f && o.backoff_factor < 1.0f))
    invalid_argument(
        fmt::format("{}: backoff_factor must be in (0, 1), got {}", kWhere, o.backoff_factor));
  if (o.growth_interval < 1)
    invalid_argument(
        fmt::format("{}: growth_interval must be >= 1, got {}", kWhere, o.growth_interval));
  if (o.hysteresis < 1)
    invalid_argument(fmt::format("{}: hysteresis must be >= 1, got {}", kWhere, o.hysteresis));
  if (o.gradient_dtype && !dtype_is_floating(*o.gradient_dtype))
    invalid_argument(fmt::format("{}: gradient_dtype must be floating, got {}", kWhere,
                                 dtype_name(*o.gradient_dtype)));
  check_timeout_option(kWhere, o.timeout);
}

// The device gradients of `grads`, multiplied in place by inv_scale with the same fused check
// as on the host: per device, every gradient's convert writes into one int32 flag, read back
// once (which also waits for the multiplies). Returns whether any value was NaN or infinite.
bool unscale_on_devices(std::span<const Buffer> grads, float inv_scale) {
  bool found_inf = false;
  for (int device : devices_of(grads)) {
    gpu::DeviceRuntime& runtime = *gpu::device_runtime();  // check_gradient saw it
    DeviceScope scope(runtime, device);
    DeviceScalar<std::int32_t> flag(runtime, device);
    for (const Buffer& b : grads) {
      if (!on_device(b) || b.device().id != device || b.count() == 0) continue;
      runtime.convert(b.dtype(), b.data(), b.dtype(), b.data(), b.count(), inv_scale, flag.get(),
                      gpu::StreamHandle{});
    }
    found_inf = flag.read() != 0 || found_inf;
  }
  return found_inf;
}

}  // namespace

GradScaler::GradScaler(std::shared_ptr<Communicator> comm, const GradScalerOptions& options)
    : comm_(std::move(comm)), options_(options) {
  if (!comm_) invalid_argument("GradScaler: the communicator is null");
  validate(options_);
  enabled_ = options_.enabled && !disables_scaling(options_.gradient_dtype);
  state_ = GradScalerState{options_.init_scale, 0, options_.hysteresis};
}

GradScaler::Group& GradScaler::group_state(int group) {
  for (Group& g : groups_)
    if (g.id == group) return g;
  groups_.push_back(Group{group, GroupStage::Ready, false});
  return groups_.back();
}

const GradScaler::Group* GradScaler::find_group(int group) const {
  for (const Group& g : groups_)
    if (g.id == group) return &g;
  return nullptr;
}

void GradScaler::unscale(std::span<const Buffer> grads, int group) {
  if (!enabled_) return;
  Group& g = group_state(group);
  if (g.stage == GroupStage::Unscaled)
    invalid_usage(
        fmt::format("GradScaler::unscale: group {} was already unscaled since the "
                    "last update()",
                    group));
  if (g.stage == GroupStage::Rejected)
    invalid_usage(
        fmt::format("GradScaler::unscale: group {}'s gradients were refused in this step, which "
                    "the other ranks skip; skip it too and call update()",
                    group));
  if (g.stage == GroupStage::Stepped)
    invalid_usage(
        fmt::format("GradScaler::unscale: group {} was already stepped since the last "
                    "update(); unscale() must come before step()",
                    group));
  // Every buffer is checked before any is multiplied, so a bad list leaves this rank's
  // gradients as they were. The verdict rides on the found-inf agreement (2 + rank instead of a
  // 0/1 flag), so the other ranks throw too instead of waiting for this one.
  std::exception_ptr local_error;
  try {
    for (std::size_t i = 0; i < grads.size(); ++i)
      check_gradient("GradScaler::unscale", i, grads[i]);
  } catch (const Error&) {
    local_error = std::current_exception();
  }
  if (local_error) {
    agree_max(*comm_, 2.0f + static_cast<float>(comm_->rank()), options_.timeout);
    // The others unscaled theirs and count the step as found-inf: so does this rank, or an
    // update() everywhere would back off there only (and throw here, nothing recorded). Alone, a
    // refused call records nothing (torch's unscale_ raises before it records).
    if (comm_->size() > 1) {
      g.stage = GroupStage::Rejected;
      g.found_inf = true;
    }
    std::rethrow_exception(local_error);
  }

  const float inv_scale = reciprocal(state_.scale);
  bool local_inf = false;
  bool any_on_device = false;
  for (const Buffer& b : grads) {
    if (on_device(b)) {
      any_on_device = true;
      continue;
    }
    // Every buffer is multiplied even after an inf was found (torch does the same): the
    // gradients must not be left half scaled, whatever the engine does with them next.
    const bool non_finite =
        kernels::convert(b.dtype(), b.data(), b.dtype(), b.data(), b.count(), inv_scale);
    local_inf = local_inf || non_finite;
  }
  if (any_on_device) local_inf = unscale_on_devices(grads, inv_scale) || local_inf;

  // The gradients are unscaled from here on, so a second unscale must be refused even if the
  // agreement below fails; until it succeeds, assume the worst (an overflow: skip the step).
  g.stage = GroupStage::Unscaled;
  g.found_inf = true;
  const float agreed = agree_max(*comm_, local_inf ? 1.0f : 0.0f, options_.timeout);
  if (agreed >= 2.0f) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("GradScaler::unscale: rank {} rejected its gradients (its error says "
                            "why; other ranks may have too); this step must be skipped",
                            static_cast<int>(agreed) - 2));
  }
  g.found_inf = agreed > 0.0f;
}

bool GradScaler::step(std::span<const Buffer> grads, int group) {
  if (!enabled_) return true;
  const Group* recorded = find_group(group);
  if (recorded && recorded->stage == GroupStage::Stepped)
    invalid_usage(
        fmt::format("GradScaler::step: step() was already called for group {} since "
                    "the last update()",
                    group));
  // A refused group is not unscaled again: the other ranks, which did, skip the step without
  // communicating, as this one does.
  if (!recorded || recorded->stage == GroupStage::Ready) unscale(grads, group);
  Group& g = group_state(group);
  g.stage = GroupStage::Stepped;
  return !g.found_inf;
}

bool GradScaler::found_inf(int group) const {
  if (!enabled_) return false;
  const Group* g = find_group(group);
  return g && g->stage != GroupStage::Ready && g->found_inf;
}

void GradScaler::update() {
  if (!enabled_) return;
  bool recorded = false;
  bool overflow = false;
  for (const Group& g : groups_) {
    if (g.stage == GroupStage::Ready) continue;
    recorded = true;
    overflow = overflow || g.found_inf;
  }
  if (!recorded)
    invalid_usage(
        "GradScaler::update: no inf checks were recorded since the last update(); "
        "call unscale() or step() first");

  if (overflow) {
    // Hysteresis (Megatron's DynamicGradScaler, DeepSpeed's delayed_shift): each overflow spends
    // one unit of the budget and the scale backs off once it is spent. Only growth refills it,
    // so after the first back-off every further overflow backs off again until the scale has
    // grown; with the default budget of 1 that is torch's "back off on every overflow".
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = std::max<std::int64_t>(state_.hysteresis_tracker - 1, 0);
    if (state_.hysteresis_tracker == 0) {
      const auto backed_off =
          static_cast<float>(static_cast<double>(state_.scale) * options_.backoff_factor);
      // Kept only while unscale() can still divide by it (mirrors growth not going to inf).
      if (usable_scale(backed_off)) state_.scale = backed_off;
    }
  } else if (++state_.growth_tracker >= options_.growth_interval) {
    // torch multiplies in double and rounds once; a product past float's range is inf and the
    // old scale is kept (2^127 * 2 stays 2^127).
    const auto grown =
        static_cast<float>(static_cast<double>(state_.scale) * options_.growth_factor);
    if (std::isfinite(grown)) state_.scale = grown;
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = options_.hysteresis;
  }
  skipped_ = overflow;
  groups_.clear();
}

void GradScaler::update(float new_scale) {
  require_usable_scale("GradScaler::update", "new_scale", new_scale);
  if (!enabled_) return;
  bool overflow = false;
  for (const Group& g : groups_)
    overflow = overflow || (g.stage != GroupStage::Ready && g.found_inf);
  state_.scale = new_scale;
  skipped_ = overflow;
  groups_.clear();
}

void GradScaler::load_state(const GradScalerState& state) {
  require_usable_scale("GradScaler::load_state", "scale", state.scale);
  if (state.growth_tracker < 0)
    invalid_argument(fmt::format("GradScaler::load_state: growth_tracker must be >= 0, got {}",
                                 state.growth_tracker));
  if (state.hysteresis_tracker < 0)
    invalid_argument(fmt::format("GradScaler::load_state: hysteresis_tracker must be >= 0, got {}",
                                 state.hysteresis_tracker));
  state_ = state;
}

}  // namespace cohort::train
