// The training layer's element-wise kernels (lib/train/kernels) on every instruction set this
// CPU runs, against the independent reference of float_format_reference.hpp: convert for all
// 36 dtype pairs × counts around the block sizes × special values (signed zeros, each format's
// subnormals, max, just past max, rounding ties and their neighbours, NaN, inf), exhaustive
// round trips of the 8- and 16-bit formats, the factor and the non-finite flag; norm_part,
// sum_abs_pow and clamp with NaN and inf.

#include <catch2/catch.hpp>
#include <cohort/error.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "float_format_reference.hpp"
#include "train/kernels/float_kernels.hpp"

namespace cohort::train::testing {
namespace {

using reduce::Isa;

constexpr std::size_t kCounts[] = {0, 1, 7, 63, 64, 65, 1000, 4099};

bool is_narrow(DType dtype) {
  return dtype != DType::Float32 && dtype != DType::Float64;
}

// Values that sit on the interesting points of format `f`: zero, the smallest subnormal and
// the ties around it, the largest subnormal, the smallest normal, 1 and its ties, the largest
// value and the tie just past it (which overflows for IEEE formats and rounds down to 448 for
// e4m3), twice the largest, inf and NaN.
std::vector<double> special_points(DType f) {
  const Format format = format_of(f);
  const int m = format.mantissa_bits;
  const double min_sub = std::ldexp(1.0, 1 - bias_of(format) - m);
  const double min_normal = std::ldexp(1.0, 1 - bias_of(format));
  const std::uint64_t top = (std::uint64_t{1} << (format.exponent_bits + m)) - 1;
  const double max = decode(f, format.ieee ? (top >> m << m) - 1 : format.nan_bits - 1);
  const double max_ulp = std::ldexp(1.0, std::ilogb(max) - m);
  const double one_ulp = std::ldexp(1.0, -m);
  return {0.0,
          min_sub,
          min_sub / 2,
          1.5 * min_sub,
          2.5 * min_sub,
          min_normal - min_sub,
          min_normal - min_sub / 2,
          min_normal,
          1.0,
          1.0 + one_ulp / 2,
          1.0 + 1.5 * one_ulp,
          max,
          max + max_ulp / 2,
          max + max_ulp,
          2 * max,
          INFINITY,
          NAN};
}

// Source values for dtype `s` (f32 or f64): every format's special points with both signs and
// their nearest neighbours in the source precision (just above and below each tie), mixed with
// random magnitudes spanning all formats' ranges and random bit patterns.
std::vector<std::uint64_t> wide_source(DType s, std::size_t length, std::uint64_t seed) {
  std::vector<std::uint64_t> specials;
  for (DType f : kFloatDTypes) {
    for (double point : special_points(f)) {
      for (double signed_point : {point, -point}) {
        if (s == DType::Float32) {
          const auto x = static_cast<float>(signed_point);
          for (float v : {x, std::nextafter(x, INFINITY), std::nextafter(x, -INFINITY)})
            specials.push_back(std::bit_cast<std::uint32_t>(v));
        } else {
          for (double v : {signed_point, std::nextafter(signed_point, INFINITY),
                           std::nextafter(signed_point, -INFINITY)})
            specials.push_back(std::bit_cast<std::uint64_t>(v));
        }
      }
    }
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> significand(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-160, 140);
  std::vector<std::uint64_t> values(length);
  for (std::size_t i = 0; i < length; ++i) {
    const double magnitude = std::ldexp(significand(rng), exponent(rng));
    const double random_value = (rng() & 1) != 0 ? -magnitude : magnitude;
    if (i % 3 == 0) {
      values[i] = specials[(i / 3) % specials.size()];
    } else if (i % 7 == 1) {
      values[i] = s == DType::Float32 ? rng() & 0xffffffffu : rng();
    } else {
      values[i] = s == DType::Float32
                      ? std::bit_cast<std::uint32_t>(static_cast<float>(random_value))
                      : std::bit_cast<std::uint64_t>(random_value);
    }
  }
  return values;
}

std::vector<std::uint64_t> source_values(DType s, std::size_t length, std::uint64_t seed) {
  if (!is_narrow(s)) return wide_source(s, length, seed);
  std::mt19937_64 rng(seed);
  const std::uint64_t mask = dtype_size(s) == 1 ? 0xffu : 0xffffu;
  std::vector<std::uint64_t> values(length);
  for (auto& v : values) v = rng() & mask;
  return values;
}

// What convert must write for one source element: computed in double when either side is f64
// (rounded once), else widened to float, multiplied in float and rounded from that float.
std::uint64_t expected_element(DType s, DType d, std::uint64_t bits, float factor) {
  const double x = decode(s, bits);
  if (s == DType::Float64 || d == DType::Float64) return encode(d, x * static_cast<double>(factor));
  const float product = static_cast<float>(x) * factor;
  return encode(d, product);
}

std::string hex(std::uint64_t bits) {
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

// Runs convert(s -> d) on `source` (misaligned, output guarded) and compares every element and
// the flag with the reference. Returns a description of the first difference, or "".
std::string check_convert(DType s, DType d, const std::vector<std::uint64_t>& source, float factor,
                          bool in_place) {
  const std::size_t count = source.size();
  const std::size_t in_size = dtype_size(s), out_size = dtype_size(d);
  constexpr std::size_t kGuard = 16;
  constexpr unsigned char kFill = 0xa5;
  std::vector<unsigned char> in_bytes(count * in_size + 1);
  std::vector<unsigned char> out_bytes(count * out_size + 3 + kGuard, kFill);
  unsigned char* in = in_bytes.data() + 1;  // deliberately misaligned
  unsigned char* out = out_bytes.data() + 3;
  for (std::size_t i = 0; i < count; ++i) write_bits(s, in_place ? out : in, i, source[i]);

  const bool flag = kernels::convert(s, in_place ? out : in, d, out, count, factor);

  bool want_flag = false;
  for (std::size_t i = 0; i < count; ++i) {
    want_flag |= !std::isfinite(decode(s, source[i]));
    const std::uint64_t want = expected_element(s, d, source[i], factor);
    const std::uint64_t got = read_bits(d, out, i);
    if (!same_result(d, want, got))
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": source " +
             hex(source[i]) + " gave " + hex(got) + ", expected " + hex(want);
  }
  if (flag != want_flag) return "non-finite flag " + std::to_string(flag);
  for (std::size_t i = count * out_size + 3; i < out_bytes.size(); ++i)
    if (out_bytes[i] != kFill) return "wrote past the end at byte " + std::to_string(i - 3);
  if (out_bytes[0] != kFill || out_bytes[1] != kFill || out_bytes[2] != kFill)
    return "wrote before the start";
  return "";
}

void sweep_pairs(std::initializer_list<float> factors, std::initializer_list<std::size_t> counts) {
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    REQUIRE(std::string(kernels::active_isa()) == reduce::isa_name(isa));
    for (DType s : kFloatDTypes) {
      const std::vector<std::uint64_t> all = source_values(s, 2 * 4099, 7 + dtype_size(s));
      for (DType d : kFloatDTypes) {
        for (float factor : factors) {
          for (std::size_t count : counts) {
            // A different window for each count, so specials fall into tails too.
            const std::vector<std::uint64_t> window(all.begin() + count, all.begin() + 2 * count);
            for (bool in_place : {false, true}) {
              if (in_place && dtype_size(s) != dtype_size(d)) continue;
              INFO(reduce::isa_name(isa)
                   << " " << dtype_name(s) << " -> " << dtype_name(d) << " factor " << factor
                   << " count " << count << (in_place ? " in place" : ""));
              CHECK(check_convert(s, d, window, factor, in_place) == "");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("convert matches the reference for every dtype pair, ISA and count", "[kernels]") {
  sweep_pairs({1.0f}, {0, 1, 7, 63, 64, 65, 1000, 4099});
}

TEST_CASE("convert applies the factor before rounding once", "[kernels]") {
  sweep_pairs({0.5f, 1.0f / 65536.0f, 3.0f, -1.5f, 65536.0f, 1e-30f}, {65, 4099});
}

TEST_CASE("every 8- and 16-bit pattern widens exactly and narrows back to itself", "[kernels]") {
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    for (DType narrow : {DType::Float16, DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2}) {
      const std::size_t patterns = std::size_t{1} << (8 * dtype_size(narrow));
      std::vector<std::uint64_t> all(patterns);
      for (std::size_t p = 0; p < patterns; ++p) all[p] = p;
      for (DType wide : {DType::Float32, DType::Float64}) {
        INFO(reduce::isa_name(isa) << " " << dtype_name(narrow) << " <-> " << dtype_name(wide));
        CHECK(check_convert(narrow, wide, all, 1.0f, false) == "");
        // Back: the wide values of every pattern must round to the pattern (NaN canonical).
        std::vector<std::uint64_t> widened(patterns);
        for (std::size_t p = 0; p < patterns; ++p) widened[p] = encode(wide, decode(narrow, p));
        CHECK(check_convert(wide, narrow, widened, 1.0f, false) == "");
      }
    }
  }
}

TEST_CASE("float -> narrow rounds like the reference around every rounding boundary", "[kernels]") {
  // Every sign/exponent/high-mantissa combination with low bits on, just above and just below
  // the tie positions of bf16 (bit 15) and f16 (bit 12); fp8 ties (bits 19, 20) are among the
  // high bits with low bits 0, their neighbours with 0x0001 and 0xffff.
  std::vector<std::uint64_t> floats;
  const std::uint32_t kLow[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001,
                                0x7fff, 0x8000, 0x8001, 0xffff};
  for (std::uint32_t high = 0; high < 0x10000; ++high)
    for (std::uint32_t low : kLow) floats.push_back((high << 16) | low);
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    for (DType narrow : {DType::Float16, DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2}) {
      INFO(reduce::isa_name(isa) << " float -> " << dtype_name(narrow));
      CHECK(check_convert(DType::Float32, narrow, floats, 1.0f, false) == "");
    }
  }
}

TEST_CASE("documented rounding cases", "[kernels]") {
  // Hand-computed from the formats: f16 max is 65504 and 65520 is the tie past it (-> inf);
  // 1 + 2^-11 + 2^-40 as a double must round once to 1 + 2^-10 in f16 (through float rounded to
  // nearest it would be the tie 1 + 2^-11 and give 1.0); e4m3 464 is the tie between 448 and
  // the NaN pattern's slot and rounds to even 448, anything above is NaN.
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    INFO(reduce::isa_name(isa));
    const double doubles[] = {65519.0, 65520.0, 1.0 + 0x1p-11 + 0x1p-40, 464.0, 464.5};
    std::uint16_t half[5];
    kernels::convert(DType::Float64, doubles, DType::Float16, half, 5);
    CHECK(half[0] == 0x7bff);  // 65504
    CHECK(half[1] == 0x7c00);  // inf
    CHECK(half[2] == 0x3c01);  // 1 + 2^-10
    std::uint8_t e4m3[5];
    kernels::convert(DType::Float64, doubles, DType::Float8E4M3, e4m3, 5);
    CHECK(e4m3[3] == 0x7e);  // 448
    CHECK(e4m3[4] == 0x7f);  // NaN
    const float floats[] = {464.0f, 465.0f, -1e9f};
    kernels::convert(DType::Float32, floats, DType::Float8E4M3, e4m3, 3);
    CHECK(e4m3[0] == 0x7e);
    CHECK(e4m3[1] == 0x7f);
    CHECK(e4m3[2] == 0xff);
  }
}

TEST_CASE("the non-finite flag reports the source values, at any position", "[kernels]") {
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    INFO(reduce::isa_name(isa));
    for (std::size_t position : {0, 15, 31, 63, 64}) {
      std::vector<float> values(65, 1.0f);
      std::vector<std::uint16_t> half(65);
      CHECK_FALSE(kernels::convert(DType::Float32, values.data(), DType::Float16, half.data(), 65));
      values[position] = -INFINITY;
      CHECK(kernels::convert(DType::Float32, values.data(), DType::Float16, half.data(), 65));
      values[position] = NAN;
      std::vector<double> wide(32);
      CHECK(kernels::convert(DType::Float32, values.data(), DType::Float64, wide.data(), 32) ==
            (position < 32));
    }
    // Overflow made by the conversion or the factor is not reported: the source was finite.
    const float big[] = {1e6f, 3e38f};
    std::uint16_t half[2];
    CHECK_FALSE(kernels::convert(DType::Float32, big, DType::Float16, half, 2));
    float scaled[2];
    CHECK_FALSE(kernels::convert(DType::Float32, big, DType::Float32, scaled, 2, 4.0f));
    CHECK(std::isinf(scaled[1]));
    const std::uint8_t e4m3_nan[] = {0x00, 0xff};
    float out[2];
    CHECK(kernels::convert(DType::Float8E4M3, e4m3_nan, DType::Float32, out, 2));
  }
}

// ---- norm_part, sum_abs_pow, clamp -----------------------------------------------------------

// Finite random values of `dtype`, drawn as patterns (narrow) or magnitudes in [2^-20, 2^20).
std::vector<std::uint64_t> finite_values(DType dtype, std::size_t count, std::uint64_t seed) {
  std::vector<std::uint64_t> values;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> magnitude(-20.0, 20.0);
  while (values.size() < count) {
    const double x = std::exp2(magnitude(rng)) * ((rng() & 1) != 0 ? -1 : 1);
    const std::uint64_t bits =
        is_narrow(dtype) ? rng() & ((1u << (8 * dtype_size(dtype))) - 1) : encode(dtype, x);
    if (std::isfinite(decode(dtype, bits))) values.push_back(bits);
  }
  return values;
}

double reference_norm(DType dtype, const std::vector<std::uint64_t>& values,
                      kernels::NormPart part) {
  double acc = 0.0;
  for (std::uint64_t bits : values) {
    const double a = std::fabs(decode(dtype, bits));
    if (part == kernels::NormPart::SumSquares) acc += a * a;
    if (part == kernels::NormPart::SumAbs) acc += a;
    if (part == kernels::NormPart::MaxAbs && (std::isnan(a) || a > acc) && !std::isnan(acc))
      acc = a;
  }
  return acc;
}

std::vector<unsigned char> stored(DType dtype, const std::vector<std::uint64_t>& values) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype) + 1);
  for (std::size_t i = 0; i < values.size(); ++i) write_bits(dtype, bytes.data() + 1, i, values[i]);
  return bytes;  // element 0 at byte 1: misaligned on purpose
}

TEST_CASE("norm_part accumulates in double; NaN gives NaN, inf gives inf", "[kernels]") {
  using kernels::NormPart;
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    for (DType dtype : kFloatDTypes) {
      for (std::size_t count : kCounts) {
        for (NormPart part : {NormPart::SumSquares, NormPart::SumAbs, NormPart::MaxAbs}) {
          INFO(reduce::isa_name(isa) << " " << dtype_name(dtype) << " count " << count << " part "
                                     << static_cast<int>(part));
          std::vector<std::uint64_t> values = finite_values(dtype, count, count + 11);
          const double want = reference_norm(dtype, values, part);
          const double got =
              kernels::norm_part(dtype, stored(dtype, values).data() + 1, count, part);
          // Sums may associate differently (per-lane partial sums); the max is exact.
          if (part == NormPart::MaxAbs)
            CHECK(got == want);
          else
            CHECK(got == Approx(want).epsilon(1e-12).margin(0.0));
          if (count == 0) continue;
          // inf anywhere (e4m3 has none) gives inf; NaN anywhere, even beside inf, gives NaN.
          const std::size_t spot = count - 1 - count / 3;
          if (dtype != DType::Float8E4M3) {
            values[spot] = encode(dtype, -INFINITY);
            CHECK(kernels::norm_part(dtype, stored(dtype, values).data() + 1, count, part) ==
                  INFINITY);
          }
          values[count / 2] = encode(dtype, NAN);
          CHECK(
              std::isnan(kernels::norm_part(dtype, stored(dtype, values).data() + 1, count, part)));
        }
      }
    }
  }
}

TEST_CASE("sum_abs_pow is the p-th power sum in double", "[kernels]") {
  const float values[] = {1.0f, -2.0f, 0.5f};
  CHECK(kernels::sum_abs_pow(DType::Float32, values, 3, 3.0) == 1.0 + 8.0 + 0.125);
  CHECK(kernels::sum_abs_pow(DType::Float32, values, 3, 0.5) ==
        Approx(1.0 + std::sqrt(2.0) + std::sqrt(0.5)));
  const std::uint16_t half[] = {0x4000, 0x7c00};  // 2, inf
  CHECK(kernels::sum_abs_pow(DType::Float16, half, 1, 1.5) == Approx(std::pow(2.0, 1.5)));
  CHECK(kernels::sum_abs_pow(DType::Float16, half, 2, 1.5) == INFINITY);
  const double with_nan[] = {1.0, NAN};
  CHECK(std::isnan(kernels::sum_abs_pow(DType::Float64, with_nan, 2, 2.0)));
  CHECK(kernels::sum_abs_pow(DType::Float64, with_nan, 0, 2.0) == 0.0);
}

TEST_CASE("clamp limits to [-limit, limit], rounded once, NaN kept", "[kernels]") {
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    for (DType dtype : kFloatDTypes) {
      for (double limit : {1.0, 0.3, 1e-30, 460.0, 470.0, 1e6, 1e300, double{INFINITY}}) {
        for (std::size_t count : kCounts) {
          INFO(reduce::isa_name(isa)
               << " " << dtype_name(dtype) << " limit " << limit << " count " << count);
          const std::vector<std::uint64_t> values = source_values(dtype, count, count);
          std::vector<unsigned char> bytes = stored(dtype, values);
          kernels::clamp(dtype, bytes.data() + 1, count, limit);
          std::size_t mismatches = 0;
          for (std::size_t i = 0; i < count; ++i) {
            double x = decode(dtype, values[i]);
            if (x > limit)
              x = limit;
            else if (x < -limit)
              x = -limit;
            const std::uint64_t want = encode(dtype, x);
            const std::uint64_t got = read_bits(dtype, bytes.data() + 1, i);
            if (!same_result(dtype, want, got) && mismatches++ == 0)
              FAIL_CHECK("element " << i << " " << hex(values[i]) << " gave " << hex(got)
                                    << ", expected " << hex(want));
          }
          CHECK(mismatches == 0);
        }
      }
    }
  }
}

TEST_CASE("kernels reject non-floating dtypes and follow the reduce layer's ISA", "[kernels]") {
  for (DType dtype : kAllDTypes) CHECK(kernels::supported(dtype) == dtype_is_floating(dtype));
  float x = 1.0f;
  std::int32_t i = 0;
  try {
    kernels::convert(DType::Float32, &x, DType::Int32, &i, 1);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("int32"));
  }
  CHECK_THROWS_AS(kernels::norm_part(DType::Int8, &i, 1, kernels::NormPart::SumAbs), Error);
  CHECK_THROWS_AS(kernels::clamp(DType::Bool, &i, 1, 1.0), Error);
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    reduce::force_isa(isa);
    CHECK(std::string(kernels::active_isa()) == reduce::isa_name(isa));
  }
}

}  // namespace
}  // namespace cohort::train::testing
