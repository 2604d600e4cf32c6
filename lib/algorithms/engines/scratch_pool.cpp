// ScratchPool: grow-only aligned buffers, one per slot.

#include "algorithms/op_context.hpp"

#include <cohort/error.hpp>

#include "core/bulk_allocation.hpp"

#include <cstdlib>
#include <new>
#include <string>

namespace cohort::algorithms {
namespace {

constexpr std::size_t kScratchAlignment = 64;

void free_scratch(std::byte* p) {
  std::free(p);
}

}  // namespace

std::byte* ScratchPool::get(std::size_t bytes, std::size_t slot) {
  if (slot >= blocks_.size()) blocks_.resize(slot + 1);
  Block& block = blocks_[slot];
  if (block.data && block.bytes >= bytes) return block.data.get();
  // Grow at least geometrically so a slowly growing sequence of ops reallocates O(log n) times;
  // round to the alignment because aligned_alloc requires a multiple of it.
  std::size_t want = bytes > 2 * block.bytes ? bytes : 2 * block.bytes;
  if (want == 0) want = kScratchAlignment;
  // Bulk memory: large scratch gets huge pages, which peers' single-copy reads need to be fast.
  void* memory = allocate_bulk(want, kScratchAlignment, &want);
  if (memory == nullptr)
    throw Error(ErrorCode::SystemError,
                "cannot allocate " + std::to_string(want) + " bytes of collective scratch memory");
  block.data = {static_cast<std::byte*>(memory), &free_scratch};
  block.bytes = want;
  return block.data.get();
}

}  // namespace cohort::algorithms
