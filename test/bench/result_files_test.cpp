// The JSON, CSV and SVG outputs, parsed back by independent parsers: Python's json, csv and
// xml.etree (the interpreter Meson runs on, passed in as COHORT_BENCH_PYTHON).

#include "result_files.hpp"
#include "svg_plot.hpp"
#include "table_printer.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace cohort;
using namespace cohort::bench;
namespace fs = std::filesystem;

namespace {

// A scratch directory removed at the end of the test.
struct ScratchDir {
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "cohort-bench-test-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
};

// Runs `script` with Python on `file`; true when it exits 0. `quiet` hides Python's stderr (for
// checks expected to fail).
bool python_accepts(const std::string& script, const fs::path& file, const fs::path& dir,
                    bool quiet = false) {
  const fs::path script_path = dir / "check.py";
  write_text_file(script_path.string(), script);
  const std::string command = std::string("'") + COHORT_BENCH_PYTHON + "' '" +
                              script_path.string() + "' '" + file.string() + "'" +
                              (quiet ? " 2>/dev/null" : "");
  return std::system(command.c_str()) == 0;
}

RunInfo sample_info() {
  RunInfo info;
  info.world_size = 3;
  info.hostname = "node\"7\\\n\t\x01<&>";  // every character JSON or XML must escape
  info.cohort_version = "0.1.0";
  info.op = "allreduce";
  info.dtype = "float";
  info.redop = "sum";
  info.peer = "gloo";
  info.warmup = 5;
  info.iters = 20;
  info.min_time_s = 0.05;
  info.average = 3;
  info.command = "cohort-bench -o allreduce --min-time 0.05";
  info.date = "2026-12-01T06:00:00Z";
  info.tunables = {{"COHORT_ALGO", "allreduce=ring"}, {"COHORT_SHARED_MEMORY", "off"}};
  return info;
}

std::vector<ResultRow> sample_rows() {
  std::vector<ResultRow> rows;
  for (std::size_t size : {8u, 1024u, 1048576u}) {
    ResultRow cohort_row;
    cohort_row.impl = "cohort";
    cohort_row.algo = "ring";
    cohort_row.op = BenchOp::Allreduce;
    cohort_row.size_bytes = size;
    cohort_row.count = size / 4;
    cohort_row.out_of_place = {true, 12.5, size / 12.5e3, size / 12.5e3 * 4.0 / 3.0, 0, 40, {}};
    cohort_row.in_place = {true,
                           11.0,
                           size / 11e3,
                           size / 11e3 * 4.0 / 3.0,
                           size == 8 ? 2u : 0u,
                           30,
                           size == 8 ? "bruck" : ""};
    rows.push_back(cohort_row);
    ResultRow gloo_row = cohort_row;
    gloo_row.impl = "gloo";
    gloo_row.algo = "default";
    gloo_row.in_place = {};
    gloo_row.skipped = "in-place: \"quoted\" reason";
    rows.push_back(gloo_row);
  }
  ResultRow skipped;
  skipped.impl = "mpi";
  skipped.algo = "default";
  skipped.op = BenchOp::Reduce;
  skipped.dtype = DType::BFloat16;
  skipped.skipped = "MPI has no reduction on bfloat16";
  rows.push_back(skipped);
  return rows;
}

}  // namespace

TEST_CASE("the JSON has null for a time that is not finite, and says whether input was fresh",
          "[bench][files]") {
  ScratchDir dir;
  const fs::path file = dir.path / "odd.json";
  RunInfo info = sample_info();
  info.fresh_input = true;
  std::vector<ResultRow> rows = sample_rows();
  rows[0].out_of_place.time_us = 1.0 / 0.0;  // JSON has no Inf
  rows[0].out_of_place.busbw_gbps = std::nan("");
  write_text_file(file.string(), results_json(info, rows));
  CHECK(python_accepts(R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fresh_input"] is True
r = d["rows"][0]
assert r["time_us"] is None and r["busbw_gbps"] is None, r
assert d["rows"][1]["time_us"] == 11.0
)PY",
                       file, dir.path));
}

TEST_CASE("the JSON document parses back with the documented fields and values", "[bench][files]") {
  ScratchDir dir;
  const fs::path file = dir.path / "results.json";
  write_text_file(file.string(), results_json(sample_info(), sample_rows()));
  const std::string script = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
assert d["world_size"] == 3
assert d["hostname"] == 'node"7\\\n\t\x01<&>', repr(d["hostname"])
assert d["op"] == "allreduce" and d["dtype"] == "float" and d["redop"] == "sum"
assert d["cohort_version"] == "0.1.0"
assert d["fresh_input"] is False and d["warmup"] == 5 and d["iters"] == 20
assert d["command"] == "cohort-bench -o allreduce --min-time 0.05"
assert d["date"] == "2026-12-01T06:00:00Z"
assert d["min_time_s"] == 0.05 and d["average"] == 3 and d["check"] is True
assert d["tunables"] == {"COHORT_ALGO": "allreduce=ring", "COHORT_SHARED_MEMORY": "off"}
rows = d["rows"]
# 3 sizes x (cohort out + in, gloo out); skipped forms and rows are left out.
assert len(rows) == 9, len(rows)
keys = {"impl", "algo", "op", "dtype", "redop", "root", "size_bytes", "count", "in_place",
        "time_us", "algbw_gbps", "busbw_gbps", "wrong", "iters"}
for r in rows:
    # Only the form where the forced algorithm declined says which one ran instead.
    declined = r["impl"] == "cohort" and r["size_bytes"] == 8 and r["in_place"]
    assert set(r) == keys | ({"declined_for"} if declined else set()), set(r) ^ keys
    assert r.get("declined_for") == ("bruck" if declined else None), r
    assert r["iters"] == (30 if r["in_place"] else 40), r
    assert r["root"] == -1 and r["redop"] == "sum" and r["dtype"] == "float"
assert sum(r["wrong"] for r in rows) == 2
assert [r["impl"] for r in rows[:3]] == ["cohort", "cohort", "gloo"]
assert rows[0]["in_place"] is False and rows[1]["in_place"] is True
big = [r for r in rows if r["size_bytes"] == 1048576 and r["impl"] == "cohort"][0]
assert big["count"] == 262144 and big["algo"] == "ring"
assert abs(big["algbw_gbps"] - 1048576 / 12.5e3) < 1e-9
)PY";
  CHECK(python_accepts(script, file, dir.path));
  // The check itself can fail: a truncated document is rejected.
  const std::string text = results_json(sample_info(), sample_rows());
  write_text_file(file.string(), text.substr(0, text.size() / 2));
  CHECK_FALSE(
      python_accepts("import json,sys\njson.load(open(sys.argv[1]))\n", file, dir.path, true));
}

TEST_CASE("a run without rows is still a valid document", "[bench][files]") {
  ScratchDir dir;
  const fs::path file = dir.path / "empty.json";
  write_text_file(file.string(), results_json(sample_info(), {}));
  CHECK(python_accepts("import json,sys\nassert json.load(open(sys.argv[1]))['rows'] == []\n", file,
                       dir.path));
}

TEST_CASE("the CSV has a header and one record per measured form", "[bench][files]") {
  ScratchDir dir;
  const fs::path file = dir.path / "results.csv";
  write_text_file(file.string(), results_csv(sample_rows()));
  CHECK(python_accepts(R"PY(
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 9, len(rows)
assert rows[0]["impl"] == "cohort" and rows[0]["in_place"] == "false"
assert rows[1]["in_place"] == "true" and rows[1]["wrong"] == "2"
assert float(rows[-1]["busbw_gbps"]) > 0
)PY",
                       file, dir.path));
}

TEST_CASE("the SVG plot is well-formed XML with axes, ticks, lines and a legend",
          "[bench][files]") {
  ScratchDir dir;
  const fs::path file = dir.path / "plot.svg";
  write_text_file(file.string(), busbw_plot_svg(sample_info(), sample_rows()));
  CHECK(python_accepts(R"PY(
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == ns + "svg"
texts = [t.text or "" for t in root.iter(ns + "text")]
assert "message size (bytes)" in texts and "bus bandwidth (GB/s)" in texts, texts
assert "1M" in texts and "1K" in texts, texts    # size ticks at powers of two
assert any(t in texts for t in ("0.001", "0.01", "0.1", "1", "10", "100")), texts
lines = list(root.iter(ns + "polyline"))
assert len(lines) == 2, len(lines)               # cohort/ring and gloo
assert len(lines[0].get("points").split()) == 3  # one point per size
assert "cohort/ring" in texts and "gloo" in texts, texts
)PY",
                       file, dir.path));
}

TEST_CASE("the SVG plot without positive data still parses", "[bench][files]") {
  ScratchDir dir;
  const fs::path file = dir.path / "empty.svg";
  write_text_file(file.string(), busbw_plot_svg(sample_info(), {}));
  CHECK(python_accepts("import sys, xml.etree.ElementTree as ET\nET.parse(sys.argv[1])\n", file,
                       dir.path));
  CHECK(size_tick_label(8) == "8");
  CHECK(size_tick_label(1024) == "1K");
  CHECK(size_tick_label(64.0 * 1024 * 1024) == "64M");
  CHECK(xml_escape("a<b&'\"") == "a&lt;b&amp;&apos;&quot;");
}

TEST_CASE("time column formatting follows nccl-tests", "[bench][files]") {
  CHECK(format_time_us(3.14159) == "   3.14");
  CHECK(format_time_us(123.45) == "  123.5");
  CHECK(format_time_us(12345.6) == "  12346");
}
