// C ABI: buffers imported from and exported to DLPack. Ownership follows the core's from_dlpack
// and to_dlpack (cohort/dlpack.hpp): an imported tensor's deleter runs exactly once, on every
// error path too, and an export keeps the memory alive until its own deleter runs.

#include "capi/handles.hpp"
#include "capi/status.hpp"
#include "core/dlpack_dtype.hpp"

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>

#include <memory>

using cohort::capi::buffer_of;
using cohort::capi::guarded;
using cohort::capi::require_out;

namespace {

// Sets *out to NULL up front so that every failure leaves it NULL.
template <class T>
void clear(T** out) {
  if (out != nullptr) *out = nullptr;
}

// Adopts `tensor` into a new handle. from_dlpack takes ownership before anything else can fail,
// so a NULL `buffer` out-parameter is checked after the import: the tensor is released then too.
template <class Managed>
cohort_status_t import(const char* fn, Managed* tensor, cohort_buffer_t* buffer) {
  clear(buffer);
  return guarded(fn, [&] {
    if (tensor == nullptr) cohort::capi::invalid_argument(fn, "tensor is NULL");
    auto handle = std::make_unique<cohort_buffer>(cohort::from_dlpack(tensor));
    require_out(buffer, fn, "buffer");
    *buffer = handle.release();
  });
}

}  // namespace

extern "C" {

cohort_status_t cohort_buffer_from_dlpack(DLManagedTensor* tensor, cohort_buffer_t* buffer) {
  return import("cohort_buffer_from_dlpack", tensor, buffer);
}

cohort_status_t cohort_buffer_from_dlpack_versioned(DLManagedTensorVersioned* tensor,
                                                    cohort_buffer_t* buffer) {
  return import("cohort_buffer_from_dlpack_versioned", tensor, buffer);
}

cohort_status_t cohort_buffer_allocate_mappable(int64_t count, DLDataType dtype,
                                                cohort_buffer_t* buffer) {
  constexpr const char* fn = "cohort_buffer_allocate_mappable";
  clear(buffer);
  return guarded(fn, [&] {
    require_out(buffer, fn, "buffer");
    if (count < 0)
      cohort::capi::invalid_argument(fn, "count is negative (" + std::to_string(count) + ")");
    auto handle = std::make_unique<cohort_buffer>(cohort::Buffer::allocate_mappable(
        static_cast<std::size_t>(count), cohort::dtype_from_dl(dtype)));
    *buffer = handle.release();
  });
}

cohort_status_t cohort_buffer_kept_mappable_bytes(size_t* bytes) {
  constexpr const char* fn = "cohort_buffer_kept_mappable_bytes";
  return guarded(fn, [&] {
    require_out(bytes, fn, "bytes");
    *bytes = cohort::Buffer::kept_mappable_bytes();
  });
}

cohort_status_t cohort_buffer_release_kept_mappable(size_t* released_bytes) {
  constexpr const char* fn = "cohort_buffer_release_kept_mappable";
  return guarded(fn, [&] {
    const std::size_t released = cohort::Buffer::release_kept_mappable();
    if (released_bytes != nullptr) *released_bytes = released;
  });
}

cohort_status_t cohort_buffer_tensor(cohort_buffer_t buffer, const DLTensor** tensor) {
  constexpr const char* fn = "cohort_buffer_tensor";
  return guarded(fn, [&] {
    const cohort_buffer& b = buffer_of(buffer, fn);
    require_out(tensor, fn, "tensor");
    *tensor = &b.descriptor->dl_tensor;
  });
}

cohort_status_t cohort_buffer_is_read_only(cohort_buffer_t buffer, int* read_only) {
  constexpr const char* fn = "cohort_buffer_is_read_only";
  return guarded(fn, [&] {
    const cohort_buffer& b = buffer_of(buffer, fn);
    require_out(read_only, fn, "read_only");
    *read_only = b.buffer.read_only() ? 1 : 0;
  });
}

cohort_status_t cohort_buffer_to_dlpack(cohort_buffer_t buffer, DLManagedTensor** tensor) {
  constexpr const char* fn = "cohort_buffer_to_dlpack";
  clear(tensor);
  return guarded(fn, [&] {
    const cohort_buffer& b = buffer_of(buffer, fn);
    require_out(tensor, fn, "tensor");
    // A legacy tensor cannot say that its memory must not be written (the Python module
    // refuses the same export).
    if (b.buffer.read_only())
      throw cohort::Error(cohort::ErrorCode::InvalidArgument,
                          std::string(fn) +
                              ": the buffer is read-only, which a legacy DLManagedTensor cannot "
                              "signal; use cohort_buffer_to_dlpack_versioned");
    *tensor = cohort::to_dlpack(b.buffer);
  });
}

cohort_status_t cohort_buffer_to_dlpack_versioned(cohort_buffer_t buffer,
                                                  DLManagedTensorVersioned** tensor) {
  constexpr const char* fn = "cohort_buffer_to_dlpack_versioned";
  clear(tensor);
  return guarded(fn, [&] {
    const cohort_buffer& b = buffer_of(buffer, fn);
    require_out(tensor, fn, "tensor");
    *tensor = cohort::to_dlpack_versioned(b.buffer);
  });
}

cohort_status_t cohort_buffer_destroy(cohort_buffer_t buffer) {
  delete buffer;  // destructors never throw
  return COHORT_OK;
}

}  // extern "C"
