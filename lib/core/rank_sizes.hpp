#pragma once

// RankSizes: one size per rank (a v-collective's counts or displacements), kept in place for
// communicators of up to kInline ranks. A gather's two std::vectors were a sixth of its
// bookkeeping in a profile (two mallocs and two frees per op); with the sizes in place, a
// collective on a small communicator allocates nothing. Larger communicators use the heap, like
// std::vector. Contiguous, so it converts to std::span<const std::size_t>.

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <ranges>
#include <span>

namespace cohort {

class RankSizes {
 public:
  static constexpr std::size_t kInline = 8;

  // User-provided, not defaulted, so that default-initialising an Args struct that holds
  // RankSizes leaves the in-place array alone. Brace-initialising one (`GatherArgs{...}`) still
  // had GCC 12 zero it whole, a `rep stos` of 200-odd bytes per op that profiles of tiny gathers
  // and scatters found among the hottest spots, so the per-op paths assign members instead
  // (comm/validated_args.cpp).
  RankSizes() noexcept {}  // NOLINT(modernize-use-equals-default)
  /// `n` copies of `value`.
  RankSizes(std::size_t n, std::size_t value) { assign(n, value); }
  /// A copy of any contiguous sizes (a span, a std::vector). Implicit, as a copy is.
  template <std::ranges::contiguous_range Values>
  requires std::same_as<std::ranges::range_value_t<Values>, std::size_t> RankSizes(
      const Values& values) {  // NOLINT(google-explicit-constructor)
    resize(std::ranges::size(values));
    std::copy(std::ranges::begin(values), std::ranges::end(values), begin());
  }
  RankSizes(std::initializer_list<std::size_t> values)
      : RankSizes(std::span<const std::size_t>(values.begin(), values.size())) {}

  RankSizes(const RankSizes& other) : RankSizes(std::span<const std::size_t>(other)) {}
  RankSizes& operator=(const RankSizes& other) {
    if (this != &other) {
      resize(other.size_);
      std::copy(other.begin(), other.end(), begin());
    }
    return *this;
  }
  RankSizes(RankSizes&& other) noexcept { take(other); }
  RankSizes& operator=(RankSizes&& other) noexcept {
    if (this != &other) {
      heap_.reset();
      take(other);
    }
    return *this;
  }
  ~RankSizes() = default;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t* data() noexcept { return heap_ ? heap_.get() : in_place_; }
  const std::size_t* data() const noexcept { return heap_ ? heap_.get() : in_place_; }
  std::size_t* begin() noexcept { return data(); }
  std::size_t* end() noexcept { return data() + size_; }
  const std::size_t* begin() const noexcept { return data(); }
  const std::size_t* end() const noexcept { return data() + size_; }
  std::size_t& operator[](std::size_t i) noexcept { return data()[i]; }
  std::size_t operator[](std::size_t i) const noexcept { return data()[i]; }
  std::size_t back() const noexcept { return data()[size_ - 1]; }

  /// Exactly `n` copies of `value`, built where the sizes live (no temporary to move from).
  void assign(std::size_t n, std::size_t value) {
    reserve(n);
    std::fill(data(), data() + n, value);
    size_ = n;
  }
  /// New entries are zero.
  void resize(std::size_t n) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, std::size_t{0});
    size_ = n;
  }
  /// `n` entries left for the caller to write (those beyond the old size hold garbage).
  void resize_for_overwrite(std::size_t n) {
    reserve(n);
    size_ = n;
  }
  void push_back(std::size_t value) {
    if (size_ == capacity_) reserve(capacity_ * 2);
    data()[size_++] = value;
  }
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    auto grown = std::make_unique_for_overwrite<std::size_t[]>(n);
    std::copy(begin(), end(), grown.get());
    heap_ = std::move(grown);
    capacity_ = n;
  }

  friend bool operator==(const RankSizes& a, const RankSizes& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void take(RankSizes& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    heap_ = std::move(other.heap_);
    if (!heap_) std::copy(other.in_place_, other.in_place_ + size_, in_place_);
    other.size_ = 0;
    other.capacity_ = kInline;
  }

  std::unique_ptr<std::size_t[]> heap_;  ///< null while the sizes fit in place
  std::size_t size_ = 0;
  std::size_t capacity_ = kInline;
  std::size_t in_place_[kInline];
};

}  // namespace cohort
