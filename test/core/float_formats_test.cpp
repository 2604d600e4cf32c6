// The scalar float formats against independent references: the compiler's _Float16 for half
// where it has one, else half's fields (every bit pattern one way, millions of floats the other),
// a binary search over the monotonic bf16 codes with the rounding decided in double arithmetic,
// and a brute-force nearest-even search over all 256 codes for fp8. Plus load_as_double /
// store_from_double.

#include "core/float_formats.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace cohort;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::uint32_t bits_of(float f) {
  return std::bit_cast<std::uint32_t>(f);
}

// ---- 16-bit IEEE-style codes (sign, exponent with bias 2^(e-1) - 1 and the all-ones exponent
// for inf and NaN, mantissa) decoded from their fields in double: bf16 is 8 + 7, half 5 + 10 ----
double ieee16_reference_value(std::uint16_t code, int exponent_bits, int mantissa_bits) {
  const int all_ones = (1 << exponent_bits) - 1;
  const int bias = all_ones / 2;
  const int exponent = (code >> mantissa_bits) & all_ones;
  const int mantissa = code & ((1 << mantissa_bits) - 1);
  double magnitude;
  if (exponent == all_ones)
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  else if (exponent == 0)
    magnitude = std::ldexp(mantissa, 1 - bias - mantissa_bits);
  else
    magnitude = std::ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits);
  return (code & 0x8000) ? -magnitude : magnitude;
}

double bf16_reference_value(std::uint16_t b) {
  return ieee16_reference_value(b, 8, 7);
}

bool bf16_is_nan(std::uint16_t b) {
  return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
}

// Nearest 16-bit code to `x`, ties to even, for a format whose positive codes 0..inf_code
// increase with the value (bf16, half): a binary search finds the code below x. inf_code stands
// for 2^overflow_exponent (where the next binade would start) when deciding the rounding, which
// puts the overflow threshold at the midpoint between the largest finite value and that power.
template <typename Decode>
std::uint16_t nearest_code_from_double(double x, std::uint32_t inf_code, int overflow_exponent,
                                       std::uint16_t nan_code, Decode decode) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return nan_code;
  const double magnitude = std::fabs(x);
  const double overflow = std::ldexp(1.0, overflow_exponent);
  auto value = [&](std::uint32_t code) {
    return code == inf_code ? overflow : decode(static_cast<std::uint16_t>(code));
  };
  if (magnitude >= overflow) return static_cast<std::uint16_t>(sign | inf_code);
  std::uint32_t lo = 0, hi = inf_code;  // value(lo) <= magnitude < value(hi)
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    (value(mid) <= magnitude ? lo : hi) = mid;
  }
  const double below = magnitude - value(lo);
  const double above = value(hi) - magnitude;
  const std::uint32_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<std::uint16_t>(sign | pick);
}

std::uint16_t bf16_reference_from_double(double x) {
  return nearest_code_from_double(x, 0x7f80, 128, 0x7fc0, bf16_reference_value);
}

// ---- half ----
#if defined(__FLT16_MAX__)
// Through the compiler's _Float16 (GCC, and clang from 15 on x86): its soft-float conversions
// are correctly rounded, and written by others than us.
float half_reference_to_float(std::uint16_t h) {
  return static_cast<float>(std::bit_cast<_Float16>(h));
}
std::uint16_t half_reference_from_float(float f) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
}
std::uint16_t half_reference_from_double(double d) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(d));
}
#else
// clang 14 (CI's sanitizer build) has no _Float16 on x86: decoded from its fields in double
// and rounded by the search above, as bf16 is.
double half_reference_value(std::uint16_t h) {
  return ieee16_reference_value(h, 5, 10);
}
float half_reference_to_float(std::uint16_t h) {
  return static_cast<float>(half_reference_value(h));
}
std::uint16_t half_reference_from_double(double d) {
  return nearest_code_from_double(d, 0x7c00, 16, 0x7e00, half_reference_value);
}
std::uint16_t half_reference_from_float(float f) {
  return half_reference_from_double(f);  // exact: a float is a double
}
#endif

// ---- fp8 decoded from its fields, written independently of the code under test ----
struct Fp8Spec {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee_specials;          // e5m2: max exponent means inf/NaN; e4m3fn: only S.1111.111 is NaN
  std::uint8_t overflow_code;  // what out-of-range values become (sign cleared)
};
constexpr Fp8Spec kE4M3Spec{4, 3, 7, false, 0x7f};
constexpr Fp8Spec kE5M2Spec{5, 2, 15, true, 0x7c};

// Value of a code read as if every pattern were an ordinary finite number.
double fp8_plain_value(std::uint8_t code, const Fp8Spec& s) {
  const int e = (code & 0x7f) >> s.mantissa_bits;
  const int m = code & ((1 << s.mantissa_bits) - 1);
  const double magnitude =
      e == 0 ? std::ldexp(m, 1 - s.bias - s.mantissa_bits)
             : std::ldexp((1 << s.mantissa_bits) + m, e - s.bias - s.mantissa_bits);
  return (code & 0x80) ? -magnitude : magnitude;
}

bool fp8_is_nan(std::uint8_t code, const Fp8Spec& s) {
  const std::uint8_t bits = code & 0x7f;
  if (!s.ieee_specials) return bits == 0x7f;
  return (bits >> s.mantissa_bits) == (1 << s.exponent_bits) - 1 &&
         (bits & ((1 << s.mantissa_bits) - 1)) != 0;
}

bool fp8_is_inf(std::uint8_t code, const Fp8Spec& s) {
  return s.ieee_specials && (code & 0x7f) == 0x7c;
}

// Brute force over all 256 codes: the finite code nearest to x, ties to the even code. The
// overflow code competes with the value it would have as a plain number, so values past the
// midpoint above the largest finite value overflow (to NaN for e4m3fn, to inf for e5m2).
std::uint8_t fp8_reference_from_double(double x, const Fp8Spec& s) {
  if (std::isnan(x)) return 0xff;  // any NaN; compared by NaN-ness
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  // At or past the overflow code's value it is the nearest candidate; deciding that here keeps
  // the distances below exact (for huge x, x - 448 and x - 480 round to the same double).
  if (std::isinf(x) || std::fabs(x) >= fp8_plain_value(s.overflow_code, s))
    return sign | s.overflow_code;
  int best = -1;
  double best_distance = 0;
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    const bool candidate = (c & 0x80) == sign && ((!fp8_is_nan(c, s) && !fp8_is_inf(c, s)) ||
                                                  (c & 0x7f) == s.overflow_code);
    if (!candidate) continue;
    const double distance = std::fabs(x - fp8_plain_value(c, s));
    if (best < 0 || distance < best_distance || (distance == best_distance && (code % 2) == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<std::uint8_t>(best);
}

// Interesting inputs around every value of a format: each value, its float neighbours, the
// midpoints to the next value and the floats just either side of those midpoints.
void add_neighbourhoods(std::vector<double>& out, const std::vector<double>& sorted_values) {
  for (std::size_t i = 0; i < sorted_values.size(); ++i) {
    const auto v = static_cast<float>(sorted_values[i]);
    out.push_back(v);
    out.push_back(std::nextafter(v, kInf));
    out.push_back(std::nextafter(v, -kInf));
    if (i + 1 < sorted_values.size()) {
      const auto mid = static_cast<float>((sorted_values[i] + sorted_values[i + 1]) / 2);
      REQUIRE(static_cast<double>(mid) == (sorted_values[i] + sorted_values[i + 1]) / 2);
      out.push_back(mid);
      out.push_back(std::nextafter(mid, kInf));
      out.push_back(std::nextafter(mid, -kInf));
    }
  }
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(-out[i]);
}

std::vector<float> special_floats() {
  return {0.0f,
          -0.0f,
          kInf,
          -kInf,
          std::numeric_limits<float>::quiet_NaN(),
          -std::numeric_limits<float>::quiet_NaN(),
          std::bit_cast<float>(0x7f800001u),  // signalling NaN
          std::numeric_limits<float>::max(),
          -std::numeric_limits<float>::max(),
          std::numeric_limits<float>::min(),
          std::numeric_limits<float>::denorm_min(),
          -std::numeric_limits<float>::denorm_min(),
          1.0f,
          -1.0f,
          1.0f / 3.0f,
          65504.0f,
          65519.996f,
          65520.0f,
          65536.0f,
          448.0f,
          464.0f,
          465.0f,
          480.0f,
          57344.0f,
          61439.0f,
          61440.0f,
          1e30f,
          std::ldexp(1.0f, -24),
          std::ldexp(1.0f, -25),
          std::ldexp(3.0f, -26),
          std::ldexp(1.0f, -14),
          std::ldexp(1.0f, -10),
          std::ldexp(1.0f, -17)};
}

// Random floats: raw bit patterns (every class of value) and patterns with an exponent in
// [lo_exp, hi_exp] (the range a narrow format represents).
std::vector<float> random_floats(std::size_t count, int lo_exp, int hi_exp, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> any;
  std::uniform_int_distribution<int> exponent(lo_exp + 127, hi_exp + 127);
  std::vector<float> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t b = any(rng);
    if (i % 2 == 1) b = (b & 0x807fffffu) | (static_cast<std::uint32_t>(exponent(rng)) << 23);
    out.push_back(std::bit_cast<float>(b));
  }
  return out;
}

}  // namespace

TEST_CASE("half -> float matches the reference for all 65536 patterns", "[float_formats]") {
  int mismatches = 0;
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float ours = fp::half_to_float(static_cast<std::uint16_t>(h));
    const float ref = half_reference_to_float(static_cast<std::uint16_t>(h));
    const bool same = std::isnan(ref) ? std::isnan(ours) && std::signbit(ours) == std::signbit(ref)
                                      : bits_of(ours) == bits_of(ref);
    if (!same && ++mismatches <= 5) {
      INFO("half 0x" << std::hex << h << ": ours " << ours << ", reference " << ref);
      CHECK(same);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("float -> half matches the reference (ties, subnormals, overflow, NaN)",
          "[float_formats]") {
  std::vector<double> values;
  for (std::uint32_t h = 0; h < 0x7c00; ++h)
    values.push_back(half_reference_to_float(static_cast<std::uint16_t>(h)));
  values.push_back(65536.0);  // where the next binade would start: the overflow threshold's pair
  std::vector<double> inputs;
  add_neighbourhoods(inputs, values);
  for (float f : special_floats()) inputs.push_back(f);
  for (float f : random_floats(2'000'000, -26, 16, 1234)) inputs.push_back(f);

  int mismatches = 0;
  for (const double input : inputs) {
    const auto f = static_cast<float>(input);
    const std::uint16_t ours = fp::float_to_half(f);
    const std::uint16_t ref = half_reference_from_float(f);
    const bool ref_nan = (ref & 0x7c00) == 0x7c00 && (ref & 0x3ff) != 0;
    const bool same = ref_nan ? (ours & 0x7c00) == 0x7c00 && (ours & 0x3ff) != 0 : ours == ref;
    if (!same && ++mismatches <= 5) {
      INFO("float " << f << " (0x" << std::hex << bits_of(f) << "): ours 0x" << ours
                    << ", reference 0x" << ref);
      CHECK(same);
    }
  }
  CHECK(mismatches == 0);
  // Spot checks that do not depend on the reference.
  CHECK(fp::float_to_half(1.0f) == 0x3c00);
  CHECK(fp::float_to_half(65504.0f) == 0x7bff);
  CHECK(fp::float_to_half(65520.0f) == 0x7c00);          // the tie above the max rounds to inf
  CHECK(fp::float_to_half(std::ldexp(1.0f, -25)) == 0);  // tie between 0 and 2^-24: even
  CHECK(fp::float_to_half(std::ldexp(3.0f, -25)) == 2);  // tie between 1 and 2 units: even
  CHECK(fp::float_to_half(-kInf) == 0xfc00);
}

TEST_CASE("bf16 -> float decodes every pattern", "[float_formats]") {
  int mismatches = 0;
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto code = static_cast<std::uint16_t>(b);
    const double ref = bf16_reference_value(code);
    const float ours = fp::bf16_to_float(code);
    const bool same = std::isnan(ref) ? std::isnan(ours)
                                      : static_cast<double>(ours) == ref &&
                                            std::signbit(ours) == std::signbit(ref);
    if (!same) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("float -> bf16 rounds to nearest even", "[float_formats]") {
  std::vector<double> values;
  for (std::uint32_t b = 0; b < 0x7f80; ++b)
    values.push_back(bf16_reference_value(static_cast<std::uint16_t>(b)));
  values.push_back(std::ldexp(1.0, 128));
  std::vector<double> inputs;
  add_neighbourhoods(inputs, values);
  for (float f : special_floats()) inputs.push_back(f);
  for (float f : random_floats(2'000'000, -140, 127, 99)) inputs.push_back(f);

  int mismatches = 0;
  for (const double input : inputs) {
    const auto f = static_cast<float>(input);
    const std::uint16_t ours = fp::float_to_bf16(f);
    const std::uint16_t ref = bf16_reference_from_double(f);
    const bool same = bf16_is_nan(ref) ? bf16_is_nan(ours) : ours == ref;
    if (!same && ++mismatches <= 5) {
      INFO("float " << f << " (0x" << std::hex << bits_of(f) << "): ours 0x" << ours
                    << ", reference 0x" << ref);
      CHECK(same);
    }
  }
  CHECK(mismatches == 0);
  CHECK(fp::float_to_bf16(1.0f) == 0x3f80);
  CHECK(fp::float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, even below
  CHECK(fp::float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, even above
  CHECK(fp::float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(bf16_is_nan(fp::float_to_bf16(std::bit_cast<float>(0x7f800001u))));  // payload low
}

TEST_CASE("fp8 codes decode to the OCP values", "[float_formats]") {
  // Hand-checked values from the OCP 8-bit floating point specification.
  CHECK(fp::e4m3_to_float(0x38) == 1.0f);
  CHECK(fp::e4m3_to_float(0x7e) == 448.0f);
  CHECK(fp::e4m3_to_float(0xfe) == -448.0f);
  CHECK(fp::e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
  CHECK(fp::e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(fp::e4m3_to_float(0x07) == std::ldexp(7.0f, -9));
  CHECK(fp::e4m3_to_float(0x78) == 256.0f);  // e4m3fn reuses the top exponent for numbers
  CHECK(std::isnan(fp::e4m3_to_float(0x7f)));
  CHECK(std::isnan(fp::e4m3_to_float(0xff)));
  CHECK(std::signbit(fp::e4m3_to_float(0x80)));
  CHECK(fp::e5m2_to_float(0x3c) == 1.0f);
  CHECK(fp::e5m2_to_float(0x7b) == 57344.0f);
  CHECK(fp::e5m2_to_float(0x04) == std::ldexp(1.0f, -14));
  CHECK(fp::e5m2_to_float(0x01) == std::ldexp(1.0f, -16));
  CHECK(fp::e5m2_to_float(0x7c) == kInf);
  CHECK(fp::e5m2_to_float(0xfc) == -kInf);
  for (std::uint8_t c : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff})
    CHECK(std::isnan(fp::e5m2_to_float(c)));

  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    INFO("code 0x" << std::hex << code);
    const float e4 = fp::e4m3_to_float(c);
    if (fp8_is_nan(c, kE4M3Spec))
      CHECK(std::isnan(e4));
    else
      CHECK(static_cast<double>(e4) == fp8_plain_value(c, kE4M3Spec));
    const float e5 = fp::e5m2_to_float(c);
    if (fp8_is_nan(c, kE5M2Spec))
      CHECK(std::isnan(e5));
    else if (fp8_is_inf(c, kE5M2Spec))
      CHECK(e5 == ((c & 0x80) ? -kInf : kInf));
    else
      CHECK(static_cast<double>(e5) == fp8_plain_value(c, kE5M2Spec));
  }
}

TEST_CASE("float -> fp8 matches a brute-force nearest-even search", "[float_formats]") {
  const struct {
    const char* name;
    const Fp8Spec& spec;
    std::uint8_t (*convert)(float);
  } formats[] = {{"e4m3", kE4M3Spec, fp::float_to_e4m3}, {"e5m2", kE5M2Spec, fp::float_to_e5m2}};
  for (const auto& format : formats) {
    INFO(format.name);
    std::vector<double> values;
    for (int code = 0; code <= format.spec.overflow_code; ++code)
      values.push_back(fp8_plain_value(static_cast<std::uint8_t>(code), format.spec));
    std::vector<double> inputs;
    add_neighbourhoods(inputs, values);
    for (float f : special_floats()) inputs.push_back(f);
    for (float f : random_floats(300'000, -20, 17, 7)) inputs.push_back(f);

    int mismatches = 0;
    for (const double input : inputs) {
      const auto f = static_cast<float>(input);
      const std::uint8_t ours = format.convert(f);
      const std::uint8_t ref = fp8_reference_from_double(f, format.spec);
      const bool same = fp8_is_nan(ref, format.spec) ? fp8_is_nan(ours, format.spec) : ours == ref;
      if (!same && ++mismatches <= 5) {
        INFO("float " << f << ": ours 0x" << std::hex << int{ours} << ", reference 0x" << int{ref});
        CHECK(same);
      }
    }
    CHECK(mismatches == 0);
  }
  CHECK(fp::float_to_e4m3(464.0f) == 0x7e);    // tie between 448 and the NaN slot: even
  CHECK(fp::float_to_e4m3(470.0f) == 0x7f);    // beyond range: NaN (e4m3fn has no inf)
  CHECK(fp::float_to_e5m2(61440.0f) == 0x7c);  // tie above the max: inf
  CHECK(fp::float_to_e5m2(61439.0f) == 0x7b);
  CHECK(fp::float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);   // half of the smallest subnormal
  CHECK(fp::float_to_e4m3(-std::ldexp(3.0f, -10)) == 0x82);  // tie 1.5 units: even (2)
}

TEST_CASE("store_from_double rounds a double once", "[float_formats]") {
  // 1 + 2^-11 is the midpoint between half 1.0 and 1.0009765625; a hair above it must round up,
  // but narrowing to float first would drop the hair and round the tie down to even.
  const double above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  std::uint16_t h = 0;
  fp::store_from_double(DType::Float16, &h, 0, above_tie);
  CHECK(h == 0x3c01);
  std::uint16_t b = 0;
  fp::store_from_double(DType::BFloat16, &b, 0, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40));
  CHECK(b == 0x3f81);
  std::uint8_t e = 0;
  fp::store_from_double(DType::Float8E4M3, &e, 0, 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40));
  CHECK(e == 0x39);

  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::uint64_t> any;
  int mismatches = 0;
  for (int i = 0; i < 300'000; ++i) {
    // Doubles in the narrow formats' ranges, with every mantissa bit random.
    const std::uint64_t raw = any(rng);
    const int exponent = static_cast<int>(raw % 60) - 30;
    const double d = std::ldexp(1.0 + static_cast<double>(raw >> 12) * 0x1p-52, exponent) *
                     ((raw & 1) ? -1.0 : 1.0);
    std::uint16_t half = 0, bf = 0;
    std::uint8_t e4 = 0, e5 = 0;
    fp::store_from_double(DType::Float16, &half, 0, d);
    fp::store_from_double(DType::BFloat16, &bf, 0, d);
    fp::store_from_double(DType::Float8E4M3, &e4, 0, d);
    fp::store_from_double(DType::Float8E5M2, &e5, 0, d);
    const bool ok =
        half == half_reference_from_double(d) && bf == bf16_reference_from_double(d) &&
        (fp8_is_nan(e4, kE4M3Spec) ? fp8_is_nan(fp8_reference_from_double(d, kE4M3Spec), kE4M3Spec)
                                   : e4 == fp8_reference_from_double(d, kE4M3Spec)) &&
        e5 == fp8_reference_from_double(d, kE5M2Spec);
    if (!ok && ++mismatches <= 5) {
      INFO("double " << d);
      CHECK(ok);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("store_from_double saturates integers and load_as_double reads every dtype",
          "[float_formats]") {
  std::uint64_t slot = 0;
  auto store_load = [&](DType dtype, double value) {
    slot = 0xdeadbeefdeadbeefull;
    fp::store_from_double(dtype, &slot, 0, value);
    return fp::load_as_double(dtype, &slot, 0);
  };
  CHECK(store_load(DType::Int8, 200.0) == 127);
  CHECK(store_load(DType::Int8, -200.0) == -128);
  CHECK(store_load(DType::Int8, 3.9) == 3);
  CHECK(store_load(DType::Int8, -3.9) == -3);
  CHECK(store_load(DType::Int8, std::nan("")) == 0);
  CHECK(store_load(DType::UInt8, -1.0) == 0);
  CHECK(store_load(DType::UInt8, 255.5) == 255);
  CHECK(store_load(DType::Int16, -40000.0) == -32768);
  CHECK(store_load(DType::Int32, 3e9) == 2147483647.0);
  CHECK(store_load(DType::UInt32, 4294967296.0) == 4294967295.0);
  CHECK(store_load(DType::UInt32, 4294967295.0) == 4294967295.0);
  fp::store_from_double(DType::Int64, &slot, 0, 1e19);
  CHECK(static_cast<std::int64_t>(slot) == std::numeric_limits<std::int64_t>::max());
  fp::store_from_double(DType::Int64, &slot, 0, -1e19);
  CHECK(static_cast<std::int64_t>(slot) == std::numeric_limits<std::int64_t>::min());
  fp::store_from_double(DType::UInt64, &slot, 0, 1e20);
  CHECK(slot == std::numeric_limits<std::uint64_t>::max());
  fp::store_from_double(DType::Int64, &slot, 0, -12345.0);
  CHECK(static_cast<std::int64_t>(slot) == -12345);
  CHECK(store_load(DType::Bool, 0.5) == 1.0);
  CHECK(store_load(DType::Bool, 0.0) == 0.0);
  std::uint8_t truthy = 7;
  CHECK(fp::load_as_double(DType::Bool, &truthy, 0) == 1.0);
  CHECK(store_load(DType::Float32, 0.1) == static_cast<double>(0.1f));
  CHECK(store_load(DType::Float64, 0.1) == 0.1);
  CHECK(store_load(DType::Float16, 0.1) == static_cast<double>(half_reference_to_float(0x2e66)));
  CHECK(store_load(DType::BFloat16, -2.5) == -2.5);
  CHECK(store_load(DType::Float8E4M3, 1000.0) != store_load(DType::Float8E4M3, 1000.0));  // NaN
  CHECK(store_load(DType::Float8E5M2, 1e6) == std::numeric_limits<double>::infinity());
  // Indexing: element 2 of a 16-bit array.
  std::int16_t arr[4] = {1, 2, 3, 4};
  CHECK(fp::load_as_double(DType::Int16, arr, 2) == 3.0);
  fp::store_from_double(DType::Int16, arr, 3, -9.0);
  CHECK(arr[3] == -9);
  CHECK(arr[2] == 3);
}
