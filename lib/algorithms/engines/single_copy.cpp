#include "algorithms/engines/single_copy.hpp"

#include <cohort/error.hpp>

#include "core/check.hpp"
#include "core/memory_fence.hpp"

#include <cstring>

namespace cohort::algorithms {
namespace {

using Flag = transport::SharedArena::Flag;

/// A table entry as it sits in the owner's data slot.
struct Entry {
  std::uint64_t address;
  std::uint64_t bytes;
};

/// Before the entries: how many there are.
struct Header {
  std::uint64_t entries;
  std::uint64_t unused;
};

}  // namespace

const std::size_t SingleCopyOp::kMaxRanks =
    (transport::SharedArena::kSlotBytes - sizeof(Header)) / sizeof(Entry);

SingleCopyOp::SingleCopyOp(const OpContext& ctx, transport::SharedArena& arena, int steps)
    : ctx_(ctx), arena_(arena), exposure_(arena.next_generation()) {
  for (int s = 1; s < steps; ++s) arena_.next_generation();
  release_ = arena_.next_generation();
}

SingleCopyOp::~SingleCopyOp() {
  if (!finished_) arena_.mark_failed(false);
}

void SingleCopyOp::expose(std::span<const ExposedBlock> blocks) {
  write_table(blocks.size(), [&](std::size_t d) { return blocks[d]; });
}

void SingleCopyOp::expose_layout(const void* base, std::span<const std::size_t> counts,
                                 std::span<const std::size_t> displs, std::size_t element_bytes) {
  const auto* bytes = static_cast<const std::byte*>(base);
  write_table(counts.size(), [&](std::size_t d) {
    return ExposedBlock{bytes + displs[d] * element_bytes, counts[d] * element_bytes};
  });
}

void SingleCopyOp::expose_next(std::span<const ExposedBlock> blocks) {
  ++exposure_;
  write_table(blocks.size(), [&](std::size_t d) { return blocks[d]; });
}

template <class BlockOf>
void SingleCopyOp::write_table(std::size_t entries, BlockOf block_of) {
  arena_.wait_until_data_free(exposure_, ctx_.deadline, ctx_.what);
  std::byte* slot = arena_.data(ctx_.rank, exposure_);
  const Header header{entries, 0};
  std::memcpy(slot, &header, sizeof header);
  std::byte* table = slot + sizeof header;
  for (std::size_t d = 0; d < entries; ++d) {
    const ExposedBlock block = block_of(d);
    const Entry entry{reinterpret_cast<std::uintptr_t>(block.data), block.bytes};
    std::memcpy(table, &entry, sizeof entry);
    table += sizeof entry;
  }
  arena_.publish(Flag::Arrived, exposure_);
}

void SingleCopyOp::read(int r, std::size_t entry, void* into, std::size_t bytes) {
  read_part(r, entry, bytes, 0, into, bytes);
}

void SingleCopyOp::read_part(int r, std::size_t entry, std::size_t entry_bytes, std::size_t offset,
                             void* into, std::size_t bytes) {
  arena_.wait_for(r, Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
  const std::byte* slot = arena_.data(r, exposure_);
  Header header{};
  std::memcpy(&header, slot, sizeof header);
  Entry found{0, 0};
  if (entry < header.entries)
    std::memcpy(&found, slot + sizeof(Header) + entry * sizeof(Entry), sizeof found);
  if (found.bytes != entry_bytes) {
    if (mismatch_.empty()) {
      mismatch_ = "rank " + std::to_string(r) + " has " + std::to_string(found.bytes) +
                  " bytes for rank " + std::to_string(ctx_.rank) + ", which expects " +
                  std::to_string(entry_bytes) + " (do the ranks' counts agree?)";
      mismatched_rank_ = r;
    }
    return;
  }
  COHORT_CHECK(offset <= entry_bytes && bytes <= entry_bytes - offset);
  if (bytes == 0) return;
  arena_.read_from(
      r, into, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(found.address) + offset),
      bytes, ctx_.what);
  // An owner that failed before this copy ended may have handed its buffer back; it marked its
  // flags before its error left the op, so this sees the mark and throws. The fence keeps the
  // look at the flag after the copy's loads.
  memory_fence(std::memory_order_acquire);
  arena_.wait_for(r, Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
}

void SingleCopyOp::release() {
  COHORT_CHECK(exposure_ + 1 == release_);  // every step exposed
  arena_.publish(Flag::Arrived, release_);
  finish();
}

void SingleCopyOp::release_after(int reader) {
  COHORT_CHECK(exposure_ + 1 == release_);
  arena_.publish(Flag::Arrived, release_);
  arena_.wait_for(reader, Flag::Arrived, release_, ctx_.deadline, ctx_.what);
  finish();
}

void SingleCopyOp::release_after_all() {
  COHORT_CHECK(exposure_ + 1 == release_);
  arena_.publish(Flag::Arrived, release_);
  arena_.wait_for_all(Flag::Arrived, release_, ctx_.deadline, ctx_.what);
  finish();
}

void SingleCopyOp::finish() {
  finished_ = true;
  if (mismatch_.empty()) return;
  arena_.mark_failed(true);  // the others learn of it as a disagreement, not as a failure
  throw Error(ErrorCode::InvalidArgument, mismatch_,
              ErrorContext{.op = ctx_.what, .peers = {mismatched_rank_}});
}

}  // namespace cohort::algorithms
