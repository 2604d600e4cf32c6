#pragma once

// The machine-readable outputs: one JSON document per run and a CSV with the same rows. Each
// measured form (out-of-place, in-place) of each row is one record; skipped rows and forms an
// op does not have are left out.

#include "results.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace cohort::bench {

/// `text` as a JSON string literal, quotes included (control characters as \u00XX).
std::string json_quote(std::string_view text);
/// A finite double as a JSON number (JSON has no NaN or Inf: those become null).
std::string json_number(double value);

/// {"world_size", "op", "dtype", "redop", "hostname", "cohort_version", "peer", "iters",
///  "warmup", "rows": [{"impl", "algo", "op", "dtype", "redop", "root", "size_bytes", "count",
///  "in_place", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}]}
std::string results_json(const RunInfo& info, const std::vector<ResultRow>& rows);
/// A header line then one line per record, same fields as the JSON rows (RFC 4180 quoting).
std::string results_csv(const std::vector<ResultRow>& rows);

/// Writes `contents` to `path`, replacing it. Throws Error(SystemError) naming the path.
void write_text_file(const std::string& path, std::string_view contents);

}  // namespace cohort::bench
