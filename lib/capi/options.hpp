#pragma once

// The C ABI's option structs and enums, read into their C++ counterparts. Option structs are
// versioned by their leading struct_size: a field is read only when the caller's struct is
// large enough to contain it, otherwise it keeps its default. That lets fields be appended to
// cohort.h without breaking callers compiled against an older header.

#include <cohort/cohort.h>
#include <cohort/communicator.hpp>

#include "capi/enum_bits.hpp"

namespace cohort::capi {

/// NULL means defaults. Throws InvalidArgument naming `function` for a struct_size too small to
/// hold struct_size itself or implausibly large (an uninitialised struct), a negative timeout or
/// one above kMaxTimeout, or an unknown algorithm.
CollectiveOptions collective_options(const cohort_collective_options_t* options,
                                     const char* function);
InitOptions init_options(const cohort_init_options_t* options, const char* function);

/// `op` is enum_bits of a cohort_reduce_op_t. Throws InvalidArgument for a value outside it.
ReduceOp reduce_op(int op, const char* function);

}  // namespace cohort::capi
