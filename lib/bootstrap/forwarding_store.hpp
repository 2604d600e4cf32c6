#pragma once

// A Store that passes every call to another, for decorators that change one or two calls
// (rank 0's store, which also owns the server its client talks to; tests' slow stores).

#include <cohort/store.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::bootstrap {

/// Forwards every call to `inner`, unchanged; a subclass overrides what it changes. Thread
/// safety and deadlines are the inner store's.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}

  void set(std::string_view key, const Bytes& value) override { inner_->set(key, value); }
  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    return inner_->get(key, timeout);
  }
  using Store::get;
  std::int64_t add(std::string_view key, std::int64_t delta) override {
    return inner_->add(key, delta);
  }
  Bytes compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  bool erase(std::string_view key) override { return inner_->erase(key); }
  std::int64_t num_keys() override { return inner_->num_keys(); }

 protected:
  Store& inner() const { return *inner_; }
  /// Lets the inner store go now, for a destructor that must close it before its own members
  /// go. No call may come after it.
  void release_inner() noexcept { inner_.reset(); }

 private:
  std::shared_ptr<Store> inner_;
};

}  // namespace cohort::bootstrap
