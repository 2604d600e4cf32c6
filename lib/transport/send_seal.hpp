#pragma once

// A rendezvous send's seal: a word in the sender's memory that holds a value of its own while the
// send's buffer is the transport's, and 0 once the send completed or was cancelled (after which
// the caller may reuse or free the buffer). A receiver copying the buffer out of the sender's
// memory reads the seal after the bytes: if it still holds the announced value, the copy was
// made before the buffer went back to the caller, so it holds the sender's bytes; else the send
// was withdrawn and the receive fails.
//
// Words come from a SealTable (the sender's fastbox segment) or, once its words are all taken,
// from a process-wide pool. Receivers read either kind through process_vm_readv at its address in
// the sender, in the copy's own system call (process_memory.hpp). A pool word is never freed; a
// table's word goes with the sender's transport, after its sends were released. So an announced
// seal names a word that holds 0 or a later send's value, or no longer exists (the read fails),
// never the announced value once its send is gone (values count up, process-wide, from a random
// start, and never repeat). The random start also makes the
// read an identity check: a process that took a dead sender's pid does not hold the announced
// value at the announced address, so the receive fails instead of taking its bytes.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cohort::transport {

class SealTable;

class SendSeal {
 public:
  /// No seal (a send that is not a rendezvous).
  SendSeal() noexcept = default;
  /// Seals a word of the process-wide pool with a value never used before in this process.
  /// Throws std::bad_alloc.
  static SendSeal make();

  SendSeal(SendSeal&& other) noexcept : word_(other.word_), table_(other.table_) {
    other.word_ = nullptr;
  }
  SendSeal& operator=(SendSeal&& other) noexcept;
  SendSeal(const SendSeal&) = delete;
  SendSeal& operator=(const SendSeal&) = delete;
  /// Breaks the seal: stores 0, fenced so that no later store of this thread (the caller
  /// reusing the buffer) can be seen before it, and returns the word. Never throws.
  ~SendSeal() {
    if (word_ != nullptr) release();
  }

  explicit operator bool() const noexcept { return word_ != nullptr; }
  /// Where to announce it: the word's address in this process, whichever kind it is.
  std::uint64_t location() const noexcept { return reinterpret_cast<std::uintptr_t>(word_); }
  /// The value it holds while sealed (only this seal writes the word until it is broken).
  std::uint64_t value() const noexcept { return word_->load(std::memory_order_relaxed); }

 private:
  friend class SealTable;
  void release() noexcept;

  // Two pointers: a fastbox receive's request entry carries an empty seal too, so it stays
  // small (the send's table is needed to give the word back).
  std::atomic<std::uint64_t>* word_ = nullptr;
  SealTable* table_ = nullptr;  ///< the word's table; nullptr for a pool word
};

/// Seal words in a block of the sender's own (its fastbox segment), handed out by index.
/// Thread-safe. Must outlive its seals.
class SealTable {
 public:
  SealTable() = default;
  SealTable(const SealTable&) = delete;
  SealTable& operator=(const SealTable&) = delete;

  /// Hands out the `count` words at `words` (zero) from now on.
  void attach(std::atomic<std::uint64_t>* words, std::size_t count);
  /// A seal on a free word of the table, else (none free, or none attached) on a pool word.
  /// Throws std::bad_alloc.
  SendSeal make();
  /// Words free now (tests).
  std::size_t free_words() const;

 private:
  friend class SendSeal;
  void give_back(std::atomic<std::uint64_t>* word) noexcept;

  mutable std::mutex mutex_;
  std::atomic<std::uint64_t>* words_ = nullptr;
  std::vector<std::uint32_t> free_;  ///< reserved for every word: give_back never allocates
};

}  // namespace cohort::transport
