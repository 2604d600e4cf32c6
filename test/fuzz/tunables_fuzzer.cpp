// libFuzzer harness: the COHORT_* tunable parsers (lib/core/tunables.hpp) and describe_tunables().
//
// Input: u8 choosing the tunable (modulo their number), then its value up to the first NUL (what
// an environment variable can hold).
//
// Invariants:
// - a parser either stores a value or throws Error(InvalidArgument) whose message starts with
//   "NAME='value'" (the variable and its value, as tunables.hpp promises), leaving every other
//   field at its default;
// - accepted durations are positive (timeouts) or non-negative (spin) and within the documented
//   bounds, so deadline arithmetic cannot overflow;
// - describe_tunables() with the value in the environment never throws, names the variable, and
//   hides a secret's value.

#include "core/tunables.hpp"
#include "fuzz_check.hpp"

#include <cstdlib>
#include <string>

using namespace cohort;
using namespace std::chrono;

namespace {

// Every field but the one `name` sets must keep its default.
void require_others_default(const Tunables& t, std::string_view name) {
  const Tunables d;
  const auto same = [&](std::string_view field, bool equal) {
    FUZZ_REQUIRE(field == name || equal,
                 std::string(name) + " changed the field of " + std::string(field));
  };
  same("COHORT_TIMEOUT", t.timeout == d.timeout);
  same("COHORT_DEBUG", t.debug_detail == d.debug_detail);
  same("COHORT_LOG_LEVEL", t.log_level == d.log_level);
  same("COHORT_SPIN_US", t.spin == d.spin);
  same("COHORT_UCX_ERR_HANDLING", t.ucx_err_handling == d.ucx_err_handling);
  same("COHORT_SHARED_MEMORY", t.shared_memory == d.shared_memory);
  same("COHORT_SINGLE_COPY", t.single_copy == d.single_copy);
  same("COHORT_MEASURED_CHOICE", t.measured_choice == d.measured_choice);
  same("COHORT_KERNEL_ISA", t.kernel_isa == d.kernel_isa);
  same("COHORT_STORE_TIMEOUT", t.store_timeout == d.store_timeout);
  same("COHORT_ALGO", t.algorithm_spec == d.algorithm_spec);
  same("COHORT_RENDEZVOUS_DIR", t.rendezvous_dir == d.rendezvous_dir);
  same("COHORT_TOKEN", t.token == d.token);
}

void check_accepted(const Tunables& t, std::string_view name, const std::string& text) {
  const std::string what = std::string(name) + "='" + text + "' accepted as ";
  if (name == "COHORT_TIMEOUT") {
    FUZZ_REQUIRE(t.timeout > 0ms && t.timeout <= hours(24 * 366),
                 what + std::to_string(t.timeout.count()) + " ms");
  } else if (name == "COHORT_STORE_TIMEOUT") {
    FUZZ_REQUIRE(t.store_timeout > 0ms && t.store_timeout <= seconds(10'000'001),
                 what + std::to_string(t.store_timeout.count()) + " ms");
  } else if (name == "COHORT_SPIN_US") {
    FUZZ_REQUIRE(t.spin && *t.spin >= 0us, what + "a negative spin");
  } else if (name == "COHORT_ALGO") {
    FUZZ_REQUIRE(t.algorithm_spec == text, what + "another spec");
  } else if (name == "COHORT_RENDEZVOUS_DIR") {
    FUZZ_REQUIRE(t.rendezvous_dir == text, what + "another directory");
  } else if (name == "COHORT_TOKEN") {
    FUZZ_REQUIRE(t.token == text, what + "another token");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto list = tunable_list();
  const TunableInfo& info = list[data[0] % list.size()];
  const std::string text = fuzz::env_text(std::span(data + 1, size - 1));
  if (text.empty()) return 0;  // an empty variable counts as unset: parsers never see one

  Tunables parsed;
  try {
    info.parse(text, parsed);
    check_accepted(parsed, info.name, text);
  } catch (const Error& e) {
    fuzz::require_invalid_argument(e, std::string(info.name) + " parser");
    const std::string prefix = std::string(info.name) + "='" + text + "'";
    FUZZ_REQUIRE(e.message().compare(0, prefix.size(), prefix) == 0,
                 "message does not start with " + prefix + ": " + e.message());
  }
  require_others_default(parsed, info.name);

  // The same value through the environment: printing must explain a bad value, never throw.
  const std::string name(info.name);
  ::setenv(name.c_str(), text.c_str(), 1);
  std::string described;
  try {
    described = describe_tunables();
  } catch (const Error& e) {
    FUZZ_REQUIRE(false, "describe_tunables threw: " + std::string(e.what()));
  }
  ::unsetenv(name.c_str());
  FUZZ_REQUIRE(described.find(name) != std::string::npos, "describe_tunables omits " + name);
  if (info.secret) {
    const auto line = described.find(name + " ");
    FUZZ_REQUIRE(described.compare(described.find("= ", line), 16, "= <set, hidden> ") == 0,
                 "describe_tunables shows the secret " + name);
  }
  return 0;
}
