// Training-layer kernel table for the avx2 instruction set.
// Built with -mavx2 -mf16c: 32-byte vectors, F16C half conversions.

#define COHORT_REDUCE_ISA_NAMESPACE train_avx2_isa
#define COHORT_REDUCE_VECTOR_BYTES 32
#include "train/kernels/float_kernels_impl.hpp"

namespace cohort::train::kernels {

// constinit: a constant table, so selecting it runs no code built for this ISA.
constinit const FloatKernelTable kAvx2FloatKernels = train_avx2_isa::make_float_kernel_table();

}  // namespace cohort::train::kernels
