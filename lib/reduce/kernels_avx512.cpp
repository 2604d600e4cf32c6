// Kernel table for the avx512 instruction set.
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mf16c: 64-byte vectors, F16C half
// conversions.

#define COHORT_REDUCE_ISA_NAMESPACE avx512_isa
#define COHORT_REDUCE_VECTOR_BYTES 64
#include "reduce/vector_kernels.hpp"

namespace cohort::reduce {

// constinit: a constant table, so selecting it runs no code built for this ISA.
constinit const KernelTable kAvx512Kernels = avx512_isa::make_kernel_table();

}  // namespace cohort::reduce
