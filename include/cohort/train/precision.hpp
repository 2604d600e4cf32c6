#pragma once

/// Mixed precision for engines that hold raw buffers: float-format casts, a dynamic loss scaler
/// whose skip decision every rank agrees on, and FP8 amax scaling.
///
/// The training step this header serves (see cohort/train.hpp for the whole step):
///
///     backward(loss * scaler.scale());        // engine
///     scaler.unscale(grads);                  // one fused pass + one 4-byte allreduce(Max)
///     clip_grad_norm(grads, 1.0);             // optional, on unscaled gradients
///     if (scaler.step(grads)) optimizer.step();
///     scaler.update();
///
/// Host buffers (CPU, pinned) run vectorised CPU kernels chosen at run time for this CPU
/// (AVX-512, AVX2 or portable). Device buffers (CUDA memory, and managed memory on a device the
/// device runtime sees; a cast between managed and host memory runs on the host) run the same
/// element-wise semantics as CUDA kernels on the buffer's device:
/// queued on that device's legacy default stream (so after work the engine queued on it or on
/// any other blocking stream), made current for the call and restored after, and each call
/// returns once its device work is done. Without CUDA (or without a visible device) a CUDA buffer
/// is Error(Unsupported) naming it.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace cohort::train {

/// Converts every element of `in` to out's dtype and writes it to `out`, in row-major order.
/// Both dtypes must be floating (f32, f64, f16, bf16, fp8 e4m3, fp8 e5m2), counts equal, out
/// contiguous and writable; `in` may have any strides. Rounding is to nearest even, computed
/// exactly once from the source value (f64 sources are not rounded twice through f32). NaN stays
/// NaN with its sign (f16 and fp8 use their canonical quiet NaN; f32, f64 and bf16 keep the
/// payload's top bits, as lib/core/float_formats does). Overflow follows lib/core/float_formats:
/// f32/f16/bf16/e5m2 overflow to +-inf (f16 from |x| >= 65520, e5m2 from 61440); e4m3 (no
/// infinities) becomes NaN above 464 (the midpoint past its largest value, 448), as torch's cast
/// does. Subnormals are kept, never flushed. in and out may be the same memory only when their
/// dtypes have equal sizes. Throws InvalidArgument naming the dtypes or counts that are wrong.
/// Device buffers: `in` and `out` both on the same device (else InvalidArgument naming both),
/// `in` contiguous (a strided device input is Unsupported); the results are the same bits as on
/// the host.
void cast(const Buffer& in, const Buffer& out);

/// A new contiguous buffer of `in`'s shape and `dtype` holding cast(in): host memory for a host
/// input, device memory of the same device (cuda:N, also for a managed input) for a device one.
Buffer cast_to(const Buffer& in, DType dtype);

/// `b` itself unless it is f16 or bf16; then a new f32 buffer of the same shape (exact).
Buffer to_fp32(const Buffer& b);

/// Options of GradScaler. Defaults are torch.amp.GradScaler's.
struct GradScalerOptions {
  float init_scale = 65536.0f;
  /// Multiplies the scale after growth_interval consecutive clean steps. Must be > 1.
  float growth_factor = 2.0f;
  /// Multiplies the scale after an overflow. Must be in (0, 1).
  float backoff_factor = 0.5f;
  /// Clean steps before the scale grows. Must be >= 1.
  std::int64_t growth_interval = 2000;
  /// Overflows tolerated before backing off (Megatron's DynamicGradScaler, DeepSpeed's
  /// delayed_shift): each overflow spends one unit, growth refills the budget, so once it is
  /// spent every overflow backs off until the scale grows again. Must be >= 1; 1 backs off on
  /// every overflow, which is torch's behaviour.
  std::int64_t hysteresis = 1;
  bool enabled = true;
  /// The dtype the engine's gradients are produced in. bf16 and fp8 gradients have float32's
  /// exponent range (or their own scaling), so the scaler disables itself for them: scale() is 1
  /// and unscale/step/update do nothing beyond what a disabled scaler does. Unset: enabled as
  /// `enabled` says (the fp16 case).
  std::optional<DType> gradient_dtype;
  /// Deadline of the found-inf agreement (>= 0). Unset: the communicator's default.
  std::optional<std::chrono::milliseconds> timeout;
};

/// Everything a checkpoint needs to resume a GradScaler exactly.
struct GradScalerState {
  float scale = 65536.0f;
  std::int64_t growth_tracker = 0;
  std::int64_t hysteresis_tracker = 1;
};

/// Dynamic loss scaling (torch.amp.GradScaler), with the found-inf decision agreed across the
/// ranks of `comm` by one allreduce(Max) of one float per unscale, so every rank skips or steps
/// together even when only one rank's gradients overflowed.
///
/// Gradients are passed per optimizer "group" (torch: per optimizer); each group is unscaled at
/// most once and stepped at most once between two update() calls. unscale/step/update are
/// collective over `comm` (every rank calls them in the same order) unless the scaler is
/// disabled, when they never communicate. A world of one never communicates.
///
/// Threading: one thread at a time. The communicator must outlive the scaler.
class GradScaler {
 public:
  /// Throws InvalidArgument for a null communicator, an init_scale that is not positive and
  /// finite (with a finite float reciprocal), a growth_factor that is not finite and > 1,
  /// backoff_factor outside (0, 1), growth_interval < 1, hysteresis < 1, a non-floating
  /// gradient_dtype or a timeout that is not positive or exceeds kMaxTimeout (one year). Options
  /// are checked even when the scaler is disabled.
  explicit GradScaler(std::shared_ptr<Communicator> comm, const GradScalerOptions& options = {});

  /// False when disabled by options (enabled = false, or bf16/fp8 gradients).
  bool enabled() const noexcept { return enabled_; }
  /// The factor to multiply the loss by before backward (1 when disabled).
  float scale() const noexcept { return enabled_ ? state_.scale : 1.0f; }

  /// Multiplies every gradient by float(1 / double(scale())) in one fused pass per buffer that
  /// also detects any non-finite value (NaN included) in the gradients as they were; every
  /// gradient is multiplied even when an inf is found (as torch does). Then agrees found-inf with
  /// every rank (allreduce Max). Gradients must be floating, writable, contiguous buffers in host
  /// or device memory; all are checked before any is touched (InvalidArgument naming the
  /// gradient's index and dtype; Unsupported for device memory without CUDA or a visible device).
  /// Device gradients are multiplied by a device kernel with the same fused check, writing one
  /// flag per device that is read back before the agreement (the only wait on the device). Throws
  /// InvalidUsage when `group` was already unscaled or stepped since the last update(). Disabled:
  /// does nothing.
  /// A rank whose gradients are refused throws its error (InvalidArgument, or Unsupported for
  /// device memory it cannot reach), after telling the others,
  /// which throw InvalidArgument naming it (their gradients are unscaled by then). On every rank
  /// the step then counts as one that found an inf: skip it and call update(), which backs off
  /// alike everywhere (step() then returns false without unscaling; another unscale() of the
  /// group is InvalidUsage). In a world of one a refused call records nothing (as torch's), and
  /// may be retried with the gradients mended.
  void unscale(std::span<const Buffer> grads, int group = 0);

  /// Whether the optimizer of `group` should step: unscales first if unscale() was not called
  /// for it, then returns false when any rank found an inf or NaN. Throws InvalidUsage when
  /// step() was already called for `group` since the last update(). Disabled: returns true.
  bool step(std::span<const Buffer> grads, int group = 0);

  /// Found-inf agreed by the unscale of `group` in the current step (false before it, after
  /// update(), and when disabled).
  bool found_inf(int group = 0) const;
  /// True when the last update() followed a step that was skipped (the engine then skips its
  /// LR-scheduler step too).
  bool step_was_skipped() const noexcept { return skipped_; }

  /// Ends the step: on any found-inf, backs off (scale *= backoff_factor once the hysteresis
  /// budget is spent; not kept if 1/scale would overflow float) and resets the growth tracker;
  /// otherwise counts a clean step and after growth_interval of them grows the scale (kept only
  /// if the result is finite) and refills the hysteresis budget. Every group returns to Ready.
  /// Throws InvalidUsage when no group was unscaled since the last update() (torch: "No inf
  /// checks were recorded prior to update"). Disabled: does nothing.
  void update();
  /// Ends the step with an explicit scale (positive and finite with a finite float reciprocal,
  /// else InvalidArgument); trackers are kept, groups return to Ready, and step_was_skipped()
  /// reports whether this step found an inf. Needs no prior unscale (as in torch).
  void update(float new_scale);

  GradScalerState state() const noexcept { return state_; }
  /// Throws InvalidArgument for an unusable scale (as update(new_scale)) or negative trackers.
  /// A growth_tracker at or past growth_interval grows the scale on the next clean step.
  void load_state(const GradScalerState& state);

 private:
  /// Rejected: this rank refused its gradients (untouched) while other ranks unscaled theirs;
  /// counts as found-inf; step() skips, as on those ranks.
  enum class GroupStage : std::uint8_t { Ready, Rejected, Unscaled, Stepped };
  struct Group {
    int id = 0;
    GroupStage stage = GroupStage::Ready;
    bool found_inf = false;
  };
  Group& group_state(int group);
  const Group* find_group(int group) const;

  std::shared_ptr<Communicator> comm_;
  GradScalerOptions options_;
  bool enabled_ = true;
  GradScalerState state_;
  std::vector<Group> groups_;
  bool skipped_ = false;
};

/// How an FP8 scale is derived from the amax history (Transformer Engine's recipe).
enum class AmaxCompute : std::uint8_t {
  MostRecent,  ///< the latest agreed amax
  Max,         ///< the largest amax in the history window
};

struct Fp8ScalingOptions {
  /// The fp8 format the tensor is cast to: Float8E4M3 (max 448) or Float8E5M2 (max 57344).
  DType format = DType::Float8E4M3;
  /// scale = fp8_max / amax / 2^margin.
  int margin = 0;
  /// Amax values remembered (>= 1).
  std::size_t history_length = 1024;
  AmaxCompute amax_compute = AmaxCompute::MostRecent;
  std::optional<std::chrono::milliseconds> timeout;
};

/// Delayed FP8 scaling for one tensor (Transformer Engine's DelayedScaling defaults): each
/// update agrees the amax across the ranks of `comm` by allreduce(Max), records it, and derives
/// scale = fp8_max / amax / 2^margin from the history. An amax of zero or a non-finite amax keeps
/// the previous scale. The initial scale is 1. update() is collective (no communication in a
/// world of one). Threading: one thread at a time.
class Fp8Scaling {
 public:
  /// Throws InvalidArgument for a null communicator, a non-fp8 format, a negative margin or one
  /// so large that fp8_max / 2^margin leaves float's normal range, history_length 0 or a
  /// timeout that is not positive or exceeds kMaxTimeout.
  explicit Fp8Scaling(std::shared_ptr<Communicator> comm, const Fp8ScalingOptions& options = {});

  /// Agrees `local_amax` (max |x| this rank saw; NaN allowed, negative is InvalidArgument)
  /// across ranks, records it, returns the new scale. A rank whose argument is refused still
  /// takes part in the agreement, so every rank throws (that rank its own error, the others
  /// InvalidArgument naming it) and none waits; nothing is recorded then. With AmaxCompute::Max,
  /// NaN entries of the history are ignored (TE's fmaxf); a quotient that overflows float
  /// (subnormal amax) becomes float's largest value, as in TE.
  float update(float local_amax);
  /// As above, with the local amax computed from a floating buffer, host or device (NaN
  /// propagates; see amax()). A buffer amax() refuses is refused as above, on every rank.
  float update(const Buffer& tensor);

  float scale() const noexcept { return scale_; }
  float scale_inverse() const noexcept { return 1.0f / scale_; }
  /// The agreed amax values, oldest first.
  const std::deque<float>& amax_history() const noexcept { return history_; }
  /// Largest finite value of the format (448 or 57344).
  float fp8_max() const noexcept;

 private:
  /// The agreement, with this rank's refusal of its argument (null: none) riding along.
  float agree_and_update(float local_amax, std::exception_ptr local_error);

  std::shared_ptr<Communicator> comm_;
  Fp8ScalingOptions options_;
  std::deque<float> history_;
  float scale_ = 1.0f;
};

/// max |x| over a floating, contiguous buffer, NaN if any element is NaN (0 for an empty buffer).
/// Device memory: computed by a device kernel and read back (the call waits for it); the same
/// value as on the host. InvalidArgument for another dtype or a strided buffer, Unsupported for
/// device memory without CUDA or a visible device.
float amax(const Buffer& tensor);

}  // namespace cohort::train
