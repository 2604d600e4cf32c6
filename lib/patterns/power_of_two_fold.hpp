#pragma once

// Recursive doubling and halving need a power-of-two number of ranks. With size = pof2 + extra
// (pof2 the largest power of two <= size), the first 2 * extra ranks pair up: each even rank
// 2i is an Extra that hands its data to its Partner 2i + 1 and sits out; the partner takes new
// rank i. Ranks >= 2 * extra are Plain and take new rank r - extra. The pof2 active ranks then
// run the power-of-two algorithm on new ranks, and partners hand results back to their extras
// ("unfold"). New ranks keep the old ranks' order, so new rank i covers the old ranks
// [fold_first_old_rank(i), fold_first_old_rank(i + 1)): two for partners, one otherwise.

namespace cohort::patterns {

enum class FoldRole {
  Plain,    ///< takes part directly (new rank = rank - extra)
  Partner,  ///< takes part for itself and the extra rank just below it (new rank = rank / 2)
  Extra,    ///< sends its data to `partner` (rank + 1) first, gets the result back at the end
};

struct FoldPosition {
  int pof2;   ///< ranks taking part in the power-of-two phase
  int extra;  ///< size - pof2
  FoldRole role;
  int partner;   ///< the other rank of the pair (Partner/Extra), -1 for Plain
  int new_rank;  ///< rank in the power-of-two phase, -1 for Extra
};

/// Where `rank` (< size, size >= 1) sits in the fold.
FoldPosition fold_position(int rank, int size) noexcept;

/// The old rank that plays new rank `new_rank` (< pof2) in the power-of-two phase.
int fold_active_rank(int new_rank, int size) noexcept;

/// First old rank covered by new rank `new_rank` (0 <= new_rank <= pof2; pof2 gives size).
int fold_first_old_rank(int new_rank, int size) noexcept;

/// Recursive doubling partner of new rank `new_rank` in round `round` (distance 2^round).
constexpr int doubling_partner(int new_rank, int round) noexcept {
  return new_rank ^ (1 << round);
}

/// Recursive halving over new ranks [0, pof2): in the round with distance `mask` (pof2/2, pof2/4,
/// ..., 1) new rank v keeps the half of its current range [lo, lo + 2*mask) that contains it
/// and sends the other half to v ^ mask.
struct HalvingSplit {
  int keep_begin, keep_end;  ///< new-rank range kept (and received from the partner)
  int send_begin, send_end;  ///< new-rank range sent to the partner
};

/// The split of round `mask` for new rank v.
constexpr HalvingSplit halving_split(int v, int mask) noexcept {
  const int lo = v & ~(2 * mask - 1);  // start of the 2*mask range v holds before this round
  const int mid = lo + mask;
  if ((v & mask) == 0) return {lo, mid, mid, mid + mask};
  return {mid, mid + mask, lo, mid};
}

}  // namespace cohort::patterns
