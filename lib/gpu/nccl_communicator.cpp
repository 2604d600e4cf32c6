#include "gpu/nccl_communicator.hpp"

#include <cohort/error.hpp>

#include "core/log.hpp"
#include "gpu/gpu_status.hpp"
#include "gpu/nccl_types.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <thread>

namespace cohort::gpu {
namespace {

// Host-side polling interval once the first checks found the GPU still busy. Short enough to
// keep small collectives fast, long enough not to burn a core that oversubscribed ranks share.
constexpr auto kPollSleep = std::chrono::microseconds(50);
constexpr int kBusyPolls = 1000;

std::string deadline_message(const std::string& what) {
  return what +
         ": timed out waiting for the GPU collective to finish (a peer may be dead or "
         "not calling the same op); the NCCL communicator was aborted";
}

}  // namespace

int visible_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" state for later calls
    return 0;
  }
  return count;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Store& store,
                                                           const std::string& key_prefix, int rank,
                                                           int size, int device,
                                                           Deadline deadline) {
  const int devices = visible_device_count();
  if (devices == 0)
    throw Error(
        ErrorCode::Unsupported,
        "CUDA buffers need a GPU, but no CUDA device is visible to rank " + std::to_string(rank));
  if (device < 0 || device >= devices)
    throw Error(ErrorCode::InvalidArgument, "CUDA device " + std::to_string(device) +
                                                " does not exist (rank " + std::to_string(rank) +
                                                " sees " + std::to_string(devices) + ")");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");

  const std::string id_key = key_prefix + "/nccl_unique_id";
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    Bytes bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    store.set(id_key, bytes);
  } else {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    Bytes bytes = store.get(id_key, std::max(left, std::chrono::milliseconds(1)));
    if (bytes.size() != sizeof id)
      throw Error(ErrorCode::Internal, "NCCL unique id in the store has " +
                                           std::to_string(bytes.size()) + " bytes, expected " +
                                           std::to_string(sizeof id));
    std::memcpy(&id, bytes.data(), sizeof id);
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRankConfig(&comm, size, id, rank, &config), "ncclCommInitRankConfig");
  std::unique_ptr<NcclCommunicator> result(new NcclCommunicator(comm, device, size));
  result->await_nccl(deadline, "NCCL communicator initialisation");
  if (rank == 0) {
    // Initialisation is collective: it finishes only once every rank has joined with the id, so
    // no reader is left. Left in place, the key would outlive the communicator.
    try {
      store.erase(id_key);
    } catch (const Error& e) {
      COHORT_LOG_WARN("could not erase the store key '{}': {}", id_key, e.what());
    }
  }
  return result;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, int size)
    : comm_(comm),
      device_(device),
      size_(size),
      stream_(CudaStream::create()),
      done_(CudaEvent::create()) {}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  if (aborted_) return;
  // A clean shutdown flushes outstanding work; if that cannot finish promptly (a peer is gone),
  // abort instead of blocking the destructor.
  try {
    bind_device();
    check_nccl(ncclCommFinalize(comm_), "ncclCommFinalize");
    await_nccl(std::chrono::steady_clock::now() + std::chrono::seconds(10), "NCCL finalize");
    if (ncclResult_t status = ncclCommDestroy(comm_); status != ncclSuccess)
      COHORT_LOG_WARN("ncclCommDestroy failed: {}", ncclGetErrorString(status));
    comm_ = nullptr;
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("NCCL communicator did not finalize cleanly ({}); aborting it", e.what());
    abort();
  }
}

void NcclCommunicator::abort() noexcept {
  if (comm_ == nullptr || aborted_) return;
  aborted_ = true;
  if (ncclResult_t status = ncclCommAbort(comm_); status != ncclSuccess)
    COHORT_LOG_WARN("ncclCommAbort failed: {}", ncclGetErrorString(status));
  comm_ = nullptr;
}

void NcclCommunicator::bind_device() const {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
}

void NcclCommunicator::require_usable(const std::string& what) const {
  if (aborted_ || comm_ == nullptr)
    throw Error(ErrorCode::InvalidUsage,
                what + ": the NCCL communicator was aborted by an earlier failure");
}

bool NcclCommunicator::nccl_idle(Deadline deadline, const std::string& what) {
  ncclResult_t state = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
  if (state == ncclSuccess) return true;
  if (state != ncclInProgress) {
    Error error = nccl_error(what, state);
    abort();
    throw error;
  }
  if (std::chrono::steady_clock::now() >= deadline) {
    abort();
    throw Error(ErrorCode::Timeout, deadline_message(what));
  }
  return false;
}

void NcclCommunicator::await_nccl(Deadline deadline, const std::string& what) {
  for (int polls = 0; !nccl_idle(deadline, what); ++polls)
    if (polls >= kBusyPolls) std::this_thread::sleep_for(kPollSleep);
}

void NcclCommunicator::await_stream(Deadline deadline, const std::string& what) {
  await_nccl(deadline, what);
  check_cuda(cudaEventRecord(done_.get(), stream_.get()), "cudaEventRecord");
  for (int polls = 0;; ++polls) {
    const cudaError_t status = cudaEventQuery(done_.get());
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) throw cuda_error(what, status);
    // NCCL reports a failed peer through its async error, not through the stream; while the
    // stream runs, "in progress" is the expected state.
    if (nccl_idle(deadline, what) && std::chrono::steady_clock::now() >= deadline) {
      abort();
      throw Error(ErrorCode::Timeout, deadline_message(what));
    }
    if (polls >= kBusyPolls) std::this_thread::sleep_for(kPollSleep);
  }
}

void NcclCommunicator::allreduce(const void* in, void* out, std::size_t count, DType dtype,
                                 ReduceOp op, Deadline deadline, const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(ncclAllReduce(in, out, count, require_nccl_dtype(dtype, what.c_str()),
                           require_nccl_op(op, dtype, what.c_str()), comm_, stream_.get()),
             "ncclAllReduce");
  await_stream(deadline, what);
}

void NcclCommunicator::broadcast(const void* in, void* out, std::size_t count, DType dtype,
                                 int root, Deadline deadline, const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(ncclBroadcast(in, out, count, require_nccl_dtype(dtype, what.c_str()), root, comm_,
                           stream_.get()),
             "ncclBroadcast");
  await_stream(deadline, what);
}

void NcclCommunicator::reduce(const void* in, void* out, std::size_t count, DType dtype,
                              ReduceOp op, int root, Deadline deadline, const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(ncclReduce(in, out, count, require_nccl_dtype(dtype, what.c_str()),
                        require_nccl_op(op, dtype, what.c_str()), root, comm_, stream_.get()),
             "ncclReduce");
  await_stream(deadline, what);
}

void NcclCommunicator::allgather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                                 Deadline deadline, const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(ncclAllGather(in, out, count_per_rank, require_nccl_dtype(dtype, what.c_str()), comm_,
                           stream_.get()),
             "ncclAllGather");
  await_stream(deadline, what);
}

void NcclCommunicator::reduce_scatter(const void* in, void* out, std::size_t count_per_rank,
                                      DType dtype, ReduceOp op, Deadline deadline,
                                      const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(ncclReduceScatter(in, out, count_per_rank, require_nccl_dtype(dtype, what.c_str()),
                               require_nccl_op(op, dtype, what.c_str()), comm_, stream_.get()),
             "ncclReduceScatter");
  await_stream(deadline, what);
}

void NcclCommunicator::alltoall(const void* in, void* out, std::size_t count_per_peer, DType dtype,
                                Deadline deadline, const std::string& what) {
  require_usable(what);
  bind_device();
  // Grouped point-to-point keeps this working on every NCCL 2.x, not only those with AlltoAll.
  const ncclDataType_t type = require_nccl_dtype(dtype, what.c_str());
  const std::size_t block = count_per_peer * dtype_size(dtype);
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size_; ++peer) {
    check_nccl(ncclSend(static_cast<const char*>(in) + peer * block, count_per_peer, type, peer,
                        comm_, stream_.get()),
               "ncclSend");
    check_nccl(ncclRecv(static_cast<char*>(out) + peer * block, count_per_peer, type, peer, comm_,
                        stream_.get()),
               "ncclRecv");
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  await_stream(deadline, what);
}

void NcclCommunicator::send(const void* in, std::size_t count, DType dtype, int peer,
                            Deadline deadline, const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(
      ncclSend(in, count, require_nccl_dtype(dtype, what.c_str()), peer, comm_, stream_.get()),
      "ncclSend");
  await_stream(deadline, what);
}

void NcclCommunicator::recv(void* out, std::size_t count, DType dtype, int peer, Deadline deadline,
                            const std::string& what) {
  require_usable(what);
  bind_device();
  check_nccl(
      ncclRecv(out, count, require_nccl_dtype(dtype, what.c_str()), peer, comm_, stream_.get()),
      "ncclRecv");
  await_stream(deadline, what);
}

}  // namespace cohort::gpu
