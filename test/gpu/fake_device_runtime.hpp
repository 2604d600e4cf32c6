#pragma once

// FakeDeviceRuntime: a CPU test double of gpu::DeviceRuntime, so the GPU backend's logic runs
// where there is no GPU. "Device memory" is host memory it hands out (buffers over it are viewed
// with Device::cuda(n)); streams and events are bookkeeping; NCCL is played through the job's
// real store: each op of a fake NCCL communicator publishes this rank's data under a key and
// reads its peers', so results across real rank processes are real. Ops run synchronously when
// queued, unless the test asks them to hang (then the stream they were queued on is stuck until
// the communicator is aborted, as a real NCCL kernel waiting for a dead peer would be).
//
// Every call is logged ("allreduce count=4 dtype=float op=sum", "group_start", ...) for tests
// that check what the backend queued. Data reductions cover float, double, int32 and int64.

#include <cohort/store.hpp>

#include "gpu/device_runtime.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cohort::test {

class FakeDeviceRuntime final : public gpu::DeviceRuntime {
 public:
  /// `store`: the job's store (a connection of this rank's own), through which fake NCCL moves
  /// data. `devices`: how many devices this process "sees".
  explicit FakeDeviceRuntime(std::shared_ptr<Store> store, int devices = 1);
  ~FakeDeviceRuntime() override;

  // ---- knobs and observations for tests ----
  void set_device_count(int devices) { devices_ = devices; }
  void set_nccl_version(int version) { nccl_version_ = version; }
  /// While set, NCCL ops are logged but never run: their stream stays stuck until an abort.
  void set_hang(bool hang) { hang_ = hang; }
  /// While set, recording an event on any stream but the legacy default one fails (as
  /// cudaEventRecord can): the record that follows an op's kernels.
  void set_record_failure(bool fail) { record_failure_ = fail; }
  /// Called (outside the fake's lock) at every nccl_supports(), the last device check of an op's
  /// prepare(): a test holds one thread's op there to order it against another's.
  void set_dtype_check_hook(std::function<void()> hook);
  /// Called (outside the fake's lock) at the start of every nccl_split().
  void set_split_hook(std::function<void()> hook);
  /// While set, nccl_async_state reports this failure (ncclRemoteError when remote).
  void set_async_failure(std::string message, bool remote);
  std::vector<std::string> calls() const;
  void clear_calls();
  int aborts() const { return aborts_; }
  int live_communicators() const;
  std::size_t live_allocations() const;
  /// Whether work queued on `stream` now would wait (a hung op or a wait on a pending event).
  bool stream_stuck(gpu::StreamHandle stream) const;
  /// The stream of the last NCCL op queued.
  gpu::StreamHandle last_op_stream() const;

  // ---- DeviceRuntime ----
  std::string describe() const override { return "fake"; }
  int device_count() noexcept override { return devices_; }
  void set_device(int device) override;
  int current_device() override;
  void* allocate_device(std::size_t bytes, int device) override;
  void free_device(void* pointer) noexcept override;
  void* allocate_pinned(std::size_t bytes) override;
  void free_pinned(void* pointer) noexcept override;
  void copy_async(void* dst, const void* src, std::size_t bytes, gpu::StreamHandle stream) override;
  void fill_async(void* dst, int value, std::size_t bytes, gpu::StreamHandle stream) override;
  gpu::StreamHandle create_stream() override;
  void destroy_stream(gpu::StreamHandle stream) noexcept override;
  gpu::EventHandle create_event() override;
  void destroy_event(gpu::EventHandle event) noexcept override;
  void record_event(gpu::EventHandle event, gpu::StreamHandle stream) override;
  gpu::EventState query_event(gpu::EventHandle event) override;
  void stream_wait_event(gpu::StreamHandle stream, gpu::EventHandle event) override;
  void synchronize_stream(gpu::StreamHandle stream) override;
  int nccl_version() noexcept override { return nccl_version_; }
  bool nccl_supports(DType dtype) noexcept override;
  gpu::NcclUniqueId nccl_unique_id() override;
  gpu::NcclHandle nccl_init(int size, const gpu::NcclUniqueId& id, int rank) override;
  gpu::NcclHandle nccl_split(gpu::NcclHandle parent, int color, int key) override;
  gpu::NcclAsyncState nccl_async_state(gpu::NcclHandle comm) override;
  void nccl_abort(gpu::NcclHandle comm) noexcept override;
  void nccl_finalize(gpu::NcclHandle comm) override;
  void nccl_destroy(gpu::NcclHandle comm) noexcept override;
  void nccl_group_start() override;
  void nccl_group_end() override;
  void nccl_allreduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                      gpu::NcclHandle comm, gpu::StreamHandle stream) override;
  void nccl_broadcast(const void* in, void* out, std::size_t count, DType dtype, int root,
                      gpu::NcclHandle comm, gpu::StreamHandle stream) override;
  void nccl_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op, int root,
                   gpu::NcclHandle comm, gpu::StreamHandle stream) override;
  void nccl_allgather(const void* in, void* out, std::size_t count, DType dtype,
                      gpu::NcclHandle comm, gpu::StreamHandle stream) override;
  void nccl_reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                           gpu::NcclHandle comm, gpu::StreamHandle stream) override;
  void nccl_send(const void* in, std::size_t count, DType dtype, int peer, gpu::NcclHandle comm,
                 gpu::StreamHandle stream) override;
  void nccl_recv(void* out, std::size_t count, DType dtype, int peer, gpu::NcclHandle comm,
                 gpu::StreamHandle stream) override;
  void convert(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t count,
               float factor, std::int32_t* nonfinite_flag, gpu::StreamHandle stream) override;
  void norm_part(DType dtype, const void* data, std::size_t count, gpu::DeviceNormPart part,
                 double* result, gpu::StreamHandle stream) override;
  void scale(DType dtype, void* data, std::size_t count, double factor,
             gpu::StreamHandle stream) override;

 private:
  struct Comm;
  /// An ncclCommSplit whose rows are not all in the store yet.
  struct PendingSplit {
    std::string round;  ///< the store prefix of its rows ("<parent key>/split<n>")
    int parent_rank = 0;
    int parent_size = 0;
    int color = 0;
    int key = 0;
  };
  struct PendingP2p {
    bool is_send;
    const void* in;
    void* out;
    std::size_t bytes;
    int peer;
    Comm* comm;
  };
  Comm& comm_of(gpu::NcclHandle handle);
  /// Finishes `comm`'s pending split once every parent rank's row is in the store.
  bool split_done(Comm& comm);
  void log(std::string line);
  /// True (and the stream marked stuck) when ops must not run now.
  bool hold(gpu::StreamHandle stream);
  Bytes exchange(Comm& comm, const std::string& what, const void* mine, std::size_t bytes,
                 int from);
  void publish(Comm& comm, const std::string& what, const void* mine, std::size_t bytes);
  void run_p2p(const PendingP2p& op);
  /// out = op over every rank's data published as `what` (allreduce, and reduce's root).
  void reduce_published(Comm& comm, const std::string& what, void* out, std::size_t count,
                        DType dtype, ReduceOp op);

  std::shared_ptr<Store> store_;
  std::atomic<int> devices_;
  std::atomic<int> nccl_version_{22809};
  std::atomic<bool> hang_{false};
  std::atomic<bool> record_failure_{false};
  std::atomic<int> aborts_{0};

  mutable std::mutex mutex_;
  /// As CUDA's, the current device is each thread's own (0 until it sets one).
  std::map<std::thread::id, int> current_;
  std::vector<std::string> calls_;
  std::set<void*> allocations_;
  std::uintptr_t next_handle_ = 0x1000;
  std::set<std::uintptr_t> stuck_streams_;
  std::map<std::uintptr_t, bool> events_;  ///< event -> pending
  std::set<Comm*> comms_;
  std::string async_failure_;
  bool async_failure_remote_ = false;
  int group_depth_ = 0;
  std::vector<PendingP2p> grouped_;
  gpu::StreamHandle last_op_stream_{};
  std::shared_ptr<const std::function<void()>> dtype_check_hook_;
  std::shared_ptr<const std::function<void()>> split_hook_;
};

}  // namespace cohort::test
