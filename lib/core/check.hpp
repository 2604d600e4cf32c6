#pragma once

// Internal invariants. A failed COHORT_CHECK is a bug in cohort, not bad user input: it prints
// file:line and the condition, then aborts so a core dump points at the cause. User input is
// validated with cohort::Error(InvalidArgument) instead, never with a CHECK.

#include <string>

namespace cohort::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& detail) noexcept;
}

#define COHORT_CHECK(cond)                                           \
  do {                                                               \
    if (!(cond)) [[unlikely]]                                        \
      ::cohort::detail::check_failed(__FILE__, __LINE__, #cond, {}); \
  } while (0)

#define COHORT_CHECK_MSG(cond, detail_string)                                     \
  do {                                                                            \
    if (!(cond)) [[unlikely]]                                                     \
      ::cohort::detail::check_failed(__FILE__, __LINE__, #cond, (detail_string)); \
  } while (0)
