#include <cohort/dtype.hpp>

#include <array>
#include <string>

namespace cohort {
namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t size;
  std::string_view name;  // nccl-tests spelling
  std::array<std::string_view, 3> aliases;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::Float32, 4, "float", {"float32", "f32", "fp32"}},
    {DType::Float64, 8, "double", {"float64", "f64", "fp64"}},
    {DType::Float16, 2, "half", {"float16", "f16", "fp16"}},
    {DType::BFloat16, 2, "bfloat16", {"bf16", "bfloat", ""}},
    {DType::Float8E4M3, 1, "fp8_e4m3", {"float8_e4m3fn", "e4m3", "f8e4m3"}},
    {DType::Float8E5M2, 1, "fp8_e5m2", {"float8_e5m2", "e5m2", "f8e5m2"}},
    {DType::Int8, 1, "int8", {"i8", "char", ""}},
    {DType::UInt8, 1, "uint8", {"u8", "byte", ""}},
    {DType::Int16, 2, "int16", {"i16", "short", ""}},
    {DType::Int32, 4, "int32", {"i32", "int", ""}},
    {DType::Int64, 8, "int64", {"i64", "long", ""}},
    {DType::UInt32, 4, "uint32", {"u32", "uint", ""}},
    {DType::UInt64, 8, "uint64", {"u64", "ulong", ""}},
    {DType::Bool, 1, "bool", {"boolean", "", ""}},
};

// dtype_size is inline in the header (every op asks); the table keeps the sizes beside the
// names, and this holds the two together.
constexpr bool sizes_agree() {
  for (const auto& entry : kDTypes)
    if (dtype_size(entry.dtype) != entry.size) return false;
  return true;
}
static_assert(sizes_agree(), "dtype_size disagrees with kDTypes");

const DTypeInfo& info(DType dtype) noexcept {
  return kDTypes[static_cast<std::size_t>(dtype)];
}

constexpr std::string_view kOpNames[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};

}  // namespace

std::string_view dtype_name(DType dtype) noexcept {
  return info(dtype).name;
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  if (name.empty()) return std::nullopt;
  for (const auto& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
    for (auto alias : entry.aliases)
      if (!alias.empty() && alias == name) return entry.dtype;
  }
  return std::nullopt;
}

bool dtype_is_floating(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32:
    case DType::Float64:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2: return true;
    default: return false;
  }
}

bool dtype_is_integer(DType dtype) noexcept {
  return !dtype_is_floating(dtype) && dtype != DType::Bool;
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
  return kOpNames[static_cast<std::size_t>(op)];
}

std::optional<ReduceOp> reduce_op_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(kOpNames); ++i)
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  if (name == "mean") return ReduceOp::Avg;
  if (name == "product") return ReduceOp::Prod;
  return std::nullopt;
}

bool reduce_op_supports(ReduceOp op, DType dtype) noexcept {
  switch (op) {
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: return !dtype_is_floating(dtype);
    case ReduceOp::Avg: return dtype != DType::Bool;
    default: return true;
  }
}

}  // namespace cohort
