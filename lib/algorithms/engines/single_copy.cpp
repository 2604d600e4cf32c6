#include "algorithms/engines/single_copy.hpp"

#include <cohort/error.hpp>

#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "core/mappable_memory.hpp"
#include "core/memory_fence.hpp"

#include <cstring>

namespace cohort::algorithms {
namespace {

using Flag = transport::SharedArena::Flag;

/// A table entry as it sits in the owner's data slot. A block in mappable memory
/// (core/mappable_memory.hpp) also names its file, so a reader may map it instead of copying.
struct Entry {
  std::uint64_t address;
  std::uint64_t bytes;
  std::uint64_t inode;  ///< 0: not in mappable memory
  std::uint64_t device;
  std::uint64_t file_bytes;
  std::uint64_t file_offset;
  std::int64_t fd;
};

Entry entry_for(const ExposedBlock& block) {
  Entry entry{reinterpret_cast<std::uintptr_t>(block.data), block.bytes, 0, 0, 0, 0, -1};
  MappableRef ref;
  if (block.bytes > 0 && find_mappable(block.data, block.bytes, &ref)) {
    entry.inode = ref.inode;
    entry.device = ref.device;
    entry.file_bytes = ref.file_bytes;
    entry.file_offset = ref.offset;
    entry.fd = ref.fd;
  }
  return entry;
}

MappableRef mappable_ref(const Entry& entry) {
  return MappableRef{static_cast<std::int32_t>(entry.fd), entry.inode, entry.device,
                     entry.file_bytes, entry.file_offset};
}

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
    const Entry entry = entry_for(block_of(d));
    std::memcpy(table, &entry, sizeof entry);
    table += sizeof entry;
  }
  arena_.publish(Flag::Arrived, exposure_);
}

void SingleCopyOp::read(int r, std::size_t entry, void* into, std::size_t bytes) {
  read_part(r, entry, bytes, 0, into, bytes);
}

bool SingleCopyOp::find_entry(int r, std::size_t entry, std::size_t entry_bytes, void* found) {
  arena_.wait_for(r, Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
  const std::byte* slot = arena_.data(r, exposure_);
  Header header{};
  std::memcpy(&header, slot, sizeof header);
  Entry e{0, 0, 0, 0, 0, 0, -1};
  if (entry < header.entries)
    std::memcpy(&e, slot + sizeof(Header) + entry * sizeof(Entry), sizeof e);
  std::memcpy(found, &e, sizeof e);
  if (e.bytes == entry_bytes) return true;
  if (mismatch_.empty()) {
    mismatch_ = "rank " + std::to_string(r) + " has " + std::to_string(e.bytes) +
                " bytes for rank " + std::to_string(ctx_.rank) + ", which expects " +
                std::to_string(entry_bytes) + " (do the ranks' counts agree?)";
    mismatched_rank_ = r;
  }
  return false;
}

void SingleCopyOp::read_part(int r, std::size_t entry, std::size_t entry_bytes, std::size_t offset,
                             void* into, std::size_t bytes) {
  Entry found{};
  if (!find_entry(r, entry, entry_bytes, &found)) return;
  COHORT_CHECK(offset <= entry_bytes && bytes <= entry_bytes - offset);
  if (bytes == 0) return;
  if (found.inode != 0) {
    // In mappable memory: a plain copy through the mapping, without the kernel pinning pages.
    copy_bytes(into,
               arena_.map_peer(r, mappable_ref(found), entry_bytes, release_, ctx_.what) + offset,
               bytes);
  } else {
    arena_.read_from(
        r, into, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(found.address) + offset),
        bytes, ctx_.what);
  }
  // An owner that failed before this copy ended may have handed its buffer back; it marked its
  // flags before its error left the op, so this sees the mark and throws. The fence keeps the
  // look at the flag after the copy's loads.
  memory_fence(std::memory_order_acquire);
  arena_.wait_for(r, Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
}

bool SingleCopyOp::all_mappable(std::size_t entries) {
  bool all = true;
  for (int r = 0; r < ctx_.size; ++r) {
    arena_.wait_for(r, Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
    const std::byte* slot = arena_.data(r, exposure_);
    Header header{};
    std::memcpy(&header, slot, sizeof header);
    if (header.entries < entries) return false;
    for (std::size_t d = 0; d < entries; ++d) {
      Entry e{};
      std::memcpy(&e, slot + sizeof(Header) + d * sizeof(Entry), sizeof e);
      all = all && (e.inode != 0 || e.bytes == 0);
    }
  }
  return all;
}

bool SingleCopyOp::entry_mappable(int r, std::size_t entry, std::size_t entry_bytes) {
  arena_.wait_for(r, Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
  const std::byte* slot = arena_.data(r, exposure_);
  Header header{};
  std::memcpy(&header, slot, sizeof header);
  if (entry >= header.entries || entry_bytes == 0) return false;
  Entry e{};
  std::memcpy(&e, slot + sizeof(Header) + entry * sizeof(Entry), sizeof e);
  return e.inode != 0 && e.bytes == entry_bytes;
}

std::byte* SingleCopyOp::mapped(int r, std::size_t entry, std::size_t entry_bytes) {
  Entry found{};
  if (!find_entry(r, entry, entry_bytes, &found) || entry_bytes == 0) return nullptr;
  if (r == ctx_.rank)
    return reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(found.address));
  COHORT_CHECK(found.inode != 0);
  return arena_.map_peer(r, mappable_ref(found), entry_bytes, release_, ctx_.what);
}

void SingleCopyOp::check_peers() {
  arena_.wait_for_all(Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
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
