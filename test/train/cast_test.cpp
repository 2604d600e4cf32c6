// cast, cast_to and to_fp32 (include/cohort/train/precision.hpp): TRAINING.md's hand-computed
// cases, fp8 rounding per cohort's format rules, strided inputs (transposed, stride 2, reversed,
// padded rows) against the independent reference, in-place casts, and every error path.

#include <catch2/catch.hpp>
#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "float_format_reference.hpp"

namespace cohort::train::testing {
namespace {

void expect_error(const std::function<void()>& fn, ErrorCode code,
                  std::initializer_list<std::string> needles) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.code() == code);
    for (const std::string& needle : needles) CHECK_THAT(e.message(), Catch::Contains(needle));
    return;
  }
  FAIL("no error thrown");
}

TEST_CASE("TRAINING.md: f32 -> f16 rounds to nearest even, overflows at 65520", "[cast]") {
  // 65519 is below the tie 65520 between 65504 and 65536 (not a half: inf); 1e-8 is below half
  // the smallest subnormal (2^-25 ~ 2.98e-8).
  const float in[] = {65519.0f, 65520.0f, 1e-8f, NAN};
  std::uint16_t out[4] = {};
  cast(Buffer::view(in, 4, DType::Float32), Buffer::view(out, 4, DType::Float16));
  CHECK(out[0] == 0x7bff);  // 65504
  CHECK(out[1] == 0x7c00);  // +inf
  CHECK(out[2] == 0x0000);  // +0
  CHECK(out[3] == 0x7e00);  // the canonical quiet NaN
}

TEST_CASE("TRAINING.md: f32 -> bf16 ties go to even", "[cast]") {
  // 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7; 1 + 3*2^-8 halfway between 1 + 2^-7
  // (odd) and 1 + 2^-6 = 1.015625 (even).
  const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  std::uint16_t out[2] = {};
  cast(Buffer::view(in, 2, DType::Float32), Buffer::view(out, 2, DType::BFloat16));
  CHECK(out[0] == 0x3f80);  // 1.0
  CHECK(out[1] == 0x3f82);  // 1.015625
}

TEST_CASE("fp8 follows cohort's format rules", "[cast]") {
  // e4m3 (OCP e4m3fn): in [256, 512) the quantum is 32, so 300 -> 288 (9.375 units -> 9) and
  // 448 = 14 units (0x7e) is the largest value, because 15 units with exponent 15 is the NaN
  // pattern 0x7f. 464 is the tie between 448 and that slot and goes to even (448); anything
  // above 464 is NaN, as is inf (no infinities). 2^-10 is the tie between 0 and the smallest
  // subnormal 2^-9 (-> 0, even); 0.001 is above it (-> 2^-9).
  const float e4m3_in[] = {300.0f, 448.0f, 464.0f, 464.5f, -500.0f, INFINITY, 0x1p-10f, 0.001f};
  const std::uint8_t e4m3_want[] = {0x79, 0x7e, 0x7e, 0x7f, 0xff, 0x7f, 0x00, 0x01};
  std::uint8_t e4m3[8] = {};
  cast(Buffer::view(e4m3_in, 8, DType::Float32), Buffer::view(e4m3, 8, DType::Float8E4M3));
  for (int i = 0; i < 8; ++i) {
    INFO("e4m3 of " << e4m3_in[i]);
    CHECK(e4m3[i] == e4m3_want[i]);
  }
  // e5m2: IEEE-like, max 57344 = 1.75 * 2^15; 61440 is the tie past it and rounds to even,
  // which is the next binade: inf.
  const float e5m2_in[] = {57344.0f, 61439.0f, 61440.0f, -NAN, 1.25f};
  const std::uint8_t e5m2_want[] = {0x7b, 0x7b, 0x7c, 0xfe, 0x3d};
  std::uint8_t e5m2[5] = {};
  cast(Buffer::view(e5m2_in, 5, DType::Float32), Buffer::view(e5m2, 5, DType::Float8E5M2));
  for (int i = 0; i < 5; ++i) {
    INFO("e5m2 of " << e5m2_in[i]);
    CHECK(e5m2[i] == e5m2_want[i]);
  }
}

TEST_CASE("f64 sources round once", "[cast]") {
  // Through float rounded to nearest, 1 + 2^-11 + 2^-40 would become the f16 tie 1 + 2^-11 and
  // then 1.0; rounded once it is 1 + 2^-10.
  const double in[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40};
  std::uint16_t half[2] = {}, bf16[2] = {};
  cast(Buffer::view(in, 2, DType::Float64), Buffer::view(half, 2, DType::Float16));
  cast(Buffer::view(in, 2, DType::Float64), Buffer::view(bf16, 2, DType::BFloat16));
  CHECK(half[0] == 0x3c01);
  CHECK(bf16[1] == 0x3f81);  // 1 + 2^-7
}

// Fills `count` elements of `dtype` with random finite and special values.
std::vector<unsigned char> random_elements(DType dtype, std::size_t count, unsigned seed) {
  std::vector<unsigned char> bytes(count * dtype_size(dtype));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(-30.0, 18.0);
  const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 65520.0, 464.0};
  for (std::size_t i = 0; i < count; ++i) {
    const double x = i % 11 == 0 ? specials[(i / 11) % 7]
                                 : std::exp2(exponent(rng)) * ((rng() & 1) != 0 ? -1.0 : 1.0);
    write_bits(dtype, bytes.data(), i, encode(dtype, x));
  }
  return bytes;
}

// Casts `in` to every floating dtype and checks output element r against the reference applied
// to the input element `offsets[r]` elements away from in.data().
void check_view(const Buffer& in, const std::vector<std::ptrdiff_t>& offsets) {
  REQUIRE(offsets.size() == in.count());
  const auto* first = static_cast<const unsigned char*>(in.data());
  const auto esize = static_cast<std::ptrdiff_t>(in.element_size());
  for (DType dst : kFloatDTypes) {
    INFO(dtype_name(in.dtype()) << " -> " << dtype_name(dst) << ", " << in.count() << " elements");
    const Buffer out = cast_to(in, dst);
    CHECK(out.shape() == in.shape());
    CHECK(out.is_contiguous());
    std::size_t mismatches = 0;
    for (std::size_t r = 0; r < offsets.size(); ++r) {
      const std::uint64_t bits = read_bits(in.dtype(), first + offsets[r] * esize, 0);
      const std::uint64_t want = encode(dst, decode(in.dtype(), bits));
      if (!same_result(dst, want, read_bits(dst, out.data(), r)) && mismatches++ == 0)
        FAIL_CHECK("element " << r << " (input offset " << offsets[r] << ")");
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("strided inputs are read in row-major order", "[cast]") {
  for (DType src : kFloatDTypes) {
    const std::int64_t rows = 37, cols = 29;
    std::vector<unsigned char> storage = random_elements(src, 2 * rows * cols + 8, 5);
    void* base = storage.data();
    const auto esize = static_cast<std::int64_t>(dtype_size(src));

    // A transposed view: shape {cols, rows} over a row-major rows x cols matrix (short rows
    // with stride `cols`, gathered across more than one block).
    std::vector<std::ptrdiff_t> offsets;
    for (std::int64_t c = 0; c < cols; ++c)
      for (std::int64_t r = 0; r < rows; ++r) offsets.push_back(r * cols + c);
    check_view(Buffer::view(base, {cols, rows}, src, Device::cpu(), {1, cols}), offsets);

    // Every other element.
    offsets.clear();
    for (std::int64_t i = 0; i < rows * cols; ++i) offsets.push_back(2 * i);
    check_view(Buffer::view(base, {rows * cols}, src, Device::cpu(), {2}), offsets);

    // Reversed: stride -1 from the last of 100 elements.
    offsets.clear();
    for (std::int64_t i = 0; i < 100; ++i) offsets.push_back(-i);
    check_view(Buffer::view(base, {100}, src, Device::cpu(), {-1}, 99 * esize), offsets);

    // Short padded rows: inner stride 1 but too short to convert one by one (gathered).
    offsets.clear();
    for (std::int64_t r = 0; r < 40; ++r)
      for (std::int64_t c = 0; c < 10; ++c) offsets.push_back(r * 16 + c);
    check_view(Buffer::view(base, {40, 10}, src, Device::cpu(), {16, 1}), offsets);

    // Padded rows: inner stride 1 and rows long enough to be converted in place, outer
    // dimensions strided, a size-1 dimension with an arbitrary stride.
    offsets.clear();
    for (std::int64_t a = 0; a < 3; ++a)
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t c = 0; c < 100; ++c) offsets.push_back(a * 300 + b * 120 + c);
    check_view(Buffer::view(base, {3, 1, 2, 100}, src, Device::cpu(), {300, 7, 120, 1}, 4 * esize),
               offsets);
  }
}

TEST_CASE("contiguous and in-place casts", "[cast]") {
  std::vector<unsigned char> bytes = random_elements(DType::Float16, 1000, 9);
  const Buffer half = Buffer::view(bytes.data(), {10, 100}, DType::Float16, Device::cpu());
  const Buffer as_float = cast_to(half, DType::Float32);
  CHECK(as_float.dtype() == DType::Float32);
  CHECK(as_float.shape() == std::vector<std::int64_t>{10, 100});
  for (std::size_t i = 0; i < 1000; ++i) {
    const double want = decode(DType::Float16, read_bits(DType::Float16, bytes.data(), i));
    const float got = as_float.data_as<float>()[i];
    CHECK(((std::isnan(want) && std::isnan(got)) || want == got));
  }
  // f16 -> bf16 in the same memory (equal element sizes).
  std::vector<unsigned char> expected(bytes.size());
  for (std::size_t i = 0; i < 1000; ++i)
    write_bits(DType::BFloat16, expected.data(), i,
               encode(DType::BFloat16,
                      decode(DType::Float16, read_bits(DType::Float16, bytes.data(), i))));
  cast(half, Buffer::view(bytes.data(), 1000, DType::BFloat16));
  for (std::size_t i = 0; i < 1000; ++i)
    CHECK(same_result(DType::BFloat16, read_bits(DType::BFloat16, expected.data(), i),
                      read_bits(DType::BFloat16, bytes.data(), i)));
  // Pinned and managed host memory are host memory.
  float in[2] = {1.5f, -2.0f};
  double out[2] = {};
  cast(Buffer::view(in, 2, DType::Float32, Device{DeviceType::CUDAHost, 0}),
       Buffer::view(out, 2, DType::Float64, Device{DeviceType::CUDAManaged, 0}));
  CHECK(out[0] == 1.5);
  CHECK(out[1] == -2.0);
  // Empty buffers are fine.
  cast(Buffer::view(in, 0, DType::Float32), Buffer::view(out, 0, DType::Float64));
}

TEST_CASE("to_fp32 widens f16 and bf16 only", "[cast]") {
  std::int32_t ints[3] = {1, 2, 3};
  const Buffer int_buffer = Buffer::view(ints, 3, DType::Int32);
  CHECK(to_fp32(int_buffer).data() == int_buffer.data());
  float floats[2] = {1.0f, 2.0f};
  CHECK(to_fp32(Buffer::view(floats, 2, DType::Float32)).data() == floats);
  const std::uint8_t e4m3[1] = {0x38};
  CHECK(to_fp32(Buffer::view(e4m3, 1, DType::Float8E4M3)).dtype() == DType::Float8E4M3);
  const std::uint16_t bf16[2] = {0x3f80, 0xc040};  // 1, -3
  const Buffer wide = to_fp32(Buffer::view(bf16, 2, DType::BFloat16));
  CHECK(wide.dtype() == DType::Float32);
  CHECK(wide.data() != static_cast<const void*>(bf16));
  CHECK(wide.data_as<float>()[0] == 1.0f);
  CHECK(wide.data_as<float>()[1] == -3.0f);
}

TEST_CASE("cast errors name the offending dtype, count or device", "[cast]") {
  float f[4] = {};
  std::int32_t i[4] = {};
  std::uint16_t h[6] = {};
  const Buffer floats = Buffer::view(f, 4, DType::Float32);
  expect_error([&] { cast(Buffer::view(i, 4, DType::Int32), floats); }, ErrorCode::InvalidArgument,
               {"int32"});
  expect_error([&] { cast(floats, Buffer::view(i, 4, DType::Int32)); }, ErrorCode::InvalidArgument,
               {"int32"});
  expect_error([&] { cast_to(floats, DType::Bool); }, ErrorCode::InvalidArgument, {"bool"});
  expect_error([&] { cast(floats, Buffer::view(h, 5, DType::Float16)); },
               ErrorCode::InvalidArgument, {"4", "5"});
  expect_error([&] { cast(floats, Buffer::view(h, 4, DType::Float16).as_read_only()); },
               ErrorCode::InvalidArgument, {"read-only"});
  expect_error(
      [&] {
        cast(floats, Buffer::view(h, {2, 2}, DType::Float16, Device::cpu(), {1, 2}));
      },
      ErrorCode::InvalidArgument, {"contiguous"});
  expect_error([&] { cast(Buffer::view(f, 4, DType::Float32, Device::cuda(0)), floats); },
               ErrorCode::Unsupported, {"cuda:0"});
  expect_error([&] { cast(floats, Buffer::view(h, 4, DType::Float16, Device::cuda(1))); },
               ErrorCode::Unsupported, {"cuda:1"});
  expect_error(
      [&] { cast_to(Buffer::view(f, 4, DType::Float32, Device::cuda(0)), DType::Float16); },
      ErrorCode::Unsupported, {"cuda:0"});
  // Partial overlap (f32 input, f16 output starting in its middle) would overwrite unread input.
  expect_error(
      [&] {
        cast(floats, Buffer::view(reinterpret_cast<unsigned char*>(f) + 2, 4, DType::Float16));
      },
      ErrorCode::InvalidArgument, {"overlaps"});
}

}  // namespace
}  // namespace cohort::train::testing
