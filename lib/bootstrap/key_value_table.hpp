#pragma once

// The semantics of a Store's data, shared by the in-process store and the TCP server so both
// behave identically. Not thread-safe: callers hold their own lock (or own thread).
//
// Counters written by add() are stored as decimal ASCII text ("42", "-7"), so get() on a counter
// returns readable digits and set_string("5") followed by add(1) yields "6". add() on a value
// that is not a decimal 64-bit integer throws Error(InvalidArgument) naming the key.

#include <cohort/store.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cohort::bootstrap {

class KeyValueTable {
 public:
  void set(const std::string& key, Bytes value) { values_[key] = std::move(value); }
  /// nullptr when absent; valid until the next mutation.
  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return values_.count(key) != 0; }
  std::int64_t add(const std::string& key, std::int64_t delta);
  /// See Store::compare_set. When the key is absent and `expected` is not empty, nothing is
  /// stored and an empty value is returned.
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  bool erase(const std::string& key) { return values_.erase(key) != 0; }
  std::int64_t size() const { return static_cast<std::int64_t>(values_.size()); }
  /// The keys of `keys` that are absent, in order.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

 private:
  std::unordered_map<std::string, Bytes> values_;
};

/// Decimal text of a counter value.
Bytes encode_counter(std::int64_t value);

}  // namespace cohort::bootstrap
