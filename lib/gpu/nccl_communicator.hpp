#pragma once

// The GPU backend: one NCCL communicator over the same ranks as a cohort Communicator, used for
// Buffers on CUDA devices. Each call enqueues NCCL work on the backend's own stream and waits on
// the host, polling both the stream and NCCL's asynchronous error state, so a dead or hung peer
// becomes an Error at the op's deadline (the NCCL communicator is then aborted) instead of a hang.
//
// Calls are blocking with respect to the host, like the CPU path: inputs must be ready (the
// caller synchronised the stream that produced them) and outputs are ready on return.
//
// The communicator is created nonblocking (ncclConfig_t::blocking = 0) so that initialisation,
// too, is bounded by a deadline.

#include <cohort/dtype.hpp>
#include <cohort/store.hpp>

#include "gpu/cuda_handles.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

typedef struct ncclComm* ncclComm_t;

namespace cohort::gpu {

using Deadline = std::chrono::steady_clock::time_point;

/// Number of CUDA devices visible to this process; 0 when there is no driver or no device.
int visible_device_count() noexcept;

class NcclCommunicator {
 public:
  /// Collective over `size` ranks: rank 0 creates NCCL's unique id and publishes it at
  /// "<key_prefix>/nccl_unique_id" in `store` (and erases it once every rank has joined); every
  /// rank joins on CUDA device `device`.
  /// Throws Unsupported when no device is visible, Timeout when the peers do not all join.
  static std::unique_ptr<NcclCommunicator> create(Store& store, const std::string& key_prefix,
                                                  int rank, int size, int device,
                                                  Deadline deadline);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int device() const noexcept { return device_; }

  // Counts are elements. `what` names the op in error messages ("allreduce #4").
  void allreduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                 Deadline deadline, const std::string& what);
  void broadcast(const void* in, void* out, std::size_t count, DType dtype, int root,
                 Deadline deadline, const std::string& what);
  void reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op, int root,
              Deadline deadline, const std::string& what);
  /// out holds size * count_per_rank elements.
  void allgather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                 Deadline deadline, const std::string& what);
  /// in holds size * count_per_rank elements.
  void reduce_scatter(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                      ReduceOp op, Deadline deadline, const std::string& what);
  /// in and out hold size * count_per_peer elements.
  void alltoall(const void* in, void* out, std::size_t count_per_peer, DType dtype,
                Deadline deadline, const std::string& what);
  void send(const void* in, std::size_t count, DType dtype, int peer, Deadline deadline,
            const std::string& what);
  void recv(void* out, std::size_t count, DType dtype, int peer, Deadline deadline,
            const std::string& what);

  /// Aborts the NCCL communicator (after a timeout or peer failure); later calls throw.
  void abort() noexcept;

 private:
  NcclCommunicator(ncclComm_t comm, int device, int size);
  /// One look at NCCL's async state: true when idle; throws (after aborting) on an NCCL error or
  /// once the deadline passed.
  bool nccl_idle(Deadline deadline, const std::string& what);
  /// Polls NCCL's async state until no operation is in progress (nonblocking mode).
  void await_nccl(Deadline deadline, const std::string& what);
  /// Waits for everything enqueued on the stream.
  void await_stream(Deadline deadline, const std::string& what);
  void require_usable(const std::string& what) const;
  void bind_device() const;

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int size_ = 0;
  bool aborted_ = false;
  CudaStream stream_;
  CudaEvent done_;
};

}  // namespace cohort::gpu
