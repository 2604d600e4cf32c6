// The device kernels' element logic (lib/gpu/kernels/float_codecs.cuh) compiled as host code and
// run against train::kernels::convert on every instruction set this CPU has: all 36 dtype pairs,
// every 8- and 16-bit source pattern, f32/f64 sources on each narrow format's values, the
// midpoints between them and their neighbours (ties), random bit patterns (NaN payloads,
// signalling NaNs), and factors that overflow, underflow and make inf * 0. The results must be
// identical bits, NaN payloads included, and the non-finite flags equal.
//
// This needs no GPU: it checks that the device code's explicit x86 NaN conventions and its port
// of lib/reduce's rounding agree with the CPU kernels. What it cannot check is the GPU's own
// arithmetic on non-NaN operands (IEEE round-to-nearest-even, subnormals kept), which
// device_kernels_test.cpp covers where a GPU is present.

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu/kernels/float_codecs.cuh"
#include "reduce/dispatch.hpp"
#include "train/kernels/float_kernels.hpp"

namespace cohort::gpu::kernels {
namespace {

constexpr DType kFloatDTypes[] = {DType::Float32,  DType::Float64,    DType::Float16,
                                  DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2};

// Calls f(integral_constant<DType, S>, integral_constant<DType, D>) for the runtime pair.
template <class F, std::size_t... I>
void dispatch_one(DType dtype, F&& f, std::index_sequence<I...>) {
  ((dtype == kFloatDTypes[I] ? f(std::integral_constant<DType, kFloatDTypes[I]>{}) : void()), ...);
}
template <class F>
void dispatch(DType dtype, F&& f) {
  dispatch_one(dtype, f, std::make_index_sequence<6>{});
}

// The device path's loop, run on the host: returns the non-finite flag.
bool codec_convert(DType s, const void* src, DType d, void* dst, std::size_t count, float factor) {
  bool flag = false;
  dispatch(s, [&](auto sc) {
    dispatch(d, [&](auto dc) {
      for (std::size_t i = 0; i < count; ++i)
        flag |=
            codec::convert_element<decltype(sc)::value, decltype(dc)::value>(src, dst, i, factor);
    });
  });
  return flag;
}

// Every bit pattern of a 1- or 2-byte format.
std::vector<unsigned char> all_patterns(DType dtype) {
  const std::size_t patterns = dtype_size(dtype) == 1 ? 256 : 65536;
  std::vector<unsigned char> out(patterns * dtype_size(dtype));
  for (std::size_t p = 0; p < patterns; ++p)
    std::memcpy(&out[p * dtype_size(dtype)], &p, dtype_size(dtype));
  return out;
}

// f32 / f64 sources: each narrow format's values with both signs, the midpoints between
// neighbours and one step either side of them, then random bit patterns.
std::vector<unsigned char> wide_source(DType s) {
  std::vector<double> values;
  for (DType f : {DType::Float16, DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2}) {
    const std::vector<unsigned char> patterns = all_patterns(f);
    const std::size_t n = patterns.size() / dtype_size(f);
    std::vector<double> decoded(n);
    train::kernels::convert(f, patterns.data(), DType::Float64, decoded.data(), n);
    // Step 7 through the 16-bit formats keeps the sweep quick; fp8 takes every value.
    const std::size_t step = n > 256 ? 7 : 1;
    for (std::size_t p = 0; p + 1 < n; p += step) {
      const double a = decoded[p], b = decoded[p + 1];
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const double mid = a + (b - a) / 2;
      for (double v : {a, mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) {
        values.push_back(v);
        values.push_back(-v);
      }
    }
  }
  for (double v : {0.0, double{INFINITY}, double{NAN}, 0x1p-1074, 0x1p-149, 0x1p-126,
                   3.4028234663852886e38, 3.4028235677973366e38, 1e300})
    for (double signed_v : {v, -v}) values.push_back(signed_v);
  if (s == DType::Float32) {
    // As float: most doubles above are exact floats or round to the float next to a tie.
    std::vector<float> narrowed(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) narrowed[i] = static_cast<float>(values[i]);
    std::mt19937 rng(11);
    for (int i = 0; i < 20000; ++i)
      narrowed.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
    // Signalling NaNs with payloads, both signs.
    for (std::uint32_t b : {0x7f800001u, 0xff800001u, 0x7fa00000u, 0xffbfffffu, 0x7fc12345u})
      narrowed.push_back(std::bit_cast<float>(b));
    std::vector<unsigned char> out(narrowed.size() * 4);
    std::memcpy(out.data(), narrowed.data(), out.size());
    return out;
  }
  std::mt19937_64 rng(13);
  for (int i = 0; i < 20000; ++i) values.push_back(std::bit_cast<double>(rng()));
  for (std::uint64_t b : {0x7ff0000000000001ull, 0xfff0000000000001ull, 0x7ff4000000000000ull,
                          0x7ff8123456789abcull, 0xfff7ffffffffffffull})
    values.push_back(std::bit_cast<double>(b));
  std::vector<unsigned char> out(values.size() * 8);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<unsigned char> source_of(DType s) {
  if (s == DType::Float32 || s == DType::Float64) return wide_source(s);
  return all_patterns(s);
}

std::string hex_element(DType dtype, const unsigned char* data, std::size_t i) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, data + i * dtype_size(dtype), dtype_size(dtype));
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

// "" when codec and CPU agree on every element and the flag, else the first difference.
std::string compare(DType s, DType d, const std::vector<unsigned char>& src, float factor) {
  const std::size_t count = src.size() / dtype_size(s);
  std::vector<unsigned char> want(count * dtype_size(d)), got(count * dtype_size(d));
  const bool want_flag = train::kernels::convert(s, src.data(), d, want.data(), count, factor);
  const bool got_flag = codec_convert(s, src.data(), d, got.data(), count, factor);
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(&want[i * dtype_size(d)], &got[i * dtype_size(d)], dtype_size(d)) != 0)
      return "element " + std::to_string(i) + " (source " + hex_element(s, src.data(), i) +
             "): cpu " + hex_element(d, want.data(), i) + ", codec " +
             hex_element(d, got.data(), i);
  }
  if (want_flag != got_flag) return "flag: cpu " + std::to_string(want_flag);
  return "";
}

struct IsaRestorer {
  IsaRestorer() = default;
  IsaRestorer(const IsaRestorer&) = delete;
  IsaRestorer& operator=(const IsaRestorer&) = delete;
  ~IsaRestorer() { reduce::force_isa(reduce::detected_isa()); }
};

TEST_CASE("device convert logic equals train::kernels::convert bit for bit", "[gpu][kernels]") {
  IsaRestorer restore;
  for (reduce::Isa isa : {reduce::Isa::Portable, reduce::Isa::Avx2, reduce::Isa::Avx512}) {
    if (!reduce::isa_available(isa)) continue;
    reduce::force_isa(isa);
    for (DType s : kFloatDTypes) {
      const std::vector<unsigned char> src = source_of(s);
      for (DType d : kFloatDTypes) {
        for (float factor : {1.0f, 0.5f, 1.0f / 65536.0f, 3.0f, -1.5f, 65536.0f, 1e-30f, 0.0f}) {
          INFO(reduce::isa_name(isa)
               << " " << dtype_name(s) << " -> " << dtype_name(d) << " factor " << factor);
          CHECK(compare(s, d, src, factor) == "");
        }
      }
    }
  }
}

TEST_CASE("device convert logic in place equals the CPU's", "[gpu][kernels]") {
  for (DType s : kFloatDTypes) {
    for (DType d : kFloatDTypes) {
      if (dtype_size(s) != dtype_size(d)) continue;
      const std::vector<unsigned char> src = source_of(s);
      const std::size_t count = src.size() / dtype_size(s);
      std::vector<unsigned char> want = src, got = src;
      const bool want_flag = train::kernels::convert(s, want.data(), d, want.data(), count, 0.25f);
      const bool got_flag = codec_convert(s, got.data(), d, got.data(), count, 0.25f);
      INFO(dtype_name(s) << " -> " << dtype_name(d));
      CHECK(want == got);
      CHECK(want_flag == got_flag);
    }
  }
}

TEST_CASE("device codecs: hand-checked conversions", "[gpu][kernels]") {
  // Values worked out from the formats' definitions, independent of any kernel.
  CHECK(codec::float_to_half_bits(65504.0f) == 0x7bffu);
  CHECK(codec::float_to_half_bits(65520.0f) == 0x7c00u);    // the tie past max: inf
  CHECK(codec::float_to_half_bits(0x1p-25f) == 0x0000u);    // half the smallest: even 0
  CHECK(codec::float_to_half_bits(0x1.8p-24f) == 0x0002u);  // 1.5 units: ties to 2
  CHECK(codec::float_to_half_bits(-NAN) == 0xfe00u);
  CHECK(codec::float_to_bf16_bits(1.00390625f) == 0x3f80u);  // 1 + 2^-8: tie to even
  CHECK(codec::float_to_bf16_bits(std::bit_cast<float>(0x7f800001u)) == 0x7fc0u);
  CHECK(codec::float_to_e4m3(448.0f) == 0x7eu);
  CHECK(codec::float_to_e4m3(464.0f) == 0x7eu);  // tie rounds down to even
  CHECK(codec::float_to_e4m3(464.5f) == 0x7fu);  // past it: NaN
  CHECK(codec::float_to_e4m3(-INFINITY) == 0xffu);
  CHECK(codec::float_to_e4m3(0x1p-9f) == 0x01u);  // smallest subnormal
  CHECK(codec::float_to_e5m2(57344.0f) == 0x7bu);
  CHECK(codec::float_to_e5m2(61440.0f) == 0x7cu);  // the tie past max: inf
  CHECK(codec::float_to_e5m2(NAN) == 0x7eu);
  CHECK(codec::e4m3_to_float(0x7fu) != codec::e4m3_to_float(0x7fu));  // NaN
  CHECK(codec::e4m3_to_float(0x01u) == 0x1p-9f);
  CHECK(codec::e5m2_to_float(0x7cu) == INFINITY);
  // x86 NaN conventions: inf * 0 is the negative indefinite NaN; a NaN operand is quieted.
  CHECK(std::bit_cast<std::uint32_t>(codec::mul(INFINITY, 0.0f)) == 0xffc00000u);
  CHECK(std::bit_cast<std::uint32_t>(codec::mul(std::bit_cast<float>(0x7f800001u), 2.0f)) ==
        0x7fc00001u);
  CHECK(std::bit_cast<std::uint64_t>(codec::widen(std::bit_cast<float>(0xffc00001u))) ==
        0xfff8000020000000ull);
  // Rounding to odd: 1 + 2^-30 is inexact in float, so the last bit is set.
  CHECK(std::bit_cast<std::uint32_t>(codec::narrow_to_odd(1.0 + 0x1p-30)) == 0x3f800001u);
  CHECK(std::bit_cast<std::uint32_t>(codec::narrow_to_odd(1e300)) == 0x7f7fffffu);
}

}  // namespace
}  // namespace cohort::gpu::kernels
