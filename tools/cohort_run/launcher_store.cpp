#include "cohort_run/launcher_store.hpp"

#include "launch/failure_report.hpp"

#include <sstream>

namespace cohort::run {
namespace {

constexpr const char* kAbortKey = "cohort-run/abort";

std::string node_finished_key(int node) {
  return "cohort-run/node/" + std::to_string(node) + "/finished";
}

// A rank failure travels as launcher::encode_failure's record; other reasons as
// "cohort-abort 1\n<exit code> <node>\n<reason>".
std::string encode(const JobAbort& abort) {
  if (abort.failure) return launcher::encode_failure(*abort.failure);
  std::ostringstream out;
  out << "cohort-abort 1\n" << abort.exit_code << ' ' << abort.node_rank << '\n' << abort.reason;
  return out.str();
}

JobAbort decode(const std::string& text) {
  JobAbort abort;
  if (std::optional<launcher::RankFailure> failure = launcher::decode_failure(text)) {
    abort.exit_code = failure->status.shell_code();
    abort.node_rank = failure->node_rank;
    abort.failure = std::move(failure);
    return abort;
  }
  std::istringstream in(text);
  std::string header;
  std::getline(in, header);
  if (header != "cohort-abort 1" || !(in >> abort.exit_code >> abort.node_rank)) {
    abort.exit_code = 1;
    abort.reason = "another launcher stopped the job (unreadable record)";
    return abort;
  }
  in.get();
  std::getline(in, abort.reason, '\0');
  return abort;
}

Bytes to_bytes(const std::string& text) {
  return Bytes(text.begin(), text.end());
}

}  // namespace

JobAbort LauncherStore::publish_abort(const JobAbort& abort) {
  const Bytes now = store_->compare_set(kAbortKey, {}, to_bytes(encode(abort)));
  return decode(std::string(now.begin(), now.end()));
}

std::optional<JobAbort> LauncherStore::published_abort() {
  if (!store_->check({kAbortKey})) return std::nullopt;
  // There (never erased): no waiting for it, so the client's io_timeout alone bounds the call.
  const Bytes value = store_->get(kAbortKey, std::chrono::milliseconds(0));
  return decode(std::string(value.begin(), value.end()));
}

void LauncherStore::mark_node_finished(int node_rank) {
  store_->set_string(node_finished_key(node_rank), "1");
}

std::vector<int> LauncherStore::unfinished_nodes(int nnodes) {
  std::vector<int> missing;
  for (int node = 0; node < nnodes; ++node) {
    if (!store_->check({node_finished_key(node)})) missing.push_back(node);
  }
  return missing;
}

}  // namespace cohort::run
