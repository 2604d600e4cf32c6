#include "patterns/power_of_two_fold.hpp"

#include "patterns/binomial_tree.hpp"

namespace cohort::patterns {

FoldPosition fold_position(int rank, int size) noexcept {
  const int pof2 = floor_power_of_two(size);
  const int extra = size - pof2;
  if (rank >= 2 * extra) return {pof2, extra, FoldRole::Plain, -1, rank - extra};
  if (rank % 2 == 0) return {pof2, extra, FoldRole::Extra, rank + 1, -1};
  return {pof2, extra, FoldRole::Partner, rank - 1, rank / 2};
}

int fold_active_rank(int new_rank, int size) noexcept {
  const int extra = size - floor_power_of_two(size);
  return new_rank < extra ? 2 * new_rank + 1 : new_rank + extra;
}

int fold_first_old_rank(int new_rank, int size) noexcept {
  const int extra = size - floor_power_of_two(size);
  return new_rank < extra ? 2 * new_rank : new_rank + extra;
}

}  // namespace cohort::patterns
