#pragma once

// The machine-readable outputs: one JSON document per run and a CSV with the same rows. Each
// measured form (out-of-place, in-place) of each row is one record; skipped rows and forms an
// op does not have are left out.

#include "results.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace cohort::bench {

/// {"world_size", "op", "dtype", "redop", "root", "hostname", "cohort_version", "peer",
///  "device", "warmup", "iters", "fresh_input", "mappable", "allocate_per_call",
///  "rows": [{"impl", "algo", "op", "dtype",
///  "redop", "root", "size_bytes", "count", "in_place", "time_us", "algbw_gbps", "busbw_gbps",
///  "wrong"}]}, written with nlohmann-json (a time that is not finite is null).
std::string results_json(const RunInfo& info, const std::vector<ResultRow>& rows);
/// A header line then one line per record, same fields as the JSON rows (RFC 4180 quoting).
std::string results_csv(const std::vector<ResultRow>& rows);

/// Writes `contents` to `path`, replacing it. Throws Error(SystemError) naming the path.
void write_text_file(const std::string& path, std::string_view contents);

}  // namespace cohort::bench
