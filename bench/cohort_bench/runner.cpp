#include "runner.hpp"

#include "check_data.hpp"

#include <cohort/buffer.hpp>

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

namespace cohort::bench {
namespace {

/// Writes every byte of `data` with plain stores, as a computation producing it would: the lines
/// end up modified in this rank's caches (glibc's memset streams large sizes past the caches
/// with non-temporal stores, which would leave the input in memory instead). Bit 6 and 7 of
/// every byte stay clear, so no dtype's exponent fills up: no Inf or NaN comes from it.
void rewrite(void* data, std::size_t bytes, unsigned call) {
  auto* p = static_cast<unsigned char*>(data);
  const unsigned first = 0x3cu ^ (call & 1u);
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(first ^ (i & 0x3eu));
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string algorithm_label(const Contender& c) {
  if (c.impl->name() != "cohort") return "default";
  return std::string(algorithm_name(c.algorithm));
}

/// The algorithm the communicator's latest op ran, read from its flight record ("auto" when the
/// record names none; nothing when it holds no op: COHORT_TRACE_BUFFER=0). A forced algorithm
/// that declines the arguments (recursive doubling on a world that is no power of two) lets the
/// selection table choose: the row must say so.
std::optional<std::string> last_algorithm(const Communicator& comm) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     fmt::format("cohort-bench-algorithm.{}.json", ::getpid());
  comm.dump_trace(path.string());
  nlohmann::json doc;
  {
    std::ifstream file(path);
    doc = nlohmann::json::parse(file, nullptr, false);
  }
  std::filesystem::remove(path);
  const nlohmann::json* latest = nullptr;
  if (doc.is_object() && doc.contains("ops"))
    for (const auto& op : doc["ops"])
      if (latest == nullptr || op.value("seq", 0ull) > latest->value("seq", 0ull)) latest = &op;
  if (latest == nullptr) return std::nullopt;
  if (!latest->contains("algorithm") || !(*latest)["algorithm"].is_string()) return "auto";
  return (*latest)["algorithm"].get<std::string>();
}

}  // namespace

// The allocations of one size, shared by every contender at that size: host buffers, where the
// check fills and counts, and with a device their device twins, which the op runs on.
struct Runner::Buffers {
  Buffer in, out, inplace;
  Buffer device_in, device_out, device_inplace;

  /// Host buffers for `shape`, mappable or ordinary.
  static Buffers allocate(const OpShape& shape, std::size_t inplace_count, DType dtype,
                          bool mappable) {
    return Buffers{make(shape.in_count, dtype, mappable),
                   make(shape.out_count, dtype, mappable),
                   make(inplace_count, dtype, mappable),
                   {},
                   {},
                   {}};
  }
  /// Only what one form uses: the in-place buffer, or the input and the output.
  static Buffers allocate_for(const OpShape& shape, DType dtype, bool mappable, bool in_place) {
    if (in_place) return Buffers{{}, {}, make(shape.inplace_count, dtype, mappable), {}, {}, {}};
    return Buffers{make(shape.in_count, dtype, mappable),
                   make(shape.out_count, dtype, mappable),
                   {},
                   {},
                   {},
                   {}};
  }
  static Buffer make(std::size_t count, DType dtype, bool mappable) {
    return mappable ? Buffer::allocate_mappable(count, dtype) : Buffer::allocate(count, dtype);
  }
  /// Where an op's input and output lie in these host buffers.
  void* input(const OpShape& shape, bool in_place) const {
    return in_place ? static_cast<unsigned char*>(inplace.data()) +
                          shape.in_offset * inplace.element_size()
                    : in.data();
  }
  void* output(const OpShape& shape, bool in_place) const {
    return in_place ? static_cast<unsigned char*>(inplace.data()) +
                          shape.out_offset * inplace.element_size()
                    : out.data();
  }

  // Copies host [host_ptr, +count elements) to the matching place in the device twin.
  void upload(DeviceMemory& device, const Buffer& host, const Buffer& twin, const void* host_ptr,
              std::size_t count) const {
    device.copy_to_device(twin_of(host, twin, host_ptr), host_ptr, count * host.element_size());
  }
  void download(DeviceMemory& device, const Buffer& host, const Buffer& twin, void* host_ptr,
                std::size_t count) const {
    device.copy_to_host(host_ptr, twin_of(host, twin, host_ptr), count * host.element_size());
  }
  static void* twin_of(const Buffer& host, const Buffer& twin, const void* host_ptr) {
    const auto at = static_cast<const unsigned char*>(host_ptr) -
                    static_cast<const unsigned char*>(host.data());
    return static_cast<unsigned char*>(twin.data()) + at;
  }
};

Runner::Runner(Communicator& comm, RunSettings settings, DeviceMemory* device)
    : comm_(comm), settings_(settings), device_(device) {}

std::vector<ResultRow> Runner::run_size(const BenchCase& bc, std::uint64_t requested_bytes,
                                        std::span<const Contender> contenders) {
  const OpShape shape = op_shape(bc.op, static_cast<std::size_t>(requested_bytes),
                                 dtype_size(bc.dtype), comm_.size(), comm_.rank());
  const std::size_t inplace_count = op_has_in_place(bc.op) ? shape.inplace_count : 0;
  Buffers buffers = Buffers::allocate(shape, inplace_count, bc.dtype, false);
  // cohort's own set when asked for mappable memory (host buffers only, options.cpp).
  std::optional<Buffers> mappable;
  if (settings_.mappable && device_ == nullptr)
    mappable.emplace(Buffers::allocate(shape, inplace_count, bc.dtype, true));
  if (device_ != nullptr) {
    const Device device = device_->device();
    buffers.device_in = Buffer::allocate(shape.in_count, bc.dtype, device);
    buffers.device_out = Buffer::allocate(shape.out_count, bc.dtype, device);
    buffers.device_inplace = Buffer::allocate(inplace_count, bc.dtype, device);
  }
  std::vector<ResultRow> rows;
  for (const Contender& contender : contenders) {
    ResultRow row;
    row.impl = std::string(contender.impl->name());
    row.algo = algorithm_label(contender);
    row.op = bc.op;
    row.dtype = bc.dtype;
    row.redop = bc.redop;
    row.root = bc.root;
    row.size_bytes = shape.size_bytes;
    row.count = shape.count;
    OpCall probe{bc.op, bc.dtype, bc.redop, bc.root, contender.algorithm};
    probe.in_count = shape.in_count;
    probe.out_count = shape.out_count;
    if (device_ != nullptr) probe.device = device_->device();
    if (auto reason = contender.impl->unsupported(probe)) {
      row.skipped = *reason;
    } else {
      Buffers& own = mappable && contender.impl->name() == "cohort" ? *mappable : buffers;
      row.out_of_place = measure(bc, shape, own, contender, false);
      if (op_has_in_place(bc.op)) {
        probe.in_place = true;
        if (auto in_place_reason = contender.impl->unsupported(probe)) {
          row.skipped = "in-place: " + *in_place_reason;
        } else {
          row.in_place = measure(bc, shape, own, contender, true);
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Measurement Runner::measure(const BenchCase& bc, const OpShape& shape, Buffers& buffers,
                            const Contender& contender, bool in_place) {
  OpCall call{bc.op, bc.dtype, bc.redop, bc.root, contender.algorithm, in_place};
  const std::size_t esize = dtype_size(bc.dtype);
  // Where the check fills and reads (host), then where the op runs (the device twins, if any).
  void* const host_in = buffers.input(shape, in_place);
  void* const host_out = buffers.output(shape, in_place);
  const Buffer& in_home = in_place ? buffers.inplace : buffers.in;
  const Buffer& out_home = in_place ? buffers.inplace : buffers.out;
  const Buffer& in_twin = in_place ? buffers.device_inplace : buffers.device_in;
  const Buffer& out_twin = in_place ? buffers.device_inplace : buffers.device_out;
  call.in = device_ != nullptr ? Buffers::twin_of(in_home, in_twin, host_in) : host_in;
  call.out = device_ != nullptr ? Buffers::twin_of(out_home, out_twin, host_out) : host_out;
  call.in_count = shape.in_count;
  call.out_count = shape.out_count;
  if (device_ != nullptr) call.device = device_->device();
  const CheckCase cc{bc.op, bc.dtype, bc.redop, bc.root, comm_.size(), comm_.rank()};
  Implementation& impl = *contender.impl;
  // Makes the device copy of what was just filled on the host (the whole in-place buffer, so
  // its sentinel outside the input travels too).
  const auto upload_filled = [&] {
    if (device_ == nullptr) return;
    if (in_place) {
      buffers.upload(*device_, buffers.inplace, buffers.device_inplace, buffers.inplace.data(),
                     buffers.inplace.count());
    } else {
      buffers.upload(*device_, buffers.out, buffers.device_out, host_out, call.out_count);
      buffers.upload(*device_, buffers.in, buffers.device_in, host_in, call.in_count);
    }
  };

  // Timed runs start from the check's input so reductions see realistic values.
  if (in_place) fill_sentinel(bc.dtype, buffers.inplace.data(), buffers.inplace.count());
  fill_input(cc, host_in, call.in_count);
  upload_filled();

  Measurement m;
  m.measured = true;
  double local_us = 0.0;
  const bool own_mappable = settings_.mappable && impl.name() == "cohort";
  if (settings_.allocate_per_call) {
    local_us = time_allocating_calls(bc, shape, impl, call, own_mappable);
  } else {
    const int iters = warm_up([&](int) { impl.run(call); });
    if (settings_.fresh_input) {
      const std::size_t in_bytes = call.in_count * esize;
      double busy_s = 0.0;
      for (int i = 0; i < iters; ++i) {
        rewrite(host_in, in_bytes, static_cast<unsigned>(i));
        comm_.barrier();
        const auto start = Clock::now();
        impl.run(call);
        busy_s += seconds_since(start);
      }
      local_us = busy_s * 1e6 / std::max(iters, 1);
    } else {
      comm_.barrier();
      const auto start = Clock::now();
      for (int i = 0; i < iters; ++i) impl.run(call);
      local_us = seconds_since(start) * 1e6 / std::max(iters, 1);
    }
  }
  m.iters = last_iters_;
  if (impl.name() == "cohort" && contender.algorithm != Algorithm::Auto && device_ == nullptr) {
    // Nothing ran on the communicator since the last timed call.
    const std::optional<std::string> ran = last_algorithm(comm_);
    if (ran && *ran != algorithm_name(contender.algorithm)) m.declined_for = *ran;
  }
  m.time_us = combine_time(local_us);
  if (op_moves_data(bc.op) && m.time_us > 0.0) {
    m.algbw_gbps = static_cast<double>(shape.size_bytes) / (m.time_us * 1e-6) / 1e9;
    m.busbw_gbps = m.algbw_gbps * busbw_factor(bc.op, comm_.size());
  }

  if (settings_.check && op_moves_data(bc.op)) {
    // One more call on fresh data, outside the timed loop, checked against the local model;
    // with --allocate-per-call (host buffers only) on buffers allocated for it as the timed
    // calls' were, so the memory the library kept from them is what gets checked.
    std::optional<Buffers> allocated;
    if (settings_.allocate_per_call)
      allocated.emplace(Buffers::allocate_for(shape, bc.dtype, own_mappable, in_place));
    const Buffers& target = allocated ? *allocated : buffers;
    void* const check_in = allocated ? target.input(shape, in_place) : host_in;
    void* const check_out = allocated ? target.output(shape, in_place) : host_out;
    OpCall checked = call;
    if (allocated) {
      checked.in = check_in;
      checked.out = check_out;
    }
    if (in_place) {
      fill_sentinel(bc.dtype, target.inplace.data(), target.inplace.count());
    } else {
      fill_sentinel(bc.dtype, check_out, call.out_count);
    }
    fill_input(cc, check_in, call.in_count);
    upload_filled();
    impl.run(checked);
    if (device_ != nullptr)
      buffers.download(*device_, out_home, out_twin, host_out, call.out_count);
    if (settings_.inject_wrong_rank == comm_.rank()) corrupt_output(cc, shape, check_out);
    m.wrong = sum_over_ranks(count_wrong(cc, shape, check_out));
  }
  return m;
}

int Runner::warm_up(const std::function<void(int)>& call) {
  const auto warmup_start = Clock::now();
  for (int i = 0; i < settings_.warmup; ++i) call(i);
  last_iters_ = settings_.iters;
  if (settings_.min_time_s <= 0.0) return settings_.iters;
  // Without warmup calls, one untimed-so-far call measures the per-call cost.
  int calibration_calls = settings_.warmup;
  if (calibration_calls == 0) {
    call(0);
    calibration_calls = 1;
  }
  last_iters_ = agreed_iters(seconds_since(warmup_start), calibration_calls);
  return last_iters_;
}

double Runner::time_allocating_calls(const BenchCase& bc, const OpShape& shape,
                                     Implementation& impl, OpCall call, bool mappable) {
  const std::size_t in_bytes = call.in_count * dtype_size(bc.dtype);
  const auto allocate_write_call_free = [&](int i) {
    const Buffers fresh = Buffers::allocate_for(shape, bc.dtype, mappable, call.in_place);
    call.in = fresh.input(shape, call.in_place);
    call.out = fresh.output(shape, call.in_place);
    rewrite(call.in, in_bytes, static_cast<unsigned>(i));
    impl.run(call);
  };  // freed on return: what a free costs is the program's too
  // The warm-up calls allocate too, so the timed ones see what a program's later steps see,
  // and --min-time's count comes from calls that cost what the timed ones do.
  const int iters = warm_up(allocate_write_call_free);
  double busy_s = 0.0;
  for (int i = 0; i < iters; ++i) {
    comm_.barrier();
    const auto start = Clock::now();
    allocate_write_call_free(i);
    busy_s += seconds_since(start);
  }
  return busy_s * 1e6 / std::max(iters, 1);
}

int Runner::agreed_iters(double warmup_seconds, int warmup_calls) {
  const double per_call = warmup_seconds / warmup_calls;
  std::int64_t wanted = settings_.iters;
  if (per_call > 0.0) {
    wanted = std::max<std::int64_t>(
        wanted, static_cast<std::int64_t>(std::ceil(settings_.min_time_s / per_call)));
  } else {
    wanted = kMaxScaledIters;
  }
  wanted = std::min(wanted, kMaxScaledIters);
  // Every rank must loop the same number of times, or the collectives would not match.
  comm_.allreduce(Buffer::view(&wanted, 1, DType::Int64), ReduceOp::Max);
  return static_cast<int>(wanted);
}

double Runner::combine_time(double local_us) {
  double value = local_us;
  const Buffer buffer = Buffer::view(&value, 1, DType::Float64);
  switch (settings_.average) {
    case Averaging::Rank0:
      // Rank 0 prints; every rank reports rank 0's time so the JSON writers agree.
      comm_.broadcast(buffer, 0);
      return value;
    case Averaging::Mean: comm_.allreduce(buffer, ReduceOp::Sum); return value / comm_.size();
    case Averaging::Min: comm_.allreduce(buffer, ReduceOp::Min); return value;
    case Averaging::Max: comm_.allreduce(buffer, ReduceOp::Max); return value;
  }
  return value;
}

std::uint64_t Runner::sum_over_ranks(std::uint64_t value) {
  comm_.allreduce(Buffer::view(&value, 1, DType::UInt64), ReduceOp::Sum);
  return value;
}

}  // namespace cohort::bench
