// DLPack import and export, legacy and versioned: field mapping, ownership (the producer's
// deleter runs exactly once, on success and on every error path) and round trips.

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>
#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using cohort::Buffer;
using cohort::Device;
using cohort::DeviceType;
using cohort::DType;
using cohort::Error;
using cohort::ErrorCode;

namespace {

// A producer's tensor: owns its shape and strides and counts deleter calls.
template <class Managed>
struct FakeTensor {
  Managed managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  int* deletions = nullptr;
};

struct Spec {
  void* data = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // empty: null strides pointer
  std::uint8_t code = 2;              // float
  std::uint8_t bits = 32;
  std::uint16_t lanes = 1;
  int device_type = 1;  // CPU
  int device_id = 0;
  std::uint64_t byte_offset = 0;
  int ndim_override = -100;  // != -100: ndim written regardless of shape
};

template <class Managed>
Managed* make_tensor(const Spec& spec, int* deletions) {
  auto* fake = new FakeTensor<Managed>;
  fake->shape = spec.shape;
  fake->strides = spec.strides;
  fake->deletions = deletions;
  DLTensor& t = fake->managed.dl_tensor;
  t.data = spec.data;
  // Stored as the int32 it is: device types past the enum's range (from newer producers) are not
  // valid values of the C++ enum.
  const std::int32_t device_type = spec.device_type;
  std::memcpy(&t.device.device_type, &device_type, sizeof device_type);
  t.device.device_id = spec.device_id;
  t.ndim = spec.ndim_override != -100 ? spec.ndim_override : static_cast<int>(spec.shape.size());
  t.dtype.code = spec.code;
  t.dtype.bits = spec.bits;
  t.dtype.lanes = spec.lanes;
  t.shape = fake->shape.empty() ? nullptr : fake->shape.data();
  t.strides = fake->strides.empty() ? nullptr : fake->strides.data();
  t.byte_offset = spec.byte_offset;
  fake->managed.manager_ctx = fake;
  fake->managed.deleter = [](Managed* self) {
    auto* owner = static_cast<FakeTensor<Managed>*>(self->manager_ctx);
    ++*owner->deletions;
    delete owner;
  };
  return &fake->managed;
}

DLManagedTensor* make_legacy(const Spec& spec, int* deletions) {
  return make_tensor<DLManagedTensor>(spec, deletions);
}

DLManagedTensorVersioned* make_versioned(const Spec& spec, int* deletions, std::uint32_t major = 1,
                                         std::uint32_t minor = 0, std::uint64_t flags = 0) {
  auto* t = make_tensor<DLManagedTensorVersioned>(spec, deletions);
  t->version.major = major;
  t->version.minor = minor;
  t->flags = flags;
  return t;
}

// Imports a tensor built from `spec` (legacy and versioned in turn) and requires an
// InvalidArgument mentioning `needle`, with the deleter called exactly once each time.
void require_import_rejected(const Spec& spec, const std::string& needle) {
  for (const bool versioned : {false, true}) {
    INFO((versioned ? "versioned" : "legacy") << " import, expecting '" << needle << "'");
    int deletions = 0;
    try {
      if (versioned)
        cohort::from_dlpack(make_versioned(spec, &deletions));
      else
        cohort::from_dlpack(make_legacy(spec, &deletions));
      FAIL("import succeeded");
    } catch (const Error& e) {
      INFO("message: " << e.message());
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(e.message().find(needle) != std::string::npos);
    }
    CHECK(deletions == 1);
  }
}

// DLPack (code, bits) for each dtype, written out from the DLPack 1.1 specification.
struct Expected {
  DType dtype;
  int code;
  int bits;
};
constexpr Expected kSpecCodes[] = {
    {DType::Float32, 2, 32},  {DType::Float64, 2, 64},    {DType::Float16, 2, 16},
    {DType::BFloat16, 4, 16}, {DType::Float8E4M3, 10, 8}, {DType::Float8E5M2, 12, 8},
    {DType::Int8, 0, 8},      {DType::UInt8, 1, 8},       {DType::Int16, 0, 16},
    {DType::Int32, 0, 32},    {DType::Int64, 0, 64},      {DType::UInt32, 1, 32},
    {DType::UInt64, 1, 64},   {DType::Bool, 6, 8},
};

}  // namespace

TEST_CASE("the versioned struct has the DLPack 1.x layout", "[dlpack]") {
  // version (2 x u32), manager_ctx, deleter, flags (u64), then the DLTensor: fixed by the ABI.
  CHECK(offsetof(DLManagedTensorVersioned, version) == 0);
  CHECK(sizeof(DLPackVersion) == 8);
  CHECK(offsetof(DLManagedTensorVersioned, manager_ctx) == 8);
  CHECK(offsetof(DLManagedTensorVersioned, deleter) == 16);
  CHECK(offsetof(DLManagedTensorVersioned, flags) == 24);
  CHECK(offsetof(DLManagedTensorVersioned, dl_tensor) == 32);
  CHECK(DLPACK_FLAG_BITMASK_READ_ONLY == 1);
  CHECK(DLPACK_FLAG_BITMASK_IS_COPIED == 2);
  CHECK(COHORT_DL_BOOL == 6);
  CHECK(COHORT_DL_FLOAT8_E4M3FN == 10);
  CHECK(COHORT_DL_FLOAT8_E5M2 == 12);
}

TEST_CASE("legacy import views the producer's memory and deletes once", "[dlpack]") {
  std::vector<float> data(6, 1.5f);
  int deletions = 0;
  Spec spec;
  spec.data = data.data();
  spec.shape = {2, 3};
  {
    Buffer b = cohort::from_dlpack(make_legacy(spec, &deletions));
    CHECK(b.data() == data.data());
    CHECK(b.shape() == std::vector<std::int64_t>{2, 3});
    CHECK(b.strides().empty());
    CHECK(b.dtype() == DType::Float32);
    CHECK(b.device() == Device::cpu());
    CHECK_FALSE(b.read_only());
    CHECK(b.is_contiguous());
    b.data_as<float>()[4] = -2;  // zero copy: the producer sees the write
    CHECK(data[4] == -2);
    Buffer copy = b;
    Buffer slice = b.slice(1, 2);
    b = Buffer();
    CHECK(deletions == 0);
    copy = Buffer();
    CHECK(deletions == 0);  // the slice still shares the tensor
  }
  CHECK(deletions == 1);
}

TEST_CASE("import honours strides, size-1 dims and byte offset", "[dlpack]") {
  std::vector<std::int32_t> data(64);
  int deletions = 0;
  Spec spec;
  spec.data = data.data();
  spec.code = 0;
  spec.bits = 32;
  SECTION("arbitrary strides on size-1 dims stay contiguous") {
    spec.shape = {3, 1, 4};
    spec.strides = {4, 123, 1};
    Buffer b = cohort::from_dlpack(make_legacy(spec, &deletions));
    CHECK(b.strides() == std::vector<std::int64_t>{4, 123, 1});
    CHECK(b.is_contiguous());
  }
  SECTION("transposed strides are not contiguous") {
    spec.shape = {4, 3};
    spec.strides = {1, 4};
    Buffer b = cohort::from_dlpack(make_versioned(spec, &deletions));
    CHECK_FALSE(b.is_contiguous());
  }
  SECTION("byte offset moves the first element") {
    spec.shape = {5};
    spec.byte_offset = 12;
    Buffer b = cohort::from_dlpack(make_legacy(spec, &deletions));
    CHECK(b.byte_offset() == 12);
    CHECK(b.data() == data.data() + 3);
  }
  SECTION("0-d tensor") {
    spec.shape = {};
    Buffer b = cohort::from_dlpack(make_legacy(spec, &deletions));
    CHECK(b.ndim() == 0);
    CHECK(b.count() == 1);
  }
  SECTION("empty tensor with null data") {
    spec.data = nullptr;
    spec.shape = {0, 7};
    Buffer b = cohort::from_dlpack(make_versioned(spec, &deletions));
    CHECK(b.count() == 0);
    CHECK(b.data() == nullptr);
  }
  CHECK(deletions == 1);
}

TEST_CASE("import maps every dtype code", "[dlpack]") {
  std::uint64_t storage = 0;
  for (const auto& e : kSpecCodes) {
    INFO(cohort::dtype_name(e.dtype));
    int deletions = 0;
    Spec spec;
    spec.data = &storage;
    spec.shape = {1};
    spec.code = static_cast<std::uint8_t>(e.code);
    spec.bits = static_cast<std::uint8_t>(e.bits);
    CHECK(cohort::from_dlpack(make_legacy(spec, &deletions)).dtype() == e.dtype);
    CHECK(cohort::from_dlpack(make_versioned(spec, &deletions, 1, 1)).dtype() == e.dtype);
    CHECK(deletions == 2);
  }
}

TEST_CASE("import keeps CUDA devices without touching the memory", "[dlpack]") {
  // An address that would fault if dereferenced on the host.
  void* const device_pointer = reinterpret_cast<void*>(std::uintptr_t{0xdead0000});
  const struct {
    int code;
    Device device;
  } cases[] = {{2, Device::cuda(3)},
               {3, Device{DeviceType::CUDAHost, 0}},
               {13, Device{DeviceType::CUDAManaged, 1}}};
  for (const auto& c : cases) {
    int deletions = 0;
    Spec spec;
    spec.data = device_pointer;
    spec.shape = {1024, 2};
    spec.code = 4;
    spec.bits = 16;
    spec.device_type = c.code;
    spec.device_id = c.device.id;
    {
      Buffer b = cohort::from_dlpack(make_versioned(spec, &deletions));
      CHECK(b.device() == c.device);
      CHECK(b.data() == device_pointer);
      CHECK(b.dtype() == DType::BFloat16);
      Buffer rows = b.slice(512, 1024);
      CHECK(rows.data() == static_cast<char*>(device_pointer) + 512 * 2 * 2);
    }
    CHECK(deletions == 1);
  }
}

TEST_CASE("import rejects bad tensors after calling the deleter once", "[dlpack]") {
  float x[4] = {};
  Spec good;
  good.data = x;
  good.shape = {4};

  Spec s = good;
  s.lanes = 4;
  require_import_rejected(s, "4 lanes");
  s = good;
  s.code = 5;  // complex
  s.bits = 64;
  require_import_rejected(s, "dtype code 5 with 64 bits");
  s = good;
  s.bits = 8;  // float with 8 bits is not a format
  require_import_rejected(s, "dtype code 2 with 8 bits");
  s = good;
  s.code = 1;  // uint16: no such cohort dtype
  s.bits = 16;
  require_import_rejected(s, "dtype code 1 with 16 bits");
  s = good;
  s.code = 200;
  require_import_rejected(s, "dtype code 200");
  s = good;
  s.shape = {4, -2};
  require_import_rejected(s, "-2");
  s = good;
  s.shape = {std::int64_t{1} << 31, std::int64_t{1} << 31, 4};
  require_import_rejected(s, "overflows");
  s = good;
  s.data = nullptr;
  require_import_rejected(s, "null data");
  s = good;
  s.device_type = 4;  // OpenCL
  require_import_rejected(s, "device type 4");
  s = good;
  s.device_type = 10;  // ROCm
  require_import_rejected(s, "device type 10");
  s = good;
  // Found by test/fuzz/dlpack_import: a type outside DLDeviceType's enumerators was loaded as the
  // enum (undefined behaviour, reported by UBSan) before being rejected.
  s.device_type = 1000000;
  require_import_rejected(s, "device type 1000000");
  s = good;
  s.device_type = 2;
  s.device_id = -1;
  require_import_rejected(s, "device id -1");
  s = good;
  s.byte_offset = std::uint64_t{1} << 63;
  require_import_rejected(s, std::to_string(std::uint64_t{1} << 63));
  s = good;
  s.shape = {};
  s.ndim_override = -3;
  require_import_rejected(s, "ndim -3");
  s = good;
  s.shape = {};
  s.ndim_override = 2;  // ndim 2 with a null shape pointer
  require_import_rejected(s, "null shape");
}

TEST_CASE("null tensors are rejected", "[dlpack]") {
  CHECK_THROWS_AS(cohort::from_dlpack(static_cast<DLManagedTensor*>(nullptr)), Error);
  CHECK_THROWS_AS(cohort::from_dlpack(static_cast<DLManagedTensorVersioned*>(nullptr)), Error);
}

TEST_CASE("a tensor without a deleter imports", "[dlpack]") {
  float x[2] = {3, 4};
  DLManagedTensor t{};
  std::int64_t shape[1] = {2};
  t.dl_tensor.data = x;
  t.dl_tensor.device.device_type = kDLCPU;
  t.dl_tensor.ndim = 1;
  t.dl_tensor.dtype.code = kDLFloat;
  t.dl_tensor.dtype.bits = 32;
  t.dl_tensor.dtype.lanes = 1;
  t.dl_tensor.shape = shape;
  Buffer b = cohort::from_dlpack(&t);
  CHECK(b.data_as<float>()[1] == 4);
}

TEST_CASE("versioned import checks the major version before anything else", "[dlpack]") {
  for (const std::uint32_t major : {0u, 2u, 7u}) {
    int deletions = 0;
    Spec garbage;
    garbage.shape = {};
    garbage.ndim_override = 5;
    garbage.lanes = 9;
    garbage.device_type = 99;
    auto* t = make_versioned(garbage, &deletions, major, 3);
    // Reading the shape would fault; reading dtype or device would report another error.
    t->dl_tensor.shape = reinterpret_cast<std::int64_t*>(std::uintptr_t{8});
    try {
      cohort::from_dlpack(t);
      FAIL("import of major version " << major << " succeeded");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(e.message().find("major version " + std::to_string(major)) != std::string::npos);
    }
    CHECK(deletions == 1);
  }
}

TEST_CASE("versioned import: minor versions and the read-only flag", "[dlpack]") {
  double x[3] = {};
  Spec spec;
  spec.data = x;
  spec.shape = {3};
  spec.code = 2;
  spec.bits = 64;
  int deletions = 0;
  CHECK_FALSE(cohort::from_dlpack(make_versioned(spec, &deletions, 1, 0)).read_only());
  CHECK_FALSE(cohort::from_dlpack(make_versioned(spec, &deletions, 1, 9)).read_only());
  CHECK(cohort::from_dlpack(make_versioned(spec, &deletions, 1, 0, DLPACK_FLAG_BITMASK_READ_ONLY))
            .read_only());
  CHECK_FALSE(
      cohort::from_dlpack(make_versioned(spec, &deletions, 1, 0, DLPACK_FLAG_BITMASK_IS_COPIED))
          .read_only());
  CHECK(deletions == 4);
}

TEST_CASE("legacy export describes the buffer and keeps it alive", "[dlpack]") {
  auto memory = std::make_shared<std::vector<float>>(12);
  std::weak_ptr<std::vector<float>> watch = memory;
  DLManagedTensor* t = nullptr;
  {
    Buffer b = Buffer::view(memory->data(), {4, 3}, DType::Float32, Device::cpu(), {}, 0,
                            std::shared_ptr<void>(memory, memory.get()));
    memory.reset();
    t = cohort::to_dlpack(b.slice(1, 3));
  }
  REQUIRE(t != nullptr);
  CHECK_FALSE(watch.expired());  // only the exported tensor holds it now
  const DLTensor& d = t->dl_tensor;
  CHECK(d.data == watch.lock()->data() + 3);
  CHECK(d.byte_offset == 0);
  CHECK(d.device.device_type == kDLCPU);
  CHECK(d.device.device_id == 0);
  REQUIRE(d.ndim == 2);
  CHECK(d.shape[0] == 2);
  CHECK(d.shape[1] == 3);
  REQUIRE(d.strides != nullptr);
  CHECK(d.strides[0] == 3);
  CHECK(d.strides[1] == 1);
  CHECK(d.dtype.code == kDLFloat);
  CHECK(d.dtype.bits == 32);
  CHECK(d.dtype.lanes == 1);
  REQUIRE(t->deleter != nullptr);
  t->deleter(t);
  CHECK(watch.expired());
}

TEST_CASE("export keeps strides, devices and every dtype", "[dlpack]") {
  std::vector<std::int16_t> v(12);
  Buffer strided = Buffer::view(v.data(), {3, 1, 4}, DType::Int16, Device::cpu(), {1, 77, 3});
  DLManagedTensor* t = cohort::to_dlpack(strided);
  CHECK(t->dl_tensor.strides[0] == 1);
  CHECK(t->dl_tensor.strides[1] == 77);
  CHECK(t->dl_tensor.strides[2] == 3);
  t->deleter(t);

  Buffer gpu = Buffer::view(reinterpret_cast<void*>(std::uintptr_t{0xbeef00}), 8, DType::Float16,
                            Device::cuda(5));
  DLManagedTensorVersioned* g = cohort::to_dlpack_versioned(gpu);
  CHECK(g->dl_tensor.device.device_type == kDLCUDA);
  CHECK(g->dl_tensor.device.device_id == 5);
  CHECK(g->dl_tensor.data == gpu.data());
  g->deleter(g);

  std::uint64_t storage = 0;
  for (const auto& e : kSpecCodes) {
    INFO(cohort::dtype_name(e.dtype));
    DLManagedTensor* l = cohort::to_dlpack(Buffer::view(&storage, 1, e.dtype));
    CHECK(l->dl_tensor.dtype.code == e.code);
    CHECK(l->dl_tensor.dtype.bits == e.bits);
    CHECK(l->dl_tensor.dtype.lanes == 1);
    l->deleter(l);
  }

  Buffer scalar = Buffer::view(&storage, std::vector<std::int64_t>{}, DType::Int64, Device::cpu());
  DLManagedTensor* s = cohort::to_dlpack(scalar);
  CHECK(s->dl_tensor.ndim == 0);
  CHECK(s->dl_tensor.data == &storage);
  s->deleter(s);
  DLManagedTensor* empty = cohort::to_dlpack(Buffer());
  CHECK(empty->dl_tensor.ndim == 1);
  CHECK(empty->dl_tensor.shape[0] == 0);
  CHECK(empty->dl_tensor.data == nullptr);
  empty->deleter(empty);
}

TEST_CASE("export of an empty buffer whose extents multiply past int64", "[dlpack]") {
  // Found by test/fuzz/dlpack_import: the row-major strides were a plain int64 product, which
  // overflowed (undefined behaviour) for [0, 2^40, 2^40]. An empty buffer's strides step over
  // nothing; they saturate at the int64 maximum instead.
  constexpr std::int64_t big = std::int64_t{1} << 40;
  const Buffer empty = Buffer::view(nullptr, {0, big, big}, DType::Float32, Device::cpu());
  REQUIRE(empty.count() == 0);
  DLManagedTensor* t = cohort::to_dlpack(empty);
  CHECK(t->dl_tensor.shape[0] == 0);
  CHECK(t->dl_tensor.strides[2] == 1);
  CHECK(t->dl_tensor.strides[1] == big);
  CHECK(t->dl_tensor.strides[0] == std::numeric_limits<std::int64_t>::max());
  t->deleter(t);
}

TEST_CASE("versioned export sets the version and the read-only flag", "[dlpack]") {
  Buffer b = Buffer::allocate({2, 2}, DType::UInt8);
  DLManagedTensorVersioned* w = cohort::to_dlpack_versioned(b);
  CHECK(w->version.major == 1);
  CHECK(w->version.minor == COHORT_DLPACK_MINOR_VERSION);
  CHECK(w->flags == 0);
  CHECK(w->dl_tensor.data == b.data());
  w->deleter(w);
  DLManagedTensorVersioned* r = cohort::to_dlpack_versioned(b.as_read_only());
  CHECK((r->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  r->deleter(r);
}

TEST_CASE("round trips through both forms share memory and ownership", "[dlpack]") {
  for (const DType dtype : cohort::kAllDTypes) {
    INFO(cohort::dtype_name(dtype));
    Buffer original = Buffer::allocate({3, 5}, dtype);
    std::weak_ptr<void> watch = original.owner();
    Buffer legacy = cohort::from_dlpack(cohort::to_dlpack(original));
    Buffer versioned = cohort::from_dlpack(cohort::to_dlpack_versioned(original.as_read_only()));
    for (const Buffer* b : {&legacy, &versioned}) {
      CHECK(b->data() == original.data());
      CHECK(b->shape() == original.shape());
      CHECK(b->dtype() == dtype);
      CHECK(b->device() == Device::cpu());
      CHECK(b->is_contiguous());
    }
    CHECK_FALSE(legacy.read_only());
    CHECK(versioned.read_only());
    original = Buffer();
    CHECK_FALSE(watch.expired());
    legacy = Buffer();
    CHECK_FALSE(watch.expired());
    versioned = Buffer();
    CHECK(watch.expired());  // the last import released the export, which released the memory
  }
}
