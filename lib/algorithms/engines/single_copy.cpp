#include "algorithms/engines/single_copy.hpp"

#include <cohort/error.hpp>

#include <cstring>

namespace cohort::algorithms {
namespace {

/// A table entry as it sits in the owner's data slot.
struct Entry {
  std::uint64_t address;
  std::uint64_t bytes;
};

/// A table (the slot holds 256 KiB, so up to 16384 ranks).
static_assert(transport::SharedArena::kSlotBytes / sizeof(Entry) >= 16384);

/// Entries before the table proper: how many there are.
struct Header {
  std::uint64_t entries;
  std::uint64_t unused;
};
static_assert(sizeof(Header) == sizeof(Entry));

}  // namespace

SingleCopyOp::SingleCopyOp(const OpContext& ctx, transport::SharedArena& arena)
    : ctx_(ctx), arena_(arena), exposure_(arena.next_generation()) {
  arena_.next_generation();  // the release
}

void SingleCopyOp::expose(std::span<const ExposedBlock> blocks) {
  arena_.wait_until_data_free(exposure_, ctx_.deadline, ctx_.what);
  std::byte* slot = arena_.data(ctx_.rank, exposure_);
  const Header header{blocks.size(), 0};
  std::memcpy(slot, &header, sizeof header);
  auto* table = slot + sizeof header;
  for (const ExposedBlock& block : blocks) {
    const Entry entry{reinterpret_cast<std::uintptr_t>(block.data), block.bytes};
    std::memcpy(table, &entry, sizeof entry);
    table += sizeof entry;
  }
  arena_.publish(transport::SharedArena::Flag::Arrived, exposure_);
}

void SingleCopyOp::read(int r, std::size_t entry, void* into, std::size_t bytes) {
  arena_.wait_for(r, transport::SharedArena::Flag::Arrived, exposure_, ctx_.deadline, ctx_.what);
  const std::byte* slot = arena_.data(r, exposure_);
  Header header{};
  std::memcpy(&header, slot, sizeof header);
  Entry found{0, 0};
  if (entry < header.entries)
    std::memcpy(&found, slot + sizeof(Header) + entry * sizeof(Entry), sizeof found);
  if (found.bytes != bytes || (entry >= header.entries && bytes != 0)) {
    if (mismatch_.empty()) {
      mismatch_ = "rank " + std::to_string(r) + " has " + std::to_string(found.bytes) +
                  " bytes for rank " + std::to_string(ctx_.rank) + ", which expects " +
                  std::to_string(bytes) + " (do the ranks' counts agree?)";
    }
    return;
  }
  if (bytes == 0) return;
  arena_.read_from(r, into,
                   reinterpret_cast<const void*>(static_cast<std::uintptr_t>(found.address)), bytes,
                   ctx_.what);
}

void SingleCopyOp::release(std::optional<int> readers) {
  const std::uint64_t done = exposure_ + 1;
  arena_.publish(transport::SharedArena::Flag::Arrived, done);
  if (readers == kEveryone)
    arena_.wait_for_all(transport::SharedArena::Flag::Arrived, done, ctx_.deadline, ctx_.what);
  else if (readers)
    arena_.wait_for(*readers, transport::SharedArena::Flag::Arrived, done, ctx_.deadline,
                    ctx_.what);
  if (!mismatch_.empty())
    throw Error(ErrorCode::InvalidArgument, mismatch_, ErrorContext{.op = ctx_.what});
}

}  // namespace cohort::algorithms
