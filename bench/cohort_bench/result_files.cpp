#include "result_files.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

std::string results_json(const RunInfo& info, const std::vector<ResultRow>& rows) {
  // Ordered, so the file reads in the documented order; nlohmann writes NaN and Inf as null.
  nlohmann::ordered_json doc;
  doc["command"] = info.command;
  doc["date"] = info.date;
  doc["world_size"] = info.world_size;
  doc["op"] = info.op;
  doc["dtype"] = info.dtype;
  doc["redop"] = info.redop;
  doc["root"] = info.root;
  doc["hostname"] = info.hostname;
  doc["cohort_version"] = info.cohort_version;
  doc["peer"] = info.peer;
  doc["device"] = info.device;
  doc["warmup"] = info.warmup;
  doc["iters"] = info.iters;  // asked for; with --min-time each row's "iters" says what ran
  doc["min_time_s"] = info.min_time_s;
  doc["average"] = info.average;
  doc["check"] = info.check;
  doc["sweep"] = info.sweep;
  doc["fresh_input"] = info.fresh_input;
  doc["mappable"] = info.mappable;
  doc["allocate_per_call"] = info.allocate_per_call;
  doc["tunables"] = nlohmann::ordered_json::object();
  for (const auto& [name, value] : info.tunables) doc["tunables"][name] = value;
  doc["rows"] = nlohmann::ordered_json::array();
  for_each_record(rows, [&](const ResultRow& row, const Measurement& m, bool in_place) {
    doc["rows"].push_back({{"impl", row.impl},
                           {"algo", row.algo},
                           {"op", bench_op_name(row.op)},
                           {"dtype", dtype_name(row.dtype)},
                           {"redop", redop_label(row)},
                           {"root", root_label(row)},
                           {"size_bytes", row.size_bytes},
                           {"count", row.count},
                           {"in_place", in_place},
                           {"time_us", m.time_us},
                           {"algbw_gbps", m.algbw_gbps},
                           {"busbw_gbps", m.busbw_gbps},
                           {"wrong", m.wrong},
                           {"iters", m.iters}});
    if (!m.declined_for.empty()) doc["rows"].back()["declined_for"] = m.declined_for;
  });
  // Invalid UTF-8 in a hostname is replaced rather than thrown over.
  return doc.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
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
