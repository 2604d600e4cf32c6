#pragma once

// A rendezvous send's seal: a word in the sender's memory that holds a value of its own while the
// send's buffer is the transport's, and 0 once the send completed or was cancelled (after which
// the caller may reuse or free the buffer). A receiver copying the buffer out of the sender's
// memory reads the seal after the bytes: if it still holds the announced value, the copy was
// made before the buffer went back to the caller, so it holds the sender's bytes; else the send
// was withdrawn and the receive fails.
//
// The words come from a process-wide pool and are never freed, so an announced address always
// names a seal word: a stale one holds 0 or a later send's value, never the announced one
// (values count up, process-wide, and never repeat).

#include <atomic>
#include <cstdint>

namespace cohort::transport {

class SendSeal {
 public:
  /// No seal (a send that is not a rendezvous).
  SendSeal() noexcept = default;
  /// Seals a word with a value never used before in this process. Throws std::bad_alloc.
  static SendSeal make();

  SendSeal(SendSeal&& other) noexcept : word_(other.word_) { other.word_ = nullptr; }
  SendSeal& operator=(SendSeal&& other) noexcept;
  SendSeal(const SendSeal&) = delete;
  SendSeal& operator=(const SendSeal&) = delete;
  /// Breaks the seal: stores 0, fenced so that no later store of this thread (the caller
  /// reusing the buffer) can be seen before it. Never throws.
  ~SendSeal() {
    if (word_ != nullptr) release();
  }

  explicit operator bool() const noexcept { return word_ != nullptr; }
  /// Where the word lies in this process, to announce.
  std::uint64_t address() const noexcept;
  /// The value it holds while sealed (only this seal writes the word until it is broken).
  std::uint64_t value() const noexcept { return word_->load(std::memory_order_relaxed); }

 private:
  void release() noexcept;

  /// The only member: a fastbox receive's request entry carries an empty seal, so it stays one
  /// pointer to build and move.
  std::atomic<std::uint64_t>* word_ = nullptr;
};

}  // namespace cohort::transport
