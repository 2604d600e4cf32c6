// Every reduce op on every dtype, on every instruction set this CPU runs, against the scalar
// reference in reduce_reference.hpp: odd lengths, unaligned starts, in-place and three-operand
// forms, and the bytes around the destination left untouched.

#include <catch2/catch.hpp>
#include <cohort/error.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "isa_restorer.hpp"
#include "reduce/dispatch.hpp"
#include "reduce/reduce.hpp"
#include "reduce_reference.hpp"

namespace cohort::reduce::testing {
namespace {

enum class Form { ThreeOperand, InPlaceFirst, InPlaceSecond, Into };

const char* form_name(Form form) {
  switch (form) {
    case Form::ThreeOperand: return "reduce_to(dst, a, b)";
    case Form::InPlaceFirst: return "reduce_to(a, a, b)";
    case Form::InPlaceSecond: return "reduce_to(b, a, b)";
    case Form::Into: return "reduce_into(a, b)";
  }
  return "?";
}

/// A copy of `data` placed `offset` bytes into a buffer with guard bytes on both sides.
struct PlacedBuffer {
  PlacedBuffer(const std::vector<unsigned char>& data, std::size_t offset)
      : storage(offset + data.size() + kGuard, kGuardByte), offset(offset), size(data.size()) {
    if (!data.empty()) std::memcpy(ptr(), data.data(), data.size());
  }
  unsigned char* ptr() { return storage.data() + offset; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < offset; ++i)
      if (storage[i] != kGuardByte) return false;
    for (std::size_t i = offset + size; i < storage.size(); ++i)
      if (storage[i] != kGuardByte) return false;
    return true;
  }
  std::vector<unsigned char> storage;
  std::size_t offset;
  std::size_t size;
};

struct Mismatches {
  std::size_t count = 0;
  std::string first;
};

Mismatches compare(DType dtype, const unsigned char* got, const std::vector<unsigned char>& want,
                   const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  const std::size_t size = dtype_size(dtype);
  const std::size_t count = want.size() / size;
  // Runs equal byte for byte are skipped with one memcmp; only a run that differs (a mismatch,
  // or NaNs with different payloads) is compared element by element. Element-wise calls over the
  // large case were most of this test's time in the unoptimised sanitizer build.
  constexpr std::size_t kRun = 256;
  Mismatches m;
  for (std::size_t first = 0; first < count; first += kRun) {
    const std::size_t end = std::min(count, first + kRun);
    if (std::memcmp(got + first * size, want.data() + first * size, (end - first) * size) == 0)
      continue;
    for (std::size_t i = first; i < end; ++i) {
      const std::size_t at = i * size;
      if (same_element(dtype, got + at, want.data() + at)) continue;
      if (m.count++ == 0)
        m.first = "element " + std::to_string(i) + ": a=" + hex_element(dtype, a.data() + at) +
                  " b=" + hex_element(dtype, b.data() + at) + " got " +
                  hex_element(dtype, got + at) + " want " + hex_element(dtype, want.data() + at);
    }
  }
  return m;
}

void run_form(Form form, ReduceOp op, DType dtype, std::size_t count, std::size_t offset,
              const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
              const std::vector<unsigned char>& want) {
  PlacedBuffer pa(a, offset), pb(b, offset);
  PlacedBuffer dst(std::vector<unsigned char>(a.size(), 0x5a), offset);
  unsigned char* result = nullptr;
  switch (form) {
    case Form::ThreeOperand:
      reduce_to(op, dtype, dst.ptr(), pa.ptr(), pb.ptr(), count);
      result = dst.ptr();
      break;
    case Form::InPlaceFirst:
      reduce_to(op, dtype, pa.ptr(), pa.ptr(), pb.ptr(), count);
      result = pa.ptr();
      break;
    case Form::InPlaceSecond:
      reduce_to(op, dtype, pb.ptr(), pa.ptr(), pb.ptr(), count);
      result = pb.ptr();
      break;
    case Form::Into:
      reduce_into(op, dtype, pa.ptr(), pb.ptr(), count);
      result = pa.ptr();
      break;
  }
  INFO(form_name(form) << " isa=" << active_isa() << " op=" << reduce_op_name(op) << " dtype="
                       << dtype_name(dtype) << " count=" << count << " offset=" << offset);
  const Mismatches m = compare(dtype, result, want, a, b);
  INFO("first mismatch: " << m.first);
  CHECK(m.count == 0);
  CHECK(pa.guards_intact());
  CHECK(pb.guards_intact());
  CHECK(dst.guards_intact());
  if (form != Form::InPlaceSecond && !b.empty())
    CHECK(std::memcmp(pb.ptr(), b.data(), b.size()) == 0);
}

TEST_CASE("every op on every dtype matches the scalar reference on every ISA", "[reduce]") {
  IsaRestorer restore;
  std::mt19937_64 rng(20240611);
  // The last is a long run through each kernel's block loop, far longer than any block (64
  // one-byte lanes): the kernels have no path that depends on the count beyond the blocks and
  // the tail. It was 1000003, which took most of the unit suite's time in CI (55 s of 95 in the
  // sanitizer build) and tested nothing more.
  const std::size_t kCounts[] = {0, 1, 7, 63, 64, 65, 100003};
  const Form kAllForms[] = {Form::ThreeOperand, Form::InPlaceFirst, Form::InPlaceSecond,
                            Form::Into};
  const Form kLargeForms[] = {Form::ThreeOperand, Form::Into};
  for (DType dtype : kAllDTypes) {
    const std::size_t size = dtype_size(dtype);
    // The large operands are made once per dtype: generating them dominates otherwise.
    const auto large_a = random_elements(dtype, kCounts[std::size(kCounts) - 1], rng);
    const auto large_b = random_elements(dtype, kCounts[std::size(kCounts) - 1], rng);
    for (ReduceOp op : kAllReduceOps) {
      if (!reduce_op_supports(op, dtype)) continue;
      for (std::size_t count : kCounts) {
        const bool large = count == kCounts[std::size(kCounts) - 1];
        const auto a = large ? large_a : random_elements(dtype, count, rng);
        const auto b = large ? large_b : random_elements(dtype, count, rng);
        std::vector<unsigned char> want(a.size());
        for (std::size_t i = 0; i < count; ++i)
          reference_element(op, dtype, a.data() + i * size, b.data() + i * size,
                            want.data() + i * size);
        // The large case keeps to two forms and the unaligned offset, for speed.
        for (Isa isa : available_isas()) {
          force_isa(isa);
          for (std::size_t offset : {std::size_t{0}, size, std::size_t{1}}) {
            if (large && offset != 1) continue;
            if (large) {
              for (Form form : kLargeForms) run_form(form, op, dtype, count, offset, a, b, want);
            } else {
              for (Form form : kAllForms) run_form(form, op, dtype, count, offset, a, b, want);
            }
          }
        }
      }
    }
  }
}

// 65 copies of one pair, so the full-vector loop and the tail both see it.
template <class T>
std::vector<T> reduce_pair(Isa isa, ReduceOp op, DType dtype, T x, T y) {
  force_isa(isa);
  std::vector<T> a(65, x), b(65, y), out(65);
  reduce_to(op, dtype, out.data(), a.data(), b.data(), out.size());
  return out;
}

template <class T>
void check_all(const std::vector<T>& got, T want) {
  for (const T& v : got) CHECK(std::memcmp(&v, &want, sizeof(T)) == 0);
}

TEST_CASE("integer sums and products wrap around like two's complement", "[reduce]") {
  IsaRestorer restore;
  for (Isa isa : available_isas()) {
    INFO("isa " << isa_name(isa));
    check_all(reduce_pair<std::int32_t>(isa, ReduceOp::Sum, DType::Int32, INT_MAX, 1), INT_MIN);
    check_all(reduce_pair<std::int32_t>(isa, ReduceOp::Sum, DType::Int32, INT_MIN, -1), INT_MAX);
    check_all(reduce_pair<std::int8_t>(isa, ReduceOp::Sum, DType::Int8, 127, 1), std::int8_t{-128});
    check_all(reduce_pair<std::int16_t>(isa, ReduceOp::Avg, DType::Int16, 32767, 1),
              std::int16_t{-32768});
    check_all(reduce_pair<std::int64_t>(isa, ReduceOp::Sum, DType::Int64, INT64_MAX, 1), INT64_MIN);
    check_all(reduce_pair<std::uint8_t>(isa, ReduceOp::Sum, DType::UInt8, 255, 1), std::uint8_t{0});
    check_all(reduce_pair<std::uint32_t>(isa, ReduceOp::Sum, DType::UInt32, UINT32_MAX, 2),
              std::uint32_t{1});
    check_all(reduce_pair<std::uint64_t>(isa, ReduceOp::Sum, DType::UInt64, UINT64_MAX, 1),
              std::uint64_t{0});
    check_all(reduce_pair<std::int32_t>(isa, ReduceOp::Prod, DType::Int32, 65536, 65536), 0);
    check_all(reduce_pair<std::int32_t>(isa, ReduceOp::Prod, DType::Int32, 65537, 65537),
              131073);  // (2^16 + 1)^2 = 2^32 + 2^17 + 1 wraps to 2^17 + 1
    check_all(reduce_pair<std::int64_t>(isa, ReduceOp::Prod, DType::Int64, INT64_MIN, -1),
              INT64_MIN);
    check_all(reduce_pair<std::int8_t>(isa, ReduceOp::Prod, DType::Int8, -128, -1),
              std::int8_t{-128});
    check_all(reduce_pair<std::uint16_t>(isa, ReduceOp::Prod, DType::Int16, 0xffff, 0xffff),
              std::uint16_t{1});
    // Signed and unsigned comparisons differ on the same bits.
    check_all(reduce_pair<std::int64_t>(isa, ReduceOp::Min, DType::Int64, -1, 1), INT64_C(-1));
    check_all(reduce_pair<std::uint64_t>(isa, ReduceOp::Min, DType::UInt64, UINT64_MAX, 1),
              std::uint64_t{1});
    check_all(reduce_pair<std::int8_t>(isa, ReduceOp::Max, DType::Int8, -128, 127),
              std::int8_t{127});
    check_all(reduce_pair<std::uint32_t>(isa, ReduceOp::Max, DType::UInt32, 0x80000000u, 1),
              0x80000000u);
  }
}

TEST_CASE("subnormal inputs and results are not flushed to zero", "[reduce]") {
  IsaRestorer restore;
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float smallest_normal = std::numeric_limits<float>::min();
  const double tiny_d = std::numeric_limits<double>::denorm_min();
  for (Isa isa : available_isas()) {
    INFO("isa " << isa_name(isa));
    check_all(reduce_pair<float>(isa, ReduceOp::Sum, DType::Float32, tiny, tiny), 2 * tiny);
    check_all(reduce_pair<float>(isa, ReduceOp::Sum, DType::Float32, smallest_normal,
                                 -0.5f * smallest_normal),
              0.5f * smallest_normal);
    check_all(reduce_pair<float>(isa, ReduceOp::Prod, DType::Float32, 0x1p-140f, 0x1p-5f),
              0x1p-145f);
    check_all(reduce_pair<float>(isa, ReduceOp::Max, DType::Float32, tiny, 0.0f), tiny);
    check_all(reduce_pair<float>(isa, ReduceOp::Min, DType::Float32, -tiny, 0.0f), -tiny);
    check_all(reduce_pair<double>(isa, ReduceOp::Sum, DType::Float64, tiny_d, tiny_d), 2 * tiny_d);
    // Half 0x0001 is 2^-24; bf16 0x0001 is the float subnormal 2^-133.
    check_all(reduce_pair<std::uint16_t>(isa, ReduceOp::Sum, DType::Float16, 1, 1),
              std::uint16_t{2});
    check_all(reduce_pair<std::uint16_t>(isa, ReduceOp::Sum, DType::BFloat16, 1, 1),
              std::uint16_t{2});
    check_all(reduce_pair<std::uint8_t>(isa, ReduceOp::Sum, DType::Float8E4M3, 1, 1),
              std::uint8_t{2});
    check_all(reduce_pair<std::uint8_t>(isa, ReduceOp::Sum, DType::Float8E5M2, 1, 1),
              std::uint8_t{2});
  }
}

TEST_CASE("min and max propagate NaN from either operand", "[reduce]") {
  IsaRestorer restore;
  const DType kFloats[] = {DType::Float32,  DType::Float64,    DType::Float16,
                           DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2};
  std::mt19937_64 rng(7);
  for (Isa isa : available_isas()) {
    force_isa(isa);
    for (DType dtype : kFloats) {
      const std::size_t size = dtype_size(dtype);
      // A NaN of this dtype: the reference encoder of a float NaN.
      std::vector<unsigned char> nan(size);
      if (dtype == DType::Float32) {
        write_element(nan.data(), std::numeric_limits<float>::quiet_NaN());
      } else if (dtype == DType::Float64) {
        write_element(nan.data(), std::numeric_limits<double>::quiet_NaN());
      } else {
        float_to_narrow(dtype, std::numeric_limits<float>::quiet_NaN(), nan.data());
      }
      for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
        const std::size_t count = 37;
        auto a = random_elements(dtype, count, rng);
        auto b = random_elements(dtype, count, rng);
        for (std::size_t i = 0; i < count; i += 2) std::memcpy(&a[i * size], nan.data(), size);
        for (std::size_t i = 0; i < count; i += 3) std::memcpy(&b[i * size], nan.data(), size);
        std::vector<unsigned char> out(a.size());
        reduce_to(op, dtype, out.data(), a.data(), b.data(), count);
        for (std::size_t i = 0; i < count; ++i) {
          if (i % 2 != 0 && i % 3 != 0) continue;
          INFO("isa " << isa_name(isa) << " " << reduce_op_name(op) << " " << dtype_name(dtype)
                      << " element " << i);
          CHECK(is_nan_element(dtype, &out[i * size]));
        }
      }
    }
  }
}

TEST_CASE("ops undefined on a dtype are rejected naming both", "[reduce]") {
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (reduce_op_supports(op, dtype)) {
        CHECK_NOTHROW(check_supported(op, dtype));
        continue;
      }
      unsigned char buffer[16] = {};
      for (int call = 0; call < 3; ++call) {
        try {
          if (call == 0) check_supported(op, dtype);
          if (call == 1) reduce_into(op, dtype, buffer, buffer, 1);
          if (call == 2) reduce_to(op, dtype, buffer, buffer, buffer, 1);
          FAIL("no error for " << reduce_op_name(op) << " on " << dtype_name(dtype));
        } catch (const Error& e) {
          CHECK(e.code() == ErrorCode::InvalidArgument);
          CHECK_THAT(e.message(), Catch::Contains(std::string(reduce_op_name(op))));
          CHECK_THAT(e.message(), Catch::Contains(std::string(dtype_name(dtype))));
        }
      }
    }
  }
  // Bitwise ops on every float type; Avg on Bool.
  CHECK_THROWS_AS(check_supported(ReduceOp::BXor, DType::Float16), Error);
  CHECK_THROWS_AS(check_supported(ReduceOp::Avg, DType::Bool), Error);
  CHECK_THROWS_AS(check_supported(static_cast<ReduceOp>(200), DType::Float32), Error);
  CHECK_THROWS_AS(check_supported(ReduceOp::Sum, static_cast<DType>(200)), Error);
}

}  // namespace
}  // namespace cohort::reduce::testing
