// libFuzzer harness: from_dlpack (include/cohort/dlpack.hpp) on producer tensors with arbitrary
// fields, legacy (DLManagedTensor) and versioned (DLManagedTensorVersioned).
//
// Input (read by fuzz::ByteReader, zeros past the end):
//   u8 mode        bit 0 versioned, bit 1 null deleter, bit 2 null data, bit 3 null shape,
//                  bit 4 null strides
//   u8 code, u8 bits, u16 lanes, u32 device type, u32 device id, u8 ndim (as int8)
//   byte offset, then ndim shape entries and (unless null) ndim strides, each "compact":
//                  u8 k; k < 0x80 is the value k itself, otherwise the next 8 bytes are it
//   versioned only: u32 major, u32 minor, u64 flags
// Data points into a small static array: nothing dereferences it (the Buffer is a view).
//
// Invariants:
// - the import succeeds exactly when the tensor is valid by an independent reading of the DLPack
//   rules cohort documents (dtype table, lanes 1, CPU/CUDA/host/managed device with id >= 0,
//   ndim >= 0 with a shape, extents >= 0 whose byte size fits in int64, data unless empty, byte
//   offset within int64 and, unless empty, so is its sum with the byte size; versioned: major 1);
//   otherwise it throws Error(InvalidArgument);
// - the producer's deleter has run exactly once after a refusal, and not at all while a Buffer
//   (or any copy, or a tensor exported from it) lives; exactly once after the last goes;
// - an accepted Buffer reports the tensor's fields; row slices of a contiguous one have the
//   expected counts and offsets; exporting it (legacy or versioned) and importing that again
//   gives the same view.

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>

#include "fuzz_check.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

using namespace cohort;
using cohort::fuzz::ByteReader;

namespace {

int g_deletions = 0;  // calls of the producer's deleter during the current input
alignas(64) std::uint8_t g_memory[256];

// What the producer allocated; the deleter frees it, as a real producer's would.
template <class Managed>
struct Producer {
  Managed managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

template <class Managed>
void delete_producer(Managed* self) {
  ++g_deletions;
  delete static_cast<Producer<Managed>*>(self->manager_ctx);
}

// DLDeviceType is a C enum that producers fill with any int32 (later DLPack versions add device
// types). C++ may not load or store values outside the enumerators' range as that enum, so the
// field is accessed as the integer it is.
std::int32_t device_type(const DLDevice& device) {
  static_assert(sizeof(DLDeviceType) == sizeof(std::int32_t));
  std::int32_t type;
  std::memcpy(&type, &device.device_type, sizeof type);
  return type;
}

std::int64_t compact(ByteReader& in) {
  const std::uint8_t k = in.u8();
  return k < 0x80 ? k : in.i64();
}

// DLPack 1.1's (code, bits) for each dtype, with its element size, written out from the
// specification rather than taken from lib/core/dlpack.cpp.
struct DTypeRow {
  std::uint8_t code;
  std::uint8_t bits;
  DType dtype;
};
constexpr DTypeRow kDTypes[] = {
    {2, 32, DType::Float32},  {2, 64, DType::Float64},    {2, 16, DType::Float16},
    {4, 16, DType::BFloat16}, {10, 8, DType::Float8E4M3}, {12, 8, DType::Float8E5M2},
    {0, 8, DType::Int8},      {1, 8, DType::UInt8},       {0, 16, DType::Int16},
    {0, 32, DType::Int32},    {0, 64, DType::Int64},      {1, 32, DType::UInt32},
    {1, 64, DType::UInt64},   {6, 8, DType::Bool},
};

std::optional<DTypeRow> dtype_row(const DLDataType& type) {
  for (const DTypeRow& row : kDTypes)
    if (row.code == type.code && row.bits == type.bits) return row;
  return std::nullopt;
}

// The independent reading of the rules: is this tensor one cohort must accept?
bool acceptable(const DLTensor& t, bool versioned, std::uint32_t major) {
  if (versioned && major != 1) return false;
  const auto row = dtype_row(t.dtype);
  if (!row || t.dtype.lanes != 1) return false;
  const int device = device_type(t.device);
  if (device != 1 && device != 2 && device != 3 && device != 13) return false;
  if (t.device.device_id < 0 || t.ndim < 0) return false;
  if (t.ndim > 0 && t.shape == nullptr) return false;
  if (t.byte_offset > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return false;
  bool empty = false;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return false;
    empty = empty || t.shape[i] == 0;
  }
  if (empty) return true;  // no bytes, so no size to overflow and no data needed
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  unsigned __int128 bytes = row->bits / 8;
  for (int i = 0; i < t.ndim; ++i) {
    bytes *= static_cast<std::uint64_t>(t.shape[i]);
    if (bytes > max) return false;
  }
  // Where the view ends must be an int64 byte offset too.
  return t.data != nullptr && t.byte_offset + bytes <= max;
}

void check_view(const Buffer& b, const DLTensor& t, bool read_only, const char* what) {
  const std::string where = std::string(what) + ": ";
  const auto row = dtype_row(t.dtype);
  FUZZ_REQUIRE(row && b.dtype() == row->dtype, where + "dtype differs");
  FUZZ_REQUIRE(static_cast<int>(b.device().type) == device_type(t.device) &&
                   b.device().id == t.device.device_id,
               where + "device differs");
  FUZZ_REQUIRE(b.ndim() == t.ndim, where + "ndim differs");
  std::uint64_t count = 1;
  for (int i = 0; i < t.ndim; ++i) {
    FUZZ_REQUIRE(b.shape()[static_cast<std::size_t>(i)] == t.shape[i], where + "shape differs");
    count *= static_cast<std::uint64_t>(t.shape[i]);
  }
  FUZZ_REQUIRE(b.count() == count, where + "count " + std::to_string(b.count()) + ", expected " +
                                       std::to_string(count));
  if (t.strides == nullptr || t.ndim == 0) {
    FUZZ_REQUIRE(b.strides().empty(), where + "null strides became explicit ones");
  } else {
    FUZZ_REQUIRE(b.strides().size() == static_cast<std::size_t>(t.ndim), where + "stride count");
    for (int i = 0; i < t.ndim; ++i)
      FUZZ_REQUIRE(b.strides()[static_cast<std::size_t>(i)] == t.strides[i],
                   where + "strides differ");
  }
  FUZZ_REQUIRE(b.byte_offset() == static_cast<std::int64_t>(t.byte_offset),
               where + "byte offset differs");
  FUZZ_REQUIRE(b.read_only() == read_only, where + "read-only flag differs");
}

// What a consumer does next with a contiguous import: row slices and a flat view. Only metadata
// changes (nothing is read), so every imported shape can be tried.
void check_slices(const Buffer& b) {
  if (b.ndim() < 1 || !b.is_contiguous()) return;
  const std::int64_t rows = b.shape()[0];
  unsigned __int128 row = 1;  // elements per row, wide enough for any product of two int64s
  for (std::size_t i = 1; i < b.shape().size() && row != 0; ++i)
    row = std::min<unsigned __int128>(row * static_cast<std::uint64_t>(b.shape()[i]),
                                      std::uint64_t{1} << 63);
  for (const std::int64_t begin : {std::int64_t{0}, rows / 2, rows}) {
    const Buffer s = b.slice(begin, rows);
    const unsigned __int128 count = row * static_cast<std::uint64_t>(rows - begin);
    FUZZ_REQUIRE(s.shape()[0] == rows - begin && s.count() == count, "slice count");
    const __int128 offset = b.byte_offset() + static_cast<__int128>(begin * row * b.element_size());
    FUZZ_REQUIRE(count == 0 || s.byte_offset() == offset, "slice byte offset");
  }
  FUZZ_REQUIRE(b.flat().count() == b.count() && b.flat().ndim() == 1, "flat view");
}

// Exports `b`, checks the exported fields, imports the export and checks that view too.
template <class Managed>
void check_export(const Buffer& b) {
  Managed* exported;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>)
    exported = to_dlpack_versioned(b);
  else
    exported = to_dlpack(b);
  const DLTensor& e = exported->dl_tensor;
  FUZZ_REQUIRE(e.data == b.data() && e.byte_offset == 0, "export moved the data pointer");
  FUZZ_REQUIRE(e.ndim == b.ndim(), "export changed ndim");
  FUZZ_REQUIRE(e.ndim == 0 || (e.shape != nullptr && e.strides != nullptr),
               "export left out the shape or strides");
  // Row-major strides in elements, computed here, stand for a Buffer without explicit ones. An
  // empty buffer's strides step over nothing, so any value is right for it.
  std::uint64_t step = 1;  // unsigned: an empty buffer's extents may multiply past int64
  for (std::size_t i = b.shape().size(); i-- > 0;) {
    const std::int64_t want =
        b.strides().empty() ? static_cast<std::int64_t>(step) : b.strides()[i];
    FUZZ_REQUIRE(e.shape[i] == b.shape()[i], "export changed the shape");
    FUZZ_REQUIRE(b.count() == 0 || e.strides[i] == want, "export changed the strides");
    step *= static_cast<std::uint64_t>(b.shape()[i]);
  }
  bool read_only = false;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    FUZZ_REQUIRE(exported->version.major == 1, "export's major version is not 1");
    read_only = b.read_only();
    FUZZ_REQUIRE(((exported->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) == read_only,
                 "export lost the read-only flag");
  }
  DLTensor expected = e;  // the export's own fields, read before from_dlpack owns it
  const std::vector<std::int64_t> shape(e.shape, e.shape + e.ndim);
  const std::vector<std::int64_t> strides(e.strides, e.strides + e.ndim);
  expected.shape = const_cast<std::int64_t*>(shape.data());
  expected.strides = const_cast<std::int64_t*>(strides.data());
  const Buffer again = from_dlpack(exported);
  check_view(again, expected, read_only, "re-imported export");
}

template <class Managed>
void run(ByteReader& in, std::uint8_t mode) {
  auto* producer = new Producer<Managed>;
  DLTensor& t = producer->managed.dl_tensor;
  t.dtype.code = in.u8();
  t.dtype.bits = in.u8();
  t.dtype.lanes = in.u16();
  const std::uint32_t device = in.u32();
  std::memcpy(&t.device.device_type, &device, sizeof device);
  t.device.device_id = static_cast<std::int32_t>(in.u32());
  t.ndim = static_cast<std::int8_t>(in.u8());
  t.byte_offset = static_cast<std::uint64_t>(compact(in));
  t.data = (mode & 4) ? nullptr : g_memory;
  if (t.ndim > 0) {
    producer->shape.resize(static_cast<std::size_t>(t.ndim));
    for (auto& extent : producer->shape) extent = compact(in);
    if (!(mode & 16)) {
      producer->strides.resize(producer->shape.size());
      for (auto& stride : producer->strides) stride = compact(in);
    }
  }
  t.shape = (mode & 8) || producer->shape.empty() ? nullptr : producer->shape.data();
  t.strides = producer->strides.empty() ? nullptr : producer->strides.data();
  constexpr bool versioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  std::uint32_t major = 0;
  bool read_only = false;
  if constexpr (versioned) {
    producer->managed.version.major = major = in.u32();
    producer->managed.version.minor = in.u32();
    producer->managed.flags = in.u64();
    read_only = (producer->managed.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  }
  producer->managed.manager_ctx = producer;
  const bool owned = !(mode & 2);  // a null deleter leaves the memory with the producer
  producer->managed.deleter = owned ? &delete_producer<Managed> : nullptr;
  const bool accept = acceptable(t, versioned, major);
  const DLTensor fields = t;  // what the import must report, readable after a deleter freed t

  g_deletions = 0;
  std::optional<Buffer> buffer;
  try {
    buffer = from_dlpack(&producer->managed);
  } catch (const Error& e) {
    fuzz::require_invalid_argument(e, "from_dlpack");
    FUZZ_REQUIRE(!accept, std::string("refused a valid tensor: ") + e.what());
    FUZZ_REQUIRE(g_deletions == (owned ? 1 : 0),
                 "deleter ran " + std::to_string(g_deletions) + " times after a refusal");
    if (!owned) delete producer;
    return;
  }
  FUZZ_REQUIRE(accept, "accepted an invalid tensor");
  FUZZ_REQUIRE(g_deletions == 0, "deleter ran while the Buffer lives");
  check_view(*buffer, fields, read_only, "import");

  // Buffers are handles: the producer lives until the last copy, or export of one, is gone.
  {
    const Buffer copy = *buffer;
    buffer.reset();
    FUZZ_REQUIRE(g_deletions == 0, "deleter ran while a copy of the Buffer lives");
    check_slices(copy);
    if (fields.byte_offset <= sizeof g_memory) {  // data() stays a pointer into g_memory
      check_export<DLManagedTensor>(copy);
      check_export<DLManagedTensorVersioned>(copy);
    }
    FUZZ_REQUIRE(g_deletions == 0, "deleter ran while a copy of the Buffer lives");
  }
  FUZZ_REQUIRE(g_deletions == (owned ? 1 : 0),
               "deleter ran " + std::to_string(g_deletions) + " times after the last Buffer");
  if (!owned) delete producer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::uint8_t mode = in.u8();
  if (mode & 1)
    run<DLManagedTensorVersioned>(in, mode);
  else
    run<DLManagedTensor>(in, mode);
  return 0;
}
