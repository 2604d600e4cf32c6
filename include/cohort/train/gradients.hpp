#pragma once

/// Gradient synchronisation for data parallelism, the way torch's DDP reducer does it: buckets
/// filled in the order backward produces gradients, each bucket's allreduce started as soon as it
/// is complete (overlapping the rest of backward), gradient accumulation windows that do no
/// communication at all, and gradient clipping.
///
/// The training step this header serves:
///
///     bool sync = grads.begin_micro_step(end_of_data);   // false: accumulate locally
///     backward(loss * grads.loss_multiplier());          // engine calls grads.mark_ready(i)
///     if (sync) {
///       grads.finish();                                  // every gradient now holds the average
///       clip_grad_norm(grad_buffers, 1.0);
///       optimizer.step();                                // engine
///     }

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>
#include <cohort/work.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace cohort::train {

struct GradientSyncOptions {
  /// A bucket closes once it holds at least this many bytes (DDP: 25 MiB).
  std::size_t bucket_cap_bytes = std::size_t{25} << 20;
  /// The first bucket (the last gradients registered, which backward produces first) closes at
  /// this many bytes, so communication starts early (DDP: 1 MiB).
  std::size_t first_bucket_cap_bytes = std::size_t{1} << 20;
  /// Communicate in this dtype (Float16 or BFloat16: cast, divide, reduce, cast back; DDP's
  /// compression hooks). Unset: each bucket communicates in its gradients' dtype.
  std::optional<DType> communication_dtype;
  /// Micro-steps per optimizer step (Accelerate's gradient_accumulation_steps). >= 1.
  int accumulation_steps = 1;
  /// Average the gradients on every micro-step, not only the last of a window (Accelerate's
  /// sync_each_batch: less memory pressure in some engines, more communication).
  bool sync_each_batch = false;
  /// A gradient not marked ready in the communicating micro-step does not fail finish(): it
  /// contributes what its memory holds if it was marked in an earlier micro-step of the window
  /// (what those added, as DDP uses a gradient that is defined), and zeros if it was marked in
  /// none (DDP's find_unused_parameters).
  bool allow_unready = false;
  /// When a window is shorter than accumulation_steps (the end of the data came first), rescale
  /// the gradients at the sync by accumulation_steps / micro-steps so the result is the exact mean
  /// over the window. Off (Accelerate's behaviour): the short window is still divided by
  /// accumulation_steps.
  bool exact_final_window = false;
  /// Deadline of each bucket's allreduce. Unset: the communicator's default.
  std::optional<std::chrono::milliseconds> timeout;
};

/// Averages registered gradient buffers across the ranks of a communicator (torch's DDP reducer
/// plus Accelerate's gradient accumulation).
///
/// Buckets: gradients are grouped in reverse registration order (the order backward produces
/// them); a bucket closes once it holds bucket_cap_bytes (first_bucket_cap_bytes for the first)
/// and never mixes dtypes or devices. Bucket k starts its allreduce once every gradient in it is
/// marked ready *and* every earlier bucket has started, so every rank issues the same collectives
/// in the same order whatever order its gradients become ready in. f32, f64 and bf16 buckets are
/// reduced with ReduceOp::Avg (the division happens inside the collective); f16 and fp8 buckets
/// are divided by the world size as they are copied in, then summed, so their sums cannot
/// overflow where the mean fits. Right after the last bucket, one allreduce of one float per rank
/// tells every rank which ranks left gradients unready.
///
/// Copies: when a bucket's gradients already tile one contiguous range of memory (same dtype, no
/// communication dtype), that memory *is* the bucket: gradients are divided in place and reduced
/// in place, with no staging copy in or out (DDP's gradient_as_bucket_view, seen from the other
/// side). contiguous_gradients() allocates gradients that way; otherwise each bucket has a
/// staging buffer and every gradient is copied in and out once. Host staging buffers are
/// mappable memory (Buffer::allocate_mappable; ordinary memory where the kernel refuses it), so
/// the ranks of a host reduce them in each other's memory; so is contiguous_gradients()'s. Like
/// all mappable memory they are shared with, not copied into, a child this process forks.
///
/// Accumulation: begin_micro_step() says whether this micro-step is the last of its window
/// (every accumulation_steps-th, and always at the end of the data). On the other micro-steps
/// mark_ready() only validates and finish() does nothing: no byte is communicated, the engine
/// accumulates into its gradient buffers as usual.
///
/// Collective: the communicating calls (mark_ready that starts a bucket, finish,
/// broadcast_parameters) must happen on every rank in the same micro-steps, and every rank must
/// register gradients of the same sizes and dtypes in the same order. Threading: mark_ready may
/// be called from any thread (calls are serialised); the other calls from one thread. Registered
/// buffers and the communicator must outlive the synchroniser. A world of one communicates
/// nothing and gives the same results (the f16/bf16 rounding of a communication dtype included).
///
/// Device gradients (CUDA memory; managed memory counts as device memory when every gradient is
/// managed memory on one device the runtime sees, else as host memory): all on one device
/// (InvalidArgument naming two gradients otherwise). Division, staging copies (staging buffers are
/// allocated on that device) and zeroing run as device kernels on its legacy default stream; the
/// bucket allreduces are issued without a stream, so the communicator orders them after those
/// kernels and runs them on NCCL; finish() returns once the unpacked gradients are in place on the
/// device. The unready flags stay a small host allreduce. The element-wise passes give the same
/// bits as on the host; the reduction itself is NCCL's.
class GradientSynchronizer {
 public:
  /// Registers the engine's gradients (floating dtypes, contiguous, writable, in host memory or
  /// all on one device). Throws InvalidArgument naming the gradient that is not (or that is on
  /// another device than gradient 0), Unsupported for device memory without CUDA or a visible
  /// device, and
  /// InvalidArgument for a null communicator, a communication dtype other than f16/bf16,
  /// accumulation_steps < 1, or a timeout that is not positive or exceeds kMaxTimeout.
  /// Collective: one allgather of a digest of the registration (counts, dtypes, kinds of memory
  /// and where the device changes, order, bucket
  /// caps, communication dtype, accumulation_steps, sync_each_batch, exact_final_window,
  /// allow_unready), so a rank that registered differently, or whose arguments were rejected,
  /// is an InvalidArgument on every rank naming it.
  GradientSynchronizer(std::shared_ptr<Communicator> comm, std::vector<Buffer> grads,
                       const GradientSyncOptions& options = {});
  /// Waits for allreduces still in flight (an unfinished micro-step), so no collective writes
  /// into freed memory; their errors are logged, not thrown.
  ~GradientSynchronizer();
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  /// The bucket layout: indices of registered gradients, bucket by bucket, in launch order.
  const std::vector<std::vector<std::size_t>>& buckets() const noexcept { return layout_; }

  /// Starts a micro-step; returns whether the optimizer steps after it. Accelerate's rule: with
  /// end_of_data the step counter restarts and the micro-step syncs; otherwise the counter
  /// advances and the micro-step syncs when it is a multiple of accumulation_steps. Inside a
  /// no_sync() window it never syncs and the counter stays put. Throws InvalidUsage when the
  /// previous communicating micro-step was not finished.
  bool begin_micro_step(bool end_of_data = false);
  /// Whether the current micro-step communicates (sync, or sync_each_batch).
  bool communicates() const noexcept { return communicating_; }
  /// What the engine multiplies its loss by: 1 / accumulation_steps.
  float loss_multiplier() const noexcept {
    return 1.0f / static_cast<float>(options_.accumulation_steps);
  }

  /// Gradient `index` holds this micro-step's final value. On a communicating micro-step it is
  /// copied into its bucket (f16/fp8: divided by the world size) and ready buckets start their
  /// allreduce;
  /// a staged gradient is written only by finish(), a gradient that is its bucket's memory is
  /// divided in place here and then reduced in place. Throws InvalidArgument for an unknown
  /// index, InvalidUsage when it was already marked in this micro-step, before the first
  /// begin_micro_step(), or after finish() of a communicating micro-step.
  void mark_ready(std::size_t index);

  /// On a communicating micro-step: starts any bucket not yet started (unready gradients
  /// contribute as allow_unready says), waits for every bucket, and copies the averages back
  /// into the gradients.
  /// If any rank left a gradient unready (and allow_unready is false), every rank throws
  /// InvalidUsage after the collectives complete (the gradients then hold unspecified partial
  /// results: abandon the step); the rank
  /// that left it names the gradient, the others name that rank. Either way the next
  /// begin_micro_step() may follow. Does nothing on a micro-step that does not communicate, or
  /// when called again.
  void finish();

  /// RAII window in which begin_micro_step() neither syncs nor communicates, whatever
  /// end_of_data says (Fabric's no_backward_sync, DDP's no_sync). Its micro-steps do not advance
  /// the accumulation counter (nor count for exact_final_window): they are extra local
  /// accumulation, so ranks may run different numbers of them. Windows nest.
  class NoSyncWindow {
   public:
    explicit NoSyncWindow(GradientSynchronizer& owner) noexcept;
    ~NoSyncWindow();
    NoSyncWindow(const NoSyncWindow&) = delete;
    NoSyncWindow& operator=(const NoSyncWindow&) = delete;

   private:
    GradientSynchronizer& owner_;
    bool previous_;
  };
  [[nodiscard]] NoSyncWindow no_sync() noexcept { return NoSyncWindow(*this); }

  struct Bucket;

 private:
  Buffer contiguous_span(const std::vector<std::size_t>& slots, int place) const;
  void check_arguments() const;
  void check_same_registration(bool arguments_rejected);
  void pack_locked(std::size_t index);
  void launch_ready_buckets_locked();
  void launch_bucket_locked(std::size_t b, bool forced);
  void wait_and_unpack_locked();
  std::vector<int> ranks_with_unready_locked() const;
  void unpack_locked(const Bucket& bucket);
  void finish_in_place_locked();
  [[noreturn]] void throw_unready_locked(const std::vector<int>& ranks) const;

  std::shared_ptr<Communicator> comm_;
  GradientSyncOptions options_;
  std::vector<Buffer> grads_;
  std::vector<std::vector<std::size_t>> layout_;
  std::vector<std::unique_ptr<Bucket>> buckets_;  // empty when in_place_
  std::vector<std::size_t> bucket_of_;            // gradient index -> bucket
  std::vector<std::size_t> offset_of_;            // gradient index -> element offset in bucket
  std::vector<bool> ready_;                       // marked in this micro-step
  std::vector<bool> marked_in_window_;            // marked in any micro-step of this window
  Buffer unready_flags_;  // f32 [world]: 1 at a rank that started the last bucket with unready
  Work flags_work_;       // their allreduce(Sum), started right after the last bucket's
  std::size_t unready_count_ = 0;  // gradients not marked in this micro-step
  std::size_t next_launch_ = 0;    // first bucket not started
  float pack_factor_ = 1.0f;       // 1 / world, times the exact_final_window correction
  float window_factor_ = 1.0f;     // the exact_final_window correction alone
  int micro_step_ = 0;             // Accelerate's step counter, modulo accumulation_steps
  int window_length_ = 0;          // counted micro-steps of the current window so far
  bool in_place_ = false;          // a world of one without a communication dtype: no staging
  bool started_ = false;           // begin_micro_step() was called at least once
  bool communicating_ = false;
  bool optimizer_steps_ = false;
  bool in_flight_ = false;  // a communicating micro-step has not been finished
  bool no_sync_ = false;
  std::mutex mutex_;
};

/// Broadcasts `params` from `root` to every rank (initial weights, DDP's _sync_module_states).
/// Buffers smaller than `chunk_bytes` are packed back to back into chunks of at most chunk_bytes
/// (as raw bytes, so dtypes may share a chunk) and each chunk is one broadcast; a buffer of at
/// least chunk_bytes is broadcast in place, in slices of chunk_bytes (DDP: 250 MiB). Host,
/// contiguous, writable buffers, the same sizes on every rank. Throws InvalidArgument for a root
/// out of range, chunk_bytes == 0, or a buffer that is not contiguous and writable (naming it),
/// Unsupported for device memory. Collective.
void broadcast_parameters(Communicator& comm, std::span<const Buffer> params, int root = 0,
                          std::size_t chunk_bytes = std::size_t{250} << 20);

/// Allocates gradients for `counts` elements each (registration order) as consecutive views of
/// one zero-filled host allocation of `dtype`, which the views keep alive. Every bucket of such
/// gradients is a contiguous range of memory, so GradientSynchronizer reduces them in place
/// without staging copies. The allocation is mappable (Buffer::allocate_mappable: the ranks of a
/// host read and write it in place; one file descriptor; shared, not copied, with a child this
/// process forks), or ordinary memory where the kernel refuses a memfd (SystemError: no memfd,
/// out of descriptors), logged once at info level. Throws InvalidArgument for a dtype that is
/// not floating or a total count that overflows.
std::vector<Buffer> contiguous_gradients(std::span<const std::size_t> counts, DType dtype);

/// The gradient bucket layout GradientSynchronizer uses, computable without a communicator:
/// reverse registration order, a bucket closes at >= its cap, dtypes and devices never mixed.
std::vector<std::vector<std::size_t>> bucket_layout(std::span<const Buffer> grads,
                                                    std::size_t bucket_cap_bytes,
                                                    std::size_t first_bucket_cap_bytes);

inline constexpr double kInfinityNorm = std::numeric_limits<double>::infinity();

struct ClipOptions {
  /// p of the p-norm: any p > 0, or kInfinityNorm for max |g|.
  double norm_type = 2.0;
  /// Throw InvalidArgument (on every rank of the shard group) before touching any gradient when
  /// the total norm is NaN or infinite. torch's default (false); Fabric passes true.
  bool error_if_nonfinite = false;
  /// When the gradients of one model are sharded across ranks (tensor/pipeline/FSDP shards), the
  /// group whose local sums make up the whole norm: its ranks allgather Σ|g|^p (max |g| for inf)
  /// so every rank sees the same total. Every rank of it passes the same norm_type, max_norm and
  /// error_if_nonfinite. Null: the gradients given are the whole model.
  std::shared_ptr<Communicator> shard_group;
  std::optional<std::chrono::milliseconds> timeout;
};

/// torch.nn.utils.clip_grad_norm_: total = p-norm of all gradients (accumulated in f64), then
/// every gradient is multiplied by min(1, max_norm / (total + 1e-6)). Returns the total before
/// clipping (0 without gradients). A NaN total makes every gradient NaN; an infinite total zeroes
/// the finite gradients (inf × 0 = NaN for the infinite ones), as torch does, unless
/// error_if_nonfinite. Floating buffers, contiguous and writable, in host or device memory.
/// Device gradients: their parts of the norm are computed by device kernels (per device into one
/// f64, read back; summed in another order than on the host, so the total may differ from a host
/// total of the same values in the last bits) and the coefficient is applied on the device (the
/// same bits as the host's multiply); norm_type must be 1, 2 or kInfinityNorm (other p are
/// Unsupported for device gradients); the call returns once the device work is done. Throws
/// InvalidArgument for norm_type <= 0 or NaN, a negative or NaN max_norm, or a gradient that is
/// not such a buffer (naming it), Unsupported for device memory without CUDA or a visible
/// device. Collective over shard_group when it is set: a rank's refusal, or arguments that differ
/// between its ranks, make every rank throw InvalidArgument (naming the ranks) before any
/// gradient is modified.
double clip_grad_norm(std::span<const Buffer> grads, double max_norm,
                      const ClipOptions& options = {});

/// torch.nn.utils.clip_grad_value_: clamps every gradient to [-value, value] (NaN stays NaN).
/// Host gradients only (Unsupported naming a device gradient: there is no device clamp kernel).
/// Throws InvalidArgument for a negative or NaN value.
void clip_grad_value(std::span<const Buffer> grads, double value);

}  // namespace cohort::train
