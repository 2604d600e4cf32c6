// The chunked ring engine behind ring_reduce_scatter and ring_allgather (see ring_pipeline.hpp).

#include "algorithms/engines/ring_pipeline.hpp"

#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "core/check.hpp"
#include "core/copy_bytes.hpp"
#include "patterns/block_partition.hpp"
#include "patterns/ring.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace cohort::algorithms {

BalancedBlocks::BalancedBlocks(std::size_t count, std::size_t n) : offsets(n), counts(n) {
  for (std::size_t b = 0; b < n; ++b) {
    const auto block = patterns::balanced_block(count, n, b);
    offsets[b] = block.offset;
    counts[b] = block.count;
  }
}
namespace {

using patterns::balanced_block;
using patterns::wrap;

/// One unit of a phase: what to send right, and where what arrives from the left goes.
struct RingUnit {
  const std::byte* send = nullptr;
  std::size_t send_bytes = 0;
  std::byte* recv = nullptr;  ///< copy units: destination; reducing units: dst of dst = a op in
  std::size_t recv_bytes = 0;
  const std::byte* reduce_a = nullptr;  ///< set for reducing units
};

bool overlaps(const std::byte* a, std::size_t a_bytes, const std::byte* b,
              std::size_t b_bytes) noexcept {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

/// Chunks per block: enough that the largest block's chunks fit kRingChunkBytes.
std::size_t chunks_per_block(const RingBlocks& blocks, std::size_t elem_size) {
  const std::size_t largest = *std::max_element(blocks.counts.begin(), blocks.counts.end());
  const std::size_t chunk_elems = std::max<std::size_t>(1, kRingChunkBytes / elem_size);
  return patterns::pieces_needed(largest, chunk_elems);
}

/// Runs `units` units (see ring_pipeline.hpp). describe(u) gives unit u; unit u's send may read
/// what unit u - lag received. Reducing units receive into two alternating scratch chunks of
/// `max_recv_bytes`.
template <class Describe>
void run_ring_units(const OpContext& ctx, const RingLayout& ring, std::size_t units,
                    std::size_t lag, std::uint32_t first_step, std::size_t max_recv_bytes,
                    DType dtype, ReduceOp op, Describe&& describe) {
  if (units == 0) return;
  const std::size_t elem_size = dtype_size(dtype);
  std::array<std::byte*, 2> landing{nullptr, nullptr};
  std::array<RingUnit, 2> unit;
  std::array<transport::Request, 2> recv_request, send_request;
  std::array<bool, 2> sent{false, false};
  auto step_of = [&](std::size_t u) { return static_cast<std::uint32_t>(first_step + u); };

  auto prepare = [&](std::size_t u) {
    RingUnit& x = unit[u % 2];
    x = describe(u);
    sent[u % 2] = false;
    if (x.reduce_a != nullptr && landing[u % 2] == nullptr)
      landing[u % 2] =
          ctx.scratch.get(max_recv_bytes, u % 2 ? kSlotRingReceive1 : kSlotRingReceive0);
  };
  auto recv_target = [&](std::size_t u) {
    const RingUnit& x = unit[u % 2];
    return x.reduce_a != nullptr ? landing[u % 2] : x.recv;
  };
  auto post_unit_send = [&](std::size_t u) {
    const RingUnit& x = unit[u % 2];
    send_request[u % 2] = post_send(ctx, ring.right, x.send, x.send_bytes, step_of(u));
    sent[u % 2] = true;
  };

  // Unit 0 has no dependency: start both directions.
  prepare(0);
  recv_request[0] = post_recv(ctx, ring.left, recv_target(0), unit[0].recv_bytes, step_of(0));
  post_unit_send(0);

  for (std::size_t u = 0; u < units; ++u) {
    const std::size_t next = u + 1;
    // 1. Post the next unit's receive (and its send, if what it sends is already final) so it
    //    travels while this unit is reduced. A receive landing where our own in-flight send still
    //    reads (only possible in place, with two ranks and one chunk) waits for that send first.
    if (next < units) {
      prepare(next);
      const RingUnit& x = unit[next % 2];
      const RingUnit& current = unit[u % 2];
      if (x.reduce_a == nullptr && overlaps(x.recv, x.recv_bytes, current.send, current.send_bytes))
        wait_request(ctx, send_request[u % 2]);
      recv_request[next % 2] =
          post_recv(ctx, ring.left, recv_target(next), x.recv_bytes, step_of(next));
      if (next < lag || next - lag < u) post_unit_send(next);
    }
    // 2. Wait for this unit's chunk and fold it in.
    wait_request(ctx, recv_request[u % 2]);
    const RingUnit& x = unit[u % 2];
    if (x.reduce_a != nullptr && x.recv_bytes > 0)
      reduce::reduce_to(op, dtype, x.recv, x.reduce_a, landing[u % 2], x.recv_bytes / elem_size);
    // 3. The next unit's send may have been waiting for exactly this reduction.
    if (next < units && !sent[next % 2]) post_unit_send(next);
    // 4. Retire this unit's send, so at most two sends are ever in flight and the buffers of
    //    unit u - 1 may be reused.
    wait_request(ctx, send_request[u % 2]);
  }
}

}  // namespace

RingLayout rank_ring(const OpContext& ctx) {
  const auto n = patterns::ring_neighbours(ctx.rank, ctx.size);
  return {ctx.rank, ctx.size, n.left, n.right};
}

RingLayout rooted_ring(const OpContext& ctx, int root) {
  const int position = patterns::relative_rank(ctx.rank, root, ctx.size);
  return {position, ctx.size, patterns::absolute_rank(position - 1, root, ctx.size),
          patterns::absolute_rank(position + 1, root, ctx.size)};
}

std::uint32_t ring_reduce_scatter(const OpContext& ctx, const RingLayout& ring, const std::byte* in,
                                  const RingBlocks& blocks, std::byte* accumulate,
                                  std::byte* final_dst, DType dtype, ReduceOp op,
                                  std::uint32_t first_step) {
  const int n = ring.size;
  const int p = ring.position;
  const std::size_t es = dtype_size(dtype);
  COHORT_CHECK(blocks.offsets.size() == static_cast<std::size_t>(n));
  COHORT_CHECK(blocks.counts.size() == static_cast<std::size_t>(n));
  if (n == 1) {
    if (final_dst != in + blocks.offsets[0] * es)
      copy_bytes(final_dst, in + blocks.offsets[0] * es, blocks.counts[0] * es);
    return 0;
  }
  const std::size_t chunks = chunks_per_block(blocks, es);
  const std::size_t largest = *std::max_element(blocks.counts.begin(), blocks.counts.end());
  const std::size_t max_chunk_bytes = balanced_block(largest, chunks, 0).count * es;
  const std::size_t steps = static_cast<std::size_t>(n - 1);

  // Without a caller-provided accumulator, partial results of step s live in one of two
  // block-sized scratch buffers (step s + 1 sends what step s wrote, step s + 2 reuses it).
  std::array<std::byte*, 2> partial{nullptr, nullptr};
  if (accumulate == nullptr && steps > 1) {
    partial[0] = ctx.scratch.get(largest * es, kSlotRingAccumulate0);
    partial[1] = ctx.scratch.get(largest * es, kSlotRingAccumulate1);
  }
  auto partial_of = [&](std::size_t step, int block) {
    return accumulate != nullptr ? accumulate + blocks.offsets[block] * es : partial[step % 2];
  };

  // Step s sends block p - s - 1 and reduces block p - s - 2, so the last step (n - 2) reduces
  // block p itself: every block travels once around the ring collecting one contribution per rank.
  run_ring_units(
      ctx, ring, steps * chunks, chunks, first_step, max_chunk_bytes, dtype, op,
      [&](std::size_t u) {
        const std::size_t s = u / chunks;
        const std::size_t c = u % chunks;
        const int send_block = wrap(p - static_cast<int>(s) - 1, n);
        const int recv_block = wrap(p - static_cast<int>(s) - 2, n);
        const auto send_chunk = balanced_block(blocks.counts[send_block], chunks, c);
        const auto recv_chunk = balanced_block(blocks.counts[recv_block], chunks, c);
        RingUnit x;
        // Step 0 sends our own contribution; later steps forward the partial reduced last step.
        x.send = (s == 0 ? in + blocks.offsets[send_block] * es : partial_of(s - 1, send_block)) +
                 send_chunk.offset * es;
        x.send_bytes = send_chunk.count * es;
        std::byte* dst = s + 1 == steps ? final_dst : partial_of(s, recv_block);
        x.recv = dst + recv_chunk.offset * es;
        x.recv_bytes = recv_chunk.count * es;
        // partial = our contribution op what arrived (one pass: no copy of `in` first).
        x.reduce_a = in + (blocks.offsets[recv_block] + recv_chunk.offset) * es;
        return x;
      });
  return static_cast<std::uint32_t>(steps * chunks);
}

std::uint32_t ring_allgather(const OpContext& ctx, const RingLayout& ring, std::byte* buf,
                             const RingBlocks& blocks, DType dtype, std::uint32_t first_step) {
  const int n = ring.size;
  const int p = ring.position;
  const std::size_t es = dtype_size(dtype);
  COHORT_CHECK(blocks.offsets.size() == static_cast<std::size_t>(n));
  COHORT_CHECK(blocks.counts.size() == static_cast<std::size_t>(n));
  if (n == 1) return 0;
  const std::size_t chunks = chunks_per_block(blocks, es);
  const std::size_t steps = static_cast<std::size_t>(n - 1);
  // Step t forwards block p - t (ours at t = 0, received at step t - 1) and receives block
  // p - t - 1 straight into place.
  run_ring_units(ctx, ring, steps * chunks, chunks, first_step, 0, dtype, ReduceOp::Sum,
                 [&](std::size_t u) {
                   const std::size_t t = u / chunks;
                   const std::size_t c = u % chunks;
                   const int send_block = wrap(p - static_cast<int>(t), n);
                   const int recv_block = wrap(p - static_cast<int>(t) - 1, n);
                   const auto send_chunk = balanced_block(blocks.counts[send_block], chunks, c);
                   const auto recv_chunk = balanced_block(blocks.counts[recv_block], chunks, c);
                   RingUnit x;
                   x.send = buf + (blocks.offsets[send_block] + send_chunk.offset) * es;
                   x.send_bytes = send_chunk.count * es;
                   x.recv = buf + (blocks.offsets[recv_block] + recv_chunk.offset) * es;
                   x.recv_bytes = recv_chunk.count * es;
                   return x;
                 });
  return static_cast<std::uint32_t>(steps * chunks);
}

}  // namespace cohort::algorithms
