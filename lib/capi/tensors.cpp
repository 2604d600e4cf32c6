// DLTensor -> Buffer for the C ABI's borrowed arguments.
//
// The core's from_dlpack() is the one place that maps DLPack dtypes and devices to cohort's, so a
// borrowed tensor goes through it too: its descriptor is copied into a small managed tensor that
// owns nothing but itself (its deleter frees only that copy, never the caller's data). The
// resulting Buffer keeps that copy alive, which is harmless, and the caller's shape and strides
// arrays are not read after the call. A cohort_buffer's own descriptor gives that buffer instead
// (buffer_descriptors.hpp).

#include "capi/tensors.hpp"

#include "capi/buffer_descriptors.hpp"
#include "capi/status.hpp"

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>
#include <cohort/error.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cohort::capi {
namespace {

void delete_descriptor_copy(DLManagedTensor* self) {
  delete self;
}

std::string where(const char* function, const char* role) {
  return std::string(function) + ": " + role;
}

}  // namespace

Buffer borrow(const DLTensor* tensor, const char* function, const char* role) {
  if (tensor == nullptr) invalid_argument(function, std::string(role) + " tensor is NULL");
  // A buffer handle's own descriptor: the buffer itself, owner and read-only flag included.
  if (std::optional<Buffer> own = buffer_of_descriptor(tensor)) return *std::move(own);
  auto copy = std::make_unique<DLManagedTensor>();
  copy->dl_tensor = *tensor;
  copy->manager_ctx = nullptr;
  copy->deleter = delete_descriptor_copy;
  try {
    // from_dlpack owns the copy from here on, on success and failure alike.
    return from_dlpack(copy.release());
  } catch (const Error& e) {
    throw Error(e.code(), where(function, role) + " tensor: " + e.message());
  }
}

Buffer borrow_or_empty(const DLTensor* tensor, const char* function, const char* role) {
  return tensor == nullptr ? Buffer() : borrow(tensor, function, role);
}

Buffer block(const Buffer& whole, std::size_t offset, std::size_t count, const char* function,
             const char* role) {
  if (!whole.is_contiguous()) {
    invalid_argument(function, std::string(role) +
                                   " is not contiguous, so it has no in-place block; pass a "
                                   "contiguous tensor");
  }
  if (offset > whole.count() || count > whole.count() - offset) {
    invalid_argument(function, std::string(role) + " has " + std::to_string(whole.count()) +
                                   " elements; the in-place block [" + std::to_string(offset) +
                                   ", " + std::to_string(offset + count) + ") does not fit");
  }
  return whole.flat().slice(static_cast<std::int64_t>(offset),
                            static_cast<std::int64_t>(offset + count));
}

Buffer uniform_block(const Buffer& whole, int rank, int size, const char* function,
                     const char* role) {
  const auto ranks = static_cast<std::size_t>(size);
  if (whole.count() % ranks != 0) {
    invalid_argument(function, "in place needs the " + std::string(role) + " count (" +
                                   std::to_string(whole.count()) +
                                   ") to be divisible by the communicator size " +
                                   std::to_string(size));
  }
  const std::size_t count = whole.count() / ranks;
  return block(whole, count * static_cast<std::size_t>(rank), count, function, role);
}

Buffer counts_block(const Buffer& whole, std::span<const std::size_t> counts, int rank,
                    const char* function, const char* role) {
  const auto me = static_cast<std::size_t>(rank);
  if (counts.size() <= me) {
    invalid_argument(function, "counts has " + std::to_string(counts.size()) +
                                   " entries, too few to locate rank " + std::to_string(rank) +
                                   "'s in-place block");
  }
  std::size_t offset = 0;
  for (std::size_t r = 0; r < me; ++r) {
    if (counts[r] > whole.count() - offset) {
      invalid_argument(function, "the counts before rank " + std::to_string(rank) + " exceed the " +
                                     role + "'s " + std::to_string(whole.count()) + " elements");
    }
    offset += counts[r];
  }
  return block(whole, offset, counts[me], function, role);
}

std::span<const std::size_t> counts_of(const std::size_t* counts, std::size_t length,
                                       const char* function, const char* name) {
  if (counts == nullptr && length != 0) {
    invalid_argument(function,
                     std::string(name) + " is NULL but its length is " + std::to_string(length));
  }
  if (counts == nullptr) return {};
  return {counts, length};
}

}  // namespace cohort::capi
