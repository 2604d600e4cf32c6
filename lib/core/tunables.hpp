#pragma once

// Every COHORT_* tunable, declared once (tunables.cpp: name, type, default, description, parser)
// and read into one snapshot. Code reads tunables().<field>; nothing else calls getenv for them.
// The launcher-provided identity variables (COHORT_RANK, ...) are not tunables: they are
// resolve_environment()'s (lib/bootstrap/environment.cpp).
//
// Threads: tunables() may be called from any thread at any time. reload_tunables() is for init
// (init(), connect_store(), Communicator::create()), not for running concurrently with ops: it is
// safe to do so (readers never see a half-written snapshot and references stay valid), but ops
// in flight would mix values from before and after.

#include <cohort/log.hpp>
#include <cohort/tunables.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cohort {

/// COHORT_UCX_ERR_HANDLING. UCX 1.13 cannot use shared memory (posix, sysv, cma) on endpoints
/// with peer-failure handling, so Auto connects same-host peers without it (and watches their
/// process instead) and remote peers with it; Peer uses UCX's peer-failure handling everywhere,
/// which routes same-host traffic over TCP loopback (~3x slower).
enum class PeerErrorHandling { Auto, Peer };

/// COHORT_KERNEL_ISA: the instruction set of the reduction and conversion kernels
/// (lib/reduce/dispatch.hpp). Auto takes the widest this CPU runs; a narrower one serves hosts
/// whose clock drops under wide vectors, and comparisons; one the CPU lacks is refused at init.
enum class KernelIsa { Auto, Avx512, Avx2, Portable };

inline constexpr std::chrono::milliseconds kDefaultOpTimeout{std::chrono::seconds(600)};
inline constexpr std::chrono::milliseconds kDefaultStoreTimeout{std::chrono::seconds(300)};
/// torch's TORCH_NCCL_TRACE_BUFFER_SIZE default; about 200 kB per communicator.
inline constexpr std::size_t kDefaultTraceBuffer = 2000;
/// A bound on COHORT_TRACE_BUFFER (about 100 MB per communicator), so a typo cannot exhaust memory.
inline constexpr std::size_t kMaxTraceBuffer = 1000000;
/// COHORT_MAPPABLE_CACHE_MIB's default, and its bound (1 TiB).
inline constexpr std::size_t kDefaultMappableCacheMiB = 1024;
inline constexpr std::size_t kMaxMappableCacheMiB = std::size_t{1} << 20;

/// The value of every tunable; a default-constructed one is what an empty environment gives.
struct Tunables {
  /// COHORT_TIMEOUT: the default deadline of every op.
  std::chrono::milliseconds timeout = kDefaultOpTimeout;
  /// COHORT_DEBUG=detail: fingerprint every collective and report cross-rank mismatches.
  bool debug_detail = false;
  /// COHORT_LOG_LEVEL: the logger's level unless set_log_level() overrides it.
  LogLevel log_level = LogLevel::Warn;
  /// COHORT_SPIN_US: how long a wait busy-polls before it blocks. Unset: chosen from how many
  /// ranks share this host's cores (lib/transport/wait_policy.hpp).
  std::optional<std::chrono::microseconds> spin;
  /// COHORT_UCX_ERR_HANDLING.
  PeerErrorHandling ucx_err_handling = PeerErrorHandling::Auto;
  /// COHORT_SHARED_MEMORY: false ("off") on any rank leaves every collective to the message
  /// transport, and that rank's send/recv with same-host peers too (no fastboxes); true ("auto")
  /// maps a shared segment when all of a communicator's ranks share a host.
  bool shared_memory = true;
  /// COHORT_SINGLE_COPY: false ("off") on any rank makes the single-copy algorithms decline on
  /// every rank (the table's next choice runs); true ("auto") lets them read peers' buffers
  /// straight from their processes where the kernel allows it.
  bool single_copy = true;
  /// COHORT_MEASURED_CHOICE: true ("auto") lets a communicator on one host time the arena and
  /// single copy on allreduces, reduces and reduce_scatters from 16 KiB and run the faster
  /// (algorithms/measured_choice.hpp; both give the same bits); false ("off") keeps the table's
  /// choice. Must agree across ranks.
  bool measured_choice = true;
  /// COHORT_KERNEL_ISA: applied at init (reduce::apply_kernel_isa_tunable()), and by the
  /// kernels' first call if that comes earlier.
  KernelIsa kernel_isa = KernelIsa::Auto;
  /// COHORT_STORE_TIMEOUT: the default deadline of store waits (default_store_timeout()).
  std::chrono::milliseconds store_timeout = kDefaultStoreTimeout;
  /// COHORT_ALGO as set (empty when unset), e.g. "allreduce:ring,broadcast:tree". Core cannot
  /// see the algorithm tables, so it is kept raw; lib/algorithms parses it and init() checks it.
  std::string algorithm_spec;
  /// COHORT_RENDEZVOUS_DIR: where the rendezvous file goes. Unset: the temp directory.
  std::optional<std::string> rendezvous_dir;
  /// COHORT_TOKEN: the store handshake's shared secret (empty when unset).
  std::string token;
  /// COHORT_TRACE_BUFFER: collectives each communicator's flight recorder keeps (0: none).
  std::size_t trace_buffer = kDefaultTraceBuffer;
  /// COHORT_TRACE_DIR: where flight records are dumped on failures and SIGUSR1. Unset: only
  /// Communicator::dump_trace() writes one (lib/comm/flight_recorder.hpp).
  std::optional<std::string> trace_dir;
  /// COHORT_MAPPABLE_CACHE_MIB, in bytes: how much freed mappable memory a process keeps for
  /// reuse (core/mappable_cache.hpp); 0 keeps none.
  std::size_t mappable_cache_bytes = kDefaultMappableCacheMiB << 20;
};

/// One tunable's declaration.
struct TunableInfo {
  std::string_view name;          ///< "COHORT_TIMEOUT"
  std::string_view type;          ///< what a value must be: "seconds", "enum auto|off", ...
  std::string_view default_text;  ///< the meaning of unset, as the README's table shows it
  std::string_view doc;           ///< one line
  bool secret;                    ///< its value is never printed
  /// Parses a non-empty value into `into`; throws Error(InvalidArgument) naming the variable,
  /// the value and what was expected.
  void (*parse)(const std::string& text, Tunables& into);
};

/// Every tunable, in the order describe_tunables() prints them.
std::span<const TunableInfo> tunable_list();

/// The snapshot, read from the environment on first use and then cached. An empty variable
/// counts as unset. Throws Error(InvalidArgument) naming every malformed variable (and caches
/// nothing, so each call reports them). The reference stays valid for the process's lifetime,
/// across reloads.
const Tunables& tunables();

/// Reads every tunable afresh and makes that the snapshot. Throws like tunables(), leaving the
/// previous snapshot in place.
void reload_tunables();

}  // namespace cohort
