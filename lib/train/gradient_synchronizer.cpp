// GradientSynchronizer: DDP's reducer over the public Communicator.
//
// How it works. The constructor fixes the bucket layout (bucket_layout.cpp). A bucket whose
// gradients tile one contiguous memory range (same dtype, no communication dtype) uses that
// memory as its buffer ("view" bucket); any other bucket gets one contiguous staging buffer in
// its communication dtype. Each micro-step:
//   1. begin_micro_step() applies Accelerate's counter rule and decides whether this micro-step
//      communicates; if not, mark_ready()/finish() only validate and track.
//   2. mark_ready(i) casts gradient i into its staging slot in one kernel pass (a view bucket
//      needs none). Buckets of f32, f64 and bf16 reduce with Avg, which divides inside the
//      collective; f16 and fp8 buckets, whose sums could overflow where the mean fits, are
//      multiplied by 1/world on the way in (in place for a view) and summed. Either way a
//      short final window's exact_final_window correction is applied in that pass. When that
//      completes the bucket at the head of the launch queue, the head and every complete bucket
//      behind it start their allreduce(Sum) asynchronously: launches happen strictly in bucket
//      order, so the sequence of collectives is the same on every rank whatever order backward
//      marks gradients in.
//   3. finish() starts the buckets not yet started (unready gradients zeroed), and waits for
//      them in order, casting each staged bucket back into its gradients as soon as its
//      allreduce is done (overlapping the later buckets' allreduces).
// Unready gradients: right after the last bucket, an allreduce(Sum) of one float per rank, where
// rank r writes 1 at element r when it started the last bucket with gradients still unready.
// Every rank then knows which ranks left gradients unready, and all of them throw together.
//
// Device gradients (cuda, or managed memory on a device the runtime sees; all on one device) take
// the same passes on their device's stream 0, and staged buckets live in device memory there.
// The bucket allreduces, issued without a stream, are ordered after stream 0 by the communicator
// (so after the packs) and run on NCCL; finish() waits for the unpacks before returning. The
// unready flags stay host memory and go through the host path of the same communicator.
//
// Cost per communicating micro-step: one allreduce per bucket, of the bucket's bytes in the
// communication dtype, plus one of `world` floats; one pass per gradient in (the division) and,
// for staged buckets, one out. A world of one without a communication dtype uses the gradients
// in place: no staging, no copies, only the exact_final_window rescale.

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#include "core/log.hpp"
#include "train/argument_agreement.hpp"
#include "train/buffer_checks.hpp"
#include "train/device_placement.hpp"
#include "train/kernels/float_kernels.hpp"
#include "train/mappable_host_memory.hpp"
#include "train/timeout_option.hpp"

namespace cohort::train {

struct GradientSynchronizer::Bucket {
  std::vector<std::size_t> grads;  // registered indices, in slot order (the layout's)
  DType dtype = DType::Float32;    // communication dtype of `staging`
  std::size_t payload = 0;         // gradient elements
  bool view = false;               // `staging` is the gradients' own memory
  bool averages = false;           // reduced with Avg instead of pre-divided and summed
  int device = -1;                 // the device of the gradients' memory (-1: host memory)
  Buffer staging;
  std::size_t unready = 0;  // gradients of this bucket not marked in this micro-step
  Work work;                // the allreduce, once started (invalid in a world of one)

  std::byte* slot(std::size_t offset) const {
    return static_cast<std::byte*>(staging.data()) + offset * dtype_size(dtype);
  }
};

namespace {

constexpr const char* kGradientSynchronizer = "GradientSynchronizer";

// "2, 5, 7" (at most `limit` items, then the total), for messages naming gradients or ranks.
template <class T>
std::string join(const std::vector<T>& items, std::size_t limit = 16) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(items[i]);
  }
  if (items.size() > limit) text += fmt::format(", ... ({} in all)", items.size());
  return text;
}

// Where the gradients' element-wise work runs: their device, or -1 for the host kernels
// (check_arguments made sure there is one place).
int place_of(const std::vector<Buffer>& grads) {
  return common_place(kGradientSynchronizer, grads,
                      [](std::size_t i) { return fmt::format("gradient {}", i); });
}

// dst = src * factor rounded to dst_dtype (kernels::convert), on the host or queued on the
// device's stream 0.
void convert_on(int device, DType src_dtype, const void* src, DType dst_dtype, void* dst,
                std::size_t count, float factor) {
  if (device < 0) {
    kernels::convert(src_dtype, src, dst_dtype, dst, count, factor);
    return;
  }
  gpu::DeviceRuntime& runtime = *gpu::device_runtime();  // check_gradient saw it
  DeviceScope scope(runtime, device);
  runtime.convert(src_dtype, src, dst_dtype, dst, count, factor, nullptr, gpu::StreamHandle{});
}

void zero_on(int device, void* dst, std::size_t bytes) {
  if (device < 0) {
    std::memset(dst, 0, bytes);
    return;
  }
  gpu::DeviceRuntime& runtime = *gpu::device_runtime();
  DeviceScope scope(runtime, device);
  runtime.fill_async(dst, 0, bytes, gpu::StreamHandle{});
}

// Waits for the work queued on the device's stream 0 (nothing for host memory).
void wait_for_device(int device) {
  if (device < 0) return;
  gpu::DeviceRuntime& runtime = *gpu::device_runtime();
  DeviceScope scope(runtime, device);
  runtime.synchronize_stream(gpu::StreamHandle{});
}

// Waits for `work` (if any) and forgets it; its error was or will be reported elsewhere.
void wait_quietly(Work& work) noexcept {
  if (!work.valid()) return;
  try {
    work.wait();
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("{}: an allreduce left from an unfinished micro-step failed: {}",
                    kGradientSynchronizer, e.what());
  }
  work = Work();
}

}  // namespace

GradientSynchronizer::GradientSynchronizer(std::shared_ptr<Communicator> comm,
                                           std::vector<Buffer> grads,
                                           const GradientSyncOptions& options)
    : comm_(std::move(comm)), options_(options), grads_(std::move(grads)) {
  if (!comm_)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: communicator is null", kGradientSynchronizer));
  // Arguments are checked locally first, but the verdict is exchanged before anyone throws, so
  // a rank with bad arguments never leaves the others waiting in the registration check.
  std::exception_ptr local_error;
  try {
    check_arguments();
  } catch (const Error&) {
    local_error = std::current_exception();
  }
  check_same_registration(local_error != nullptr);
  if (local_error) std::rethrow_exception(local_error);

  layout_ = bucket_layout(grads_, options_.bucket_cap_bytes, options_.first_bucket_cap_bytes);
  const int place = place_of(grads_);
  const std::size_t world = static_cast<std::size_t>(comm_->size());
  in_place_ = world == 1 && !options_.communication_dtype;
  bucket_of_.assign(grads_.size(), 0);
  offset_of_.assign(grads_.size(), 0);
  ready_.assign(grads_.size(), false);
  marked_in_window_.assign(grads_.size(), false);
  for (std::size_t b = 0; b < layout_.size(); ++b) {
    // Slots follow ascending registration order on every rank, whether the bucket is staged or
    // a view of the gradients' memory: the allreduce adds element k of every rank together, so
    // every rank must put the same gradient there.
    std::vector<std::size_t> slots = layout_[b];
    std::sort(slots.begin(), slots.end());
    std::size_t offset = 0;
    for (std::size_t i : slots) {
      bucket_of_[i] = b;
      offset_of_[i] = offset;
      offset += grads_[i].count();
    }
    if (in_place_) continue;
    auto bucket = std::make_unique<Bucket>();
    bucket->grads = layout_[b];
    bucket->dtype = options_.communication_dtype.value_or(grads_[layout_[b].front()].dtype());
    bucket->payload = offset;
    if (!options_.communication_dtype) bucket->staging = contiguous_span(slots, place);
    bucket->view = bucket->staging.count() > 0;
    // Avg divides inside the collective (the shared-memory engine while the sums are in cache),
    // which saves a view bucket a pass of its own. f16 and fp8 are pre-divided and summed
    // instead: their partial sums could overflow where the mean fits. The choice depends on the
    // bucket's dtype only, so every rank makes the same one whatever its memory layout.
    bucket->averages = bucket->dtype != DType::Float16 && bucket->dtype != DType::Float8E4M3 &&
                       bucket->dtype != DType::Float8E5M2;
    bucket->device = place;
    // Host staging is mappable, so the ranks of a host reduce each other's buckets in place.
    if (!bucket->view)
      bucket->staging =
          bucket->device < 0
              ? allocate_mappable_or_ordinary(offset, bucket->dtype, "gradient staging buffers")
              : Buffer::allocate(offset, bucket->dtype, Device::cuda(bucket->device));
    buckets_.push_back(std::move(bucket));
  }
  unready_flags_ = Buffer::allocate(world, DType::Float32);
}

void GradientSynchronizer::check_arguments() const {
  if (options_.accumulation_steps < 1) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: accumulation_steps is {}; it must be at least 1",
                            kGradientSynchronizer, options_.accumulation_steps));
  }
  if (options_.communication_dtype && *options_.communication_dtype != DType::Float16 &&
      *options_.communication_dtype != DType::BFloat16) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: communication dtype {} is not supported; use half or bfloat16",
                            kGradientSynchronizer, dtype_name(*options_.communication_dtype)));
  }
  check_timeout_option(kGradientSynchronizer, options_.timeout);
  for (std::size_t i = 0; i < grads_.size(); ++i)
    check_gradient(kGradientSynchronizer, i, grads_[i]);
  // A bucket's gradients share one staging buffer and one allreduce, so one place for all.
  place_of(grads_);
}

Buffer GradientSynchronizer::contiguous_span(const std::vector<std::size_t>& slots,
                                             int place) const {
  // The gradients, in slot order, must follow each other in memory without gaps or overlaps.
  const Buffer* first = nullptr;
  const std::byte* expected = nullptr;
  std::size_t count = 0;
  for (std::size_t i : slots) {
    const Buffer& grad = grads_[i];
    if (grad.count() == 0) continue;
    if (first == nullptr) {
      first = &grad;
      expected = static_cast<const std::byte*>(grad.data());
    }
    if (grad.data() != expected) return Buffer();
    expected += grad.nbytes();
    count += grad.count();
  }
  if (first == nullptr) return Buffer();
  // The view is reduced where the bucket is placed: host memory (managed memory among host
  // gradients included, which would otherwise steer this one bucket to the device path) or
  // the gradients' device. It keeps the first gradient's owner alive, as the gradients do.
  const Device device = place < 0 ? Device::cpu() : first->device();
  return Buffer::view(first->data(), {static_cast<std::int64_t>(count)}, first->dtype(), device, {},
                      0, first->owner());
}

void GradientSynchronizer::check_same_registration(bool arguments_rejected) {
  // Every rank must register the same gradients (counts and dtypes, in order) and options that
  // shape the buckets or say on which micro-steps they are reduced, or their allreduces would
  // pair different data (accumulation windows of different lengths pair one rank's second
  // micro-step with another's fourth, alike in size and op, so nothing else would notice).
  Digest digest;
  digest.mix(grads_.size());
  for (std::size_t i = 0; i < grads_.size(); ++i) {
    const Buffer& grad = grads_[i];
    digest.mix(grad.count()).mix(static_cast<unsigned>(grad.dtype()));
    // The kind of memory decides the path (host memory, pinned or not, or NCCL) and, with
    // where the device changes, the buckets; the device's index may differ between ranks (one
    // GPU each).
    const DeviceType type = grad.device().type;
    digest
        .mix(type == DeviceType::CUDAHost ? static_cast<unsigned>(DeviceType::CPU)
                                          : static_cast<unsigned>(type))
        .mix(static_cast<unsigned>(i > 0 && grad.device() == grads_[i - 1].device()));
  }
  digest.mix(options_.bucket_cap_bytes).mix(options_.first_bucket_cap_bytes);
  digest.mix(options_.communication_dtype
                 ? 1 + static_cast<std::uint64_t>(*options_.communication_dtype)
                 : 0);
  digest.mix(static_cast<std::uint64_t>(options_.accumulation_steps))
      .mix(static_cast<unsigned>(options_.sync_each_batch))
      .mix(static_cast<unsigned>(options_.exact_final_window))
      .mix(static_cast<unsigned>(options_.allow_unready));
  const ArgumentAgreement agreement =
      agree_arguments(*comm_, digest, arguments_rejected, usable_timeout(options_.timeout));
  if (arguments_rejected) return;  // this rank throws its own error
  throw_if_disagreed(agreement, kGradientSynchronizer,
                     "registered gradients (counts, dtypes, kinds of memory, order) or options "
                     "(bucket caps, "
                     "communication dtype, accumulation_steps, sync_each_batch, "
                     "exact_final_window, allow_unready)");
}

GradientSynchronizer::~GradientSynchronizer() {
  // An unfinished micro-step may have allreduces writing into the staging buffers.
  for (auto& bucket : buckets_) wait_quietly(bucket->work);
  wait_quietly(flags_work_);
}

bool GradientSynchronizer::begin_micro_step(bool end_of_data) {
  std::lock_guard lock(mutex_);
  if (in_flight_) {
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("{}::begin_micro_step: the previous micro-step communicates and "
                            "finish() was not called",
                            kGradientSynchronizer));
  }
  const int steps = options_.accumulation_steps;
  if (optimizer_steps_) {  // the previous micro-step closed a window
    window_length_ = 0;
    marked_in_window_.assign(grads_.size(), false);
  }
  if (no_sync_) {
    optimizer_steps_ = false;
    communicating_ = false;
  } else {
    ++window_length_;
    if (end_of_data) {
      micro_step_ = 0;
      optimizer_steps_ = true;
    } else {
      micro_step_ = (micro_step_ + 1) % steps;
      optimizer_steps_ = micro_step_ == 0;
    }
    communicating_ = optimizer_steps_ || options_.sync_each_batch;
  }
  // A short final window was divided by `steps` through loss_multiplier(); the exact mean over
  // its window_length_ micro-steps needs steps / window_length_ more.
  double scale = 1.0;
  if (options_.exact_final_window && optimizer_steps_ && window_length_ < steps) {
    scale = static_cast<double>(steps) / window_length_;
  }
  pack_factor_ = static_cast<float>(scale / comm_->size());
  window_factor_ = static_cast<float>(scale);

  // An earlier finish() that failed may have left allreduces running into the staging buffers.
  for (auto& bucket : buckets_) {
    bucket->unready = bucket->grads.size();
    wait_quietly(bucket->work);
  }
  wait_quietly(flags_work_);
  ready_.assign(grads_.size(), false);
  unready_count_ = grads_.size();
  next_launch_ = 0;
  started_ = true;
  in_flight_ = communicating_;
  return optimizer_steps_;
}

void GradientSynchronizer::mark_ready(std::size_t index) {
  std::lock_guard lock(mutex_);
  if (index >= grads_.size()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}::mark_ready: gradient index {} is out of range ({} registered)",
                            kGradientSynchronizer, index, grads_.size()));
  }
  if (!started_) {
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("{}::mark_ready({}) before the first begin_micro_step()",
                            kGradientSynchronizer, index));
  }
  if (communicating_ && !in_flight_) {
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("{}::mark_ready({}) after finish(); begin the next micro-step first",
                            kGradientSynchronizer, index));
  }
  if (ready_[index]) {
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("{}::mark_ready: gradient {} was already marked ready in this "
                            "micro-step",
                            kGradientSynchronizer, index));
  }
  ready_[index] = true;
  marked_in_window_[index] = true;
  --unready_count_;
  if (!communicating_ || in_place_) return;
  pack_locked(index);
  --buckets_[bucket_of_[index]]->unready;
  launch_ready_buckets_locked();
}

void GradientSynchronizer::pack_locked(std::size_t index) {
  const Buffer& grad = grads_[index];
  const Bucket& bucket = *buckets_[bucket_of_[index]];
  if (grad.count() == 0) return;
  if (bucket.view) {
    // An averaging bucket leaves the division to its allreduce; only a short window's
    // correction (rare) costs a pass here.
    const float factor = bucket.averages ? window_factor_ : pack_factor_;
    if (factor != 1.0f)
      convert_on(bucket.device, grad.dtype(), grad.data(), grad.dtype(), grad.data(), grad.count(),
                 factor);
    return;
  }
  convert_on(bucket.device, grad.dtype(), grad.data(), bucket.dtype, bucket.slot(offset_of_[index]),
             grad.count(), bucket.averages ? window_factor_ : pack_factor_);
}

void GradientSynchronizer::launch_ready_buckets_locked() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->unready == 0) {
    launch_bucket_locked(next_launch_++, /*forced=*/false);
  }
}

void GradientSynchronizer::launch_bucket_locked(std::size_t b, bool forced) {
  Bucket& bucket = *buckets_[b];
  if (forced && bucket.unready > 0) {
    // An unready gradient marked earlier in the window holds what those micro-steps added: it
    // goes as it is. One never marked contributes zeros (a staging slot still holds an earlier
    // window's values; a view bucket's memory is the gradient, never finished in this window).
    for (std::size_t i : bucket.grads) {
      if (ready_[i]) continue;
      if (marked_in_window_[i]) {
        pack_locked(i);
        continue;
      }
      void* target = bucket.view ? grads_[i].data() : bucket.slot(offset_of_[i]);
      if (grads_[i].count() > 0)
        zero_on(bucket.device, target, grads_[i].count() * dtype_size(bucket.dtype));
    }
  }
  CollectiveOptions collective;
  collective.timeout = options_.timeout;
  const bool communicate = comm_->size() > 1;
  if (communicate && bucket.staging.count() > 0)
    bucket.work =
        comm_->allreduce_async(bucket.staging, bucket.staging,
                               bucket.averages ? ReduceOp::Avg : ReduceOp::Sum, collective);
  if (b + 1 == buckets_.size()) {
    // The last bucket starts after every other one, so unready_count_ is final here.
    float* flags = unready_flags_.data_as<float>();
    std::fill_n(flags, unready_flags_.count(), 0.0f);
    flags[comm_->rank()] = unready_count_ > 0 ? 1.0f : 0.0f;
    if (communicate)
      flags_work_ =
          comm_->allreduce_async(unready_flags_, unready_flags_, ReduceOp::Sum, collective);
  }
}

void GradientSynchronizer::finish() {
  std::lock_guard lock(mutex_);
  if (!in_flight_) return;
  in_flight_ = false;
  if (in_place_) {
    finish_in_place_locked();
    return;
  }
  while (next_launch_ < buckets_.size()) launch_bucket_locked(next_launch_++, /*forced=*/true);
  wait_and_unpack_locked();
  if (!buckets_.empty()) wait_for_device(buckets_.front()->device);  // every bucket's device
  // Every gradient now holds the average, unready ones too: what a later micro-step of this
  // window (sync_each_batch) sends for one left unready again.
  marked_in_window_.assign(grads_.size(), true);
  const std::vector<int> ranks = ranks_with_unready_locked();
  if (!ranks.empty() && !options_.allow_unready) throw_unready_locked(ranks);
}

void GradientSynchronizer::wait_and_unpack_locked() {
  // Each staged bucket is copied back as soon as its allreduce is done, while later buckets are
  // still being reduced. Every Work is waited for even after a failure, so no allreduce is left
  // writing into memory the caller may free.
  std::exception_ptr first_error;
  for (auto& bucket : buckets_) {
    try {
      if (bucket->work.valid()) bucket->work.wait();
      if (!first_error) unpack_locked(*bucket);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
    bucket->work = Work();
  }
  try {
    if (flags_work_.valid()) flags_work_.wait();
  } catch (...) {
    if (!first_error) first_error = std::current_exception();
  }
  flags_work_ = Work();
  if (first_error) std::rethrow_exception(first_error);
}

std::vector<int> GradientSynchronizer::ranks_with_unready_locked() const {
  std::vector<int> ranks;
  if (buckets_.empty()) return ranks;
  const float* flags = unready_flags_.data_as<float>();
  for (std::size_t r = 0; r < unready_flags_.count(); ++r) {
    if (flags[r] > 0.5f) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

void GradientSynchronizer::unpack_locked(const Bucket& bucket) {
  if (bucket.view) return;
  for (std::size_t i : bucket.grads) {
    const Buffer& grad = grads_[i];
    if (grad.count() == 0) continue;
    convert_on(bucket.device, bucket.dtype, bucket.slot(offset_of_[i]), grad.dtype(), grad.data(),
               grad.count(), 1.0f);
  }
}

void GradientSynchronizer::finish_in_place_locked() {
  // A world of one: the "average" of a gradient is the gradient itself (zero if unready and
  // never marked in the window).
  if (unready_count_ > 0 && !options_.allow_unready) throw_unready_locked({comm_->rank()});
  const int place = place_of(grads_);
  for (std::size_t i = 0; i < grads_.size(); ++i) {
    const Buffer& grad = grads_[i];
    if (grad.count() == 0) continue;
    if (!ready_[i] && !marked_in_window_[i]) {
      zero_on(place, grad.data(), grad.nbytes());
    } else if (pack_factor_ != 1.0f) {
      convert_on(place, grad.dtype(), grad.data(), grad.dtype(), grad.data(), grad.count(),
                 pack_factor_);
    }
  }
  wait_for_device(place);
  marked_in_window_.assign(grads_.size(), true);  // as finish() says
}

void GradientSynchronizer::throw_unready_locked(const std::vector<int>& ranks) const {
  const int me = comm_->rank();
  std::vector<int> others;
  for (int r : ranks) {
    if (r != me) others.push_back(r);
  }
  const std::string how =
      "mark every gradient ready in each communicating micro-step, or set allow_unready so "
      "unready gradients contribute zeros";
  if (unready_count_ == 0) {
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("{}::finish: {} {} left gradients unready in this micro-step (their "
                            "errors name them); {}",
                            kGradientSynchronizer, others.size() == 1 ? "rank" : "ranks",
                            join(others), how));
  }
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < grads_.size(); ++i) {
    if (!ready_[i]) mine.push_back(i);
  }
  std::string also;
  if (!others.empty()) {
    also = fmt::format(" (and {} {} left gradients unready too)",
                       others.size() == 1 ? "rank" : "ranks", join(others));
  }
  throw Error(ErrorCode::InvalidUsage,
              fmt::format("{}::finish: {} {} never marked ready on rank {} in this "
                          "micro-step{}; {}",
                          kGradientSynchronizer, mine.size() == 1 ? "gradient" : "gradients",
                          join(mine), me, also, how));
}

GradientSynchronizer::NoSyncWindow::NoSyncWindow(GradientSynchronizer& owner) noexcept
    : owner_(owner), previous_(owner.no_sync_) {
  owner_.no_sync_ = true;
}

GradientSynchronizer::NoSyncWindow::~NoSyncWindow() {
  owner_.no_sync_ = previous_;
}

}  // namespace cohort::train
