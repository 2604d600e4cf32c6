// How the verdict is reached (see trace_verdict.hpp for what each kind means): walk the sequence
// numbers every rank still holds, oldest first, and stop at the first one where the ranks'
// records differ. At that number the checks run from the most fundamental down: different calls
// (diverged), then absent ranks (behind), then ranks still inside (stuck), then errors (failed).

#include "cohort_trace/trace_verdict.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace cohort::trace {
namespace {

/// What every rank must agree on at one sequence number.
struct Call {
  std::string op;
  std::optional<std::string> dtype, reduce_op;
  std::uint64_t count = 0;
  std::optional<int> root;

  bool operator==(const Call&) const = default;
};

Call call_of(const RecordedOp& op) {
  // alltoallv's count is this rank's send total, which legitimately differs between ranks.
  const std::uint64_t count = op.op == "alltoallv" ? 0 : op.count;
  return {op.op, op.dtype, op.reduce_op, count, op.root};
}

std::string seconds_text(std::int64_t us) {
  const double s = static_cast<double>(std::max<std::int64_t>(us, 0)) / 1e6;
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.1f s" : "%.0f s", s);
  return text;
}

/// "allreduce #7"
std::string op_name(const RecordedOp& op) {
  return op.op + " #" + std::to_string(op.seq);
}

/// "allreduce #7 (float x 4, sum)", "broadcast #3 (int32 x 10, root 1)", "barrier #2".
std::string call_text(const RecordedOp& op) {
  std::vector<std::string> parts;
  if (op.dtype) parts.push_back(*op.dtype + " x " + std::to_string(op.count));
  if (op.reduce_op) parts.push_back(*op.reduce_op);
  if (op.root) parts.push_back("root " + std::to_string(*op.root));
  std::string text = op_name(op);
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? " (" : ", ") + parts[i];
  return parts.empty() ? text : text + ")";
}

/// How long a rank has spent on the op: until it finished, else until its dump.
std::int64_t time_in(const RecordedOp& op, const RankDump& dump) {
  const std::optional<std::int64_t> from = op.started_us ? op.started_us : op.queued_us;
  if (!from) return 0;
  return op.finished_us.value_or(dump.dumped_at_us) - *from;
}

/// The error of a rank's failed op: its communicator's failure when that names this op (by name
/// and number: a send's numbers are counted apart from the collectives').
const RecordedFailure* failure_of(const RecordedOp& op, const RankDump& dump) {
  if (dump.failure && dump.failure->sequence == op.seq && dump.failure->op == op.op)
    return &*dump.failure;
  return nullptr;
}

/// Whether the rank's failure names one of the collectives it recorded.
bool failed_in_recorded_op(const RankDump& dump) {
  return std::any_of(dump.ops.begin(), dump.ops.end(),
                     [&](const RecordedOp& op) { return failure_of(op, dump) != nullptr; });
}

/// "allreduce #7, failed after 2.0 s (timeout), waiting for rank 2"
std::string state_text(const RecordedOp& op, const RankDump& dump) {
  const std::string name = op_name(op);
  const std::string spent = seconds_text(time_in(op, dump));
  switch (op.state) {
    case OpState::Queued: return name + ", called, never started (queued for " + spent + ")";
    case OpState::Started: return name + ", entered, not finished after " + spent;
    case OpState::Done: return name + ", done in " + spent;
    case OpState::Failed: {
      std::string text = name + ", failed after " + spent;
      if (const RecordedFailure* f = failure_of(op, dump)) text += " (" + f->code + ")";
      if (!op.awaited_peers.empty()) text += ", waiting for " + rank_list(op.awaited_peers);
      return text;
    }
  }
  return name;
}

// Sequence numbers are 32 bits and wrap (after 2^32 ops on one communicator): they are ordered
// by their distance from `base`, a number older than every one held (see GroupJudge), so that
// #0 comes after #4294967295.
struct RankView {
  const RankDump* dump = nullptr;
  std::uint32_t base = 0;
  std::map<std::uint32_t, const RecordedOp*> by_seq;  ///< keyed by seq - base

  const RecordedOp* at(std::uint32_t seq) const {
    const auto it = by_seq.find(seq - base);
    return it == by_seq.end() ? nullptr : it->second;
  }
};

// A number older than every one in `dumps`: 2^31 before the newest (numbers are compared by
// their signed 32-bit distance from one of them; rings hold far fewer than 2^31).
std::uint32_t oldest_base(const std::vector<const RankDump*>& dumps) {
  std::optional<std::uint32_t> reference;
  std::int64_t newest = 0;
  for (const RankDump* d : dumps)
    for (const RecordedOp& op : d->ops) {
      if (!reference) reference = op.seq;
      newest = std::max<std::int64_t>(newest, static_cast<std::int32_t>(op.seq - *reference));
    }
  if (!reference) return 0;
  return static_cast<std::uint32_t>(*reference + static_cast<std::uint32_t>(newest)) -
         (std::uint32_t{1} << 31) + 1;
}

class GroupJudge {
 public:
  explicit GroupJudge(const std::vector<const RankDump*>& dumps) {
    for (const RankDump* d : dumps) {
      verdict_.job = d->job;
      verdict_.communicator = d->communicator;
      verdict_.size = std::max(verdict_.size, d->size);
    }
    std::set<int> present;
    base_ = oldest_base(dumps);
    for (const RankDump* d : dumps) {
      // A rank that records nothing (COHORT_TRACE_BUFFER=0) says nothing about where it was.
      if (d->capacity == 0) continue;
      RankView& view = views_[d->rank];
      view.dump = d;
      view.base = base_;
      for (const RecordedOp& op : d->ops) view.by_seq[op.seq - base_] = &op;
      present.insert(d->rank);
    }
    for (int r = 0; r < verdict_.size; ++r)
      if (present.count(r) == 0) verdict_.missing.push_back(r);
  }

  Verdict judge() {
    std::optional<std::uint32_t> lo, hi;
    for (const auto& [rank, view] : views_) {
      if (view.by_seq.empty()) continue;
      const std::uint32_t last = view.by_seq.rbegin()->first;
      // Where this rank's record is whole, not its oldest entry: a dump is two rings (the driver's
      // and the side ring of ops run or queued elsewhere), each keeping its newest `capacity`, so
      // an old host op can outlive newer device ops the other ring dropped. Every number of the
      // last `capacity` is still held (a slot is reused only `capacity` numbers later).
      std::uint32_t first = view.by_seq.begin()->first;
      const std::uint64_t capacity = view.dump->capacity;
      if (capacity > 0 && std::uint64_t{last} + 1 > capacity)
        first = std::max(first, static_cast<std::uint32_t>(std::uint64_t{last} + 1 - capacity));
      lo = lo ? std::max(*lo, first) : first;
      hi = hi ? std::max(*hi, last) : last;
    }
    if (lo && hi) {
      for (std::uint64_t s = *lo; s <= *hi; ++s)
        if (judge_seq(static_cast<std::uint32_t>(s) + base_)) return finish();
    }
    consistent(hi ? std::optional<std::uint32_t>(*hi + base_) : std::nullopt);
    return finish();
  }

 private:
  // True when the ranks disagree at `seq` (the verdict is then filled in).
  bool judge_seq(std::uint32_t seq) {
    std::vector<int> entered, absent;
    for (const auto& [rank, view] : views_) (view.at(seq) ? entered : absent).push_back(rank);
    if (entered.empty()) return false;
    verdict_.seq = seq;
    if (diverged(seq, entered)) return true;
    const RecordedOp& reference = *views_.at(entered.front()).at(seq);
    verdict_.op = reference.op;
    if (!absent.empty()) {
      behind(seq, entered, absent);
      return true;
    }
    std::vector<int> inside, done, failed;
    for (int r : entered) {
      switch (views_.at(r).at(seq)->state) {
        case OpState::Queued:
        case OpState::Started: inside.push_back(r); break;
        case OpState::Done: done.push_back(r); break;
        case OpState::Failed: failed.push_back(r); break;
      }
    }
    if (!inside.empty()) {
      stuck(seq, reference, inside, done, failed);
      return true;
    }
    if (!failed.empty()) {
      failed_op(seq, reference, done, failed);
      return true;
    }
    return false;
  }

  bool diverged(std::uint32_t seq, const std::vector<int>& entered) {
    std::vector<std::pair<Call, std::vector<int>>> groups;
    for (int r : entered) {
      const Call call = call_of(*views_.at(r).at(seq));
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == call; });
      if (it == groups.end()) {
        groups.push_back({call, {r}});
      } else {
        it->second.push_back(r);
      }
    }
    if (groups.size() < 2) return false;
    // The majority is the reference; the smaller groups diverged from it (ties: the group with
    // the lowest rank is the reference, as the groups were formed in rank order).
    std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.second.size() > b.second.size();
    });
    verdict_.kind = VerdictKind::Diverged;
    verdict_.op = groups.front().first.op;
    std::string headline = "diverged at #" + std::to_string(seq) + ": ";
    for (std::size_t g = groups.size(); g-- > 0;) {
      const std::vector<int>& ranks = groups[g].second;
      if (g > 0) verdict_.culprits.insert(verdict_.culprits.end(), ranks.begin(), ranks.end());
      headline += rank_list(ranks) + " called " + call_text(*views_.at(ranks.front()).at(seq));
      if (g > 0) headline += "; ";
    }
    verdict_.headline = headline;
    for (int r : entered) detail(r, state_text(*views_.at(r).at(seq), *views_.at(r).dump));
    return true;
  }

  void behind(std::uint32_t seq, const std::vector<int>& entered, const std::vector<int>& absent) {
    const RecordedOp& reference = *views_.at(entered.front()).at(seq);
    std::vector<int> waiting, finished;
    std::int64_t waited = 0;
    for (int r : entered) {
      const RecordedOp& op = *views_.at(r).at(seq);
      if (op.state == OpState::Done) {
        finished.push_back(r);
      } else {
        waiting.push_back(r);
        waited = std::max(waited, time_in(op, *views_.at(r).dump));
      }
    }
    verdict_.kind = VerdictKind::Behind;
    verdict_.culprits = absent;
    std::string headline = rank_list(absent) + " never entered " + op_name(reference);
    if (!waiting.empty()) headline += "; " + rank_list(waiting) + " waited " + seconds_text(waited);
    if (!finished.empty()) headline += "; " + rank_list(finished) + " finished it";
    verdict_.headline = headline;
    for (int r : absent) {
      const RankView& view = views_.at(r);
      if (view.by_seq.empty()) {
        detail(r, "never entered it, nor any collective before");
      } else {
        const RecordedOp& last = *view.by_seq.rbegin()->second;
        detail(r, "never entered it; its last was " + state_text(last, *view.dump));
      }
    }
    for (int r : entered) detail(r, state_text(*views_.at(r).at(seq), *views_.at(r).dump));
  }

  void stuck(std::uint32_t seq, const RecordedOp& reference, const std::vector<int>& inside,
             const std::vector<int>& done, const std::vector<int>& failed) {
    verdict_.kind = VerdictKind::Stuck;
    std::int64_t longest = 0;
    bool all_queued = true;
    for (int r : inside) {
      const RecordedOp& op = *views_.at(r).at(seq);
      longest = std::max(longest, time_in(op, *views_.at(r).dump));
      all_queued = all_queued && op.state == OpState::Queued;
    }
    std::string headline;
    if (done.empty() && failed.empty()) {
      // Nobody to compare with: every rank is in it, and none has left.
      headline = "every rank (" + rank_list(inside) + ") is inside " + op_name(reference) +
                 " and none finished (for up to " + seconds_text(longest) + ")";
    } else {
      verdict_.culprits = inside;
      headline = all_queued
                     ? rank_list(inside) + " called " + op_name(reference) +
                           " but never started it (queued for " + seconds_text(longest) + ")"
                     : rank_list(inside) + " froze in " + op_name(reference) +
                           ": entered, never finished (inside for " + seconds_text(longest) + ")";
      if (!failed.empty()) {
        std::int64_t gave_up = 0;
        for (int r : failed)
          gave_up = std::max(gave_up, time_in(*views_.at(r).at(seq), *views_.at(r).dump));
        headline += "; " + rank_list(failed) + " failed after " + seconds_text(gave_up);
        if (const std::string code = first_code(seq, failed); !code.empty())
          headline += " (" + code + ")";
      }
      if (!done.empty()) headline += "; " + rank_list(done) + " finished it";
    }
    verdict_.headline = headline;
    for (int r : inside) detail(r, state_text(*views_.at(r).at(seq), *views_.at(r).dump));
    for (int r : failed) detail(r, state_text(*views_.at(r).at(seq), *views_.at(r).dump));
    for (int r : done) detail(r, state_text(*views_.at(r).at(seq), *views_.at(r).dump));
  }

  void failed_op(std::uint32_t seq, const RecordedOp& reference, const std::vector<int>& done,
                 const std::vector<int>& failed) {
    verdict_.kind = VerdictKind::Failed;
    std::set<int> awaited;
    for (int r : failed)
      for (int p : views_.at(r).at(seq)->awaited_peers) awaited.insert(p);
    // Blame the peers the failed ranks waited for that did not fail themselves (a dead or silent
    // rank), not the ranks that gave up waiting.
    for (int p : awaited)
      if (std::find(failed.begin(), failed.end(), p) == failed.end())
        verdict_.culprits.push_back(p);
    std::string headline = op_name(reference) + " failed on " + rank_list(failed);
    if (const std::string code = first_code(seq, failed); !code.empty())
      headline += " (" + code + ")";
    if (!verdict_.culprits.empty()) {
      headline += ", waiting for " + rank_list(verdict_.culprits);
      std::vector<int> silent;
      for (int p : verdict_.culprits)
        if (std::find(verdict_.missing.begin(), verdict_.missing.end(), p) !=
            verdict_.missing.end())
          silent.push_back(p);
      if (!silent.empty()) headline += " (no flight record from " + rank_list(silent) + ")";
    }
    if (!done.empty()) headline += "; " + rank_list(done) + " finished it";
    verdict_.headline = headline;
    for (int r : failed) {
      const RankView& view = views_.at(r);
      std::string text = state_text(*view.at(seq), *view.dump);
      if (const RecordedFailure* f = failure_of(*view.at(seq), *view.dump))
        text += ": " + f->message;
      detail(r, text);
    }
    for (int r : done) detail(r, state_text(*views_.at(r).at(seq), *views_.at(r).dump));
  }

  void consistent(std::optional<std::uint32_t> hi) {
    verdict_.kind = VerdictKind::Consistent;
    if (hi) verdict_.seq = *hi;
    // A failure outside any recorded collective (a send or receive) is still worth saying.
    for (const auto& [rank, view] : views_) {
      const RankDump& d = *view.dump;
      if (d.failure && !failed_in_recorded_op(d)) {
        verdict_.kind = VerdictKind::Failed;
        verdict_.headline = "collectives agree; rank " + std::to_string(rank) + " failed in " +
                            (d.failure->name.empty() ? std::string("no op") : d.failure->name) +
                            " (" + d.failure->code + ")";
        detail(rank, d.failure->message);
        return;
      }
    }
    if (!hi) {
      verdict_.headline = "no collectives recorded";
      return;
    }
    std::string last;
    for (const auto& [rank, view] : views_)
      if (const RecordedOp* op = view.at(*hi)) last = op_name(*op);
    verdict_.headline = "consistent: every rank finished every collective up to " + last;
  }

  // The error code of the failed rank that failed first (empty when none names one).
  std::string first_code(std::uint32_t seq, const std::vector<int>& failed) const {
    std::optional<std::int64_t> earliest;
    std::string code;
    for (int r : failed) {
      const RecordedOp& op = *views_.at(r).at(seq);
      const RecordedFailure* f = failure_of(op, *views_.at(r).dump);
      if (f == nullptr) continue;
      const std::int64_t when = op.finished_us.value_or(views_.at(r).dump->dumped_at_us);
      if (!earliest || when < *earliest) {
        earliest = when;
        code = f->code;
      }
    }
    return code;
  }

  void detail(int rank, const std::string& text) {
    verdict_.details.push_back("rank " + std::to_string(rank) + ": " + text);
  }

  Verdict finish() {
    if (!verdict_.missing.empty())
      verdict_.details.push_back(rank_list(verdict_.missing) + ": no flight record");
    return std::move(verdict_);
  }

  std::map<int, RankView> views_;
  std::uint32_t base_ = 0;  ///< see RankView
  Verdict verdict_;
};

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string text = sorted.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (i > 0) text += ",";
    if (j - i >= 2) {
      text += std::to_string(sorted[i]) + "-" + std::to_string(sorted[j]);
      i = j + 1;
    } else {
      text += std::to_string(sorted[i]);
      ++i;
    }
  }
  return text;
}

std::vector<Verdict> judge(const std::vector<RankDump>& dumps) {
  // (job, communicator) -> rank -> its latest dump
  std::map<std::pair<std::string, std::uint32_t>, std::map<int, const RankDump*>> groups;
  for (const RankDump& d : dumps) {
    const RankDump*& slot = groups[{d.job, d.communicator}][d.rank];
    if (slot == nullptr || d.dumped_at_us > slot->dumped_at_us) slot = &d;
  }
  std::vector<Verdict> verdicts;
  for (const auto& [key, by_rank] : groups) {
    std::vector<const RankDump*> members;
    for (const auto& [rank, d] : by_rank) members.push_back(d);
    verdicts.push_back(GroupJudge(members).judge());
  }
  std::stable_sort(verdicts.begin(), verdicts.end(), [](const Verdict& a, const Verdict& b) {
    return std::tie(a.kind, a.communicator) < std::tie(b.kind, b.communicator);
  });
  return verdicts;
}

std::string format_verdicts(const std::vector<Verdict>& verdicts, std::size_t max_details) {
  std::set<std::string> jobs;
  for (const Verdict& v : verdicts) jobs.insert(v.job);
  const auto name = [&](const Verdict& v) {
    std::string text = jobs.size() > 1 ? "job " + (v.job.empty() ? "?" : v.job) + ", " : "";
    return text + "communicator " + std::to_string(v.communicator) + " (" + std::to_string(v.size) +
           (v.size == 1 ? " rank)" : " ranks)");
  };
  std::string out;
  std::vector<std::string> consistent;
  for (const Verdict& v : verdicts) {
    if (v.kind == VerdictKind::Consistent && v.missing.empty()) {
      consistent.push_back(name(v));
      continue;
    }
    out += name(v) + ": " + v.headline + "\n";
    const std::size_t shown = std::min(v.details.size(), max_details);
    for (std::size_t i = 0; i < shown; ++i) out += "    " + v.details[i] + "\n";
    if (v.details.size() > shown)
      out += "    ... " + std::to_string(v.details.size() - shown) + " more lines\n";
  }
  if (!consistent.empty()) {
    out += consistent.size() == 1 ? consistent.front()
                                  : std::to_string(consistent.size()) + " communicators";
    out += ": consistent (no disagreement in the records)\n";
  }
  return out;
}

}  // namespace cohort::trace
