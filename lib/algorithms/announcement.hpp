#pragma once

// What an op announces in the shared arena (SharedArena::begin_op), so a rank that disagrees
// with its peers about the op (another collective, dtype, reduce op, root or byte count) is an
// error on every rank instead of a silent wrong result. The same op run by the single-copy
// algorithm (whose slots hold address tables, not data) announces itself apart. Packed in 64 bits:
//   single copy 1 | collective 4 | dtype 5 | reduce op 4 | root 12 | bytes 38
// Fields that do not apply hold all ones; so do bytes of alltoallv (the counts differ per rank
// legitimately) and byte counts beyond 2^38 - 1 (compared modulo that: such mismatches are
// caught only when they differ in the low bits, which any plausible mistake does). A measured
// broadcast's, scatter's or gather's reduce-op field, which those leave unused, carries the
// root's form (CallForm): the others learn it from the root's first flag (dispatch.cpp).

#include "algorithms/args.hpp"
#include "algorithms/measured_choice.hpp"

#include <cstdint>
#include <string>

namespace cohort::algorithms {

/// What `args` of `bytes` announce when `algorithm` (SharedMemory or SingleCopy) runs them.
template <class Args>
std::uint64_t announcement_of(const Args& args, std::size_t bytes, Algorithm algorithm);

/// What a measured broadcast, scatter or gather announces when `algorithm` runs it and the root's
/// call has `form`: announcement_of's value, in place marked in the reduce-op field.
template <class Args>
std::uint64_t announcement_of(const Args& args, std::size_t bytes, Algorithm algorithm,
                              CallForm form);

/// The form and the algorithm (SingleCopy or SharedMemory) an announcement names.
CallForm announced_form(std::uint64_t announcement);
Algorithm announced_algorithm(std::uint64_t announcement);

/// What the measured choice's vote announces (measured_choice.hpp, dispatch.cpp): an allreduce
/// whose root field, which allreduces leave unused, holds a value no root has, so a vote never
/// pairs with a user's op on a rank whose sequence of ops differs.
std::uint64_t vote_announcement();

/// "allreduce of 400 bytes (float32, sum)", "broadcast of 16 bytes (int32) from root 2".
std::string describe_announcement(std::uint64_t announcement);

}  // namespace cohort::algorithms
