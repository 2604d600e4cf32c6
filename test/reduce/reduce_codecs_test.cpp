// The vectorised narrow-float codecs against lib/core/float_formats.hpp (every stored pattern,
// and floats around every rounding boundary), divide_by against division in the accumulate
// type, and the run-time ISA dispatch.

#include <catch2/catch.hpp>
#include <cohort/error.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tunables.hpp"
#include "isa_restorer.hpp"
#include "reduce/dispatch.hpp"
#include "reduce/reduce.hpp"
#include "reduce_reference.hpp"
#include "support/scoped_env.hpp"
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace cohort::reduce::testing {
namespace {

__extension__ typedef __int128 Int128;  // exact truncating division of any 64-bit value

constexpr DType kNarrowFloats[] = {DType::Float16, DType::BFloat16, DType::Float8E4M3,
                                   DType::Float8E5M2};

TEST_CASE("widening every stored pattern matches the reference conversion", "[reduce]") {
  for (Isa isa : available_isas()) {
    const KernelTable& table = kernels_of(isa);
    for (DType dtype : kNarrowFloats) {
      const std::size_t size = dtype_size(dtype);
      const std::size_t patterns = std::size_t{1} << (8 * size);
      std::vector<unsigned char> stored(patterns * size);
      for (std::size_t p = 0; p < patterns; ++p) std::memcpy(&stored[p * size], &p, size);
      std::vector<float> wide(patterns);
      table.widen[static_cast<std::size_t>(dtype)](wide.data(), stored.data(), patterns);
      std::size_t mismatches = 0;
      for (std::size_t p = 0; p < patterns; ++p) {
        const float want = narrow_to_float(dtype, &stored[p * size]);
        const bool same =
            (std::isnan(want) && std::isnan(wide[p])) ||
            std::bit_cast<std::uint32_t>(want) == std::bit_cast<std::uint32_t>(wide[p]);
        if (!same && mismatches++ == 0)
          FAIL_CHECK(isa_name(isa) << " " << dtype_name(dtype) << " pattern " << p << " gave "
                                   << wide[p] << ", reference " << want);
      }
      CHECK(mismatches == 0);
    }
  }
}

// Floats whose low bits sit on, just above and just below every rounding boundary of the
// narrow formats (ties included), for every sign, exponent and high mantissa, plus random bits.
std::vector<float> boundary_floats() {
  std::vector<float> values;
  const std::uint32_t kLow[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001,
                                0x7fff, 0x8000, 0x8001, 0xffff};
  for (std::uint32_t high = 0; high < 0x10000; ++high)
    for (std::uint32_t low : kLow) values.push_back(std::bit_cast<float>((high << 16) | low));
  std::mt19937 rng(99);
  for (int i = 0; i < 200000; ++i)
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  return values;
}

TEST_CASE("narrowing rounds exactly like the reference conversion", "[reduce]") {
  const std::vector<float> values = boundary_floats();
  for (DType dtype : kNarrowFloats) {
    const std::size_t size = dtype_size(dtype);
    std::vector<unsigned char> want(values.size() * size);
    for (std::size_t i = 0; i < values.size(); ++i)
      float_to_narrow(dtype, values[i], &want[i * size]);
    for (Isa isa : available_isas()) {
      const KernelTable& table = kernels_of(isa);
      std::vector<unsigned char> got(want.size());
      table.narrow[static_cast<std::size_t>(dtype)](got.data(), values.data(), values.size());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (same_element(dtype, &got[i * size], &want[i * size])) continue;
        if (mismatches++ == 0)
          FAIL_CHECK(isa_name(isa) << " " << dtype_name(dtype) << " float bits 0x" << std::hex
                                   << std::bit_cast<std::uint32_t>(values[i]) << " gave "
                                   << hex_element(dtype, &got[i * size]) << ", reference "
                                   << hex_element(dtype, &want[i * size]));
      }
      CHECK(mismatches == 0);
    }
  }
}

// data[i] / divisor computed one element at a time in the accumulate type.
void reference_divide(DType dtype, unsigned char* p, std::size_t divisor) {
  switch (dtype) {
    case DType::Float32:
      return write_element(p, read_element<float>(p) / static_cast<float>(divisor));
    case DType::Float64:
      return write_element(p, read_element<double>(p) / static_cast<double>(divisor));
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return float_to_narrow(dtype, narrow_to_float(dtype, p) / static_cast<float>(divisor), p);
#define COHORT_TEST_DIVIDE_CASE(D, T) \
  case DType::D:                      \
    return write_element(p, static_cast<T>(static_cast<Int128>(read_element<T>(p)) / divisor));
      COHORT_TEST_DIVIDE_CASE(Int8, std::int8_t)
      COHORT_TEST_DIVIDE_CASE(UInt8, std::uint8_t)
      COHORT_TEST_DIVIDE_CASE(Int16, std::int16_t)
      COHORT_TEST_DIVIDE_CASE(Int32, std::int32_t)
      COHORT_TEST_DIVIDE_CASE(Int64, std::int64_t)
      COHORT_TEST_DIVIDE_CASE(UInt32, std::uint32_t)
      COHORT_TEST_DIVIDE_CASE(UInt64, std::uint64_t)
#undef COHORT_TEST_DIVIDE_CASE
    case DType::Bool: break;
  }
}

TEST_CASE("divide_by divides in the accumulate type", "[reduce]") {
  IsaRestorer restore;
  std::mt19937_64 rng(3);
  const std::size_t kDivisors[] = {1, 3, 7, 1000, std::size_t{1} << 63, SIZE_MAX};
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::Bool) continue;
    const std::size_t size = dtype_size(dtype);
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{65}, std::size_t{1003}}) {
      for (std::size_t divisor : kDivisors) {
        auto data = random_elements(dtype, count, rng);
        if (dtype == DType::Int64 && count > 0) write_element(data.data(), INT64_MIN);
        auto want = data;
        for (std::size_t i = 0; i < count; ++i) reference_divide(dtype, &want[i * size], divisor);
        for (Isa isa : available_isas()) {
          force_isa(isa);
          std::vector<unsigned char> got(data.size() + 1);  // +1: an unaligned start
          if (!data.empty()) std::memcpy(got.data() + 1, data.data(), data.size());
          divide_by(dtype, got.data() + 1, count, divisor);
          std::size_t mismatches = 0;
          for (std::size_t i = 0; i < count; ++i) {
            if (same_element(dtype, &got[1 + i * size], &want[i * size])) continue;
            if (mismatches++ == 0)
              FAIL_CHECK(isa_name(isa)
                         << " " << dtype_name(dtype) << " / " << divisor << " element " << i
                         << ": got " << hex_element(dtype, &got[1 + i * size]) << " want "
                         << hex_element(dtype, &want[i * size]));
          }
          CHECK(mismatches == 0);
        }
      }
    }
  }
}

TEST_CASE("divide_by rejects a zero divisor and Bool data", "[reduce]") {
  float data[4] = {1, 2, 3, 4};
  try {
    divide_by(DType::Float32, data, 4, 0);
    FAIL("divisor 0 accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("divisor 0"));
  }
  bool flags[2] = {true, false};
  try {
    divide_by(DType::Bool, flags, 2, 2);
    FAIL("bool divide accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("bool"));
  }
  CHECK(data[0] == 1.0f);
}

TEST_CASE("the dispatched ISA is the best available and can be forced", "[reduce]") {
  IsaRestorer restore;
  // The best available unless COHORT_KERNEL_ISA names another (tested below).
  CHECK(std::string(active_isa()) ==
        isa_name(kernel_isa_for(cohort::tunables().kernel_isa, &isa_available)));
  CHECK(isa_available(Isa::Portable));
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    if (isa_available(isa)) {
      force_isa(isa);
      CHECK(std::string(active_isa()) == isa_name(isa));
      CHECK(&active_kernels() == &kernels_of(isa));
      CHECK(static_cast<int>(isa) <= static_cast<int>(detected_isa()));
    } else {
      CHECK_THROWS_AS(force_isa(isa), Error);
    }
  }
#if defined(__x86_64__)
  // On x86-64 the detection must agree with what the CPU reports.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    CHECK(detected_isa() == Isa::Avx512);
  else if (__builtin_cpu_supports("avx2") && [] {
             // F16C is CPUID leaf 1, ECX bit 29 (clang before 15 has no "f16c" builtin name).
             unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
             return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
           }())
    CHECK(detected_isa() == Isa::Avx2);
#else
  CHECK(detected_isa() == Isa::Portable);
#endif
  WARN("reduction kernels tested on: " << [] {
    std::string names;
    for (Isa isa : available_isas()) names += std::string(isa_name(isa)) + " ";
    return names;
  }());
}

/// Stand-ins for isa_available on CPUs this test may not run on.
bool avx2_at_most(Isa isa) {
  return isa != Isa::Avx512;
}
bool portable_only(Isa isa) {
  return isa == Isa::Portable;
}

TEST_CASE("COHORT_KERNEL_ISA names an instruction set the CPU runs, or is refused", "[reduce]") {
  CHECK(kernel_isa_for(KernelIsa::Auto, &avx2_at_most) == Isa::Avx2);
  CHECK(kernel_isa_for(KernelIsa::Auto, &portable_only) == Isa::Portable);
  CHECK(kernel_isa_for(KernelIsa::Avx2, &avx2_at_most) == Isa::Avx2);
  CHECK(kernel_isa_for(KernelIsa::Portable, &avx2_at_most) == Isa::Portable);
  CHECK(kernel_isa_for(KernelIsa::Auto, &isa_available) == detected_isa());
  try {
    kernel_isa_for(KernelIsa::Avx512, &avx2_at_most);
    FAIL("avx512 accepted on a CPU that runs avx2 at most");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("COHORT_KERNEL_ISA=avx512 names instructions this "
                                            "CPU lacks (it runs avx2 at most)"));
  }
  CHECK_THROWS_WITH(
      kernel_isa_for(KernelIsa::Avx2, &portable_only),
      Catch::Contains("COHORT_KERNEL_ISA=avx2") && Catch::Contains("(it runs portable at most)"));
}

TEST_CASE("init's application of COHORT_KERNEL_ISA switches the kernels' table", "[reduce]") {
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    const cohort::test::ScopedEnv set("COHORT_KERNEL_ISA", isa_name(isa));
    reload_tunables();
    apply_kernel_isa_tunable();
    CHECK(std::string(active_isa()) == isa_name(isa));
    CHECK(&active_kernels() == &kernels_of(isa));
  }
  {
    const cohort::test::ScopedEnv set("COHORT_KERNEL_ISA", "auto");
    reload_tunables();
    force_isa(Isa::Portable);
    apply_kernel_isa_tunable();
    CHECK(std::string(active_isa()) == isa_name(detected_isa()));
  }
  if (!isa_available(Isa::Avx512)) {
    // A CPU without it: the value is refused and the kernels stay as they were (forced to the
    // portable ones first, so staying differs from a reset to the widest).
    const cohort::test::ScopedEnv set("COHORT_KERNEL_ISA", "avx512");
    reload_tunables();
    force_isa(Isa::Portable);
    CHECK_THROWS_AS(apply_kernel_isa_tunable(), Error);
    CHECK(std::string(active_isa()) == "portable");
  }
  reload_tunables();  // the environment as the test found it
}

}  // namespace
}  // namespace cohort::reduce::testing
