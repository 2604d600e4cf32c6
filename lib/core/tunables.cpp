// The table of tunables (one row per COHORT_* variable) and the snapshot they are read into.

#include "core/tunables.hpp"

#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <forward_list>
#include <mutex>
#include <vector>

namespace cohort {
namespace {

[[noreturn]] void malformed(std::string_view name, const std::string& text,
                            std::string_view expected) {
  throw Error(ErrorCode::InvalidArgument,
              std::string(name) + "='" + text + "' " + std::string(expected));
}

void parse_timeout(const std::string& text, Tunables& into) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  // Bounded above so the conversion to milliseconds (and deadline arithmetic) cannot overflow.
  constexpr double kMaxSeconds = static_cast<double>(kMaxTimeout.count()) / 1000.0;
  if (end == text.c_str() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > kMaxSeconds)
    malformed("COHORT_TIMEOUT", text, "is not a positive number of seconds (at most one year)");
  into.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
}

void parse_debug(const std::string& text, Tunables& into) {
  std::string value = text;
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "detail")
    into.debug_detail = true;
  else if (value == "off" || value == "0" || value == "none")
    into.debug_detail = false;
  else
    malformed("COHORT_DEBUG", text, "(expected 'detail' or 'off')");
}

void parse_log_level(const std::string& text, Tunables& into) {
  try {
    into.log_level = log_level_from_name(text);
  } catch (const Error&) {
    malformed("COHORT_LOG_LEVEL", text, "(expected trace, debug, info, warn, error or off)");
  }
}

void parse_spin(const std::string& text, Tunables& into) {
  long long us = -1;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, us);
  if (ec != std::errc() || stop != end || us < 0)
    malformed("COHORT_SPIN_US", text, "is not a non-negative number of microseconds");
  into.spin = std::chrono::microseconds(us);
}

void parse_ucx_err_handling(const std::string& text, Tunables& into) {
  if (text == "auto")
    into.ucx_err_handling = PeerErrorHandling::Auto;
  else if (text == "peer")
    into.ucx_err_handling = PeerErrorHandling::Peer;
  else
    malformed("COHORT_UCX_ERR_HANDLING", text, "(expected 'auto' or 'peer')");
}

/// An auto|off switch: true for "auto".
bool auto_or_off(std::string_view name, const std::string& text) {
  if (text == "auto") return true;
  if (text == "off") return false;
  malformed(name, text, "(expected 'auto' or 'off')");
}

void parse_shared_memory(const std::string& text, Tunables& into) {
  into.shared_memory = auto_or_off("COHORT_SHARED_MEMORY", text);
}

void parse_single_copy(const std::string& text, Tunables& into) {
  into.single_copy = auto_or_off("COHORT_SINGLE_COPY", text);
}

void parse_measured_choice(const std::string& text, Tunables& into) {
  into.measured_choice = auto_or_off("COHORT_MEASURED_CHOICE", text);
}

void parse_kernel_isa(const std::string& text, Tunables& into) {
  if (text == "auto")
    into.kernel_isa = KernelIsa::Auto;
  else if (text == "avx512")
    into.kernel_isa = KernelIsa::Avx512;
  else if (text == "avx2")
    into.kernel_isa = KernelIsa::Avx2;
  else if (text == "portable")
    into.kernel_isa = KernelIsa::Portable;
  else
    malformed("COHORT_KERNEL_ISA", text, "(expected 'auto', 'avx512', 'avx2' or 'portable')");
}

void parse_store_timeout(const std::string& text, Tunables& into) {
  double seconds = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, seconds);
  // !(seconds > 0) also rejects NaN; the bound keeps deadline arithmetic from overflowing.
  if (ec != std::errc() || stop != end || !(seconds > 0) || seconds > 1e7)
    malformed("COHORT_STORE_TIMEOUT", text, "is not a positive number of seconds (at most 1e7)");
  // At least 1 ms: a positive value below 0.5 ms would otherwise round to a zero timeout, under
  // which every store wait fails at once (found by test/fuzz/tunables).
  into.store_timeout = std::chrono::milliseconds(
      std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds * 1000.0 + 0.5)));
}

// COHORT_ALGO is checked by lib/algorithms (at init), which knows the algorithm names.
void keep_algorithm_spec(const std::string& text, Tunables& into) {
  into.algorithm_spec = text;
}
void keep_rendezvous_dir(const std::string& text, Tunables& into) {
  into.rendezvous_dir = text;
}
void keep_token(const std::string& text, Tunables& into) {
  into.token = text;
}

// A whole number from 0 to `max` (no sign, no spaces, nothing after it), or fails naming `name`.
std::size_t parse_bounded_count(const char* name, const std::string& text, std::size_t max,
                                const char* expectation) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || stop != end || value > max) malformed(name, text, expectation);
  return value;
}

void parse_trace_buffer(const std::string& text, Tunables& into) {
  into.trace_buffer = parse_bounded_count("COHORT_TRACE_BUFFER", text, kMaxTraceBuffer,
                                          "is not a number of ops between 0 and 1000000");
}
void keep_trace_dir(const std::string& text, Tunables& into) {
  into.trace_dir = text;
}

void parse_mappable_cache(const std::string& text, Tunables& into) {
  into.mappable_cache_bytes =
      parse_bounded_count("COHORT_MAPPABLE_CACHE_MIB", text, kMaxMappableCacheMiB,
                          "is not a number of MiB between 0 and 1048576")
      << 20;
}

// The README's environment table must list these names with these types and defaults (checked
// by test/core/tunables_test.cpp).
constexpr std::array kTunables{
    TunableInfo{"COHORT_TIMEOUT", "seconds", "600",
                "default deadline of every op, and of connecting a world (decimals allowed, at "
                "most one year)",
                false, &parse_timeout},
    TunableInfo{"COHORT_ALGO", "collective:algorithm,...", "unset",
                "force algorithms per collective, e.g. allreduce:ring,broadcast:tree", false,
                &keep_algorithm_spec},
    TunableInfo{"COHORT_DEBUG", "enum detail|off", "off",
                "detail: fingerprint every collective; a cross-rank mismatch names the ranks",
                false, &parse_debug},
    TunableInfo{"COHORT_LOG_LEVEL", "enum trace|debug|info|warn|error|off", "warn",
                "level of cohort's log lines on stderr", false, &parse_log_level},
    TunableInfo{"COHORT_SPIN_US", "microseconds", "auto",
                "how long a wait busy-polls before it sleeps (auto: from ranks per core)", false,
                &parse_spin},
    TunableInfo{"COHORT_SHARED_MEMORY", "enum auto|off", "auto",
                "off on any rank leaves every collective, and its send/recv, to the message "
                "transport",
                false, &parse_shared_memory},
    TunableInfo{"COHORT_UCX_ERR_HANDLING", "enum auto|peer", "auto",
                "peer: UCX peer-failure handling on same-host endpoints too (no UCX shared memory)",
                false, &parse_ucx_err_handling},
    TunableInfo{"COHORT_STORE_TIMEOUT", "seconds", "300",
                "default deadline of store waits (decimals allowed, at most 1e7)", false,
                &parse_store_timeout},
    TunableInfo{"COHORT_RENDEZVOUS_DIR", "path", "temp dir",
                "where ranks without a store address meet (cohort-<job id>.addr)", false,
                &keep_rendezvous_dir},
    TunableInfo{"COHORT_TOKEN", "text", "unset", "shared secret for the store handshake", true,
                &keep_token},
    TunableInfo{"COHORT_TRACE_BUFFER", "ops", "2000",
                "collectives each communicator's flight recorder keeps (0: none)", false,
                &parse_trace_buffer},
    TunableInfo{"COHORT_TRACE_DIR", "path", "unset",
                "where flight records are dumped on a failure or SIGUSR1 (unset: on request only)",
                false, &keep_trace_dir},
    TunableInfo{"COHORT_MAPPABLE_CACHE_MIB", "MiB", "1024",
                "freed mappable buffers a process keeps for reuse, so a new one of about their "
                "size skips the first-touch page faults (0: none kept)",
                false, &parse_mappable_cache},
    TunableInfo{"COHORT_SINGLE_COPY", "enum auto|off", "auto",
                "off on any rank: no single-copy algorithms (process_vm_readv between ranks of "
                "a host), and that rank's send/recv above 512 KiB (4 MiB on an oversubscribed "
                "host) stay on UCX",
                false, &parse_single_copy},
    TunableInfo{"COHORT_MEASURED_CHOICE", "enum auto|off", "auto",
                "auto: allreduces, reduces and reduce_scatters from 16 KiB on one host, "
                "broadcasts from 1 MiB and gathers from 2 MiB (in place and out of place "
                "apart), and scatters (each form apart) and uniform alltoalls from 256 KiB on 3 "
                "ranks or more, "
                "time the arena and single copy and run the faster (same bits), and same-host "
                "send/recv of 32-512 KiB times the spread over the ring against the rendezvous "
                "per pair; off: the table's choice, and the spread (set alike on every rank)",
                false, &parse_measured_choice},
    TunableInfo{"COHORT_KERNEL_ISA", "enum auto|avx512|avx2|portable", "auto",
                "instruction set of the reduction and conversion kernels (auto: the widest this "
                "CPU runs; one it lacks fails init)",
                false, &parse_kernel_isa},
};

// The environment as it is now, every variable parsed; a malformed one keeps its default in
// `values` and has its message in `errors`.
struct Reading {
  Tunables values;
  std::vector<std::optional<std::string>> text;  // as set; nullopt when unset or empty
  std::vector<std::string> errors;               // empty when that variable parsed
};

Reading read_environment() {
  Reading reading;
  reading.text.resize(kTunables.size());
  reading.errors.resize(kTunables.size());
  for (std::size_t i = 0; i < kTunables.size(); ++i) {
    const char* value = std::getenv(std::string(kTunables[i].name).c_str());
    if (value == nullptr || *value == '\0') continue;
    reading.text[i] = value;
    try {
      kTunables[i].parse(*reading.text[i], reading.values);
    } catch (const Error& e) {
      reading.errors[i] = e.message();
    }
  }
  return reading;
}

Tunables read_checked() {
  Reading reading = read_environment();
  std::string all_errors;
  for (const std::string& error : reading.errors) {
    if (error.empty()) continue;
    if (!all_errors.empty()) all_errors += "; ";
    all_errors += error;
  }
  if (!all_errors.empty()) throw Error(ErrorCode::InvalidArgument, all_errors);
  return std::move(reading.values);
}

// Every snapshot ever published is kept (a reload happens once per init, a few hundred bytes
// each), so a reference handed out by tunables() never dangles. Readers load `current` without
// locking; the mutex only orders publishers.
struct Registry {
  std::mutex mutex;
  std::forward_list<Tunables> snapshots;
  std::atomic<const Tunables*> current{nullptr};
};

// Never destroyed: threads still running at exit may read it.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

// Called with the registry's mutex held.
const Tunables& publish(Registry& reg) {
  reg.snapshots.push_front(read_checked());
  reg.current.store(&reg.snapshots.front(), std::memory_order_release);
  return reg.snapshots.front();
}

}  // namespace

std::span<const TunableInfo> tunable_list() {
  return kTunables;
}

const Tunables& tunables() {
  Registry& reg = registry();
  if (const Tunables* current = reg.current.load(std::memory_order_acquire)) return *current;
  std::lock_guard lock(reg.mutex);
  if (const Tunables* current = reg.current.load(std::memory_order_acquire)) return *current;
  return publish(reg);
}

void reload_tunables() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  publish(reg);
}

std::string describe_tunables() {
  const Reading reading = read_environment();
  std::size_t width = 0;
  for (const TunableInfo& info : kTunables) width = std::max(width, info.name.size());
  std::string out;
  for (std::size_t i = 0; i < kTunables.size(); ++i) {
    const TunableInfo& info = kTunables[i];
    out.append(info.name).append(width - info.name.size(), ' ').append(" = ");
    if (!reading.text[i]) {
      out.append(info.default_text).append(" (default; ");
    } else {
      out.append(info.secret ? "<set, hidden>" : *reading.text[i])
          .append(" (default ")
          .append(info.default_text)
          .append("; ");
    }
    out.append(info.type).append("): ").append(info.doc);
    if (!reading.errors[i].empty()) out.append(" -- INVALID: ").append(reading.errors[i]);
    out.append("\n");
  }
  return out;
}

}  // namespace cohort
