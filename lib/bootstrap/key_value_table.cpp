#include "bootstrap/key_value_table.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <limits>

namespace cohort::bootstrap {

Bytes encode_counter(std::int64_t value) {
  const std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

const Bytes* KeyValueTable::find(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

std::int64_t KeyValueTable::add(const std::string& key, std::int64_t delta) {
  std::int64_t current = 0;
  if (const Bytes* value = find(key)) {
    const char* first = reinterpret_cast<const char*>(value->data());
    const char* last = first + value->size();
    const auto [end, ec] = std::from_chars(first, last, current);
    if (ec != std::errc() || end != last || value->empty())
      throw Error(ErrorCode::InvalidArgument,
                  "store add on key '" + key + "': its value is not a decimal 64-bit integer");
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result))
    throw Error(ErrorCode::InvalidArgument, "store add on key '" + key +
                                                "': " + std::to_string(current) + " + " +
                                                std::to_string(delta) + " overflows 64 bits");
  values_[key] = encode_counter(result);
  return result;
}

Bytes KeyValueTable::compare_set(const std::string& key, const Bytes& expected,
                                 const Bytes& desired) {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    if (!expected.empty()) return {};
    values_.emplace(key, desired);
    return desired;
  }
  // An empty `expected` means "absent", so an existing key (even with an empty value) stays.
  if (!expected.empty() && it->second == expected) it->second = desired;
  return it->second;
}

std::vector<std::string> KeyValueTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> absent;
  for (const auto& key : keys)
    if (!contains(key)) absent.push_back(key);
  return absent;
}

}  // namespace cohort::bootstrap
