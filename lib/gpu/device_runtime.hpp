#pragma once

// DeviceRuntime: every CUDA runtime, NCCL and device-kernel call the GPU backend makes, behind one
// small interface with no CUDA type in it. The real implementation (cuda_device_runtime.cpp,
// built where the toolkit and NCCL were found) forwards to CUDA and NCCL; tests install a CPU
// test double (test/gpu/fake_device_runtime.*) so the backend's own logic (routing, lazy NCCL
// set-up across ranks, streams, events and Work, timeout -> abort -> poison, split, refusals)
// runs on machines without a GPU.
//
// Handles are opaque integers: a stream is the bits of a cudaStream_t (0 is CUDA's legacy
// default stream), an event a cudaEvent_t, a communicator an ncclComm_t. Calls that fail throw
// cohort::Error (a missing driver or device is Unsupported). Thread safety follows CUDA's and
// NCCL's: any thread may call, but one NCCL communicator is driven by one thread at a time (the
// backend serialises its calls).

#include <cohort/dtype.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cohort::gpu {

struct StreamHandle {
  std::uintptr_t bits = 0;  ///< 0: the legacy default stream
  friend bool operator==(StreamHandle, StreamHandle) = default;
};
struct EventHandle {
  std::uintptr_t bits = 0;
  friend bool operator==(EventHandle, EventHandle) = default;
};
struct NcclHandle {
  std::uintptr_t bits = 0;
  friend bool operator==(NcclHandle, NcclHandle) = default;
};

/// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES).
using NcclUniqueId = std::array<std::byte, 128>;

enum class EventState : std::uint8_t { Done, Pending };

/// What ncclCommGetAsyncError reports, in our terms.
struct NcclAsyncState {
  enum Kind : std::uint8_t { Idle, InProgress, Failed } kind = Idle;
  std::string message;  ///< set when Failed: "ncclRemoteError: ..." with NCCL's last error
  bool remote = false;  ///< Failed because a peer failed (ncclRemoteError)
};

/// What a reduction kernel accumulates (mirrors train::kernels::NormPart).
enum class DeviceNormPart : std::uint8_t { SumSquares, SumAbs, MaxAbs };

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  /// A short name for logs and errors ("cuda 13.0, nccl 2.28.9", "fake").
  virtual std::string describe() const = 0;

  // ---- devices and memory ------------------------------------------------------------------
  /// Devices visible to this process; 0 when there is no driver or no device (never throws).
  virtual int device_count() noexcept = 0;
  /// Makes `device` current on the calling thread.
  virtual void set_device(int device) = 0;
  /// The calling thread's current device.
  virtual int current_device() = 0;
  /// Device memory on `device` (uninitialised); freed with free_device.
  virtual void* allocate_device(std::size_t bytes, int device) = 0;
  virtual void free_device(void* pointer) noexcept = 0;
  /// Page-locked host memory (uninitialised); freed with free_pinned.
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* pointer) noexcept = 0;
  /// Copies `bytes` in any direction (host or device on either side), ordered on `stream`.
  virtual void copy_async(void* dst, const void* src, std::size_t bytes, StreamHandle stream) = 0;
  /// Sets `bytes` bytes at `dst` (device memory) to `value`, ordered on `stream`.
  virtual void fill_async(void* dst, int value, std::size_t bytes, StreamHandle stream) = 0;

  // ---- streams and events ------------------------------------------------------------------
  /// A non-blocking stream on the current device.
  virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle stream) noexcept = 0;
  /// An event without timing, for completion polling and cross-stream ordering.
  virtual EventHandle create_event() = 0;
  virtual void destroy_event(EventHandle event) noexcept = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  /// Done once everything queued on the recorded stream before the record has run (an event
  /// never recorded is Done). Throws on a device error.
  virtual EventState query_event(EventHandle event) = 0;
  /// Work queued on `stream` after this call waits for `event` (no host block).
  virtual void stream_wait_event(StreamHandle stream, EventHandle event) = 0;
  /// Blocks the host until `stream` drained (used only where the caller asked for a blocking,
  /// unbounded device copy: Buffer allocation and the training layer's scalar read-backs).
  virtual void synchronize_stream(StreamHandle stream) = 0;

  // ---- NCCL --------------------------------------------------------------------------------
  /// NCCL's version code (e.g. 22809 for 2.28.9); 0 when NCCL is unavailable.
  virtual int nccl_version() noexcept = 0;
  /// Whether this NCCL has `dtype` (fp8 needs NCCL >= 2.24; i16 and bool never exist).
  virtual bool nccl_supports(DType dtype) noexcept = 0;
  virtual NcclUniqueId nccl_unique_id() = 0;
  /// Starts a nonblocking ncclCommInitRankConfig on the current device; poll nccl_async_state
  /// until Idle before using the communicator.
  virtual NcclHandle nccl_init(int size, const NcclUniqueId& id, int rank) = 0;
  /// Starts a nonblocking ncclCommSplit (collective over `parent`'s ranks). color < 0 leaves
  /// this rank out (returns a null handle once the split finished).
  virtual NcclHandle nccl_split(NcclHandle parent, int color, int key) = 0;
  virtual NcclAsyncState nccl_async_state(NcclHandle comm) = 0;
  /// Aborts outstanding work and frees the communicator (never blocks on peers).
  virtual void nccl_abort(NcclHandle comm) noexcept = 0;
  /// Starts a clean shutdown (ncclCommFinalize); poll nccl_async_state, then nccl_destroy.
  virtual void nccl_finalize(NcclHandle comm) = 0;
  virtual void nccl_destroy(NcclHandle comm) noexcept = 0;
  virtual void nccl_group_start() = 0;
  virtual void nccl_group_end() = 0;
  // Counts are elements; dtypes and ops were checked against nccl_supports beforehand.
  virtual void nccl_allreduce(const void* in, void* out, std::size_t count, DType dtype,
                              ReduceOp op, NcclHandle comm, StreamHandle stream) = 0;
  virtual void nccl_broadcast(const void* in, void* out, std::size_t count, DType dtype, int root,
                              NcclHandle comm, StreamHandle stream) = 0;
  virtual void nccl_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                           int root, NcclHandle comm, StreamHandle stream) = 0;
  /// out holds size * count elements, rank r's block at r * count.
  virtual void nccl_allgather(const void* in, void* out, std::size_t count, DType dtype,
                              NcclHandle comm, StreamHandle stream) = 0;
  /// in holds size * count elements; out receives block `rank` of the reduction.
  virtual void nccl_reduce_scatter(const void* in, void* out, std::size_t count, DType dtype,
                                   ReduceOp op, NcclHandle comm, StreamHandle stream) = 0;
  virtual void nccl_send(const void* in, std::size_t count, DType dtype, int peer, NcclHandle comm,
                         StreamHandle stream) = 0;
  virtual void nccl_recv(void* out, std::size_t count, DType dtype, int peer, NcclHandle comm,
                         StreamHandle stream) = 0;

  // ---- training-layer kernels (lib/gpu/kernels/*.cu) ---------------------------------------
  // The same element-wise semantics as train::kernels (lib/train/kernels/float_kernels.hpp) on
  // device memory of the six floating dtypes, queued on `stream`.
  /// dst[i] = round<dst_dtype>(widen(src[i]) * factor); when `nonfinite_flag` (device memory,
  /// one int32) is not null, writes 1 there if any src[i] is NaN or infinite (never writes 0).
  virtual void convert(DType src_dtype, const void* src, DType dst_dtype, void* dst,
                       std::size_t count, float factor, std::int32_t* nonfinite_flag,
                       StreamHandle stream) = 0;
  /// *result (device memory, one double) = Σ x², Σ |x| or max |x| of data, combined with the
  /// value already there (added, or max for MaxAbs), so several buffers accumulate into one.
  virtual void norm_part(DType dtype, const void* data, std::size_t count, DeviceNormPart part,
                         double* result, StreamHandle stream) = 0;
  /// data[i] *= factor (rounded back to the dtype), NaN kept.
  virtual void scale(DType dtype, void* data, std::size_t count, double factor,
                     StreamHandle stream) = 0;
};

/// The runtime in use: the one installed by install_device_runtime if any, otherwise the CUDA
/// runtime where cohort was built with it, otherwise null (CUDA buffers are then refused with
/// Unsupported). Stable for the process once a GPU op ran.
DeviceRuntime* device_runtime() noexcept;
/// Replaces the runtime for the whole process (tests install the CPU double before they create
/// communicators). Pass null to go back to the default.
void install_device_runtime(std::shared_ptr<DeviceRuntime> runtime);
/// True when this build has the real CUDA runtime compiled in.
bool built_with_cuda() noexcept;

}  // namespace cohort::gpu
