// What the C ABI's collectives see of a tensor they borrow (capi/tensors.hpp): a cohort_buffer's
// own descriptor brings the buffer itself, its owner included, so an op that fails with a
// transfer still in flight keeps the memory alive past cohort_buffer_destroy (cohort.h, as the
// C++ API keeps Buffer::owner()); any other descriptor is a view that owns nothing.

#include <cohort/cohort.h>
#include <cohort/error.hpp>

#include "capi/tensors.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace {

int deleted = 0;

// A producer's tensor over heap floats whose deleter counts its calls.
DLManagedTensor* counted_tensor(std::int64_t count) {
  struct Owned {
    std::vector<float> data;
    std::int64_t shape;
  };
  auto* owned = new Owned{std::vector<float>(static_cast<std::size_t>(count), 1.5f), count};
  auto* managed = new DLManagedTensor{};
  managed->dl_tensor.data = owned->data.data();
  managed->dl_tensor.device = {kDLCPU, 0};
  managed->dl_tensor.ndim = 1;
  managed->dl_tensor.dtype = {kDLFloat, 32, 1};
  managed->dl_tensor.shape = &owned->shape;
  managed->manager_ctx = owned;
  managed->deleter = [](DLManagedTensor* self) {
    delete static_cast<Owned*>(self->manager_ctx);
    delete self;
    ++deleted;
  };
  return managed;
}

}  // namespace

TEST_CASE(
    "capi borrow: a buffer handle's descriptor keeps the producer's memory alive past the "
    "handle",
    "[capi]") {
  deleted = 0;
  cohort_buffer_t handle = nullptr;
  REQUIRE(cohort_buffer_from_dlpack(counted_tensor(1000), &handle) == COHORT_OK);
  const DLTensor* tensor = nullptr;
  REQUIRE(cohort_buffer_tensor(handle, &tensor) == COHORT_OK);
  {
    const cohort::Buffer borrowed = cohort::capi::borrow(tensor, "test", "out");
    REQUIRE(borrowed.data() == tensor->data);
    REQUIRE(borrowed.count() == 1000);
    REQUIRE(cohort_buffer_destroy(handle) == COHORT_OK);
    // What a failed op hands to the transport is this Buffer's owner: the memory must stay.
    REQUIRE(deleted == 0);
    REQUIRE(borrowed.data_as<const float>()[999] == 1.5f);
  }
  REQUIRE(deleted == 1);
}

TEST_CASE(
    "capi borrow: a read-only buffer's descriptor stays read-only; a caller's copy of the "
    "struct is a plain view",
    "[capi]") {
  deleted = 0;
  DLManagedTensorVersioned* versioned = new DLManagedTensorVersioned{};
  static float data[4] = {1, 2, 3, 4};
  static std::int64_t shape = 4;
  versioned->version.major = COHORT_DLPACK_MAJOR_VERSION;
  versioned->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  versioned->dl_tensor.data = data;
  versioned->dl_tensor.device = {kDLCPU, 0};
  versioned->dl_tensor.ndim = 1;
  versioned->dl_tensor.dtype = {kDLFloat, 32, 1};
  versioned->dl_tensor.shape = &shape;
  versioned->deleter = [](DLManagedTensorVersioned* self) {
    delete self;
    ++deleted;
  };
  cohort_buffer_t handle = nullptr;
  REQUIRE(cohort_buffer_from_dlpack_versioned(versioned, &handle) == COHORT_OK);
  const DLTensor* tensor = nullptr;
  REQUIRE(cohort_buffer_tensor(handle, &tensor) == COHORT_OK);
  REQUIRE(cohort::capi::borrow(tensor, "test", "out").read_only());
  const DLTensor copy = *tensor;
  const cohort::Buffer view = cohort::capi::borrow(&copy, "test", "out");
  REQUIRE_FALSE(view.read_only());
  REQUIRE(view.owner() != cohort::capi::borrow(tensor, "test", "out").owner());
  REQUIRE(cohort_buffer_destroy(handle) == COHORT_OK);
  REQUIRE(deleted == 1);
}
