// Buffer: views, owning allocations, slicing, concatenation, padding and argument errors.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

using cohort::Buffer;
using cohort::Device;
using cohort::DeviceType;
using cohort::DType;
using cohort::Error;
using cohort::ErrorCode;

namespace {

// Runs `fn`, requires an InvalidArgument whose message contains `needle`.
template <class Fn>
void require_invalid(Fn&& fn, const std::string& needle) {
  try {
    fn();
    FAIL("expected InvalidArgument mentioning '" << needle << "'");
  } catch (const Error& e) {
    INFO("message: " << e.message());
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(e.message().find(needle) != std::string::npos);
  }
}

std::vector<float> contents(const Buffer& b) {
  const float* p = b.data_as<float>();
  return std::vector<float>(p, p + b.count());
}

Buffer iota_2d(std::int64_t rows, std::int64_t cols) {
  Buffer b = Buffer::allocate({rows, cols}, DType::Float32);
  float* p = b.data_as<float>();
  for (std::size_t i = 0; i < b.count(); ++i) p[i] = static_cast<float>(i + 1);
  return b;
}

}  // namespace

TEST_CASE("default buffer is an empty float32 view on the CPU", "[buffer]") {
  Buffer b;
  CHECK(b.data() == nullptr);
  CHECK(b.dtype() == DType::Float32);
  CHECK(b.device() == Device::cpu());
  CHECK(b.shape() == std::vector<std::int64_t>{0});
  CHECK(b.count() == 0);
  CHECK(b.nbytes() == 0);
  CHECK(b.is_contiguous());
  CHECK_FALSE(b.read_only());
}

TEST_CASE("1-D views describe caller memory without copying", "[buffer]") {
  std::vector<std::int32_t> v(7, 3);
  Buffer b = Buffer::view(v.data(), v.size(), DType::Int32);
  CHECK(b.data() == v.data());
  CHECK(b.count() == 7);
  CHECK(b.nbytes() == 28);
  CHECK(b.element_size() == 4);
  CHECK(b.ndim() == 1);
  CHECK(b.shape() == std::vector<std::int64_t>{7});
  CHECK(b.owner() == nullptr);
  CHECK_FALSE(b.read_only());
  b.data_as<std::int32_t>()[2] = 42;
  CHECK(v[2] == 42);

  const std::vector<std::int32_t>& cv = v;
  Buffer ro = Buffer::view(static_cast<const void*>(cv.data()), cv.size(), DType::Int32);
  CHECK(ro.read_only());
  CHECK(ro.data() == v.data());

  Buffer on_gpu =
      Buffer::view(reinterpret_cast<void*>(0x1000), 16, DType::Float16, Device::cuda(3));
  CHECK(on_gpu.device() == Device{DeviceType::CUDA, 3});
  CHECK_FALSE(on_gpu.device().host_accessible());
}

TEST_CASE("N-D views honour strides, byte offset and owner", "[buffer]") {
  std::vector<double> v(24);
  std::iota(v.begin(), v.end(), 0.0);
  auto owner = std::make_shared<int>(5);
  std::weak_ptr<int> watch = owner;
  {
    Buffer b = Buffer::view(v.data(), {2, 3}, DType::Float64, Device::cpu(), {}, 16,
                            std::shared_ptr<void>(owner), false);
    owner.reset();
    CHECK_FALSE(watch.expired());  // the buffer keeps its owner alive
    CHECK(b.byte_offset() == 16);
    CHECK(b.data() == v.data() + 2);
    CHECK(*b.data_as<double>() == 2.0);
    CHECK(b.count() == 6);
    CHECK(b.is_contiguous());
    Buffer copy = b;  // copies share the owner
    CHECK(copy.owner() == b.owner());
  }
  CHECK(watch.expired());

  // A transposed 3x2 view of a 2x3 row-major matrix.
  Buffer t = Buffer::view(v.data(), {3, 2}, DType::Float64, Device::cpu(), {1, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.strides() == std::vector<std::int64_t>{1, 3});
  // Explicit row-major strides are contiguous.
  CHECK(
      Buffer::view(v.data(), {2, 3, 4}, DType::Float64, Device::cpu(), {12, 4, 1}).is_contiguous());
  // Size-1 dimensions may carry any stride (torch exports such strides).
  CHECK(
      Buffer::view(v.data(), {1, 3, 1}, DType::Float64, Device::cpu(), {99, 1, 7}).is_contiguous());
  CHECK(
      Buffer::view(v.data(), {4, 1, 6}, DType::Float64, Device::cpu(), {6, 1, 1}).is_contiguous());
  CHECK_FALSE(
      Buffer::view(v.data(), {2, 1, 6}, DType::Float64, Device::cpu(), {12, 6, 1}).is_contiguous());
  // No elements means nothing to step over.
  CHECK(Buffer::view(nullptr, {0, 3}, DType::Float64, Device::cpu(), {1, 5}).is_contiguous());
  // A 0-d view holds one element.
  Buffer scalar =
      Buffer::view(v.data(), std::vector<std::int64_t>{}, DType::Float64, Device::cpu());
  CHECK(scalar.ndim() == 0);
  CHECK(scalar.count() == 1);
}

TEST_CASE("view rejects bad arguments naming the value", "[buffer]") {
  float x = 0;
  require_invalid([] { Buffer::view(static_cast<void*>(nullptr), 3, DType::Float32); },
                  "null data");
  CHECK(Buffer::view(static_cast<void*>(nullptr), 0, DType::Float32).count() == 0);
  require_invalid([&] { Buffer::view(&x, {2, -3}, DType::Float32, Device::cpu()); }, "-3");
  require_invalid(
      [&] {
        Buffer::view(&x, {std::int64_t{1} << 40, std::int64_t{1} << 40}, DType::Float32,
                     Device::cpu());
      },
      "overflows");
  require_invalid(
      [&] {
        Buffer::view(&x, std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max() / 4},
                     DType::Float64, Device::cpu());
      },
      "overflows");
  require_invalid(
      [&] {
        Buffer::view(&x, {2, 3}, DType::Float32, Device::cpu(), {3});
      },
      "strides [3]");
  require_invalid([&] { Buffer::view(&x, {1}, DType::Float32, Device::cpu(), {}, -8); }, "-8");
  require_invalid(
      [&] {
        Buffer::view(&x, 1, DType::Float32, Device{static_cast<DeviceType>(7), 0});
      },
      "device type 7");
  require_invalid([&] { Buffer::view(&x, 1, DType::Float32, Device::cuda(-1)); }, "cuda:-1");
  require_invalid([&] { Buffer::view(&x, std::numeric_limits<std::size_t>::max(), DType::UInt8); },
                  std::to_string(std::numeric_limits<std::size_t>::max()));
}

TEST_CASE("allocate returns zeroed 64-byte-aligned host memory", "[buffer]") {
  for (const DType dtype : cohort::kAllDTypes) {
    for (const std::size_t count : {1u, 3u, 17u, 1000u}) {
      Buffer b = Buffer::allocate(count, dtype);
      INFO(cohort::dtype_name(dtype) << " x " << count);
      REQUIRE(b.data() != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 64 == 0);
      CHECK(b.count() == count);
      CHECK(b.dtype() == dtype);
      CHECK(b.device() == Device::cpu());
      CHECK(b.owner() != nullptr);
      const auto* bytes = static_cast<const unsigned char*>(b.data());
      bool all_zero = true;
      for (std::size_t i = 0; i < b.nbytes(); ++i) all_zero = all_zero && bytes[i] == 0;
      CHECK(all_zero);
    }
  }
  Buffer m = Buffer::allocate({4, 5, 6}, DType::Int16);
  CHECK(m.shape() == std::vector<std::int64_t>{4, 5, 6});
  CHECK(m.count() == 120);
  CHECK(m.nbytes() == 240);
  Buffer none = Buffer::allocate(0, DType::Float32);
  CHECK(none.count() == 0);
  CHECK(none.data() == nullptr);
  require_invalid([] { Buffer::allocate({3, -1}, DType::Float32); }, "-1");
}

TEST_CASE("slices of an empty buffer whose other extents multiply past int64", "[buffer]") {
  // Found by test/fuzz/dlpack_import: slice() multiplied the trailing extents into a row size,
  // which overflowed (undefined behaviour) for [0, 2^40, 2^40]; an empty buffer's extents are not
  // bounded the way a non-empty one's byte size is.
  constexpr std::int64_t big = std::int64_t{1} << 40;
  const Buffer empty = Buffer::view(nullptr, {0, big, big}, DType::Float64, Device::cpu());
  const Buffer s = empty.slice(0, 0);
  CHECK(s.shape() == std::vector<std::int64_t>{0, big, big});
  CHECK(s.count() == 0);
  CHECK(s.byte_offset() == 0);
  // Rows of zero elements: any slice is empty and stays at the buffer's offset.
  const Buffer rows = Buffer::view(nullptr, {4, 0, big}, DType::Float64, Device::cpu());
  const Buffer r = rows.slice(1, 3);
  CHECK(r.shape() == std::vector<std::int64_t>{2, 0, big});
  CHECK(r.count() == 0);
  CHECK(r.byte_offset() == 0);
}

TEST_CASE("a view's byte offset plus its size must fit in int64", "[buffer]") {
  // Found by test/fuzz/dlpack_import: a view at offset 2^63 - 55 accepted, then slice() added the
  // rows' bytes to that offset and overflowed (undefined behaviour).
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const auto at = [](std::int64_t offset) {
    return Buffer::view(reinterpret_cast<void*>(0x1000), {4, 2}, DType::Float32, Device::cpu(), {},
                        offset);
  };
  // 8 floats are 32 bytes: the last offset that fits is max - 32.
  const Buffer last = at(max - 32);
  CHECK(last.slice(3, 4).byte_offset() == max - 8);
  require_invalid([&] { at(max - 31); }, "exceeds the int64 range");
  require_invalid([&] { at(max); }, std::to_string(max));
  // An empty view has no bytes to place: any non-negative offset is accepted.
  CHECK(Buffer::view(nullptr, {0, 4}, DType::Float32, Device::cpu(), {}, max).byte_offset() == max);
}

TEST_CASE("slice shares memory along dim 0", "[buffer]") {
  Buffer b = iota_2d(5, 3);
  Buffer s = b.slice(1, 4);
  CHECK(s.shape() == std::vector<std::int64_t>{3, 3});
  CHECK(s.count() == 9);
  CHECK(s.data() == b.data_as<float>() + 3);
  CHECK(s.owner() == b.owner());
  CHECK(contents(s) == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 12});
  s.data_as<float>()[0] = -1;
  CHECK(b.data_as<float>()[3] == -1);
  // Slices of slices accumulate the offset.
  Buffer ss = s.slice(2, 3);
  CHECK(ss.data() == b.data_as<float>() + 9);
  CHECK(ss.byte_offset() == 36);
  CHECK(b.slice(5, 5).count() == 0);
  CHECK(b.slice(0, 5).data() == b.data());
  // Read-only and device survive slicing.
  CHECK(b.as_read_only().slice(0, 1).read_only());
  Buffer gpu =
      Buffer::view(reinterpret_cast<void*>(0x10000), {8, 2}, DType::Float32, Device::cuda(1));
  Buffer gs = gpu.slice(2, 4);
  CHECK(gs.device() == Device::cuda(1));
  CHECK(gs.data() == reinterpret_cast<char*>(0x10000) + 16);

  require_invalid([&] { b.slice(2, 6); }, "[2, 6)");
  require_invalid([&] { b.slice(3, 2); }, "[3, 2)");
  require_invalid([&] { b.slice(-1, 2); }, "[-1, 2)");
  std::vector<float> v(12);
  Buffer strided = Buffer::view(v.data(), {3, 2}, DType::Float32, Device::cpu(), {1, 3});
  require_invalid([&] { strided.slice(0, 1); }, "strides [1, 3]");
  Buffer scalar =
      Buffer::view(v.data(), std::vector<std::int64_t>{}, DType::Float32, Device::cpu());
  require_invalid([&] { scalar.slice(0, 1); }, "0-d");
}

TEST_CASE("flat and reshape reinterpret contiguous memory", "[buffer]") {
  Buffer b = iota_2d(4, 6);
  Buffer f = b.flat();
  CHECK(f.shape() == std::vector<std::int64_t>{24});
  CHECK(f.data() == b.data());
  Buffer r = b.reshape({2, 3, 4});
  CHECK(r.shape() == std::vector<std::int64_t>{2, 3, 4});
  CHECK(r.data() == b.data());
  CHECK(r.count() == 24);
  require_invalid([&] { b.reshape({5, 5}); }, "[5, 5]");
  std::vector<float> v(12);
  Buffer strided = Buffer::view(v.data(), {3, 2}, DType::Float32, Device::cpu(), {1, 3});
  require_invalid([&] { strided.flat(); }, "flattened buffer");
  require_invalid([&] { strided.reshape({6}); }, "reshaped buffer");
}

TEST_CASE("as_read_only marks the handle, not the memory", "[buffer]") {
  Buffer b = iota_2d(2, 2);
  Buffer ro = b.as_read_only();
  CHECK(ro.read_only());
  CHECK_FALSE(b.read_only());
  CHECK(ro.data() == b.data());
  Buffer v = Buffer::view(b.data(), {4}, DType::Float32, Device::cpu(), {}, 0, nullptr, true);
  CHECK(v.read_only());
}

TEST_CASE("concat joins along dim 0 into a new allocation", "[buffer]") {
  Buffer a = iota_2d(2, 3);
  Buffer b = iota_2d(1, 3);
  Buffer empty = Buffer::allocate({0, 3}, DType::Float32);
  std::vector<Buffer> parts{a, empty, b.as_read_only(), a.slice(1, 2)};
  Buffer c = Buffer::concat(parts);
  CHECK(c.shape() == std::vector<std::int64_t>{4, 3});
  CHECK(reinterpret_cast<std::uintptr_t>(c.data()) % 64 == 0);
  CHECK_FALSE(c.read_only());
  CHECK(contents(c) == std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  CHECK(c.data() != a.data());
  c.data_as<float>()[0] = 100;  // a copy, not a view
  CHECK(a.data_as<float>()[0] == 1);

  std::vector<std::int64_t> i64{1, 2, 3};
  std::vector<Buffer> one{Buffer::view(i64.data(), i64.size(), DType::Int64)};
  Buffer single = Buffer::concat(one);
  CHECK(single.dtype() == DType::Int64);
  CHECK(single.data_as<std::int64_t>()[2] == 3);

  require_invalid([] { Buffer::concat({}); }, "got 0");
  std::vector<Buffer> dtypes{a, Buffer::allocate({1, 3}, DType::Float64)};
  require_invalid([&] { Buffer::concat(dtypes); }, "part 1 has dtype double");
  std::vector<Buffer> shapes{a, iota_2d(2, 4)};
  require_invalid([&] { Buffer::concat(shapes); }, "[2, 4]");
  std::vector<Buffer> ranks{a, Buffer::allocate(3, DType::Float32)};
  require_invalid([&] { Buffer::concat(ranks); }, "part 1 has shape [3]");
  std::vector<float> v(12);
  std::vector<Buffer> strided{
      a, Buffer::view(v.data(), {2, 3}, DType::Float32, Device::cpu(), {1, 2})};
  require_invalid([&] { Buffer::concat(strided); }, "concat part 1 must be contiguous");
  std::vector<Buffer> gpu{
      a, Buffer::view(reinterpret_cast<void*>(0x1000), {1, 3}, DType::Float32, Device::cuda(0))};
  require_invalid([&] { Buffer::concat(gpu); }, "cuda:0");
  // Empty parts may have any extent; three of 2^62 rows would wrap the int64 sum.
  const Buffer huge =
      Buffer::view(v.data(), {std::int64_t{1} << 62, 0}, DType::Float32, Device::cpu());
  std::vector<Buffer> wide{huge, huge, huge};
  require_invalid([&] { Buffer::concat(wide); }, "past the int64 range (at concat part 1)");
}

TEST_CASE("pad extends dim 0 at the end or the front", "[buffer]") {
  Buffer a = iota_2d(2, 3);
  Buffer end = a.pad(0, 4, -1.0);
  CHECK(end.shape() == std::vector<std::int64_t>{4, 3});
  CHECK(contents(end) == std::vector<float>{1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, -1});
  Buffer front = a.pad(0, 3, 7.5, true);
  CHECK(contents(front) == std::vector<float>{7.5, 7.5, 7.5, 1, 2, 3, 4, 5, 6});
  Buffer same = a.pad(0, 2);
  CHECK(contents(same) == contents(a));
  CHECK(same.data() != a.data());  // always a new allocation
  CHECK(reinterpret_cast<std::uintptr_t>(end.data()) % 64 == 0);
}

TEST_CASE("pad extends dim 1 of a 2-D buffer row by row", "[buffer]") {
  Buffer a = iota_2d(2, 3);
  Buffer end = a.pad(1, 5, 0.0);
  CHECK(end.shape() == std::vector<std::int64_t>{2, 5});
  CHECK(contents(end) == std::vector<float>{1, 2, 3, 0, 0, 4, 5, 6, 0, 0});
  Buffer front = a.pad(1, 4, 9.0, true);
  CHECK(contents(front) == std::vector<float>{9, 1, 2, 3, 9, 4, 5, 6});
  // Middle dimension of a 3-D buffer: 2 x [2 x 2] -> 2 x [3 x 2].
  Buffer c = Buffer::allocate({2, 2, 2}, DType::Float32);
  for (int i = 0; i < 8; ++i) c.data_as<float>()[i] = static_cast<float>(i);
  CHECK(contents(c.pad(1, 3, -1.0)) == std::vector<float>{0, 1, 2, 3, -1, -1, 4, 5, 6, 7, -1, -1});
  CHECK(contents(c.pad(1, 3, -1.0, true)) ==
        std::vector<float>{-1, -1, 0, 1, 2, 3, -1, -1, 4, 5, 6, 7});
}

TEST_CASE("pad converts the fill value to the dtype", "[buffer]") {
  std::vector<std::int16_t> v{1, 2};
  Buffer i = Buffer::view(v.data(), v.size(), DType::Int16).pad(0, 4, -3.0, true);
  CHECK(i.data_as<std::int16_t>()[0] == -3);
  CHECK(i.data_as<std::int16_t>()[1] == -3);
  CHECK(i.data_as<std::int16_t>()[2] == 1);
  CHECK(i.data_as<std::int16_t>()[3] == 2);
  std::vector<std::uint16_t> h{0x3c00};  // half 1.0
  Buffer hp = Buffer::view(h.data(), h.size(), DType::Float16).pad(0, 2, -2.0);
  CHECK(hp.data_as<std::uint16_t>()[1] == 0xc000);  // half -2.0
  std::vector<std::uint16_t> bf{0x3f80};            // bf16 1.0
  Buffer bp = Buffer::view(bf.data(), bf.size(), DType::BFloat16).pad(0, 2, 0.5);
  CHECK(bp.data_as<std::uint16_t>()[1] == 0x3f00);
  std::vector<std::uint8_t> u{9};
  Buffer up = Buffer::view(u.data(), u.size(), DType::UInt8).pad(0, 3, 300.0);
  CHECK(up.data_as<std::uint8_t>()[1] == 255);  // saturates
  Buffer empty_rows = Buffer::allocate({0, 2}, DType::Int32).pad(0, 2, 4.0);
  CHECK(empty_rows.count() == 4);
  CHECK(empty_rows.data_as<std::int32_t>()[3] == 4);
}

TEST_CASE("pad rejects bad arguments naming the value", "[buffer]") {
  Buffer a = iota_2d(2, 3);
  require_invalid([&] { a.pad(2, 4); }, "pad dimension 2");
  require_invalid([&] { a.pad(-1, 4); }, "pad dimension -1");
  require_invalid([&] { a.pad(1, 2); }, "pad size 2");
  std::vector<float> v(6);
  Buffer strided = Buffer::view(v.data(), {3, 2}, DType::Float32, Device::cpu(), {1, 3});
  require_invalid([&] { strided.pad(0, 4); }, "strides [1, 3]");
  Buffer gpu = Buffer::view(reinterpret_cast<void*>(0x1000), 2, DType::Float32, Device::cuda(2));
  require_invalid([&] { gpu.pad(0, 4); }, "cuda:2");
}

TEST_CASE("require_contiguous names the operand", "[buffer]") {
  std::vector<float> v(6);
  Buffer strided = Buffer::view(v.data(), {3, 2}, DType::Float32, Device::cpu(), {1, 3});
  require_invalid([&] { strided.require_contiguous("allreduce output"); }, "allreduce output");
  iota_2d(2, 2).require_contiguous("fine");
}

TEST_CASE("device names", "[buffer]") {
  CHECK(Device::cpu().to_string() == "cpu");
  CHECK(Device::cuda(1).to_string() == "cuda:1");
  CHECK(Device{DeviceType::CUDAHost, 0}.to_string() == "cuda_host:0");
  CHECK(Device{DeviceType::CUDAManaged, 2}.to_string() == "cuda_managed:2");
  CHECK(Device{DeviceType::CUDAHost, 0}.host_accessible());
  CHECK(Device{DeviceType::CUDAManaged, 0}.host_accessible());
}
