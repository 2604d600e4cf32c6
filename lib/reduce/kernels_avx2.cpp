// Kernel table for the avx2 instruction set.
// Built with -mavx2 -mf16c: 32-byte vectors, F16C half conversions.

#define COHORT_REDUCE_ISA_NAMESPACE avx2_isa
#define COHORT_REDUCE_VECTOR_BYTES 32
#include "reduce/vector_kernels.hpp"

namespace cohort::reduce {

// constinit: a constant table, so selecting it runs no code built for this ISA.
constinit const KernelTable kAvx2Kernels = avx2_isa::make_kernel_table();

}  // namespace cohort::reduce
