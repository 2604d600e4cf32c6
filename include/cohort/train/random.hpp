#pragma once

/// Randomness that stays in step across ranks without cohort owning the engine's generators:
/// a counter-based generator (Philox4x32-10), seeds derived statelessly, Accelerate's set_seed,
/// and a registry that broadcasts the engine's generator states from one rank.
///
/// The step this header serves: once at start-up
///
///     std::uint64_t seed = set_seed(*comm, 42, /*device_specific=*/false);
///     rng_sync.add("torch_cpu", get_state, set_state);   // the engine's own generator
///     rng_sync.synchronize(*comm, {"torch_cpu"});        // every rank now draws the same stream
///
/// and per sample, derive_seed(seed, stream, index) gives the same number on every rank with no
/// communication (dropout masks, data augmentation).

#include <cohort/communicator.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace cohort::train {

/// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
/// Random123's philox4x32_10): a bijection of the 128-bit counter under the 64-bit key.
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) noexcept;

/// The first 64 bits of Philox(counter = (index, stream), key = seed), each 64-bit value split
/// low word first: counter {index_lo, index_hi, stream_lo, stream_hi}, key {seed_lo, seed_hi},
/// result out[0] | out[1] << 32. Stateless: the same on every rank, for any order of calls.
///
/// What it guarantees: a pure function of its three arguments, bit-identical on every platform
/// (32-bit integer arithmetic only), with no communication. For one seed, distinct
/// (stream, index) pairs are distinct counters, and Philox is a bijection of the counter, so
/// their 128-bit outputs never collide; the 64 bits kept collide only by chance (about n^2/2^65
/// pairs among n draws). Different seeds are different keys, i.e. unrelated sequences. Statistical
/// quality is Philox4x32-10's (it passes TestU01's BigCrush); it is not a cryptographic generator.
/// Give each purpose its own `stream` (dropout, augmentation, ...) and let `index` count samples
/// or steps; derive_seed(seed, s, i) == derive_seed(seed, i, s) only by chance.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) noexcept;

/// Accelerate's set_seed: returns the seed this rank should give its generators, `seed` or
/// `seed + rank` when device_specific (wrapping modulo 2^64). `apply`, when given, is called with
/// it (seed the engine's generators there). No communication.
std::uint64_t set_seed(const Communicator& comm, std::uint64_t seed, bool device_specific = false,
                       const std::function<void(std::uint64_t)>& apply = {});

/// A registry of the engine's generators, by name. cohort never owns them: `get` returns a
/// generator's state as bytes, `set` installs such bytes. Threading: one thread at a time; the
/// callbacks must not add or remove generators.
///
/// Follows Accelerate's synchronize_rng_states (a state read on one rank, broadcast, installed
/// everywhere) with deliberate differences: the generators are named by the caller rather than
/// a fixed list of kinds, the root is a parameter (Accelerate: always rank 0), and the names are
/// checked across ranks before any state moves instead of broadcasting blindly.
class RngStateSync {
 public:
  using Getter = std::function<std::vector<std::byte>()>;
  using Setter = std::function<void(std::span<const std::byte>)>;

  /// Registers (or replaces) generator `name`. Throws InvalidArgument for an empty name or
  /// empty callbacks.
  void add(const std::string& name, Getter get, Setter set);
  /// Unregisters generator `name`. Throws InvalidArgument when no such name is registered.
  void remove(const std::string& name);
  /// The registered names, sorted.
  std::vector<std::string> names() const;

  /// Collective over `comm`: for each of `names` (every registered name when empty), the root's
  /// state is read, broadcast, and installed with `set` on every rank, the root included. The
  /// root's names and state sizes travel first: if any rank lacks one of the names (or the ranks
  /// asked for different names) every rank throws InvalidArgument naming the ranks and names
  /// before any setter runs. States may differ in size between generators.
  ///
  /// In detail, on every rank alike:
  /// - `root` outside [0, size) throws InvalidArgument locally (all ranks must pass the same root).
  /// - The same names in another order are fine; the setters run in the root's order. A name
  ///   given twice is a mismatch like a missing one (the message says "names 'x' twice").
  /// - The root reads its states before the check. If one of its getters throws, the root
  ///   rethrows that exception and every other rank throws RemoteError naming the root, the
  ///   generator and the getter's message; no setter runs anywhere.
  /// - If a setter throws, the rest of that rank's setters are skipped; once every rank has run
  ///   its setters, that rank rethrows the setter's exception and every other rank throws
  ///   RemoteError naming the failing ranks (their own states are installed).
  /// - An empty state is allowed; its setter receives an empty span.
  /// - A world of one communicates nothing: the root's getters feed its own setters.
  /// Cost: broadcasts of the plan's length and of the plan (names and sizes), an allgather of 8
  /// bytes per rank for the check (plus an allgatherv of the reports on a mismatch), one
  /// broadcast of the concatenated states, an allgather of 4 bytes per rank for the setters'
  /// status.
  void synchronize(Communicator& comm, const std::vector<std::string>& names = {}, int root = 0);

 private:
  struct Entry {
    Getter get;
    Setter set;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace cohort::train
