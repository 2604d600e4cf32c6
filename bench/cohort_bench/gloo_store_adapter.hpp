#pragma once

// Gloo's rendezvous store interface on top of a cohort::Store, so the Gloo peer rendezvouses
// through the store the cohort job already shares (cohort-run's, torchrun's) instead of a file
// or Redis. Keys are passed through unchanged; give it a PrefixStore to keep them apart.

#include <cohort/store.hpp>

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace cohort::bench {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  /// `timeout` bounds get() and the timeout-less wait() (Gloo calls those without one).
  GlooStoreAdapter(std::shared_ptr<cohort::Store> store, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<cohort::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace cohort::bench
