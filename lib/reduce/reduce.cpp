// Public entry points of the reduction kernels: validate, then call the kernel of the
// instruction set chosen once per process (see dispatch.hpp).

#include "reduce/reduce.hpp"

#include <cohort/error.hpp>

#include <atomic>
#include <string>

#include "core/check.hpp"
#include "core/log.hpp"
#include "core/tunables.hpp"
#include "reduce/dispatch.hpp"

#if COHORT_REDUCE_X86
#include <cpuid.h>
#endif

namespace cohort::reduce {
namespace {

const KernelTable& table_for(Isa isa) noexcept {
#if COHORT_REDUCE_X86
  if (isa == Isa::Avx512) return kAvx512Kernels;
  if (isa == Isa::Avx2) return kAvx2Kernels;
#endif
  (void)isa;
  return kPortableKernels;
}

// The active ISA; initialised on first use from COHORT_KERNEL_ISA and the CPU, and again by
// init (apply_kernel_isa_tunable). Relaxed atomics suffice: every value stored names a constant
// table that is valid on this CPU.
std::atomic<int> g_active_isa{-1};

/// The first call's choice: COHORT_KERNEL_ISA's where it is valid here, else the widest. A
/// process that inits a communicator has a wrong value refused there; one that only calls the
/// kernels (the training layer's conversions, say) gets a warning. The tunables are read as one
/// snapshot, so a malformed other variable also leaves the widest here (init names it).
Isa initial_isa() noexcept {
  try {
    return kernel_isa_for(tunables().kernel_isa, &isa_available);
  } catch (const std::exception& e) {
    COHORT_LOG_WARN("reduction kernels: {}; they use {}", e.what(), isa_name(detected_isa()));
    return detected_isa();
  }
}

Isa active() noexcept {
  int isa = g_active_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    // Only the first choice may land here: init's (apply_kernel_isa_tunable) stands if it came
    // between this thread's load and its store.
    int first = static_cast<int>(initial_isa());
    if (!g_active_isa.compare_exchange_strong(isa, first, std::memory_order_relaxed)) first = isa;
    isa = first;
  }
  return static_cast<Isa>(isa);
}

#if COHORT_REDUCE_X86
// F16C from CPUID leaf 1 (ECX bit 29): clang before 15 has no "f16c" in __builtin_cpu_supports.
// Its VEX registers are the AVX ones, whose OS support the "avx2" check covers.
bool cpu_has_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

void check_count_fits(DType dtype, std::size_t count) {
  if (count > SIZE_MAX / dtype_size(dtype))
    throw Error(ErrorCode::InvalidArgument, "reduction count " + std::to_string(count) + " of " +
                                                std::string(dtype_name(dtype)) +
                                                " overflows the address space");
}

}  // namespace

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Portable: break;
  }
  return "portable";
}

bool isa_available(Isa isa) noexcept {
  switch (isa) {
    case Isa::Portable: return true;
#if COHORT_REDUCE_X86
    // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
    case Isa::Avx2: return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             cpu_has_f16c();
#else
    case Isa::Avx2:
    case Isa::Avx512: return false;
#endif
  }
  return false;
}

Isa detected_isa() noexcept {
  return kernel_isa_for(KernelIsa::Auto, &isa_available);
}

Isa kernel_isa_for(KernelIsa wanted, bool (*available)(Isa)) {
  if (wanted == KernelIsa::Auto) {
    for (Isa isa : {Isa::Avx512, Isa::Avx2})
      if (available(isa)) return isa;
    return Isa::Portable;
  }
  const Isa isa = wanted == KernelIsa::Avx512 ? Isa::Avx512
                  : wanted == KernelIsa::Avx2 ? Isa::Avx2
                                              : Isa::Portable;
  if (!available(isa))
    throw Error(ErrorCode::InvalidArgument,
                std::string("COHORT_KERNEL_ISA=") + isa_name(isa) +
                    " names instructions this CPU lacks (it runs " +
                    isa_name(kernel_isa_for(KernelIsa::Auto, available)) +
                    " at most); unset it, or set 'auto'");
  return isa;
}

void apply_kernel_isa_tunable() {
  const Isa isa = kernel_isa_for(tunables().kernel_isa, &isa_available);
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void force_isa(Isa isa) {
  if (!isa_available(isa))
    throw Error(ErrorCode::Unsupported,
                std::string("reduction kernels for ") + isa_name(isa) + " cannot run on this CPU");
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

const KernelTable& active_kernels() noexcept {
  return table_for(active());
}

const char* active_isa() noexcept {
  return isa_name(active());
}

void check_supported(ReduceOp op, DType dtype) {
  if (static_cast<std::size_t>(op) >= kOpCount)
    throw Error(ErrorCode::InvalidArgument,
                "unknown reduce op " + std::to_string(static_cast<int>(op)));
  if (static_cast<std::size_t>(dtype) >= kDTypeCount)
    throw Error(ErrorCode::InvalidArgument,
                "unknown dtype " + std::to_string(static_cast<int>(dtype)));
  if (!reduce_op_supports(op, dtype))
    throw Error(ErrorCode::InvalidArgument,
                "reduce op " + std::string(reduce_op_name(op)) + " is not defined on dtype " +
                    std::string(dtype_name(dtype)) +
                    (op == ReduceOp::Avg ? " (avg needs a numeric type)"
                                         : " (bitwise ops need an integer or bool type)"));
}

void reduce_into(ReduceOp op, DType dtype, void* dst, const void* src, std::size_t count) {
  reduce_to(op, dtype, dst, dst, src, count);
}

void reduce_to(ReduceOp op, DType dtype, void* dst, const void* a, const void* b,
               std::size_t count) {
  check_supported(op, dtype);
  check_count_fits(dtype, count);
  if (count == 0) return;
  if (dst == nullptr || a == nullptr || b == nullptr)
    throw Error(ErrorCode::InvalidArgument, "null buffer passed to a reduction of " +
                                                std::to_string(count) + " " +
                                                std::string(dtype_name(dtype)));
  const BinaryKernel kernel =
      active_kernels().binary[static_cast<std::size_t>(op)][static_cast<std::size_t>(dtype)];
  COHORT_CHECK(kernel != nullptr);
  kernel(dst, a, b, count);
}

void fold_to_all(ReduceOp op, DType dtype, void* const* outputs, std::size_t n_outputs,
                 const void* const* inputs, std::size_t n_inputs, std::size_t count,
                 Stores stores) {
  check_supported(op, dtype);
  check_count_fits(dtype, count);
  // The message is built only on failure: a small allreduce calls this once per piece.
  const auto fail = [&](const std::string& detail) {
    throw Error(ErrorCode::InvalidArgument, "fold_to_all of " + std::to_string(count) + " " +
                                                std::string(dtype_name(dtype)) + ": " + detail);
  };
  if (n_inputs < 2 || n_outputs < 1)
    fail("needs at least 2 inputs and 1 output, got " + std::to_string(n_inputs) + " and " +
         std::to_string(n_outputs));
  if (count == 0) return;
  if (outputs == nullptr || inputs == nullptr) fail("null pointer array");
  for (std::size_t r = 0; r < n_inputs; ++r)
    if (inputs[r] == nullptr) fail("input " + std::to_string(r) + " is null");
  for (std::size_t j = 0; j < n_outputs; ++j)
    if (outputs[j] == nullptr) fail("output " + std::to_string(j) + " is null");
  const FoldKernel kernel =
      active_kernels().fold[static_cast<std::size_t>(op)][static_cast<std::size_t>(dtype)];
  COHORT_CHECK(kernel != nullptr);
  kernel(outputs, n_outputs, inputs, n_inputs, count, stores == Stores::Streaming);
}

void divide_by(DType dtype, void* data, std::size_t count, std::size_t divisor) {
  check_supported(ReduceOp::Avg, dtype);
  check_count_fits(dtype, count);
  if (divisor == 0)
    throw Error(ErrorCode::InvalidArgument,
                "divide_by: divisor 0 for " + std::string(dtype_name(dtype)) + " data");
  if (count == 0) return;
  if (data == nullptr)
    throw Error(ErrorCode::InvalidArgument, "null buffer passed to divide_by of " +
                                                std::to_string(count) + " " +
                                                std::string(dtype_name(dtype)));
  const DivideKernel kernel = active_kernels().divide[static_cast<std::size_t>(dtype)];
  COHORT_CHECK(kernel != nullptr);
  kernel(data, count, divisor);
}

}  // namespace cohort::reduce
