// Kernel table for the portable instruction set.
// Built with the compiler's baseline flags (SSE2 on x86-64, NEON/whatever the target has
// elsewhere): the path every machine can run.

#define COHORT_REDUCE_ISA_NAMESPACE portable_isa
#define COHORT_REDUCE_VECTOR_BYTES 16
#include "reduce/vector_kernels.hpp"

namespace cohort::reduce {

// constinit: a constant table, so selecting it runs no code built for this ISA.
constinit const KernelTable kPortableKernels = portable_isa::make_kernel_table();

}  // namespace cohort::reduce
