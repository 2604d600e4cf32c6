#pragma once

// Counting a decimal number up in place, for names that end in a number one more than last time
// (the running op's "allreduce #41"): cheaper than formatting the number again, which was a tenth
// of a tiny collective's bookkeeping.

#include <cstddef>
#include <string>

namespace cohort {

/// Adds one to the decimal number that `text` ends with, its digits being text[first..]. False,
/// with `text` unchanged, when every digit is a 9 (the number grows a digit: the caller formats
/// it again) or there are no digits.
inline bool decimal_count_up(std::string& text, std::size_t first) noexcept {
  for (std::size_t i = text.size(); i-- > first;) {
    if (text[i] != '9') {
      ++text[i];
      return true;
    }
    text[i] = '0';
  }
  for (std::size_t i = first; i < text.size(); ++i) text[i] = '9';  // undo the carries
  return false;
}

}  // namespace cohort
