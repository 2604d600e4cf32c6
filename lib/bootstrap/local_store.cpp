// make_local_store(): a Store inside one process, for a world of one and for tests. A mutex
// guards the table; blocked get()/wait() sleep on a condition variable with their deadline.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/key_value_table.hpp"
#include "bootstrap/store_protocol.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace cohort {
namespace {

class LocalStore final : public Store {
 public:
  void set(std::string_view key, const Bytes& value) override {
    {
      std::lock_guard lock(mutex_);
      table_.set(std::string(key), value);
    }
    changed_.notify_all();
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    const std::string name(key);
    std::unique_lock lock(mutex_);
    wait_locked(lock, {name}, timeout, "get");
    return *table_.find(name);
  }
  using Store::get;

  std::int64_t add(std::string_view key, std::int64_t delta) override {
    std::int64_t result;
    {
      std::lock_guard lock(mutex_);
      result = table_.add(std::string(key), delta);
    }
    changed_.notify_all();
    return result;
  }

  Bytes compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) override {
    Bytes result;
    {
      std::lock_guard lock(mutex_);
      result = table_.compare_set(std::string(key), expected, desired);
    }
    changed_.notify_all();
    return result;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    wait_locked(lock, keys, timeout, "wait");
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mutex_);
    return table_.missing(keys).empty();
  }

  bool erase(std::string_view key) override {
    std::lock_guard lock(mutex_);
    return table_.erase(std::string(key));
  }

  std::int64_t num_keys() override {
    std::lock_guard lock(mutex_);
    return table_.size();
  }

 private:
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   std::chrono::milliseconds timeout, const char* op) {
    if (timeout.count() < 0)
      throw Error(ErrorCode::InvalidArgument, std::string("store ") + op + " timeout " +
                                                  std::to_string(timeout.count()) +
                                                  " ms is negative");
    const auto deadline =
        Clock::now() + std::min<std::chrono::milliseconds>(timeout, bootstrap::kMaxWaitTimeout);
    while (true) {
      const auto absent = table_.missing(keys);
      if (absent.empty()) return;
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
          !table_.missing(keys).empty())
        throw Error(ErrorCode::Timeout, std::string("local store ") + op + " timed out after " +
                                            std::to_string(timeout.count()) + " ms waiting for " +
                                            bootstrap::quote_keys(table_.missing(keys)));
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bootstrap::KeyValueTable table_;
};

}  // namespace

std::shared_ptr<Store> make_local_store() {
  return std::make_shared<LocalStore>();
}

}  // namespace cohort
