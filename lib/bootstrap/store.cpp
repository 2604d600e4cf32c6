// Store conveniences, the default deadline and PrefixStore.

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "core/tunables.hpp"

#include <string>

namespace cohort {

std::chrono::milliseconds default_store_timeout() {
  return tunables().store_timeout;
}

void Store::set_string(std::string_view key, std::string_view value) {
  set(key, Bytes(value.begin(), value.end()));
}

std::string Store::get_string(std::string_view key, std::chrono::milliseconds timeout) {
  const Bytes value = get(key, timeout);
  return std::string(value.begin(), value.end());
}

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
    : prefix_(std::move(prefix)), inner_(std::move(inner)) {
  if (!inner_)
    throw Error(ErrorCode::InvalidArgument, "PrefixStore '" + prefix_ + "' has no inner store");
}

std::string PrefixStore::full(std::string_view key) const {
  std::string result;
  result.reserve(prefix_.size() + 1 + key.size());
  result.append(prefix_).append("/").append(key);
  return result;
}

void PrefixStore::set(std::string_view key, const Bytes& value) {
  inner_->set(full(key), value);
}

Bytes PrefixStore::get(std::string_view key, std::chrono::milliseconds timeout) {
  return inner_->get(full(key), timeout);
}

std::int64_t PrefixStore::add(std::string_view key, std::int64_t delta) {
  return inner_->add(full(key), delta);
}

Bytes PrefixStore::compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) {
  return inner_->compare_set(full(key), expected, desired);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& key : keys) prefixed.push_back(full(key));
  inner_->wait(prefixed, timeout);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& key : keys) prefixed.push_back(full(key));
  return inner_->check(prefixed);
}

bool PrefixStore::erase(std::string_view key) {
  return inner_->erase(full(key));
}

std::int64_t PrefixStore::num_keys() {
  return inner_->num_keys();
}

}  // namespace cohort
