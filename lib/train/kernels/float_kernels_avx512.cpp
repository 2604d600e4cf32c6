// Training-layer kernel table for the avx512 instruction set.
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mf16c: 64-byte vectors, F16C half
// conversions.

#define COHORT_REDUCE_ISA_NAMESPACE train_avx512_isa
#define COHORT_REDUCE_VECTOR_BYTES 64
#include "train/kernels/float_kernels_impl.hpp"

namespace cohort::train::kernels {

// constinit: a constant table, so selecting it runs no code built for this ISA.
constinit const FloatKernelTable kAvx512FloatKernels = train_avx512_isa::make_float_kernel_table();

}  // namespace cohort::train::kernels
