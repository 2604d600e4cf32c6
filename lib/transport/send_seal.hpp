#pragma once

// A rendezvous send's seal: a word in the sender's memory that holds a value of its own while the
// send's buffer is the transport's, and 0 once the send completed or was cancelled (after which
// the caller may reuse or free the buffer). A receiver copying the buffer out of the sender's
// memory reads the seal after the bytes: if it still holds the announced value, the copy was
// made before the buffer went back to the caller, so it holds the sender's bytes; else the send
// was withdrawn and the receive fails.
//
// Words come from a process-wide pool and are never freed. Receivers read them through
// process_vm_readv at their address in the sender, in the copy's own system call
// (process_memory.hpp). So an announced seal names a word that holds 0 or a later send's value,
// never the announced value once its send is gone (values count up, process-wide, from a
// random start, and never repeat). The random start also makes the read an identity check: a
// process that took a dead sender's pid does not hold the announced value at the announced
// address, so the receive fails instead of taking its bytes.

#include <atomic>
#include <cstdint>

namespace cohort::transport {

class SendSeal {
 public:
  /// No seal (a send that is not a rendezvous).
  SendSeal() noexcept = default;
  /// Seals a word of the process-wide pool with a value never used before in this process.
  /// Throws std::bad_alloc.
  static SendSeal make();

  SendSeal(SendSeal&& other) noexcept : word_(other.word_) { other.word_ = nullptr; }
  SendSeal& operator=(SendSeal&& other) noexcept;
  SendSeal(const SendSeal&) = delete;
  SendSeal& operator=(const SendSeal&) = delete;
  /// Breaks the seal: stores 0, fenced so that no later store of this thread (the caller
  /// reusing the buffer) can be seen before it, and returns the word. Never throws.
  ~SendSeal() {
    if (word_ != nullptr) release();
  }

  explicit operator bool() const noexcept { return word_ != nullptr; }
  /// Where to announce it: the word's address in this process.
  std::uint64_t location() const noexcept { return reinterpret_cast<std::uintptr_t>(word_); }
  /// The value it holds while sealed (only this seal writes the word until it is broken).
  std::uint64_t value() const noexcept { return word_->load(std::memory_order_relaxed); }

 private:
  void release() noexcept;

  // One pointer: a fastbox receive's request entry carries an empty seal too.
  std::atomic<std::uint64_t>* word_ = nullptr;
};

}  // namespace cohort::transport
