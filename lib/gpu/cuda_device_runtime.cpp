// The real DeviceRuntime: the CUDA runtime API and NCCL. Every status becomes a cohort Error
// (gpu_status.hpp); dtype and op mapping is nccl_types.hpp's. Built only with the toolkit.

#include "gpu/device_runtime.hpp"

#include <cohort/error.hpp>

#include "core/log.hpp"
#include "gpu/gpu_status.hpp"
#include "gpu/nccl_types.hpp"

#if COHORT_HAVE_DEVICE_KERNELS
#include "gpu/kernels/device_kernels.hpp"
#endif

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <fmt/format.h>

#include <cstring>

namespace cohort::gpu {
namespace {

cudaStream_t stream_of(StreamHandle s) {
  return reinterpret_cast<cudaStream_t>(s.bits);
}
cudaEvent_t event_of(EventHandle e) {
  return reinterpret_cast<cudaEvent_t>(e.bits);
}
ncclComm_t comm_of(NcclHandle c) {
  return reinterpret_cast<ncclComm_t>(c.bits);
}
NcclHandle handle_of(ncclComm_t c) {
  return NcclHandle{reinterpret_cast<std::uintptr_t>(c)};
}

/// Nonblocking communicators, so that set-up, split and finalise are bounded by deadlines too.
ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

#if !COHORT_HAVE_DEVICE_KERNELS
[[noreturn]] void no_kernels(const char* what) {
  throw Error(ErrorCode::Unsupported,
              fmt::format("{}: this cohort was built without its device kernels (nvcc was not "
                          "found when it was configured; set CUDACXX and reconfigure)",
                          what));
}
#endif

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  std::string describe() const override {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    int nccl = 0;
    ncclGetVersion(&nccl);
    return fmt::format("cuda {}.{}, nccl {}.{}.{}", runtime / 1000, runtime % 1000 / 10,
                       nccl / 10000, nccl / 100 % 100, nccl % 100);
  }

  int device_count() noexcept override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the "no driver" state for later calls
      return 0;
    }
    return count;
  }
  void set_device(int device) override { check_cuda(cudaSetDevice(device), "cudaSetDevice"); }
  int current_device() override {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    return device;
  }
  void* allocate_device(std::size_t bytes, int device) override {
    set_device(device);
    void* pointer = nullptr;
    check_cuda(cudaMalloc(&pointer, bytes), "cudaMalloc");
    return pointer;
  }
  void free_device(void* pointer) noexcept override {
    if (cudaError_t status = cudaFree(pointer); status != cudaSuccess)
      COHORT_LOG_WARN("cudaFree failed: {}", cudaGetErrorString(status));
  }
  void* allocate_pinned(std::size_t bytes) override {
    void* pointer = nullptr;
    check_cuda(cudaMallocHost(&pointer, bytes), "cudaMallocHost");
    return pointer;
  }
  void free_pinned(void* pointer) noexcept override {
    if (cudaError_t status = cudaFreeHost(pointer); status != cudaSuccess)
      COHORT_LOG_WARN("cudaFreeHost failed: {}", cudaGetErrorString(status));
  }
  void copy_async(void* dst, const void* src, std::size_t bytes, StreamHandle stream) override {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(stream)),
               "cudaMemcpyAsync");
  }
  void fill_async(void* dst, int value, std::size_t bytes, StreamHandle stream) override {
    check_cuda(cudaMemsetAsync(dst, value, bytes, stream_of(stream)), "cudaMemsetAsync");
  }

  StreamHandle create_stream() override {
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    return StreamHandle{reinterpret_cast<std::uintptr_t>(stream)};
  }
  void destroy_stream(StreamHandle stream) noexcept override {
    if (cudaError_t status = cudaStreamDestroy(stream_of(stream)); status != cudaSuccess)
      COHORT_LOG_WARN("cudaStreamDestroy failed: {}", cudaGetErrorString(status));
  }
  EventHandle create_event() override {
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    return EventHandle{reinterpret_cast<std::uintptr_t>(event)};
  }
  void destroy_event(EventHandle event) noexcept override {
    if (cudaError_t status = cudaEventDestroy(event_of(event)); status != cudaSuccess)
      COHORT_LOG_WARN("cudaEventDestroy failed: {}", cudaGetErrorString(status));
  }
  void record_event(EventHandle event, StreamHandle stream) override {
    check_cuda(cudaEventRecord(event_of(event), stream_of(stream)), "cudaEventRecord");
  }
  EventState query_event(EventHandle event) override {
    const cudaError_t status = cudaEventQuery(event_of(event));
    if (status == cudaSuccess) return EventState::Done;
    if (status == cudaErrorNotReady) return EventState::Pending;
    throw cuda_error("cudaEventQuery", status);
  }
  void stream_wait_event(StreamHandle stream, EventHandle event) override {
    check_cuda(cudaStreamWaitEvent(stream_of(stream), event_of(event), 0), "cudaStreamWaitEvent");
  }
  void synchronize_stream(StreamHandle stream) override {
    check_cuda(cudaStreamSynchronize(stream_of(stream)), "cudaStreamSynchronize");
  }

  int nccl_version() noexcept override {
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess) return 0;
    return version;
  }
  bool nccl_supports(DType dtype) noexcept override {
    if (!nccl_dtype(dtype)) return false;
    const bool fp8 = dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2;
    // The library loaded at run time may be older than the header we were built with.
    return !fp8 || nccl_version() >= 22400;
  }
  NcclUniqueId nccl_unique_id() override {
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    static_assert(sizeof id == sizeof(NcclUniqueId));
    NcclUniqueId bytes;
    std::memcpy(bytes.data(), &id, sizeof id);
    return bytes;
  }
  NcclHandle nccl_init(int size, const NcclUniqueId& bytes, int rank) override {
    ncclUniqueId id;
    std::memcpy(&id, bytes.data(), sizeof id);
    ncclConfig_t config = nonblocking_config();
    ncclComm_t comm = nullptr;
    check_nccl(ncclCommInitRankConfig(&comm, size, id, rank, &config), "ncclCommInitRankConfig");
    return handle_of(comm);
  }
  NcclHandle nccl_split(NcclHandle parent, int color, int key) override {
    ncclConfig_t config = nonblocking_config();
    ncclComm_t child = nullptr;
    check_nccl(ncclCommSplit(comm_of(parent), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child,
                             &config),
               "ncclCommSplit");
    return handle_of(child);
  }
  NcclAsyncState nccl_async_state(NcclHandle comm) override {
    ncclResult_t state = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_of(comm), &state), "ncclCommGetAsyncError");
    if (state == ncclSuccess) return {};
    if (state == ncclInProgress) return {NcclAsyncState::InProgress, {}, false};
    const char* last = ncclGetLastError(comm_of(comm));
    return {NcclAsyncState::Failed,
            fmt::format("{}{}{}", ncclGetErrorString(state), last && *last ? ": " : "",
                        last ? last : ""),
            state == ncclRemoteError};
  }
  void nccl_abort(NcclHandle comm) noexcept override {
    if (ncclResult_t status = ncclCommAbort(comm_of(comm)); status != ncclSuccess)
      COHORT_LOG_WARN("ncclCommAbort failed: {}", ncclGetErrorString(status));
  }
  void nccl_finalize(NcclHandle comm) override {
    check_nccl(ncclCommFinalize(comm_of(comm)), "ncclCommFinalize");
  }
  void nccl_destroy(NcclHandle comm) noexcept override {
    if (ncclResult_t status = ncclCommDestroy(comm_of(comm)); status != ncclSuccess)
      COHORT_LOG_WARN("ncclCommDestroy failed: {}", ncclGetErrorString(status));
  }
  void nccl_group_start() override { check_nccl(ncclGroupStart(), "ncclGroupStart"); }
  void nccl_group_end() override { check_nccl(ncclGroupEnd(), "ncclGroupEnd"); }

  void nccl_allreduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                      NcclHandle comm, StreamHandle stream) override {
    check_nccl(
        ncclAllReduce(in, out, count, require_nccl_dtype(dtype, "allreduce"),
                      require_nccl_op(op, dtype, "allreduce"), comm_of(comm), stream_of(stream)),
        "ncclAllReduce");
  }
  void nccl_broadcast(const void* in, void* out, std::size_t count, DType dtype, int root,
                      NcclHandle comm, StreamHandle stream) override {
    check_nccl(ncclBroadcast(in, out, count, require_nccl_dtype(dtype, "broadcast"), root,
                             comm_of(comm), stream_of(stream)),
               "ncclBroadcast");
  }
  void nccl_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op, int root,
                   NcclHandle comm, StreamHandle stream) override {
    check_nccl(
        ncclReduce(in, out, count, require_nccl_dtype(dtype, "reduce"),
                   require_nccl_op(op, dtype, "reduce"), root, comm_of(comm), stream_of(stream)),
        "ncclReduce");
  }
  void nccl_allgather(const void* in, void* out, std::size_t count, DType dtype, NcclHandle comm,
                      StreamHandle stream) override {
    check_nccl(ncclAllGather(in, out, count, require_nccl_dtype(dtype, "allgather"), comm_of(comm),
                             stream_of(stream)),
               "ncclAllGather");
  }
  void nccl_reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                           NcclHandle comm, StreamHandle stream) override {
    check_nccl(ncclReduceScatter(in, out, count, require_nccl_dtype(dtype, "reduce_scatter"),
                                 require_nccl_op(op, dtype, "reduce_scatter"), comm_of(comm),
                                 stream_of(stream)),
               "ncclReduceScatter");
  }
  void nccl_send(const void* in, std::size_t count, DType dtype, int peer, NcclHandle comm,
                 StreamHandle stream) override {
    check_nccl(ncclSend(in, count, require_nccl_dtype(dtype, "send"), peer, comm_of(comm),
                        stream_of(stream)),
               "ncclSend");
  }
  void nccl_recv(void* out, std::size_t count, DType dtype, int peer, NcclHandle comm,
                 StreamHandle stream) override {
    check_nccl(ncclRecv(out, count, require_nccl_dtype(dtype, "recv"), peer, comm_of(comm),
                        stream_of(stream)),
               "ncclRecv");
  }

  void convert(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t count,
               float factor, std::int32_t* nonfinite_flag, StreamHandle stream) override {
#if COHORT_HAVE_DEVICE_KERNELS
    kernels::launch_convert(src_dtype, src, dst_dtype, dst, count, factor, nonfinite_flag,
                            reinterpret_cast<void*>(stream.bits));
#else
    (void)src_dtype, (void)src, (void)dst_dtype, (void)dst, (void)count, (void)factor,
        (void)nonfinite_flag, (void)stream;
    no_kernels("convert");
#endif
  }
  void norm_part(DType dtype, const void* data, std::size_t count, DeviceNormPart part,
                 double* result, StreamHandle stream) override {
#if COHORT_HAVE_DEVICE_KERNELS
    kernels::launch_norm_part(dtype, data, count, part, result,
                              reinterpret_cast<void*>(stream.bits));
#else
    (void)dtype, (void)data, (void)count, (void)part, (void)result, (void)stream;
    no_kernels("norm_part");
#endif
  }
  void scale(DType dtype, void* data, std::size_t count, double factor,
             StreamHandle stream) override {
#if COHORT_HAVE_DEVICE_KERNELS
    kernels::launch_scale(dtype, data, count, factor, reinterpret_cast<void*>(stream.bits));
#else
    (void)dtype, (void)data, (void)count, (void)factor, (void)stream;
    no_kernels("scale");
#endif
  }
};

}  // namespace

DeviceRuntime& cuda_runtime() noexcept {
  static CudaDeviceRuntime runtime;
  return runtime;
}

}  // namespace cohort::gpu
