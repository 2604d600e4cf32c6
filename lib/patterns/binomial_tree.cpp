#include "patterns/binomial_tree.hpp"

namespace cohort::patterns {

std::vector<int> binomial_children(int v, int size) {
  std::vector<int> children;
  // Children sit at v + 2^k for every 2^k strictly below v's lowest set bit (the root has no
  // set bit, so all of them), as long as they exist.
  const int limit = v == 0 ? ceil_power_of_two(size) : (v & -v);
  for (int mask = 1; mask < limit && v + mask < size; mask <<= 1) children.push_back(v + mask);
  return children;
}

}  // namespace cohort::patterns
