#include "table_printer.hpp"

#include <fmt/format.h>

namespace cohort::bench {
namespace {

std::string format_bw(double gbps) {
  return fmt::format("{:6.2f}", gbps);
}

// One "time algbw busbw #wrong" group.
std::string format_group(const ResultRow& row, const Measurement& m, bool check) {
  if (!row.skipped.empty() && !m.measured) {
    return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "skip", "-", "-", "-");
  }
  if (!m.measured) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A");
  const bool moves = op_moves_data(row.op);
  return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", format_time_us(m.time_us),
                     moves ? format_bw(m.algbw_gbps) : "N/A",
                     moves ? format_bw(m.busbw_gbps) : "N/A",
                     check && moves ? std::to_string(m.wrong) : "N/A");
}

}  // namespace

std::string format_time_us(double time_us) {
  if (time_us >= 10000.0) return fmt::format("{:7.0f}", time_us);
  if (time_us >= 100.0) return fmt::format("{:7.1f}", time_us);
  return fmt::format("{:7.2f}", time_us);
}

void print_run_header(std::FILE* out, const RunInfo& info) {
  fmt::print(out, "# cohort-bench (cohort {})\n", info.cohort_version);
  fmt::print(out, "# world size: {}  hostname: {}  peer: {}  device: {}\n", info.world_size,
             info.hostname, info.peer, info.device);
  fmt::print(out, "# op: {}  dtype: {}  redop: {}  root: {}\n", info.op, info.dtype, info.redop,
             info.root);
  std::string iters = std::to_string(info.iters);
  if (info.min_time_s > 0.0) iters += fmt::format(" (min time {} s)", info.min_time_s);
  if (info.fresh_input) iters += " (fresh input, calls timed alone)";
  if (info.mappable) iters += " (cohort's buffers mappable)";
  if (info.allocate_per_call) iters += " (buffers allocated per call, calls timed alone)";
  static constexpr const char* kAverage[] = {"rank 0", "mean", "min", "max"};
  fmt::print(out, "# {} warmup iters: {} iters: {} validation: {} average: {} ({})\n", info.sweep,
             info.warmup, iters, info.check ? 1 : 0, info.average,
             info.average >= 0 && info.average <= 3 ? kAverage[info.average] : "?");
  std::fflush(out);
}

void print_block_header(std::FILE* out, BenchOp op, DType dtype, ReduceOp redop, int root) {
  // A barrier has no payload, so its block names no dtype.
  std::string title(bench_op_name(op));
  if (op_moves_data(op)) title += fmt::format(" {}", dtype_name(dtype));
  if (op_reduces(op)) title += fmt::format(" {}", reduce_op_name(redop));
  if (op_has_root(op)) title += fmt::format(" root {}", root);
  fmt::print(out, "#\n# {}\n#\n", title);
  // Centred over the two groups: the label columns end at 52, each group is 33 wide.
  fmt::print(out, "# {:>73}{:>30}\n", "out-of-place", "in-place");
  fmt::print(out, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "size", "count", "type", "redop",
             "root");
  for (int group = 0; group < 2; ++group) {
    fmt::print(out, "  {:>7}  {:>6}  {:>6}  {:>6}", "time", "algbw", "busbw", "#wrong");
  }
  fmt::print(out, "  impl\n");
  fmt::print(out, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "(B)", "(elements)", "", "", "");
  for (int group = 0; group < 2; ++group) {
    fmt::print(out, "  {:>7}  {:>6}  {:>6}  {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  }
  fmt::print(out, "\n");
  std::fflush(out);
}

void print_row(std::FILE* out, const ResultRow& row, bool check) {
  std::string line = fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", row.size_bytes, row.count,
                                 dtype_name(row.dtype), redop_label(row), root_label(row));
  line += format_group(row, row.out_of_place, check);
  line += format_group(row, row.in_place, check);
  line += "  " + impl_label(row);
  if (!row.skipped.empty()) line += " (skipped: " + row.skipped + ")";
  // A forced algorithm that declined these arguments: the table's choice was timed instead.
  const Measurement& outside = row.out_of_place;
  const Measurement& inside = row.in_place;
  if (outside.measured && inside.measured && outside.declined_for == inside.declined_for) {
    if (!outside.declined_for.empty()) line += " (declined: " + outside.declined_for + " ran)";
  } else {
    for (const auto* m : {&outside, &inside})
      if (m->measured && !m->declined_for.empty())
        line += " (declined: " + m->declined_for + " ran" +
                (m == &inside ? " in place)" : " out of place)");
  }
  fmt::print(out, "{}\n", line);
  std::fflush(out);
}

void print_trailer(std::FILE* out, const std::vector<ResultRow>& rows,
                   const std::vector<std::string>& peers) {
  const std::uint64_t wrong = total_wrong(rows);
  fmt::print(out, "# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  fmt::print(out, "# Avg bus bandwidth    : {:g} \n", average_busbw(rows, "cohort"));
  for (const auto& peer : peers) {
    fmt::print(out, "# Avg bus bandwidth ({}) : {:g} \n", peer, average_busbw(rows, peer));
  }
  fmt::print(out, "#\n");
  std::fflush(out);
}

}  // namespace cohort::bench
