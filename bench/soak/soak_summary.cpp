#include "soak_summary.hpp"

#include "soak_plan.hpp"

#include <iomanip>
#include <sstream>

namespace cohort::soak {

std::string format_mix(const OpMix& mix) {
  std::ostringstream text;
  text << "  by collective:";
  for (std::size_t i = 0; i < mix.collectives.size(); ++i) {
    if (mix.collectives[i] == 0) continue;
    text << " " << soak_op_name(static_cast<Collective>(i)) << "=" << mix.collectives[i];
  }
  text << "\n  by dtype:";
  for (DType d : kAllDTypes)
    text << " " << dtype_name(d) << "=" << mix.dtypes[static_cast<std::size_t>(d)];
  text << "\n  reductions by op:";
  for (ReduceOp op : kAllReduceOps)
    text << " " << reduce_op_name(op) << "=" << mix.reduce_ops[static_cast<std::size_t>(op)];
  text << "\n  async=" << mix.async << " in-place=" << mix.in_place
       << " forced-algorithm=" << mix.forced_algorithm << " misaligned=" << mix.misaligned
       << " elements=" << mix.elements;
  text << "\n  on world=" << mix.on_world << " split=" << mix.on_split
       << " nested-split=" << mix.on_nested_split << " dup=" << mix.on_dup
       << "; splits=" << mix.splits << " nested-splits=" << mix.nested_splits
       << " dups=" << mix.dups << "\n";
  return text.str();
}

std::string format_report(int rank, const RankOutcome& outcome, const std::string& verdict) {
  std::ostringstream text;
  text << "rank " << rank << " " << verdict << ": " << outcome.ops_executed << " ops of "
       << outcome.ops_planned << " planned in " << std::fixed << std::setprecision(1)
       << outcome.seconds << " s; baseline [" << to_string(outcome.baseline) << "] peak ["
       << to_string(outcome.peak) << "] end [" << to_string(outcome.end) << "]";
  if (const auto& f = outcome.failure) {
    text << "; failed at op #" << f->op_index << " (" << f->op << ") with "
         << error_code_name(f->code) << ", then ";
    if (f->followup_code)
      text << error_code_name(*f->followup_code);
    else
      text << "success";
    text << " after " << f->followup_time.count() << " ms";
    if (!f->others.empty()) {
      text << "; in the same batch";
      for (const std::string& other : f->others) text << ", " << other;
    }
    text << ": " << f->what;
  }
  return text.str();
}

}  // namespace cohort::soak
