#pragma once

/// Element types and reduction operators understood by every cohort collective.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cohort {

/// Element type of a Buffer. fp8 types are storage formats: they convert to and from float and
/// reduce through float, like f16 and bf16.
enum class DType : std::uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Float8E4M3,  ///< OCP e4m3fn: no infinities, one NaN pattern per sign, max 448
  Float8E5M2,  ///< OCP e5m2: IEEE-like, with infinities and NaNs, max 57344
  Int8,
  UInt8,
  Int16,
  Int32,
  Int64,
  UInt32,
  UInt64,
  Bool,
};

/// Every dtype, in declaration order (for sweeps and name tables).
inline constexpr DType kAllDTypes[] = {
    DType::Float32,    DType::Float64, DType::Float16, DType::BFloat16, DType::Float8E4M3,
    DType::Float8E5M2, DType::Int8,    DType::UInt8,   DType::Int16,    DType::Int32,
    DType::Int64,      DType::UInt32,  DType::UInt64,  DType::Bool};

/// Bytes per element. Inline: every op's validation and every algorithm asks, per op.
constexpr std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float64:
    case DType::Int64:
    case DType::UInt64: return 8;
    case DType::Float32:
    case DType::Int32:
    case DType::UInt32: return 4;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int16: return 2;
    case DType::Float8E4M3:
    case DType::Float8E5M2:
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool: return 1;
  }
  return 0;
}
/// The name nccl-tests uses: "float", "double", "half", "bfloat16", "fp8_e4m3", "fp8_e5m2",
/// "int8", "uint8", "int16", "int32", "int64", "uint32", "uint64", "bool".
std::string_view dtype_name(DType dtype) noexcept;
/// Parses dtype_name()'s spelling and common aliases ("f32", "float32", "fp16", "bf16", ...).
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
/// True for the six floating-point types.
bool dtype_is_floating(DType dtype) noexcept;
/// True for the signed and unsigned integer types (not Bool).
bool dtype_is_integer(DType dtype) noexcept;

/// Reduction operator. Avg is the mean over the contributing ranks:
/// - f16, bf16, fp8: each rank's contribution is divided by the number of ranks before the sum
///   (NCCL's pre-multiplied sum), so the result does not overflow whenever the mean and every
///   x/n are representable; it may differ from sum/n in the last place.
/// - f32, f64: the sum, divided once at the end (exact for integer-valued data). On device
///   buffers the op is NCCL's ncclAvg, which pre-multiplies these too: no overflow, but the
///   last place may differ from the host path's (ten ranks averaging 1.0f can give 1.0000001).
/// - integers: the sum (wrapping on overflow), then truncating division toward zero:
///   avg of {-3, 0} on two ranks is -1, of {3, 4} is 3.
/// BAnd/BOr/BXor
/// are for integers and Bool only. On Bool, Sum/Max/BOr are "or", Prod/Min/BAnd are "and".
/// Min and Max propagate NaN: if either operand is NaN the result is NaN.
enum class ReduceOp : std::uint8_t { Sum, Prod, Min, Max, Avg, BAnd, BOr, BXor };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min,
                                             ReduceOp::Max, ReduceOp::Avg,  ReduceOp::BAnd,
                                             ReduceOp::BOr, ReduceOp::BXor};

/// "sum", "prod", "min", "max", "avg", "band", "bor", "bxor".
std::string_view reduce_op_name(ReduceOp op) noexcept;
std::optional<ReduceOp> reduce_op_from_name(std::string_view name) noexcept;
/// Whether `op` is defined on `dtype` (bitwise ops need integers or Bool; Avg is not for Bool).
bool reduce_op_supports(ReduceOp op, DType dtype) noexcept;

}  // namespace cohort
