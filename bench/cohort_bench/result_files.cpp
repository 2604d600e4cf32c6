#include "result_files.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace cohort::bench {
namespace {

// Calls `fn(row, measurement, in_place)` for every measured form of every row.
template <class Fn>
void for_each_record(const std::vector<ResultRow>& rows, Fn&& fn) {
  for (const auto& row : rows) {
    if (row.out_of_place.measured) fn(row, row.out_of_place, false);
    if (row.in_place.measured) fn(row, row.in_place, true);
  }
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;  // UTF-8 bytes pass through unchanged
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  return fmt::format("{}", value);  // shortest round-trip form, valid JSON for finite values
}

std::string results_json(const RunInfo& info, const std::vector<ResultRow>& rows) {
  std::string out = "{\n";
  out += fmt::format("  \"world_size\": {},\n", info.world_size);
  out += fmt::format("  \"op\": {},\n", json_quote(info.op));
  out += fmt::format("  \"dtype\": {},\n", json_quote(info.dtype));
  out += fmt::format("  \"redop\": {},\n", json_quote(info.redop));
  out += fmt::format("  \"root\": {},\n", info.root);
  out += fmt::format("  \"hostname\": {},\n", json_quote(info.hostname));
  out += fmt::format("  \"cohort_version\": {},\n", json_quote(info.cohort_version));
  out += fmt::format("  \"peer\": {},\n", json_quote(info.peer));
  out += fmt::format("  \"device\": {},\n", json_quote(info.device));
  out += fmt::format("  \"warmup\": {},\n", info.warmup);
  out += fmt::format("  \"iters\": {},\n", info.iters);
  out += "  \"rows\": [";
  bool first = true;
  for_each_record(rows, [&](const ResultRow& row, const Measurement& m, bool in_place) {
    out += first ? "\n" : ",\n";
    first = false;
    out += fmt::format(
        "    {{\"impl\": {}, \"algo\": {}, \"op\": {}, \"dtype\": {}, \"redop\": {}, "
        "\"root\": {}, \"size_bytes\": {}, \"count\": {}, \"in_place\": {}, \"time_us\": {}, "
        "\"algbw_gbps\": {}, \"busbw_gbps\": {}, \"wrong\": {}}}",
        json_quote(row.impl), json_quote(row.algo), json_quote(bench_op_name(row.op)),
        json_quote(dtype_name(row.dtype)), json_quote(redop_label(row)), root_label(row),
        row.size_bytes, row.count, in_place ? "true" : "false", json_number(m.time_us),
        json_number(m.algbw_gbps), json_number(m.busbw_gbps), m.wrong);
  });
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

std::string results_csv(const std::vector<ResultRow>& rows) {
  std::string out =
      "impl,algo,op,dtype,redop,root,size_bytes,count,in_place,time_us,algbw_gbps,busbw_gbps,"
      "wrong\n";
  for_each_record(rows, [&](const ResultRow& row, const Measurement& m, bool in_place) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(row.impl),
                       csv_field(row.algo), bench_op_name(row.op), dtype_name(row.dtype),
                       redop_label(row), root_label(row), row.size_bytes, row.count,
                       in_place ? "true" : "false", m.time_us, m.algbw_gbps, m.busbw_gbps, m.wrong);
  });
  return out;
}

void write_text_file(const std::string& path, std::string_view contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (file) file.close();
  if (!file) {
    throw Error(ErrorCode::SystemError, "cannot write '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace cohort::bench
