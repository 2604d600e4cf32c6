#pragma once

// Run-time instruction-set dispatch for the reduction kernels (private to lib/reduce and its
// tests). Each instruction set has a constant table of kernels compiled in its own translation
// unit with its own target flags (kernels_avx512.cpp, kernels_avx2.cpp, kernels_portable.cpp);
// reduce.cpp picks one table the first time a kernel runs, from __builtin_cpu_supports.
// The tables are constant-initialised, so choosing one executes no code from a translation
// unit whose instructions the CPU may lack.

#include <cohort/dtype.hpp>

#include <cstddef>
#include <iterator>

// The AVX2 and AVX-512 tables are built on x86-64 only (lib/reduce/meson.build agrees).
#if defined(__x86_64__)
#define COHORT_REDUCE_X86 1
#else
#define COHORT_REDUCE_X86 0
#endif

namespace cohort {
// Declared here, defined in core/tunables.hpp: this header is compiled into each instruction
// set's kernels, which should see nothing of the library's inline code (vector_codecs.hpp).
enum class KernelIsa;
}  // namespace cohort

namespace cohort::reduce {

/// Instruction sets with a kernel table, best last.
enum class Isa : unsigned char { Portable, Avx2, Avx512 };

/// "portable", "avx2", "avx512".
const char* isa_name(Isa isa) noexcept;

/// dst[i] = a[i] op b[i] for i < count; dst may be identical to a or b.
using BinaryKernel = void (*)(void* dst, const void* a, const void* b, std::size_t count);
/// Every outputs[j][i] = inputs[0][i] op ... op inputs[n_inputs - 1][i], in one pass (see
/// fold_to_all in reduce.hpp); `stream` asks for non-temporal stores where the outputs allow.
using FoldKernel = void (*)(void* const* outputs, std::size_t n_outputs, const void* const* inputs,
                            std::size_t n_inputs, std::size_t count, bool stream);
/// data[i] = data[i] / divisor in the accumulate type.
using DivideKernel = void (*)(void* data, std::size_t count, std::size_t divisor);
/// dst[i] = float(src[i]) for a 16- or 8-bit float dtype (exact).
using WidenKernel = void (*)(float* dst, const void* src, std::size_t count);
/// dst[i] = src[i] rounded to nearest even in a 16- or 8-bit float dtype.
using NarrowKernel = void (*)(void* dst, const float* src, std::size_t count);

inline constexpr std::size_t kOpCount = std::size(kAllReduceOps);
inline constexpr std::size_t kDTypeCount = std::size(kAllDTypes);

/// One instruction set's kernels. An entry is null where the op is undefined on the dtype
/// (reduce_op_supports() is false); callers validate before looking up.
struct KernelTable {
  BinaryKernel binary[kOpCount][kDTypeCount];
  FoldKernel fold[kOpCount][kDTypeCount];
  DivideKernel divide[kDTypeCount];
  /// The vectorised codecs the kernels use, exposed so tests can check them against
  /// lib/core/float_formats.hpp over many more values than reductions reach. Non-null only for
  /// Float16, BFloat16, Float8E4M3 and Float8E5M2.
  WidenKernel widen[kDTypeCount];
  NarrowKernel narrow[kDTypeCount];
};

/// The tables, defined in their own translation units. The x86 ones exist only on x86-64;
/// calling a kernel from one on a CPU without its instructions is undefined.
extern const KernelTable kPortableKernels;
#if COHORT_REDUCE_X86
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;
#endif

/// Whether this CPU (and OS) can run `isa`'s kernels.
bool isa_available(Isa isa) noexcept;

/// The best instruction set available here: what the kernels use unless forced.
Isa detected_isa() noexcept;

/// The instruction set COHORT_KERNEL_ISA's value `wanted` stands for where `available` says
/// which ones run (isa_available, or a test's stand-in): Auto the widest; any other itself, or
/// Error(InvalidArgument) naming it and the widest when it does not run.
Isa kernel_isa_for(KernelIsa wanted, bool (*available)(Isa));

/// Test hook: makes every later kernel call use `isa`'s table (or the detected one again when
/// `isa` is the detected one). Throws Error(Unsupported) when isa_available(isa) is false. Not
/// synchronised with kernels running on other threads: call it while no kernel runs.
void force_isa(Isa isa);

/// The table the public functions currently use.
const KernelTable& active_kernels() noexcept;

}  // namespace cohort::reduce
