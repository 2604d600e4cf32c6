#pragma once

// An algorithm, described in one place: next to its code, each algorithm file defines one
// AlgorithmDescriptor (name, family, device kind, when it applies, the function), and
// registry.cpp lists them. Selection, dispatch, COHORT_ALGO parsing, cohort-bench's
// `--algos all` and the tests all read that one list.
//
// Adding an algorithm: write <family>/<name>.cpp with its `accepts` (if it does not take every
// argument) and `run`, define its descriptor with describe<>(), add one entry to registry.cpp
// (and a name to cohort::Algorithm if it is a new one), and give it a place in the selection
// table (selection.cpp) if it should ever be chosen without being forced.

#include <cohort/algorithm.hpp>

#include "algorithms/args.hpp"
#include "algorithms/op_context.hpp"

#include <span>
#include <string_view>

namespace cohort::algorithms {

/// Where the data an algorithm moves lives.
enum class DeviceKind : std::uint8_t { Host, Cuda };

struct AlgorithmDescriptor {
  Collective family;
  Algorithm algorithm;
  DeviceKind device;
  /// One line for listings ("binomial tree, log2(n) rounds").
  std::string_view summary;
  /// Whether the algorithm takes these arguments. Must depend only on values every rank agrees
  /// on (world size, counts, dtype, whether a shared arena exists), so all ranks decide alike
  /// and fall through to the same next candidate. `args` points to the family's Args type.
  bool (*accepts)(const OpContext& ctx, const void* args);
  /// Runs the op; called only after accepts() returned true on this rank.
  void (*run)(const OpContext& ctx, const void* args);
};

/// Every algorithm, in a stable order (families in Collective order).
std::span<const AlgorithmDescriptor* const> all_algorithms() noexcept;
/// The descriptor of `algorithm` for `family`, or null when it does not implement it.
const AlgorithmDescriptor* find_algorithm(Collective family, Algorithm algorithm) noexcept;

namespace detail {
template <class Args>
Args args_of(void (*)(const OpContext&, const Args&));
template <class Args>
constexpr bool always(const OpContext&, const Args&) {
  return true;
}
}  // namespace detail

/// accepts() of the shared-memory algorithms: a shared arena exists (every rank on one host and
/// COHORT_SHARED_MEMORY not off), or the op runs on one rank. Asking sets the arena up on the
/// communicator's first call, collectively, so every rank asks at the same point.
template <class Args>
bool alone_or_sharing_host(const OpContext& ctx, const Args&) {
  return ctx.size == 1 || ctx.arena() != nullptr;
}

/// A descriptor from typed functions: `Run` is void(const OpContext&, const <Family>Args&) and
/// `Accepts` bool(const OpContext&, const <Family>Args&) (default: every argument).
template <auto Run, auto Accepts = &detail::always<decltype(detail::args_of(Run))>>
constexpr AlgorithmDescriptor describe(Algorithm algorithm, std::string_view summary,
                                       DeviceKind device = DeviceKind::Host) {
  using Args = decltype(detail::args_of(Run));
  return {
      kFamilyOf<Args>,
      algorithm,
      device,
      summary,
      [](const OpContext& ctx, const void* args) {
        return Accepts(ctx, *static_cast<const Args*>(args));
      },
      [](const OpContext& ctx, const void* args) { Run(ctx, *static_cast<const Args*>(args)); }};
}

}  // namespace cohort::algorithms
