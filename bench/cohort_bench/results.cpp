#include "results.hpp"

namespace cohort::bench {

std::string redop_label(const ResultRow& row) {
  return op_reduces(row.op) ? std::string(reduce_op_name(row.redop)) : std::string("none");
}

int root_label(const ResultRow& row) {
  return op_has_root(row.op) ? row.root : -1;
}

std::string impl_label(const ResultRow& row) {
  if (row.impl == "cohort" && row.algo != "auto") return row.impl + "/" + row.algo;
  return row.impl;
}

double average_busbw(const std::vector<ResultRow>& rows, const std::string& impl) {
  double sum = 0.0;
  std::size_t n = 0;
  for (const auto& row : rows) {
    if (row.impl != impl || !op_moves_data(row.op)) continue;
    for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
      if (!m->measured) continue;
      sum += m->busbw_gbps;
      ++n;
    }
  }
  return n == 0 ? 0.0 : sum / static_cast<double>(n);
}

std::uint64_t total_wrong(const std::vector<ResultRow>& rows) {
  std::uint64_t wrong = 0;
  for (const auto& row : rows) wrong += row.out_of_place.wrong + row.in_place.wrong;
  return wrong;
}

}  // namespace cohort::bench
