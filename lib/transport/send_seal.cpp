#include "transport/send_seal.hpp"

#include "transport/process_memory.hpp"

#include <cstddef>
#include <mutex>
#include <vector>

#include <pthread.h>

namespace cohort::transport {

namespace {

/// Seal words, handed out and taken back. Never destroyed (a send may be released during static
/// destruction) and its words never freed (see send_seal.hpp).
class SealPool {
 public:
  std::atomic<std::uint64_t>* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) grow();
    std::atomic<std::uint64_t>* word = free_.back();
    free_.pop_back();
    return word;
  }

  /// Never throws: free_ has room for every word ever made.
  void give_back(std::atomic<std::uint64_t>* word) noexcept {
    std::lock_guard lock(mutex_);
    free_.push_back(word);
  }

 private:
  static constexpr std::size_t kWordsPerChunk = 512;

  void grow() {
    free_.reserve(made_ + kWordsPerChunk);
    // Leaked on purpose: the words outlive every announcement that may name them.
    auto* chunk = new std::atomic<std::uint64_t>[kWordsPerChunk];
    for (std::size_t i = 0; i < kWordsPerChunk; ++i) {
      chunk[i].store(0, std::memory_order_relaxed);
      free_.push_back(&chunk[i]);
    }
    made_ += kWordsPerChunk;
  }

  std::mutex mutex_;
  std::vector<std::atomic<std::uint64_t>*> free_;
  std::size_t made_ = 0;
};

SealPool& pool() {
  static SealPool* const instance = new SealPool;
  return *instance;
}

/// The count behind seal values: from a random start, and a new one in a forked child, so that
/// no other process is found holding a value where a dead sender's seal was (send_seal.hpp).
std::atomic<std::uint64_t>& seal_count() noexcept {
  static std::atomic<std::uint64_t> count{[] {
    pthread_atfork(nullptr, nullptr,
                   [] { seal_count().store(random_probe(), std::memory_order_relaxed); });
    return random_probe();
  }()};
  return count;
}

/// Values for seals; 0 is a broken seal. The count times an odd constant: a
/// bijection, so values never repeat, with every byte likely non-zero, so a read the kernel tore
/// against the 0 of a release does not look like the value.
std::uint64_t next_value() noexcept {
  constexpr std::uint64_t kSpread = 0x9e3779b97f4a7c15ULL;
  std::uint64_t value = 0;
  while (value == 0)  // once in 2^64 values
    value = seal_count().fetch_add(1, std::memory_order_relaxed) * kSpread;
  return value;
}

}  // namespace

SendSeal SendSeal::make() {
  SendSeal seal;
  seal.word_ = pool().take();
  // Relaxed: the announcement that names the word is published with a release store after this.
  seal.word_->store(next_value(), std::memory_order_relaxed);
  return seal;
}

SendSeal& SendSeal::operator=(SendSeal&& other) noexcept {
  if (this != &other) {
    if (word_ != nullptr) release();
    word_ = other.word_;
    other.word_ = nullptr;
  }
  return *this;
}

void SendSeal::release() noexcept {
  word_->store(0, std::memory_order_relaxed);
  // The caller's next stores into the buffer must not be seen before the 0: a receiver that
  // read the value after its copy then read the buffer before them.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  pool().give_back(word_);
  word_ = nullptr;
}

}  // namespace cohort::transport
