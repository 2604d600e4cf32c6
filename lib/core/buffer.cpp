#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include "core/bulk_allocation.hpp"
#include "core/float_formats.hpp"
#include "core/invalid_argument.hpp"
#include "core/mappable_memory.hpp"
#include "core/system_error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace cohort {
namespace {

constexpr std::size_t kAllocationAlignment = 64;

std::string dims_to_string(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

bool known_device_type(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
    case DeviceType::CUDA:
    case DeviceType::CUDAHost:
    case DeviceType::CUDAManaged: return true;
  }
  return false;
}

// Element count of `shape`, rejecting negative extents and products whose byte size would not
// fit in an int64 (byte offsets and DLPack sizes are signed 64-bit).
std::size_t checked_count(const std::vector<std::int64_t>& shape, DType dtype) {
  const auto limit =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / dtype_size(dtype);
  std::uint64_t count = 1;
  bool zero = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      invalid_argument("negative extent " + std::to_string(shape[i]) + " in dimension " +
                       std::to_string(i) + " of shape " + dims_to_string(shape));
    if (shape[i] == 0) zero = true;
  }
  if (zero) return 0;
  for (const std::int64_t extent : shape) {
    const auto e = static_cast<std::uint64_t>(extent);
    if (count > limit / e)
      invalid_argument("shape " + dims_to_string(shape) + " of " + std::string(dtype_name(dtype)) +
                       " overflows a 64-bit byte size");
    count *= e;
  }
  return static_cast<std::size_t>(count);
}

std::shared_ptr<void> allocate_zeroed(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  std::size_t rounded = 0;
  void* memory = allocate_bulk(nbytes, kAllocationAlignment, &rounded);
  if (memory == nullptr)
    throw system_error("allocating " + std::to_string(nbytes) + " bytes for a Buffer", ENOMEM);
  std::memset(memory, 0, rounded);
  return std::shared_ptr<void>(memory, std::free);
}

void require_host(const Buffer& buffer, const char* operation) {
  if (!buffer.device().host_accessible())
    invalid_argument(std::string(operation) + " needs host-accessible memory, got a buffer on " +
                     buffer.device().to_string());
}

}  // namespace

Buffer::Buffer() = default;

Buffer Buffer::view(void* data, std::size_t count, DType dtype, Device device) {
  if (count > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))
    invalid_argument("element count " + std::to_string(count) + " exceeds the int64 range");
  return view(data, std::vector<std::int64_t>{static_cast<std::int64_t>(count)}, dtype, device);
}

Buffer Buffer::view(const void* data, std::size_t count, DType dtype, Device device) {
  return view(const_cast<void*>(data), count, dtype, device).as_read_only();
}

Buffer Buffer::view(void* data, std::vector<std::int64_t> shape, DType dtype, Device device,
                    std::vector<std::int64_t> strides, std::int64_t byte_offset,
                    std::shared_ptr<void> owner, bool read_only) {
  if (!known_device_type(device.type))
    invalid_argument("unknown device type " + std::to_string(static_cast<int>(device.type)));
  if (device.id < 0) invalid_argument("negative device index in " + device.to_string());
  const std::size_t count = checked_count(shape, dtype);
  if (data == nullptr && count > 0)
    invalid_argument("null data pointer for a non-empty buffer of shape " + dims_to_string(shape));
  if (!strides.empty() && strides.size() != shape.size())
    invalid_argument("strides " + dims_to_string(strides) + " do not match the " +
                     std::to_string(shape.size()) + " dimensions of shape " +
                     dims_to_string(shape));
  if (byte_offset < 0) invalid_argument("negative byte offset " + std::to_string(byte_offset));
  // Offsets of sub-views (slice) stay below offset + byte size, so they cannot overflow either.
  const auto nbytes =
      static_cast<std::int64_t>(count * dtype_size(dtype));  // bounded by checked_count
  if (byte_offset > std::numeric_limits<std::int64_t>::max() - nbytes)
    invalid_argument("byte offset " + std::to_string(byte_offset) + " plus the view's " +
                     std::to_string(nbytes) + " bytes exceeds the int64 range");

  Buffer buffer;
  buffer.base_ = data;
  buffer.dtype_ = dtype;
  buffer.device_ = device;
  buffer.shape_ = std::move(shape);
  buffer.strides_ = std::move(strides);
  buffer.byte_offset_ = byte_offset;
  buffer.count_ = count;
  buffer.read_only_ = read_only;
  buffer.owner_ = std::move(owner);
  return buffer;
}

Buffer Buffer::allocate(std::size_t count, DType dtype) {
  if (count > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))
    invalid_argument("element count " + std::to_string(count) + " exceeds the int64 range");
  return allocate(std::vector<std::int64_t>{static_cast<std::int64_t>(count)}, dtype);
}

Buffer Buffer::allocate(std::vector<std::int64_t> shape, DType dtype) {
  const std::size_t count = checked_count(shape, dtype);
  std::shared_ptr<void> memory = allocate_zeroed(count * dtype_size(dtype));
  void* data = memory.get();
  return view(data, std::move(shape), dtype, Device::cpu(), {}, 0, std::move(memory));
}

Buffer Buffer::allocate_mappable(std::size_t count, DType dtype) {
  if (count > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))
    invalid_argument("element count " + std::to_string(count) + " exceeds the int64 range");
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(count)};
  const std::size_t nbytes = checked_count(shape, dtype) * dtype_size(dtype);
  std::shared_ptr<void> memory;
  if (nbytes > 0) {
    std::size_t rounded = 0;
    void* base = cohort::allocate_mappable(nbytes, &rounded);
    if (base == nullptr)
      throw system_error("allocating " + std::to_string(nbytes) + " bytes of mappable memory",
                         errno);
    memory = std::shared_ptr<void>(base, cohort::free_mappable);
  }
  void* data = memory.get();
  return view(data, std::move(shape), dtype, Device::cpu(), {}, 0, std::move(memory));
}

std::size_t Buffer::kept_mappable_bytes() noexcept {
  return cached_mappable_bytes();
}

std::size_t Buffer::release_kept_mappable() noexcept {
  return release_cached_mappable();
}

Buffer Buffer::concat(std::span<const Buffer> parts) {
  if (parts.empty()) invalid_argument("concat needs at least one buffer, got 0");
  const Buffer& first = parts[0];
  if (first.ndim() < 1)
    invalid_argument("concat needs buffers with at least one dimension, part 0 is 0-d");
  std::vector<std::int64_t> shape = first.shape();
  std::int64_t rows = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Buffer& part = parts[i];
    const std::string name = "concat part " + std::to_string(i);
    require_host(part, name.c_str());
    part.require_contiguous(name.c_str());
    if (part.dtype() != first.dtype())
      invalid_argument(name + " has dtype " + std::string(dtype_name(part.dtype())) +
                       ", part 0 has " + std::string(dtype_name(first.dtype())));
    if (part.ndim() != first.ndim() ||
        !std::equal(part.shape().begin() + 1, part.shape().end(), shape.begin() + 1))
      invalid_argument(name + " has shape " + dims_to_string(part.shape()) +
                       ", whose trailing dimensions differ from part 0's " + dims_to_string(shape));
    // Empty parts may have any extent (buffer.cpp's views allow it): the sum must still fit.
    if (__builtin_add_overflow(rows, part.shape()[0], &rows))
      invalid_argument("concat: the parts' first dimensions add up past the int64 range (at " +
                       name + ")");
  }
  shape[0] = rows;
  Buffer result = allocate(std::move(shape), first.dtype());
  auto* out = static_cast<char*>(result.data());
  for (const Buffer& part : parts) {
    if (part.nbytes() == 0) continue;
    std::memcpy(out, part.data(), part.nbytes());
    out += part.nbytes();
  }
  return result;
}

bool Buffer::strides_are_contiguous() const noexcept {
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    // A size-1 dimension is never stepped over, so its stride is irrelevant.
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

Buffer Buffer::slice(std::int64_t begin, std::int64_t end) const {
  if (ndim() < 1)
    invalid_argument("slice needs a buffer with at least one dimension, got a 0-d buffer");
  require_contiguous("sliced buffer");
  if (begin < 0 || end < begin || end > shape_[0])
    invalid_argument("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") is out of range for dimension 0 of extent " + std::to_string(shape_[0]));
  Buffer result = *this;
  result.shape_[0] = end - begin;
  result.strides_.clear();  // contiguous, so row-major describes it exactly
  // Every slice of an empty buffer is empty. Its other extents are not bounded (only a non-empty
  // buffer's byte size is), so they are never multiplied; a non-empty one's row is count / rows.
  if (count_ == 0) return result;
  const auto row = static_cast<std::int64_t>(count_) / shape_[0];
  result.count_ = static_cast<std::size_t>(row * (end - begin));
  if (result.count_ > 0)
    result.byte_offset_ += begin * row * static_cast<std::int64_t>(element_size());
  return result;
}

Buffer Buffer::flat() const {
  require_contiguous("flattened buffer");
  Buffer result = *this;
  result.shape_ = {static_cast<std::int64_t>(count_)};
  result.strides_.clear();
  return result;
}

Buffer Buffer::reshape(std::vector<std::int64_t> shape) const {
  require_contiguous("reshaped buffer");
  const std::size_t count = checked_count(shape, dtype_);
  if (count != count_)
    invalid_argument("cannot reshape " + dims_to_string(shape_) + " (" + std::to_string(count_) +
                     " elements) to " + dims_to_string(shape) + " (" + std::to_string(count) +
                     " elements)");
  Buffer result = *this;
  result.shape_ = std::move(shape);
  result.strides_.clear();
  return result;
}

Buffer Buffer::as_read_only() const {
  Buffer result = *this;
  result.read_only_ = true;
  return result;
}

Buffer Buffer::pad(int dim, std::int64_t size, double fill, bool pad_first) const {
  require_host(*this, "pad");
  require_contiguous("padded buffer");
  if (dim < 0 || dim >= ndim())
    invalid_argument("pad dimension " + std::to_string(dim) + " is out of range for a " +
                     std::to_string(ndim()) + "-d buffer");
  const std::int64_t extent = shape_[static_cast<std::size_t>(dim)];
  if (size < extent)
    invalid_argument("pad size " + std::to_string(size) + " is smaller than the extent " +
                     std::to_string(extent) + " of dimension " + std::to_string(dim));

  std::vector<std::int64_t> shape = shape_;
  shape[static_cast<std::size_t>(dim)] = size;
  Buffer result = allocate(shape, dtype_);
  if (result.count() == 0) return result;

  // The buffer is `outer` blocks of [extent x inner] elements; each becomes [size x inner].
  std::size_t outer = 1;
  std::size_t inner = 1;
  for (int i = 0; i < dim; ++i)
    outer *= static_cast<std::size_t>(shape_[static_cast<std::size_t>(i)]);
  for (int i = dim + 1; i < ndim(); ++i)
    inner *= static_cast<std::size_t>(shape_[static_cast<std::size_t>(i)]);
  const std::size_t esize = element_size();
  const std::size_t data_bytes = static_cast<std::size_t>(extent) * inner * esize;
  const std::size_t pad_elements = static_cast<std::size_t>(size - extent) * inner;

  unsigned char fill_bytes[8] = {};
  fp::store_from_double(dtype_, fill_bytes, 0, fill);

  const auto* src = static_cast<const unsigned char*>(data());
  auto* dst = static_cast<unsigned char*>(result.data());
  for (std::size_t block = 0; block < outer; ++block) {
    unsigned char* pad_at = pad_first ? dst : dst + data_bytes;
    unsigned char* data_at = pad_first ? dst + pad_elements * esize : dst;
    if (data_bytes > 0) std::memcpy(data_at, src, data_bytes);
    for (std::size_t i = 0; i < pad_elements; ++i)
      std::memcpy(pad_at + i * esize, fill_bytes, esize);
    src += data_bytes;
    dst += data_bytes + pad_elements * esize;
  }
  return result;
}

void Buffer::require_contiguous(const char* what) const {
  if (!is_contiguous())
    invalid_argument(std::string(what) + " must be contiguous, got shape " +
                     dims_to_string(shape_) + " with strides " + dims_to_string(strides_));
}

}  // namespace cohort
