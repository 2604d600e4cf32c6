#pragma once

// The verdict over the ranks' flight records (flight_dump.hpp): for each communicator, the first
// sequence number where the ranks' records disagree, and in one sentence what that means:
//
//   diverged   ranks called different collectives (or dtypes, counts, roots, reduce ops) at the
//              same sequence number: "rank 1 called broadcast #7 (float x 4, root 0); ranks 0,2
//              called allreduce #7 (float x 4, sum)"
//   behind     some ranks never entered the op the others were in: "rank 2 never entered
//              allreduce #1042; ranks 0,1,3 waited 600 s"
//   stuck      every rank entered it, some never finished nor failed while the others gave up
//              or finished (a frozen rank): "rank 1 froze in allreduce #5: entered, never
//              finished; ranks 0,2 failed after 2.0 s (timeout)"
//   failed     every rank entered and left it, at least one with an error: the first error
//   consistent no disagreement in the records
//
// Sequence numbers are compared where every rank still holds records (a ring drops old ops), so a
// rank whose ring starts later does not look behind. Ranks without a dump are named, never
// assumed to have done anything. Pure: no I/O, so it is tested with hand-written dumps.

#include "cohort_trace/flight_dump.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::trace {

enum class VerdictKind { Diverged, Behind, Stuck, Failed, Consistent };

struct Verdict {
  std::string job;
  std::uint32_t communicator = 0;
  int size = 0;  ///< the communicator's ranks (from the dumps)
  VerdictKind kind = VerdictKind::Consistent;
  /// The first sequence number where the ranks disagree (unset when consistent with no ops).
  std::optional<std::uint32_t> seq;
  /// The collective at seq, as most ranks called it.
  std::string op;
  /// The ranks the verdict blames: behind, diverging (the minority), frozen. Empty when it blames
  /// nobody in particular (all stuck together, or consistent).
  std::vector<int> culprits;
  /// Ranks of the communicator that left no dump.
  std::vector<int> missing;
  /// The one-line verdict.
  std::string headline;
  /// A few lines of evidence (each rank's state at seq, what a missing rank means).
  std::vector<std::string> details;
};

/// Groups `dumps` by job and communicator (a rank dumped more than once counts with its latest
/// dump) and judges each: problems first (diverged, behind, stuck, failed), then consistent
/// ones; ties by communicator id.
std::vector<Verdict> judge(const std::vector<RankDump>& dumps);

/// The verdicts as text, one block per communicator ("communicator 0 (4 ranks): <headline>"
/// then indented details), at most `max_details` detail lines each. Consistent communicators
/// share one line.
std::string format_verdicts(const std::vector<Verdict>& verdicts, std::size_t max_details = 8);

/// "rank 2", "ranks 0,1,3", "ranks 0-5,7" (runs of three or more as ranges).
std::string rank_list(const std::vector<int>& ranks);

}  // namespace cohort::trace
