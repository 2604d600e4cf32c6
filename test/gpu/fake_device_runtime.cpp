#include "fake_device_runtime.hpp"

#include <cohort/error.hpp>

#include "train/kernels/float_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

namespace cohort::test {

/// A fake NCCL communicator: its key prefix in the store, this rank's place, op counters.
struct FakeDeviceRuntime::Comm {
  std::string key;
  int rank = 0;
  int size = 1;
  std::uint64_t ops = 0;                              ///< collectives so far (the next op's number)
  std::map<std::pair<int, int>, std::uint64_t> sent;  ///< (src, dst) -> messages so far
  std::map<std::pair<int, int>, std::uint64_t> received;
  bool joined = false;  ///< init finished (every rank joined)
  bool aborted = false;
  /// A split in progress: of this child, or, for a rank in no group, of this parent.
  std::optional<PendingSplit> split;
};

namespace {

constexpr auto kExchangeTimeout = std::chrono::seconds(60);

std::string_view op_name(ReduceOp op) {
  return reduce_op_name(op);
}

template <class T>
void reduce_into(T* acc, const T* x, std::size_t n, ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc[i] = static_cast<T>(acc[i] + x[i]); break;
      case ReduceOp::Prod: acc[i] = static_cast<T>(acc[i] * x[i]); break;
      case ReduceOp::Min: acc[i] = std::min(acc[i], x[i]); break;
      case ReduceOp::Max: acc[i] = std::max(acc[i], x[i]); break;
      default: throw std::logic_error("fake NCCL: reduce op not played");
    }
  }
}

template <class T>
void divide(T* acc, std::size_t n, int by) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] / by);
}

/// acc op= x, elementwise, for the dtypes the fake plays.
void reduce_bytes(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::Float32:
      reduce_into(static_cast<float*>(acc), static_cast<const float*>(x), count, op);
      return;
    case DType::Float64:
      reduce_into(static_cast<double*>(acc), static_cast<const double*>(x), count, op);
      return;
    case DType::Int32:
      reduce_into(static_cast<std::int32_t*>(acc), static_cast<const std::int32_t*>(x), count, op);
      return;
    case DType::Int64:
      reduce_into(static_cast<std::int64_t*>(acc), static_cast<const std::int64_t*>(x), count, op);
      return;
    default: throw std::logic_error("fake NCCL: reductions play float, double, int32, int64 only");
  }
}

void finish_avg(void* acc, std::size_t count, DType dtype, ReduceOp op, int size) {
  if (op != ReduceOp::Avg) return;
  if (dtype == DType::Float32) divide(static_cast<float*>(acc), count, size);
  if (dtype == DType::Float64) divide(static_cast<double*>(acc), count, size);
}

}  // namespace

FakeDeviceRuntime::FakeDeviceRuntime(std::shared_ptr<Store> store, int devices)
    : store_(std::move(store)), devices_(devices) {}

FakeDeviceRuntime::~FakeDeviceRuntime() {
  for (void* p : allocations_) std::free(p);
  for (Comm* c : comms_) delete c;
}

void FakeDeviceRuntime::log(std::string line) {
  std::lock_guard lock(mutex_);
  calls_.push_back(std::move(line));
}

std::vector<std::string> FakeDeviceRuntime::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

void FakeDeviceRuntime::clear_calls() {
  std::lock_guard lock(mutex_);
  calls_.clear();
}

int FakeDeviceRuntime::live_communicators() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(comms_.size());
}

std::size_t FakeDeviceRuntime::live_allocations() const {
  std::lock_guard lock(mutex_);
  return allocations_.size();
}

bool FakeDeviceRuntime::stream_stuck(gpu::StreamHandle stream) const {
  std::lock_guard lock(mutex_);
  return stuck_streams_.count(stream.bits) > 0;
}

gpu::StreamHandle FakeDeviceRuntime::last_op_stream() const {
  std::lock_guard lock(mutex_);
  return last_op_stream_;
}

void FakeDeviceRuntime::set_async_failure(std::string message, bool remote) {
  std::lock_guard lock(mutex_);
  async_failure_ = std::move(message);
  async_failure_remote_ = remote;
}

int FakeDeviceRuntime::current_device() {
  std::lock_guard lock(mutex_);
  const auto found = current_.find(std::this_thread::get_id());
  return found == current_.end() ? 0 : found->second;
}

void FakeDeviceRuntime::set_device(int device) {
  if (device < 0 || device >= devices_)
    throw Error(ErrorCode::InvalidArgument, fmt::format("fake: no device {}", device));
  std::lock_guard lock(mutex_);
  current_[std::this_thread::get_id()] = device;
}

void* FakeDeviceRuntime::allocate_device(std::size_t bytes, int device) {
  set_device(device);
  void* p = std::aligned_alloc(256, std::max<std::size_t>(256, (bytes + 255) / 256 * 256));
  if (p == nullptr) throw Error(ErrorCode::SystemError, "fake: out of memory");
  std::lock_guard lock(mutex_);
  allocations_.insert(p);
  return p;
}

void FakeDeviceRuntime::free_device(void* pointer) noexcept {
  std::lock_guard lock(mutex_);
  if (allocations_.erase(pointer) > 0) std::free(pointer);
}

void* FakeDeviceRuntime::allocate_pinned(std::size_t bytes) {
  return allocate_device(bytes, current_device());
}

void FakeDeviceRuntime::free_pinned(void* pointer) noexcept {
  free_device(pointer);
}

void FakeDeviceRuntime::copy_async(void* dst, const void* src, std::size_t bytes,
                                   gpu::StreamHandle stream) {
  log(fmt::format("copy bytes={} stream={}", bytes, stream.bits));
  std::memmove(dst, src, bytes);
}

void FakeDeviceRuntime::fill_async(void* dst, int value, std::size_t bytes,
                                   gpu::StreamHandle stream) {
  log(fmt::format("fill bytes={} stream={}", bytes, stream.bits));
  std::memset(dst, value, bytes);
}

gpu::StreamHandle FakeDeviceRuntime::create_stream() {
  std::lock_guard lock(mutex_);
  return gpu::StreamHandle{next_handle_++};
}

void FakeDeviceRuntime::destroy_stream(gpu::StreamHandle stream) noexcept {
  std::lock_guard lock(mutex_);
  stuck_streams_.erase(stream.bits);
}

gpu::EventHandle FakeDeviceRuntime::create_event() {
  std::lock_guard lock(mutex_);
  const gpu::EventHandle event{next_handle_++};
  events_[event.bits] = false;
  return event;
}

void FakeDeviceRuntime::destroy_event(gpu::EventHandle event) noexcept {
  std::lock_guard lock(mutex_);
  events_.erase(event.bits);
}

void FakeDeviceRuntime::record_event(gpu::EventHandle event, gpu::StreamHandle stream) {
  if (record_failure_ && stream.bits != 0)
    throw Error(ErrorCode::SystemError, "fake: cudaEventRecord failed");
  std::lock_guard lock(mutex_);
  auto it = events_.find(event.bits);
  if (it == events_.end())
    throw Error(ErrorCode::InvalidArgument, "fake: recording an event that does not exist");
  it->second = stuck_streams_.count(stream.bits) > 0;
}

gpu::EventState FakeDeviceRuntime::query_event(gpu::EventHandle event) {
  std::lock_guard lock(mutex_);
  auto it = events_.find(event.bits);
  if (it == events_.end())
    throw Error(ErrorCode::InvalidArgument, "fake: querying an event that does not exist");
  return it->second ? gpu::EventState::Pending : gpu::EventState::Done;
}

void FakeDeviceRuntime::stream_wait_event(gpu::StreamHandle stream, gpu::EventHandle event) {
  std::lock_guard lock(mutex_);
  calls_.push_back(fmt::format("stream_wait_event stream={}", stream.bits));
  auto it = events_.find(event.bits);
  if (it == events_.end())
    throw Error(ErrorCode::InvalidArgument, "fake: waiting on an event that does not exist");
  if (it->second) stuck_streams_.insert(stream.bits);
}

void FakeDeviceRuntime::synchronize_stream(gpu::StreamHandle stream) {
  if (stream_stuck(stream))
    throw Error(ErrorCode::Timeout, "fake: synchronising a stream that is stuck forever");
}

void FakeDeviceRuntime::set_dtype_check_hook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  dtype_check_hook_ =
      hook ? std::make_shared<const std::function<void()>>(std::move(hook)) : nullptr;
}

bool FakeDeviceRuntime::nccl_supports(DType dtype) noexcept {
  std::shared_ptr<const std::function<void()>> hook;
  {
    std::lock_guard lock(mutex_);
    hook = dtype_check_hook_;
  }
  if (hook) (*hook)();
  if (dtype == DType::Int16 || dtype == DType::Bool) return false;
  if (dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2) return nccl_version_ >= 22400;
  return true;
}

gpu::NcclUniqueId FakeDeviceRuntime::nccl_unique_id() {
  gpu::NcclUniqueId id{};
  std::random_device random;
  for (auto& b : id) b = static_cast<std::byte>(random() & 0xff);
  log("unique_id");
  return id;
}

FakeDeviceRuntime::Comm& FakeDeviceRuntime::comm_of(gpu::NcclHandle handle) {
  std::lock_guard lock(mutex_);
  Comm* comm = reinterpret_cast<Comm*>(handle.bits);
  if (comms_.count(comm) == 0)
    throw Error(ErrorCode::InvalidUsage, "fake: NCCL call on a communicator that does not exist");
  if (comm->aborted)
    throw Error(ErrorCode::InvalidUsage, "fake: NCCL call on an aborted communicator");
  return *comm;
}

gpu::NcclHandle FakeDeviceRuntime::nccl_init(int size, const gpu::NcclUniqueId& id, int rank) {
  std::string hex;
  for (int i = 0; i < 12; ++i) hex += fmt::format("{:02x}", static_cast<unsigned>(id[i]));
  auto* comm = new Comm{"fake-nccl/" + hex, rank, size};
  store_->add(comm->key + "/joined", 1);
  log(fmt::format("init rank={} size={}", rank, size));
  std::lock_guard lock(mutex_);
  comms_.insert(comm);
  return gpu::NcclHandle{reinterpret_cast<std::uintptr_t>(comm)};
}

gpu::NcclHandle FakeDeviceRuntime::nccl_split(gpu::NcclHandle parent, int color, int key) {
  std::shared_ptr<const std::function<void()>> hook;
  {
    std::lock_guard lock(mutex_);
    hook = split_hook_;
  }
  if (hook) (*hook)();
  Comm& p = comm_of(parent);
  // Nonblocking, as cohort configures NCCL: the call posts this rank's row and returns; the
  // child (or, for a rank in no group, the parent) is in progress until every row is there.
  PendingSplit split{fmt::format("{}/split{}", p.key, p.ops++), p.rank, p.size, color, key};
  const std::string mine = fmt::format("{} {}", color, key);
  store_->set(fmt::format("{}/r{}", split.round, p.rank), Bytes(mine.begin(), mine.end()));
  log(fmt::format("split color={} key={}", color, key));
  if (color < 0) {
    p.split = std::move(split);
    return {};
  }
  auto* comm = new Comm{fmt::format("{}/c{}", split.round, color), 0, 0};
  comm->split = std::move(split);
  std::lock_guard lock(mutex_);
  comms_.insert(comm);
  return gpu::NcclHandle{reinterpret_cast<std::uintptr_t>(comm)};
}

bool FakeDeviceRuntime::split_done(Comm& comm) {
  const PendingSplit& split = *comm.split;
  std::vector<std::string> rows;
  for (int r = 0; r < split.parent_size; ++r) rows.push_back(fmt::format("{}/r{}", split.round, r));
  if (!store_->check(rows)) return false;
  if (split.color >= 0) {
    std::vector<std::pair<int, int>> members;  // (key, parent rank) of its color
    for (int r = 0; r < split.parent_size; ++r) {
      const Bytes row = store_->get(rows[static_cast<std::size_t>(r)], kExchangeTimeout);
      int c = 0;
      int k = 0;
      std::sscanf(std::string(row.begin(), row.end()).c_str(), "%d %d", &c, &k);
      if (c == split.color) members.emplace_back(k, r);
    }
    std::sort(members.begin(), members.end());
    comm.size = static_cast<int>(members.size());
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i].second == split.parent_rank) comm.rank = static_cast<int>(i);
    comm.joined = true;
  }
  comm.split.reset();
  return true;
}

void FakeDeviceRuntime::set_split_hook(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  split_hook_ = hook ? std::make_shared<const std::function<void()>>(std::move(hook)) : nullptr;
}

gpu::NcclAsyncState FakeDeviceRuntime::nccl_async_state(gpu::NcclHandle handle) {
  Comm& comm = comm_of(handle);
  {
    std::lock_guard lock(mutex_);
    if (!async_failure_.empty())
      return {gpu::NcclAsyncState::Failed, async_failure_, async_failure_remote_};
  }
  if (comm.split && !split_done(comm)) {
    // Each look is a store round trip: pace the caller's polling loop, which would otherwise
    // take the cores of the ranks it waits for.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return {gpu::NcclAsyncState::InProgress};
  }
  if (!comm.joined) {
    if (store_->add(comm.key + "/joined", 0) < comm.size) return {gpu::NcclAsyncState::InProgress};
    comm.joined = true;
  }
  // Queueing never stays in progress here: ops run (or hang on their stream) when queued.
  return {};
}

void FakeDeviceRuntime::nccl_abort(gpu::NcclHandle handle) noexcept {
  std::lock_guard lock(mutex_);
  Comm* comm = reinterpret_cast<Comm*>(handle.bits);
  calls_.push_back("abort");
  ++aborts_;
  // NCCL's abort ends the kernels waiting for peers: every stream moves on.
  stuck_streams_.clear();
  for (auto& [event, pending] : events_) pending = false;
  if (comms_.erase(comm) > 0) delete comm;
}

void FakeDeviceRuntime::nccl_finalize(gpu::NcclHandle handle) {
  comm_of(handle);
  log("finalize");
}

void FakeDeviceRuntime::nccl_destroy(gpu::NcclHandle handle) noexcept {
  std::lock_guard lock(mutex_);
  calls_.push_back("destroy");
  Comm* comm = reinterpret_cast<Comm*>(handle.bits);
  if (comms_.erase(comm) > 0) delete comm;
}

bool FakeDeviceRuntime::hold(gpu::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  last_op_stream_ = stream;
  if (!hang_ && stuck_streams_.count(stream.bits) == 0) return false;
  stuck_streams_.insert(stream.bits);
  return true;
}

void FakeDeviceRuntime::publish(Comm& comm, const std::string& what, const void* mine,
                                std::size_t bytes) {
  const auto* p = static_cast<const std::uint8_t*>(mine);
  store_->set(fmt::format("{}/{}/r{}", comm.key, what, comm.rank),
              Bytes(p, p + (mine ? bytes : 0)));
}

Bytes FakeDeviceRuntime::exchange(Comm& comm, const std::string& what, const void*, std::size_t,
                                  int from) {
  return store_->get(fmt::format("{}/{}/r{}", comm.key, what, from), kExchangeTimeout);
}

void FakeDeviceRuntime::nccl_group_start() {
  std::lock_guard lock(mutex_);
  calls_.push_back("group_start");
  ++group_depth_;
}

void FakeDeviceRuntime::nccl_group_end() {
  std::vector<PendingP2p> ops;
  {
    std::lock_guard lock(mutex_);
    calls_.push_back("group_end");
    if (group_depth_ == 0) throw Error(ErrorCode::InvalidUsage, "fake: group_end without start");
    if (--group_depth_ > 0) return;
    ops.swap(grouped_);
  }
  // NCCL runs a group's sends and receives together; published sends never block here, so
  // posting every send before any receive cannot deadlock.
  for (const auto& op : ops)
    if (op.is_send) run_p2p(op);
  for (const auto& op : ops)
    if (!op.is_send) run_p2p(op);
}

void FakeDeviceRuntime::run_p2p(const PendingP2p& op) {
  Comm& comm = *op.comm;
  if (op.is_send) {
    const std::uint64_t n = comm.sent[{comm.rank, op.peer}]++;
    const auto* p = static_cast<const std::uint8_t*>(op.in);
    store_->set(fmt::format("{}/p2p/{}-{}/{}", comm.key, comm.rank, op.peer, n),
                Bytes(p, p + op.bytes));
    return;
  }
  const std::uint64_t n = comm.received[{op.peer, comm.rank}]++;
  const Bytes data = store_->get(fmt::format("{}/p2p/{}-{}/{}", comm.key, op.peer, comm.rank, n),
                                 kExchangeTimeout);
  if (data.size() != op.bytes)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("fake NCCL: recv of {} bytes met a send of {}", op.bytes, data.size()));
  std::memcpy(op.out, data.data(), op.bytes);
}

void FakeDeviceRuntime::reduce_published(Comm& comm, const std::string& what, void* out,
                                         std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t bytes = count * dtype_size(dtype);
  std::vector<std::uint8_t> acc;
  for (int r = 0; r < comm.size; ++r) {
    const Bytes x = exchange(comm, what, nullptr, bytes, r);
    if (r == 0) {
      acc.assign(x.begin(), x.end());
    } else {
      reduce_bytes(acc.data(), x.data(), count, dtype, op);
    }
  }
  finish_avg(acc.data(), count, dtype, op, comm.size);
  if (bytes > 0) std::memcpy(out, acc.data(), bytes);
}

void FakeDeviceRuntime::nccl_allreduce(const void* in, void* out, std::size_t count, DType dtype,
                                       ReduceOp op, gpu::NcclHandle handle,
                                       gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("allreduce count={} dtype={} op={} stream={}", count, dtype_name(dtype),
                  op_name(op), stream.bits));
  if (hold(stream)) return;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::string what = fmt::format("op{}", comm.ops++);
  publish(comm, what, in, bytes);
  reduce_published(comm, what, out, count, dtype, op);
}

void FakeDeviceRuntime::nccl_broadcast(const void* in, void* out, std::size_t count, DType dtype,
                                       int root, gpu::NcclHandle handle, gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("broadcast count={} dtype={} root={} stream={}", count, dtype_name(dtype), root,
                  stream.bits));
  if (hold(stream)) return;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::string what = fmt::format("op{}", comm.ops++);
  if (comm.rank == root) {
    publish(comm, what, in, bytes);
    if (bytes > 0 && in != out) std::memcpy(out, in, bytes);
    return;
  }
  const Bytes x = exchange(comm, what, nullptr, bytes, root);
  if (bytes > 0) std::memcpy(out, x.data(), bytes);
}

void FakeDeviceRuntime::nccl_reduce(const void* in, void* out, std::size_t count, DType dtype,
                                    ReduceOp op, int root, gpu::NcclHandle handle,
                                    gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("reduce count={} dtype={} op={} root={} stream={}", count, dtype_name(dtype),
                  op_name(op), root, stream.bits));
  if (hold(stream)) return;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::string what = fmt::format("op{}", comm.ops++);
  publish(comm, what, in, bytes);
  if (comm.rank != root) return;
  reduce_published(comm, what, out, count, dtype, op);
}

void FakeDeviceRuntime::nccl_allgather(const void* in, void* out, std::size_t count, DType dtype,
                                       gpu::NcclHandle handle, gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("allgather count={} dtype={} stream={}", count, dtype_name(dtype), stream.bits));
  if (hold(stream)) return;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::string what = fmt::format("op{}", comm.ops++);
  publish(comm, what, in, bytes);
  for (int r = 0; r < comm.size; ++r) {
    const Bytes x = exchange(comm, what, in, bytes, r);
    if (bytes > 0) std::memcpy(static_cast<std::uint8_t*>(out) + r * bytes, x.data(), bytes);
  }
}

void FakeDeviceRuntime::nccl_reduce_scatter(const void* in, void* out, std::size_t count,
                                            DType dtype, ReduceOp op, gpu::NcclHandle handle,
                                            gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("reduce_scatter count={} dtype={} op={} stream={}", count, dtype_name(dtype),
                  op_name(op), stream.bits));
  if (hold(stream)) return;
  const std::size_t bytes = count * dtype_size(dtype);
  const std::size_t total = bytes * static_cast<std::size_t>(comm.size);
  const std::string what = fmt::format("op{}", comm.ops++);
  publish(comm, what, in, total);
  std::vector<std::uint8_t> acc;
  for (int r = 0; r < comm.size; ++r) {
    const Bytes x = exchange(comm, what, in, total, r);
    const std::uint8_t* block = x.data() + static_cast<std::size_t>(comm.rank) * bytes;
    if (r == 0) {
      acc.assign(block, block + bytes);
    } else {
      reduce_bytes(acc.data(), block, count, dtype, op);
    }
  }
  finish_avg(acc.data(), count, dtype, op, comm.size);
  if (bytes > 0) std::memcpy(out, acc.data(), bytes);
}

void FakeDeviceRuntime::nccl_send(const void* in, std::size_t count, DType dtype, int peer,
                                  gpu::NcclHandle handle, gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("send count={} dtype={} peer={} stream={}", count, dtype_name(dtype), peer,
                  stream.bits));
  if (hold(stream)) return;
  const PendingP2p op{true, in, nullptr, count * dtype_size(dtype), peer, &comm};
  {
    std::lock_guard lock(mutex_);
    if (group_depth_ > 0) {
      grouped_.push_back(op);
      return;
    }
  }
  run_p2p(op);
}

void FakeDeviceRuntime::nccl_recv(void* out, std::size_t count, DType dtype, int peer,
                                  gpu::NcclHandle handle, gpu::StreamHandle stream) {
  Comm& comm = comm_of(handle);
  log(fmt::format("recv count={} dtype={} peer={} stream={}", count, dtype_name(dtype), peer,
                  stream.bits));
  if (hold(stream)) return;
  const PendingP2p op{false, nullptr, out, count * dtype_size(dtype), peer, &comm};
  {
    std::lock_guard lock(mutex_);
    if (group_depth_ > 0) {
      grouped_.push_back(op);
      return;
    }
  }
  run_p2p(op);
}

void FakeDeviceRuntime::convert(DType src_dtype, const void* src, DType dst_dtype, void* dst,
                                std::size_t count, float factor, std::int32_t* nonfinite_flag,
                                gpu::StreamHandle stream) {
  log(fmt::format("convert {}->{} count={} stream={}", dtype_name(src_dtype), dtype_name(dst_dtype),
                  count, stream.bits));
  const bool nonfinite = train::kernels::convert(src_dtype, src, dst_dtype, dst, count, factor);
  if (nonfinite && nonfinite_flag != nullptr) *nonfinite_flag = 1;
}

void FakeDeviceRuntime::norm_part(DType dtype, const void* data, std::size_t count,
                                  gpu::DeviceNormPart part, double* result,
                                  gpu::StreamHandle stream) {
  log(fmt::format("norm_part {} count={} stream={}", dtype_name(dtype), count, stream.bits));
  const auto which = static_cast<train::kernels::NormPart>(part);
  const double value = train::kernels::norm_part(dtype, data, count, which);
  if (part == gpu::DeviceNormPart::MaxAbs) {
    *result = std::isnan(value) || std::isnan(*result) ? std::nan("") : std::max(*result, value);
  } else {
    *result += value;
  }
}

void FakeDeviceRuntime::scale(DType dtype, void* data, std::size_t count, double factor,
                              gpu::StreamHandle stream) {
  log(fmt::format("scale {} count={} stream={}", dtype_name(dtype), count, stream.bits));
  if (dtype == DType::Float64) {  // in f64, as the device kernel does
    for (std::size_t i = 0; i < count; ++i) static_cast<double*>(data)[i] *= factor;
    return;
  }
  train::kernels::convert(dtype, data, dtype, data, count, static_cast<float>(factor));
}

}  // namespace cohort::test
