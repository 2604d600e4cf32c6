#pragma once

// A rendezvous send's seal: a word in the sender's memory that holds a value of its own while the
// send's buffer is the transport's, and 0 once the send completed or was cancelled (after which
// the caller may reuse or free the buffer). A receiver copying the buffer out of the sender's
// memory reads the seal after the bytes: if it still holds the announced value, the copy was
// made before the buffer went back to the caller, so it holds the sender's bytes; else the send
// was withdrawn and the receive fails.
//
// Words come from a SealTable in memory the receivers map (the sender's fastbox segment), which
// they read with a plain load, or, once its words are all taken, from a process-wide pool, which
// they read through process_vm_readv. Neither is ever freed while a receiver may read it (the
// pool never; a table's segment stays mapped in every reader), so an announced seal always names
// a seal word: a stale one holds 0 or a later send's value, never the announced one (values
// count up, process-wide, and never repeat).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cohort::transport {

class SealTable;

class SendSeal {
 public:
  /// An announced seal location with this bit set names word (location >> kIndexShift) of the
  /// sender's table; without it, the address of a pool word in the sender (pool words are
  /// 8-byte aligned, so their low bits are clear whatever the top bits hold).
  static constexpr std::uint64_t kInTable = 1;
  static constexpr int kIndexShift = 3;
  /// The table index a location with kInTable names.
  static constexpr std::uint64_t table_index(std::uint64_t location) noexcept {
    return location >> kIndexShift;
  }

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
  /// Where to announce it: index << kIndexShift | kInTable for a table's word, else its address
  /// here.
  std::uint64_t location() const noexcept;
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

/// Seal words in shared memory, handed out by index. Thread-safe. Must outlive its seals.
class SealTable {
 public:
  SealTable() = default;
  SealTable(const SealTable&) = delete;
  SealTable& operator=(const SealTable&) = delete;

  /// Hands out the `count` words at `words` (zero, and mapped by the readers) from now on.
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
