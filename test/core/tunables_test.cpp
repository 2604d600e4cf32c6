// The tunables table: defaults, every variable's accepted and rejected values, reloading, the
// printed description, and agreement with the README's environment table.

#include <catch2/catch.hpp>

#include <cohort/error.hpp>

#include "core/tunables.hpp"
#include "support/scoped_env.hpp"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace cohort;
using namespace std::chrono_literals;
using cohort::test::ScopedEnv;

namespace {

/// Unsets every declared tunable for a scope, so the caller's environment cannot leak in.
class NoTunablesSet {
 public:
  NoTunablesSet() {
    for (const TunableInfo& info : tunable_list())
      cleared_.push_back(std::make_unique<ScopedEnv>(std::string(info.name), std::nullopt));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> cleared_;
};

/// Every field, compared one by one (Tunables has no operator==: nothing else needs one).
bool same(const Tunables& a, const Tunables& b) {
  return a.timeout == b.timeout && a.debug_detail == b.debug_detail && a.log_level == b.log_level &&
         a.spin == b.spin && a.ucx_err_handling == b.ucx_err_handling &&
         a.shared_memory == b.shared_memory && a.store_timeout == b.store_timeout &&
         a.algorithm_spec == b.algorithm_spec && a.rendezvous_dir == b.rendezvous_dir &&
         a.token == b.token && a.trace_buffer == b.trace_buffer && a.trace_dir == b.trace_dir &&
         a.single_copy == b.single_copy && a.measured_choice == b.measured_choice &&
         a.kernel_isa == b.kernel_isa && a.mappable_cache_bytes == b.mappable_cache_bytes;
}

const TunableInfo& declaration(std::string_view name) {
  const TunableInfo* found = nullptr;
  for (const TunableInfo& info : tunable_list())
    if (info.name == name) found = &info;
  REQUIRE(found != nullptr);
  return *found;
}

/// reload_tunables() with `name`=`value` and every other tunable unset; the new snapshot.
Tunables read_with(const std::string& name, const std::string& value) {
  const NoTunablesSet clean;
  const ScopedEnv set(name, value);
  reload_tunables();
  return tunables();
}

/// The message reload_tunables() throws with `name`=`value`; fails when it does not throw.
std::string rejection_of(const std::string& name, const std::string& value) {
  const NoTunablesSet clean;
  const ScopedEnv set(name, value);
  try {
    reload_tunables();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    return e.message();
  }
  FAIL(name << "='" << value << "' was accepted");
  return {};
}

}  // namespace

TEST_CASE("an empty environment gives every default", "[tunables]") {
  const NoTunablesSet clean;
  reload_tunables();
  const Tunables& t = tunables();
  CHECK(t.timeout == 600s);
  CHECK_FALSE(t.debug_detail);
  CHECK(t.log_level == LogLevel::Warn);
  CHECK_FALSE(t.spin.has_value());
  CHECK(t.ucx_err_handling == PeerErrorHandling::Auto);
  CHECK(t.shared_memory);
  CHECK(t.store_timeout == 300s);
  CHECK(t.algorithm_spec.empty());
  CHECK_FALSE(t.rendezvous_dir.has_value());
  CHECK(t.token.empty());
  CHECK(t.trace_buffer == 2000);
  CHECK_FALSE(t.trace_dir.has_value());
  CHECK(t.single_copy);
  CHECK(t.measured_choice);
  CHECK(t.kernel_isa == KernelIsa::Auto);
  CHECK(same(t, Tunables{}));
}

TEST_CASE("an empty value counts as unset", "[tunables]") {
  for (const TunableInfo& info : tunable_list()) {
    CAPTURE(info.name);
    CHECK(same(read_with(std::string(info.name), ""), Tunables{}));
  }
}

TEST_CASE("each declared default, parsed as a value, gives the built-in default", "[tunables]") {
  // The ones whose default is itself a value of the variable (the others say "unset", "auto",
  // "temp dir": a meaning, not a value).
  for (const char* name :
       {"COHORT_TIMEOUT", "COHORT_DEBUG", "COHORT_LOG_LEVEL", "COHORT_SHARED_MEMORY",
        "COHORT_UCX_ERR_HANDLING", "COHORT_STORE_TIMEOUT", "COHORT_TRACE_BUFFER",
        "COHORT_KERNEL_ISA", "COHORT_MAPPABLE_CACHE_MIB"}) {
    CAPTURE(name);
    const TunableInfo& info = declaration(name);
    Tunables parsed;
    info.parse(std::string(info.default_text), parsed);
    CHECK(same(parsed, Tunables{}));
  }
}

TEST_CASE("accepted values", "[tunables]") {
  SECTION("COHORT_TIMEOUT: seconds, decimals rounded up to whole milliseconds") {
    CHECK(read_with("COHORT_TIMEOUT", "2.5").timeout == 2500ms);
    CHECK(read_with("COHORT_TIMEOUT", "0.0001").timeout == 1ms);
    CHECK(read_with("COHORT_TIMEOUT", "31536000").timeout == 31536000000ms);  // one year
  }
  SECTION("COHORT_DEBUG: detail, or off / 0 / none, in any case") {
    CHECK(read_with("COHORT_DEBUG", "detail").debug_detail);
    CHECK(read_with("COHORT_DEBUG", "DETAIL").debug_detail);
    CHECK_FALSE(read_with("COHORT_DEBUG", "off").debug_detail);
    CHECK_FALSE(read_with("COHORT_DEBUG", "0").debug_detail);
    CHECK_FALSE(read_with("COHORT_DEBUG", "None").debug_detail);
  }
  SECTION("COHORT_LOG_LEVEL: the six level names, and warning for warn") {
    CHECK(read_with("COHORT_LOG_LEVEL", "trace").log_level == LogLevel::Trace);
    CHECK(read_with("COHORT_LOG_LEVEL", "debug").log_level == LogLevel::Debug);
    CHECK(read_with("COHORT_LOG_LEVEL", "info").log_level == LogLevel::Info);
    CHECK(read_with("COHORT_LOG_LEVEL", "warning").log_level == LogLevel::Warn);
    CHECK(read_with("COHORT_LOG_LEVEL", "error").log_level == LogLevel::Error);
    CHECK(read_with("COHORT_LOG_LEVEL", "off").log_level == LogLevel::Off);
  }
  SECTION("COHORT_SPIN_US: whole non-negative microseconds") {
    CHECK(read_with("COHORT_SPIN_US", "0").spin == std::optional(0us));
    CHECK(read_with("COHORT_SPIN_US", "250").spin == std::optional(250us));
  }
  SECTION("COHORT_UCX_ERR_HANDLING and COHORT_SHARED_MEMORY: their enums") {
    CHECK(read_with("COHORT_UCX_ERR_HANDLING", "peer").ucx_err_handling == PeerErrorHandling::Peer);
    CHECK(read_with("COHORT_UCX_ERR_HANDLING", "auto").ucx_err_handling == PeerErrorHandling::Auto);
    CHECK_FALSE(read_with("COHORT_SHARED_MEMORY", "off").shared_memory);
    CHECK(read_with("COHORT_SHARED_MEMORY", "auto").shared_memory);
  }
  SECTION("COHORT_KERNEL_ISA: auto or one of the three instruction sets, as spelled") {
    CHECK(read_with("COHORT_KERNEL_ISA", "auto").kernel_isa == KernelIsa::Auto);
    CHECK(read_with("COHORT_KERNEL_ISA", "avx512").kernel_isa == KernelIsa::Avx512);
    CHECK(read_with("COHORT_KERNEL_ISA", "avx2").kernel_isa == KernelIsa::Avx2);
    CHECK(read_with("COHORT_KERNEL_ISA", "portable").kernel_isa == KernelIsa::Portable);
  }
  SECTION("COHORT_STORE_TIMEOUT: seconds, rounded to the nearest millisecond") {
    CHECK(read_with("COHORT_STORE_TIMEOUT", "0.2").store_timeout == 200ms);
    CHECK(read_with("COHORT_STORE_TIMEOUT", "1.0004").store_timeout == 1000ms);
    CHECK(read_with("COHORT_STORE_TIMEOUT", "1e7").store_timeout == 10000000000ms);
    // Positive but below half a millisecond: 1 ms, never a zero timeout (found by fuzzing).
    CHECK(read_with("COHORT_STORE_TIMEOUT", "0.0001").store_timeout == 1ms);
    CHECK(read_with("COHORT_STORE_TIMEOUT", ".000013358283471264427").store_timeout == 1ms);
  }
  SECTION("text variables are kept as set") {
    CHECK(read_with("COHORT_ALGO", "allreduce:ring,broadcast:tree").algorithm_spec ==
          "allreduce:ring,broadcast:tree");
    CHECK(read_with("COHORT_RENDEZVOUS_DIR", "/tmp/job dir").rendezvous_dir ==
          std::optional<std::string>("/tmp/job dir"));
    CHECK(read_with("COHORT_TOKEN", "s3cret").token == "s3cret");
    CHECK(read_with("COHORT_TRACE_DIR", "/tmp/traces").trace_dir ==
          std::optional<std::string>("/tmp/traces"));
  }
  SECTION("COHORT_TRACE_BUFFER: whole ops from 0 (records nothing) to a million") {
    CHECK(read_with("COHORT_TRACE_BUFFER", "0").trace_buffer == 0);
    CHECK(read_with("COHORT_TRACE_BUFFER", "64").trace_buffer == 64);
    CHECK(read_with("COHORT_TRACE_BUFFER", "1000000").trace_buffer == 1000000);
  }
  SECTION("COHORT_MAPPABLE_CACHE_MIB: whole MiB from 0 (keeps none) to 1 TiB, held in bytes") {
    CHECK(read_with("COHORT_MAPPABLE_CACHE_MIB", "0").mappable_cache_bytes == 0);
    CHECK(read_with("COHORT_MAPPABLE_CACHE_MIB", "3").mappable_cache_bytes == 3u * 1024 * 1024);
    CHECK(read_with("COHORT_MAPPABLE_CACHE_MIB", "1048576").mappable_cache_bytes == std::size_t{1}
                                                                                        << 40);
  }
}

TEST_CASE("a malformed value names the variable, the value and what was expected", "[tunables]") {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"COHORT_TIMEOUT", "soon", "is not a positive number of seconds (at most one year)"},
      {"COHORT_TIMEOUT", "0", "positive number of seconds"},
      {"COHORT_TIMEOUT", "-3", "positive number of seconds"},
      {"COHORT_TIMEOUT", "inf", "positive number of seconds"},
      {"COHORT_TIMEOUT", "nan", "positive number of seconds"},
      {"COHORT_TIMEOUT", "31536001", "at most one year"},
      {"COHORT_TIMEOUT", "2.5s", "positive number of seconds"},
      {"COHORT_DEBUG", "verbose", "(expected 'detail' or 'off')"},
      {"COHORT_LOG_LEVEL", "loud", "(expected trace, debug, info, warn, error or off)"},
      {"COHORT_LOG_LEVEL", "INFO", "(expected trace, debug, info, warn, error or off)"},
      {"COHORT_SPIN_US", "-1", "is not a non-negative number of microseconds"},
      {"COHORT_SPIN_US", "1.5", "is not a non-negative number of microseconds"},
      {"COHORT_SPIN_US", "fast", "is not a non-negative number of microseconds"},
      {"COHORT_UCX_ERR_HANDLING", "none", "(expected 'auto' or 'peer')"},
      {"COHORT_SHARED_MEMORY", "maybe", "(expected 'auto' or 'off')"},
      {"COHORT_SHARED_MEMORY", "on", "(expected 'auto' or 'off')"},
      {"COHORT_STORE_TIMEOUT", "0", "is not a positive number of seconds (at most 1e7)"},
      {"COHORT_STORE_TIMEOUT", "1e8", "at most 1e7"},
      {"COHORT_STORE_TIMEOUT", "nan", "positive number of seconds"},
      {"COHORT_STORE_TIMEOUT", "soon", "positive number of seconds"},
      {"COHORT_TRACE_BUFFER", "-1", "is not a number of ops between 0 and 1000000"},
      {"COHORT_TRACE_BUFFER", "1000001", "between 0 and 1000000"},
      {"COHORT_TRACE_BUFFER", "2k", "number of ops"},
      {"COHORT_MAPPABLE_CACHE_MIB", "-1", "is not a number of MiB between 0 and 1048576"},
      {"COHORT_MAPPABLE_CACHE_MIB", "1048577", "between 0 and 1048576"},
      {"COHORT_MAPPABLE_CACHE_MIB", "1G", "number of MiB"},
      {"COHORT_KERNEL_ISA", "sse2", "(expected 'auto', 'avx512', 'avx2' or 'portable')"},
      {"COHORT_KERNEL_ISA", "AVX2", "(expected 'auto', 'avx512', 'avx2' or 'portable')"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name, c.value);
    const std::string message = rejection_of(c.name, c.value);
    CHECK_THAT(message, Catch::Contains(std::string(c.name) + "='" + c.value + "'"));
    CHECK_THAT(message, Catch::Contains(c.expected));
  }
}

TEST_CASE("every malformed variable is named at once", "[tunables]") {
  const NoTunablesSet clean;
  const ScopedEnv timeout("COHORT_TIMEOUT", "soon");
  const ScopedEnv spin("COHORT_SPIN_US", "fast");
  try {
    reload_tunables();
    FAIL("accepted two malformed variables");
  } catch (const Error& e) {
    CHECK_THAT(e.message(), Catch::Contains("COHORT_TIMEOUT='soon'"));
    CHECK_THAT(e.message(), Catch::Contains("COHORT_SPIN_US='fast'"));
  }
}

TEST_CASE("the snapshot is cached until reloaded; a failed reload keeps it", "[tunables]") {
  const NoTunablesSet clean;
  const ScopedEnv first("COHORT_TIMEOUT", "7");
  reload_tunables();
  const Tunables& before = tunables();
  CHECK(before.timeout == 7s);
  {
    const ScopedEnv second("COHORT_TIMEOUT", "9");
    CHECK(tunables().timeout == 7s);  // not re-read without a reload
    reload_tunables();
    CHECK(tunables().timeout == 9s);
    // A reference taken before the reload still reads the values it was taken with.
    CHECK(before.timeout == 7s);
    const ScopedEnv bad("COHORT_TIMEOUT", "soon");
    CHECK_THROWS_AS(reload_tunables(), Error);
    CHECK(tunables().timeout == 9s);
  }
}

TEST_CASE("readers on other threads see whole snapshots while reloads happen", "[tunables]") {
  const NoTunablesSet clean;
  reload_tunables();
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!stop.load()) {
      const Tunables& t = tunables();
      // Every snapshot published below has timeout and store timeout equal (1 s or 2 s), or is
      // the all-default one from before the loop.
      const bool consistent = t.timeout == t.store_timeout || same(t, Tunables{});
      if (!consistent) torn.fetch_add(1);
    }
  });
  for (int i = 0; i < 200; ++i) {
    const char* value = i % 2 == 0 ? "1" : "2";
    const ScopedEnv timeout("COHORT_TIMEOUT", value);
    const ScopedEnv store_timeout("COHORT_STORE_TIMEOUT", value);
    reload_tunables();
  }
  stop.store(true);
  reader.join();
  CHECK(torn.load() == 0);
}

TEST_CASE("describe_tunables prints every tunable with its value and default", "[tunables]") {
  const NoTunablesSet clean;
  const ScopedEnv timeout("COHORT_TIMEOUT", "42");
  const ScopedEnv token("COHORT_TOKEN", "do-not-print-me");
  const ScopedEnv spin("COHORT_SPIN_US", "fast");  // malformed: described, not thrown
  const std::string text = describe_tunables();
  std::map<std::string, std::string> line_of;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) line_of[line.substr(0, line.find(' '))] = line;
  REQUIRE(line_of.size() == tunable_list().size());
  for (const TunableInfo& info : tunable_list()) {
    CAPTURE(info.name);
    REQUIRE(line_of.count(std::string(info.name)) == 1);
    CHECK_THAT(line_of[std::string(info.name)], Catch::Contains(std::string(info.doc)));
  }
  CHECK_THAT(line_of["COHORT_TIMEOUT"], Catch::Contains("= 42 (default 600; seconds)"));
  CHECK_THAT(line_of["COHORT_STORE_TIMEOUT"], Catch::Contains("= 300 (default; seconds)"));
  CHECK_THAT(line_of["COHORT_TOKEN"], Catch::Contains("<set, hidden>"));
  CHECK(text.find("do-not-print-me") == std::string::npos);
  CHECK_THAT(line_of["COHORT_SPIN_US"], Catch::Contains("INVALID"));
  CHECK_THAT(line_of["COHORT_SPIN_US"], Catch::Contains("COHORT_SPIN_US='fast'"));
}

TEST_CASE("each tunable is declared once", "[tunables]") {
  std::set<std::string_view> names;
  for (const TunableInfo& info : tunable_list()) {
    CAPTURE(info.name);
    CHECK(names.insert(info.name).second);
    CHECK_FALSE(info.type.empty());
    CHECK_FALSE(info.default_text.empty());
    CHECK_FALSE(info.doc.empty());
  }
}

namespace {

/// A README table row's cells, split at the '|' that are not escaped ("\|"), unescaped and
/// with backticks and surrounding spaces removed.
std::vector<std::string> cells_of(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 1; i < row.size(); ++i) {  // row[0] is the leading '|'
    if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (row[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else if (row[i] != '`') {
      cell += row[i];
    }
  }
  for (std::string& c : cells) {
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
  }
  return cells;
}

}  // namespace

TEST_CASE("the README's environment table lists exactly the tunables, with their defaults",
          "[tunables][readme]") {
  const char* path = std::getenv("COHORT_README");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  REQUIRE(in);
  std::string line;
  while (std::getline(in, line) && line != "### Environment variables") {
  }
  REQUIRE(line == "### Environment variables");
  std::vector<std::string> rows;
  while (std::getline(in, line) && (line.empty() || line[0] == '|'))
    if (!line.empty()) rows.push_back(line);
  REQUIRE(rows.size() > 2);
  REQUIRE(cells_of(rows[0]) == std::vector<std::string>{"variable", "type", "default", "meaning"});

  // Variables the launchers set (lib/bootstrap/environment.cpp reads them): not tunables, but
  // the table documents them too.
  const std::set<std::string> launcher_variables = {
      "COHORT_RANK",      "COHORT_WORLD_SIZE", "COHORT_LOCAL_RANK", "COHORT_LOCAL_WORLD_SIZE",
      "COHORT_NODE_RANK", "COHORT_NNODES",     "COHORT_STORE_ADDR", "COHORT_STORE_PORT",
      "COHORT_JOB_ID",    "COHORT_HOST_STORE",
  };
  std::set<std::string> declared;
  for (const TunableInfo& info : tunable_list()) declared.insert(std::string(info.name));

  const std::regex variable_name("COHORT_[A-Z_]+");
  std::set<std::string> listed;
  for (std::size_t r = 2; r < rows.size(); ++r) {  // after the header and the |---| row
    const std::vector<std::string> cells = cells_of(rows[r]);
    CAPTURE(rows[r]);
    REQUIRE(cells.size() == 4);
    std::vector<std::string> names;
    for (std::sregex_iterator it(cells[0].begin(), cells[0].end(), variable_name), end; it != end;
         ++it)
      names.push_back(it->str());
    CHECK_FALSE(names.empty());
    for (const std::string& name : names) {
      CAPTURE(name);
      CHECK((declared.count(name) == 1 || launcher_variables.count(name) == 1));
      listed.insert(name);
      if (declared.count(name) == 1) {
        // A tunable's row is its own, so its type and default are unambiguous.
        CHECK(names.size() == 1);
        const TunableInfo& info = declaration(name);
        CHECK(cells[1] == info.type);
        CHECK(cells[2] == info.default_text);
      }
    }
  }
  for (const std::string& name : declared) {
    CAPTURE(name);
    CHECK(listed.count(name) == 1);
  }
}
