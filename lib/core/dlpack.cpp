#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>

#include <cohort/error.hpp>
#include "core/dlpack_dtype.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/invalid_argument.hpp"

namespace cohort {
namespace {

struct DTypeCode {
  DType dtype;
  std::uint8_t code;
  std::uint8_t bits;
};

// The one table between cohort dtypes and DLPack (code, bits).
constexpr DTypeCode kDTypeCodes[] = {
    {DType::Float32, kDLFloat, 32},
    {DType::Float64, kDLFloat, 64},
    {DType::Float16, kDLFloat, 16},
    {DType::BFloat16, kDLBfloat, 16},
    {DType::Float8E4M3, COHORT_DL_FLOAT8_E4M3FN, 8},
    {DType::Float8E5M2, COHORT_DL_FLOAT8_E5M2, 8},
    {DType::Int8, kDLInt, 8},
    {DType::UInt8, kDLUInt, 8},
    {DType::Int16, kDLInt, 16},
    {DType::Int32, kDLInt, 32},
    {DType::Int64, kDLInt, 64},
    {DType::UInt32, kDLUInt, 32},
    {DType::UInt64, kDLUInt, 64},
    {DType::Bool, COHORT_DL_BOOL, 8},
};

}  // namespace

DType dtype_from_dl(const DLDataType& type) {
  if (type.lanes != 1)
    invalid_argument("DLPack tensor has " + std::to_string(type.lanes) +
                     " lanes per element; only scalar elements (lanes 1) are supported");
  for (const auto& entry : kDTypeCodes)
    if (entry.code == type.code && entry.bits == type.bits) return entry.dtype;
  invalid_argument("unsupported DLPack dtype code " + std::to_string(type.code) + " with " +
                   std::to_string(type.bits) + " bits");
}

namespace {

DLDataType dtype_to_dl(DType dtype) {
  for (const auto& entry : kDTypeCodes)
    if (entry.dtype == dtype) return DLDataType{entry.code, entry.bits, 1};
  invalid_argument("dtype " + std::string(dtype_name(dtype)) + " has no DLPack type code");
}

Device device_from_dl(const DLDevice& device) {
  // DLDeviceType is a C enum that producers fill with any int32 (later DLPack versions add device
  // types); loading a value outside its enumerators' range as the enum is undefined in C++, so
  // the field is read as the integer it is.
  static_assert(sizeof(DLDeviceType) == sizeof(std::int32_t));
  std::int32_t type;
  std::memcpy(&type, &device.device_type, sizeof type);
  const int id = static_cast<int>(device.device_id);
  if (id < 0) invalid_argument("DLPack tensor has negative device id " + std::to_string(id));
  switch (type) {
    case kDLCPU: return Device{DeviceType::CPU, id};
    case kDLCUDA: return Device{DeviceType::CUDA, id};
    case kDLCUDAHost: return Device{DeviceType::CUDAHost, id};
    case kDLCUDAManaged: return Device{DeviceType::CUDAManaged, id};
    default: break;
  }
  invalid_argument(
      "unsupported DLPack device type " + std::to_string(type) + " (device id " +
      std::to_string(id) +
      "); cohort accepts CPU (1), CUDA (2), CUDA host (3) and CUDA managed (13) memory");
}

// Reads a DLTensor into a Buffer that keeps `owner` (the producer's managed tensor) alive. Any
// exception releases `owner`, which is how every error path calls the deleter exactly once.
Buffer buffer_from_dl(const DLTensor& tensor, std::shared_ptr<void> owner, bool read_only) {
  const DType dtype = dtype_from_dl(tensor.dtype);
  const Device device = device_from_dl(tensor.device);
  if (tensor.ndim < 0)
    invalid_argument("DLPack tensor has negative ndim " + std::to_string(tensor.ndim));
  if (tensor.ndim > 0 && tensor.shape == nullptr)
    invalid_argument("DLPack tensor has ndim " + std::to_string(tensor.ndim) + " but a null shape");
  if (tensor.byte_offset > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    invalid_argument("DLPack byte offset " + std::to_string(tensor.byte_offset) +
                     " exceeds the int64 range");
  const auto ndim = static_cast<std::size_t>(tensor.ndim);
  std::vector<std::int64_t> shape(tensor.shape, tensor.shape + ndim);
  // Null strides (allowed before DLPack 1.1) mean compact row-major, as do our empty strides.
  std::vector<std::int64_t> strides;
  if (tensor.strides != nullptr && ndim > 0) strides.assign(tensor.strides, tensor.strides + ndim);
  // Buffer::view validates shape signs, overflow and null data with a non-empty shape.
  return Buffer::view(tensor.data, std::move(shape), dtype, device, std::move(strides),
                      static_cast<std::int64_t>(tensor.byte_offset), std::move(owner), read_only);
}

template <class Managed>
std::shared_ptr<void> adopt(Managed* tensor) {
  // shared_ptr calls the lambda even if allocating its control block throws.
  return std::shared_ptr<void>(tensor, [](void* pointer) {
    auto* managed = static_cast<Managed*>(pointer);
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
}

// Everything an exported tensor points into, freed by the consumer through the deleter.
template <class Managed>
struct ExportContext {
  Managed managed{};
  Buffer buffer;  // keeps the memory (and its owner) alive
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

template <class Managed>
Managed* export_buffer(const Buffer& buffer) {
  auto context = std::make_unique<ExportContext<Managed>>();
  context->buffer = buffer;
  context->shape = buffer.shape();
  // Always emit strides: DLPack 1.1 forbids null strides for ndim > 0.
  if (buffer.strides().empty()) {
    // Row-major. Only a non-empty buffer's extents are known to multiply within int64 (Buffer
    // bounds its byte size); an empty one's may not, and its strides step over nothing, so there
    // the product saturates instead of overflowing.
    context->strides.resize(context->shape.size());
    std::int64_t step = 1;
    for (std::size_t i = context->shape.size(); i-- > 0;) {
      context->strides[i] = step;
      if (__builtin_mul_overflow(step, context->shape[i], &step))
        step = std::numeric_limits<std::int64_t>::max();
    }
  } else {
    context->strides = buffer.strides();
  }
  DLTensor& tensor = context->managed.dl_tensor;
  // The byte offset is folded into the pointer: several consumers ignore byte_offset.
  tensor.data = buffer.data();
  tensor.device = DLDevice{static_cast<DLDeviceType>(buffer.device().type), buffer.device().id};
  tensor.ndim = static_cast<decltype(tensor.ndim)>(context->shape.size());
  tensor.dtype = dtype_to_dl(buffer.dtype());
  tensor.shape = context->shape.empty() ? nullptr : context->shape.data();
  tensor.strides = context->strides.empty() ? nullptr : context->strides.data();
  tensor.byte_offset = 0;
  context->managed.manager_ctx = context.get();
  context->managed.deleter = [](Managed* self) {
    delete static_cast<ExportContext<Managed>*>(self->manager_ctx);
  };
  return &context.release()->managed;
}

}  // namespace

Buffer from_dlpack(DLManagedTensor* tensor) {
  if (tensor == nullptr) invalid_argument("from_dlpack got a null DLManagedTensor");
  std::shared_ptr<void> owner = adopt(tensor);
  return buffer_from_dl(tensor->dl_tensor, std::move(owner), false);
}

Buffer from_dlpack(DLManagedTensorVersioned* tensor) {
  if (tensor == nullptr) invalid_argument("from_dlpack got a null DLManagedTensorVersioned");
  std::shared_ptr<void> owner = adopt(tensor);
  // Only the version and the deleter may be read before the major version is known to match.
  const std::uint32_t major = tensor->version.major;
  if (major != COHORT_DLPACK_MAJOR_VERSION)
    invalid_argument("DLPack tensor has major version " + std::to_string(major) + "." +
                     std::to_string(tensor->version.minor) + "; cohort supports major version " +
                     std::to_string(COHORT_DLPACK_MAJOR_VERSION));
  const bool read_only = (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return buffer_from_dl(tensor->dl_tensor, std::move(owner), read_only);
}

DLManagedTensor* to_dlpack(const Buffer& buffer) {
  return export_buffer<DLManagedTensor>(buffer);
}

DLManagedTensorVersioned* to_dlpack_versioned(const Buffer& buffer) {
  DLManagedTensorVersioned* tensor = export_buffer<DLManagedTensorVersioned>(buffer);
  tensor->version = DLPackVersion{COHORT_DLPACK_MAJOR_VERSION, COHORT_DLPACK_MINOR_VERSION};
  tensor->flags = buffer.read_only() ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return tensor;
}

}  // namespace cohort
