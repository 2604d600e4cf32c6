#pragma once

/// Coordinating the ranks around the training loop: who is the main process, named barriers,
/// letting one rank (or one rank per node) go first, printing once, and a flag any rank can raise
/// to stop every rank at the same step.
///
/// The steps this header serves, as a training script drives them:
///
///     main_first(*comm, env, [&] { prepare_dataset_cache(); });   // rank 0 downloads, then the
///                                                                  // others read its cache
///     for (step = 0; ...; ++step) {
///       ...
///       if (!std::isfinite(loss)) stop.set();        // this rank saw a diverged loss
///       if (stop.check(*comm)) break;                // every rank leaves at the same step
///       print(env, "step " + std::to_string(step));  // once per node, not once per rank
///     }
///     barrier(*comm, "before-save");
///     if (is_main(*comm)) save_checkpoint();
///
/// The node-level notions (local main, Scope::Local, printing) need the process's local rank,
/// which a Communicator does not carry: they take the cohort::Environment that placed the process
/// (launch() hands it to each rank; after init(), resolve_environment() returns the same one,
/// read from the same variables). "Local main" is env.local_rank == 0, as Accelerate's
/// is_local_main_process and Fabric's local_rank are.

#include <cohort/communicator.hpp>
#include <cohort/environment.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <optional>
#include <ostream>
#include <string_view>

namespace cohort::train {

// ---- Process info (no communication).

/// Rank 0 of `comm` (Accelerate's is_main_process, Fabric's is_global_zero).
bool is_main(const Communicator& comm) noexcept;
/// The first process of its node: env.local_rank == 0 (Accelerate's is_local_main_process).
bool is_local_main(const Environment& env) noexcept;
/// The last rank of `comm`, size - 1 (Accelerate's is_last_process).
bool is_last(const Communicator& comm) noexcept;
/// More than one rank (Accelerate's use_distributed).
bool distributed(const Communicator& comm) noexcept;

/// Which ranks count as "main" for main_first, on_main and print.
enum class Scope {
  Global,  ///< rank 0 of the communicator only
  Local,   ///< each node's first process (env.local_rank == 0)
};

/// Accelerate's wait_for_everyone, with a name: collective over `comm`. A timeout (unset: the
/// communicator's) or any other failure is rethrown as the same Error code with "barrier '<name>'"
/// in the message, so a hang in a long job says which barrier it was. Throws InvalidArgument for
/// a timeout that is not positive or exceeds kMaxTimeout (one year), in a world of one too,
/// which otherwise returns at once.
void barrier(Communicator& comm, std::string_view name,
             std::optional<std::chrono::milliseconds> timeout = {});

struct MainFirstOptions {
  /// Global: rank 0 goes first. Local: each node's first process goes first (the others of
  /// every node wait for all of them: the wait is over the whole communicator, as Accelerate's).
  Scope scope = Scope::Global;
  /// After the others ran fn, every rank waits for every other before returning, and a fn that
  /// threw on any rank is reported on all (Fabric's rank_zero_first). Off (Accelerate's
  /// main_process_first): the first ranks return as soon as the others have started.
  bool barrier_on_exit = false;
  /// Deadline of each wait; the others wait for the first ranks' fn within it, so make it longer
  /// than fn (a dataset download) can take. Unset: the communicator's default. Fabric waits
  /// forever; cohort's waits always end.
  std::optional<std::chrono::milliseconds> timeout;
};

/// Collective over `comm`: the first ranks (options.scope) run fn, then every other rank runs it
/// (Accelerate's main_process_first, Fabric's rank_zero_first). Typical use: one process per
/// machine fills a cache the others then read.
///
/// Where cohort deliberately differs: the references separate the two phases with a bare barrier,
/// so when the first rank's fn throws the others wait in that barrier until their timeout (Fabric:
/// forever). cohort exchanges a status instead (an allreduce(Max) of a failure flag, with the
/// messages only on failure): if a first rank's fn throws, that rank rethrows its own exception
/// and every other rank throws RemoteError "main_first: fn threw on rank <r>: <message>" at once,
/// without running fn. With barrier_on_exit, a throwing fn on a later rank is reported the same
/// way on every rank after all have run; without it, that exception propagates on its rank only.
///
/// `env` supplies the local rank for Scope::Local and is not read for Scope::Global. A world of
/// one runs fn and communicates nothing. A wait that times out rethrows the Timeout with
/// "main_first" and the phase in the message; after it the communicator is poisoned (see
/// Communicator). Throws InvalidArgument for a timeout that is not positive or exceeds
/// kMaxTimeout, or an empty fn, before fn runs
/// anywhere.
void main_first(Communicator& comm, const Environment& env, const std::function<void()>& fn,
                const MainFirstOptions& options = {});

/// Runs fn on the main rank(s) only and returns whether it ran here (Accelerate's
/// on_main_process / on_local_main_process). No communication and no waiting: ranks that do not
/// run fn go on at once. axolotl's zero_only runs its body on every rank; this does not. `env`
/// is read for Scope::Local only. Throws InvalidArgument for an empty fn.
bool on_main(const Communicator& comm, const Environment& env, const std::function<void()>& fn,
             Scope scope = Scope::Global);

/// Writes `text` and a newline to `out` on world rank 0 only (scope Global, the default: once per
/// job), or on each node's first process (scope Local: what Accelerate's and Fabric's print do by
/// default, so that a 4-node job shows each line 4 times; a trap not copied here). The line is
/// written and flushed in one piece, so lines of different processes sharing a terminal do not
/// interleave mid-line.
void print(const Environment& env, std::string_view text, std::ostream& out = std::cout,
           Scope scope = Scope::Global);

/// Writes `text` on every rank, each of its lines prefixed with "[rank <env.rank>] " and ended
/// with a newline, flushed in one piece: "a\nb" on rank 3 is "[rank 3] a\n[rank 3] b\n".
void print_all(const Environment& env, std::string_view text, std::ostream& out = std::cout);

/// A stop flag any rank can raise and every rank observes at the same step (Accelerate's
/// set_trigger / check_trigger): e.g. one rank sees a NaN loss and all ranks break out of the
/// loop together instead of the others blocking in the next collective.
class Trigger {
 public:
  /// Raises this rank's flag. No communication. Safe from any thread, and from a signal handler
  /// (a lock-free atomic store). Raising it twice before a check counts once.
  void set() noexcept { flag_.store(true); }
  /// Whether this rank's flag is raised and not yet consumed by check(). No communication.
  bool is_set() const noexcept { return flag_.load(); }

  /// Collective over `comm`: true on every rank if any rank raised its flag since the previous
  /// check, and then every rank's flag is lowered; false on every rank otherwise. One
  /// allreduce(Sum) of 4 bytes (unset timeout: the communicator's); a world of one returns its own
  /// flag without communicating. A set() racing with check() is seen by this check or the next,
  /// never lost. If the allreduce throws, this rank's flag is left raised. Throws
  /// InvalidArgument for a timeout that is not positive or exceeds kMaxTimeout (one year).
  bool check(Communicator& comm, std::optional<std::chrono::milliseconds> timeout = {});

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace cohort::train
