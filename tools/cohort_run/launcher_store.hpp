#pragma once

// How the launchers of one job talk to each other through the job's store (keys under
// "cohort-run/", apart from anything the ranks store): the first launcher to see its job fail
// publishes why, the others watch for that and stop their ranks; every launcher marks its node
// finished so node 0 keeps the store up until the last one is done with it.

#include <cohort/store.hpp>

#include "launch/rank_supervisor.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cohort::run {

/// Why a job ended early: a rank failure, or a launcher-level reason (interrupt, timeout).
struct JobAbort {
  std::optional<launcher::RankFailure> failure;
  /// The exit code every launcher uses (the failing rank's shell code, 124 for a timeout, ...).
  int exit_code = 1;
  /// The node whose launcher published it.
  int node_rank = 0;
  /// For launcher-level reasons: what happened, for people.
  std::string reason;
};

class LauncherStore {
 public:
  explicit LauncherStore(std::shared_ptr<Store> store) : store_(std::move(store)) {}

  /// Publishes `abort` unless another launcher did first; returns the one that is in the store
  /// (the job's first).
  JobAbort publish_abort(const JobAbort& abort);
  /// The published abort, if any, without blocking.
  std::optional<JobAbort> published_abort();

  void mark_node_finished(int node_rank);
  /// Nodes of 0 .. nnodes-1 that have not marked themselves finished.
  std::vector<int> unfinished_nodes(int nnodes);

 private:
  std::shared_ptr<Store> store_;
};

}  // namespace cohort::run
