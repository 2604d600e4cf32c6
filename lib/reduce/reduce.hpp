#pragma once

// Element-wise reduction kernels: the inner loop of every reducing collective. f16, bf16 and
// fp8 are widened to float, combined, and rounded back to nearest even (per call: a chain of
// calls rounds after each step, as every ring/tree implementation does). Integers wrap around
// (two's complement), never trap. Min/Max propagate NaN; when the operands compare equal
// (+0 and -0) they keep the first (dst for reduce_into, a for reduce_to). Bool reads any
// non-zero byte as true and writes 0 or 1. Avg combines like Sum; the final division is
// divide_by() once all contributions are in. Denormals are never flushed (the kernels do not
// touch MXCSR; they assume the caller has not set FTZ/DAZ).

#include <cohort/dtype.hpp>

#include <cstddef>

namespace cohort::reduce {

/// Throws Error(InvalidArgument) naming op and dtype when the op is not defined on the dtype
/// (bitwise ops on floats, Avg on Bool).
void check_supported(ReduceOp op, DType dtype);

/// dst[i] = dst[i] op src[i] for i < count. dst and src may be unaligned; they must not
/// partially overlap (identical is fine).
void reduce_into(ReduceOp op, DType dtype, void* dst, const void* src, std::size_t count);

/// dst[i] = a[i] op b[i]. dst may be identical to a or b. Saves a pass over memory compared with
/// memcpy + reduce_into when the result must land in a third buffer.
void reduce_to(ReduceOp op, DType dtype, void* dst, const void* a, const void* b,
               std::size_t count);

/// How fold_to_all writes its outputs.
enum class Stores {
  Cached,     ///< ordinary stores: the lines stay in this core's cache
  Streaming,  ///< non-temporal stores past the cache, for outputs no core reads soon
};

/// outputs[j][i] = inputs[0][i] op inputs[1][i] op ... op inputs[n_inputs - 1][i] for every j
/// and i < count, in one pass: each input element is read once, each output element written
/// once, nothing goes through scratch memory. Folded in input order and rounded after each
/// step, so the bits are exactly those of reduce_to(inputs 0 and 1) followed by reduce_into of
/// each later input. n_inputs >= 2, n_outputs >= 1. An output may be identical to an input (in
/// place); no other overlap. Streaming stores apply to whole 64-byte lines where every output
/// sits alike against them (from output 0's first line boundary on; a line of one output at a
/// time, so that many outputs do not leave many lines half-written), the rest is stored
/// ordinarily; they are fenced before return, so a flag stored afterwards is seen after the
/// data. Throws Error(InvalidArgument) naming what is wrong (op/dtype as check_supported, too
/// few inputs or outputs, a null pointer) before touching any output; with count 0 it checks op,
/// dtype and the numbers of inputs and outputs only, and touches nothing.
void fold_to_all(ReduceOp op, DType dtype, void* const* outputs, std::size_t n_outputs,
                 const void* const* inputs, std::size_t n_inputs, std::size_t count, Stores stores);

/// data[i] = data[i] / divisor in the accumulate type (float for 16/8-bit floats, truncating
/// integer division for integers). Used to finish Avg.
void divide_by(DType dtype, void* data, std::size_t count, std::size_t divisor);

/// Which instruction set the kernels dispatched to at run time ("avx512", "avx2", "portable").
const char* active_isa() noexcept;

/// Makes the kernels use the instruction set COHORT_KERNEL_ISA names in the current tunables
/// (the widest this CPU runs for 'auto'). Called at init, after the tunables were read afresh;
/// throws Error(InvalidArgument) for one this CPU lacks, leaving the kernels as they were. Kernels
/// running on other threads meanwhile (another communicator's) finish on the table they started
/// with; every table gives the same bits, except a norm's partial sums (their last bits), which
/// change only if the variable itself changed between inits.
void apply_kernel_isa_tunable();

}  // namespace cohort::reduce
