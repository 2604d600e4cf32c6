// Entry points of the training layer's element-wise kernels: check the dtype, then call the
// kernel of the instruction set lib/reduce is using (see float_kernel_table.hpp).

#include "train/kernels/float_kernels.hpp"

#include <cohort/error.hpp>

#include <cmath>
#include <string>

#include "core/float_formats.hpp"
#include "train/kernels/float_kernel_table.hpp"

namespace cohort::train::kernels {
namespace {

// Following the reduce layer's choice (rather than detecting again) keeps the two in step, so a
// test that forces an ISA with reduce::force_isa exercises these kernels on it too.
const FloatKernelTable& active_table() noexcept {
#if COHORT_REDUCE_X86
  const reduce::KernelTable* reduce_table = &reduce::active_kernels();
  if (reduce_table == &reduce::kAvx512Kernels) return kAvx512FloatKernels;
  if (reduce_table == &reduce::kAvx2Kernels) return kAvx2FloatKernels;
#endif
  return kPortableFloatKernels;
}

void require_supported(DType dtype) {
  if (!supported(dtype))
    throw Error(
        ErrorCode::InvalidArgument,
        "float kernels: dtype " + std::string(dtype_name(dtype)) + " is not a floating type");
}

std::size_t slot(DType dtype) {
  require_supported(dtype);
  return static_cast<std::size_t>(dtype);
}

}  // namespace

bool supported(DType dtype) noexcept {
  return static_cast<std::size_t>(dtype) < kFloatDTypeCount;
}

bool convert(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t count,
             float factor) {
  const std::size_t from = slot(src_dtype);
  const std::size_t to = slot(dst_dtype);
  if (count == 0) return false;
  return active_table().convert[from][to](src, dst, count, factor);
}

double norm_part(DType dtype, const void* data, std::size_t count, NormPart part) {
  const std::size_t s = slot(dtype);
  if (count == 0) return 0.0;
  return active_table().norm[s][static_cast<std::size_t>(part)](data, count);
}

double sum_abs_pow(DType dtype, const void* data, std::size_t count, double p) {
  require_supported(dtype);
  double sum = 0.0;
  for (std::size_t i = 0; i < count; ++i)
    sum += std::pow(std::fabs(fp::load_as_double(dtype, data, i)), p);
  return sum;
}

void clamp(DType dtype, void* data, std::size_t count, double limit) {
  const std::size_t s = slot(dtype);
  if (count == 0) return;
  // Clamping to the limit rounded once into the dtype and rounding the clamped value are the
  // same (rounding is monotonic), and with a representable limit the kernels clamp exactly in
  // float. e4m3 has no infinity: a limit past its range (NaN when rounded) clamps nothing finite.
  double representable = limit;
  if (dtype != DType::Float64) {
    unsigned char bytes[sizeof(double)];
    fp::store_from_double(dtype, bytes, 0, limit);
    representable = fp::load_as_double(dtype, bytes, 0);
    if (std::isnan(representable) && !std::isnan(limit))
      representable = std::copysign(INFINITY, limit);
  }
  active_table().clamp[s](data, count, representable);
}

const char* active_isa() noexcept {
  const FloatKernelTable* table = &active_table();
#if COHORT_REDUCE_X86
  if (table == &kAvx512FloatKernels) return reduce::isa_name(reduce::Isa::Avx512);
  if (table == &kAvx2FloatKernels) return reduce::isa_name(reduce::Isa::Avx2);
#endif
  (void)table;
  return reduce::isa_name(reduce::Isa::Portable);
}

}  // namespace cohort::train::kernels
