// Training-layer kernel table for the portable instruction set.
// Built with the compiler's baseline flags (SSE2 on x86-64): the path every machine can run.

#define COHORT_REDUCE_ISA_NAMESPACE train_portable_isa
#define COHORT_REDUCE_VECTOR_BYTES 16
#include "train/kernels/float_kernels_impl.hpp"

namespace cohort::train::kernels {

// constinit: a constant table, so selecting it runs no code built for this ISA.
constinit const FloatKernelTable kPortableFloatKernels =
    train_portable_isa::make_float_kernel_table();

}  // namespace cohort::train::kernels
