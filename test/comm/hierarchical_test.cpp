// Hierarchical allreduce, broadcast, reduce, allgather(v), reduce_scatter and barrier across
// simulated hosts: each rank enters a UTS namespace of its own and takes the hostname of its
// "host", so ranks on different simulated hosts have different host identities (the shared arena
// and HostGroups compare them) while running on one machine over real UCX. Layouts with each host's
// ranks consecutive and not, even and uneven, cover the algorithms' in-place and repacking paths.
// Every dtype/op the algorithm takes, counts from 0 up, 2 hosts x 1-3 ranks and uneven hosts; the
// flight record shows which algorithm ran. Needs root for the namespaces; exits 77 (meson: SKIP)
// without.

#include "rank_checks.hpp"

#include "algorithms/engines/host_allgather_pipeline.hpp"
#include "algorithms/engines/host_pipeline.hpp"
#include "algorithms/engines/host_signals.hpp"

#include "catch_session.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/heap_keeps_freed.hpp"
#include "support/simulated_hosts.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;

/// Checks which algorithm each numbered op ran against this rank's flight record, one dump for
/// many ops: a dump and parse per op cost in proportion to the ops before it (a fifth of this
/// test's time). Expectations still pending are checked when it is destroyed, unless an
/// exception is already leaving the scope.
class RanChecks {
 public:
  RanChecks(Communicator& comm, std::string dir) : comm_(comm), dir_(std::move(dir)) {}
  RanChecks(const RanChecks&) = delete;
  RanChecks& operator=(const RanChecks&) = delete;
  ~RanChecks() noexcept(false) {
    if (std::uncaught_exceptions() == 0) verify();
  }

  /// The next numbered op must have run `algorithm`; `what` names it in a failure.
  void expect(std::string algorithm, std::string what) {
    pending_.push_back(Expected{next_seq_++, std::move(algorithm), std::move(what)});
    // The record keeps the last COHORT_TRACE_BUFFER (2000) ops: check long before it wraps.
    if (pending_.size() >= 256) verify();
  }
  /// The next numbered op's algorithm is not checked.
  void skip() { ++next_seq_; }

  void verify() {
    if (pending_.empty()) return;
    const std::string path =
        comm_.dump_trace(dir_ + "/rank" + std::to_string(comm_.rank()) + ".json");
    const auto doc = nlohmann::json::parse(std::ifstream(path));
    std::map<std::uint32_t, std::string> algorithm_of;
    for (const auto& op : doc["ops"])
      algorithm_of[op["seq"].get<std::uint32_t>()] =
          op["algorithm"].is_null() ? "" : op["algorithm"].get<std::string>();
    std::vector<Expected> checking;
    checking.swap(pending_);
    for (const Expected& e : checking) {
      const auto it = algorithm_of.find(e.seq);
      const std::string got = it == algorithm_of.end() ? "(not recorded)" : it->second;
      RANK_CHECK(got == e.algorithm,
                 e.what << " (op " << e.seq << ") ran '" << got << "', not " << e.algorithm);
    }
  }

 private:
  struct Expected {
    std::uint32_t seq;
    std::string algorithm;
    std::string what;
  };
  Communicator& comm_;
  const std::string dir_;
  std::uint32_t next_seq_ = 0;
  std::vector<Expected> pending_;
};

/// op over ranks 0 .. ranks - 1 of value(r), folded here as the reference (Avg: the mean).
template <class Value>
double fold_reference(ReduceOp op, int ranks, Value value) {
  double acc = op == ReduceOp::Prod ? 1 : 0;
  for (int r = 0; r < ranks; ++r) {
    const double v = value(r);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += v;
    if (op == ReduceOp::Prod) acc *= v;
    if (op == ReduceOp::Max) acc = std::max(acc, v);
  }
  return op == ReduceOp::Avg ? acc / ranks : acc;
}

/// Allreduces a vector of `count` whose element i is value(rank, i) on each rank, into another
/// buffer or in place, and checks every element against the fold of all ranks' values made here.
template <class Value>
void allreduce_and_check(Communicator& comm, DType dtype, ReduceOp op, std::size_t count,
                         bool in_place, const CollectiveOptions& options, Value value,
                         const std::string& what) {
  Buffer in = Buffer::allocate(count, dtype);
  Buffer out = in_place ? in : Buffer::allocate(count, dtype);
  for (std::size_t i = 0; i < count; ++i) set(in, i, value(comm.rank(), i));
  if (in_place) {
    comm.allreduce(in, op, options);
  } else {
    comm.allreduce(in, out, op, options);
  }
  expect_values(
      out, 0, count,
      [&](std::size_t i) {
        return fold_reference(op, comm.size(), [&](int r) { return value(r, i); });
      },
      what + (in_place ? ", in place" : ""));
}

/// Reduces a vector of `count` whose element i is value(rank, i) on each rank to `root`, into
/// another buffer or in place, and checks on the root every element against the fold of all
/// ranks' values made here (Avg: their mean), and on the others that their input stayed.
template <class Value>
void reduce_and_check(Communicator& comm, DType dtype, ReduceOp op, std::size_t count, int root,
                      bool in_place, const CollectiveOptions& options, Value value,
                      const std::string& what) {
  Buffer in = Buffer::allocate(count, dtype);
  Buffer out = in_place ? in : Buffer::allocate(count, dtype);
  for (std::size_t i = 0; i < count; ++i) {
    set(in, i, value(comm.rank(), i));
    if (!in_place) set(out, i, -1);
  }
  comm.reduce(in, out, op, root, options);
  const std::string where = what + " x " + std::to_string(count) + " to " + std::to_string(root) +
                            (in_place ? ", in place" : "");
  if (comm.rank() != root || !in_place)
    expect_values(
        in, 0, count, [&](std::size_t i) { return value(comm.rank(), i); },
        where + ": the input afterwards");
  if (comm.rank() != root) return;
  expect_values(
      out, 0, count,
      [&](std::size_t i) {
        return fold_reference(op, comm.size(), [&](int r) { return value(r, i); });
      },
      where);
}

/// Reduce_scatters blocks of `count` whose element i of block b is value(rank, b, i) on each rank,
/// into this rank's own block of the input (in place) or a buffer of its own, and checks every
/// element against the fold of all ranks' values made here (Avg: their mean).
template <class Value>
void reduce_scatter_and_check(Communicator& comm, DType dtype, ReduceOp op, std::size_t count,
                              bool in_place, const CollectiveOptions& options, Value value,
                              const std::string& what) {
  const int n = comm.size();
  const auto me = static_cast<std::int64_t>(comm.rank());
  const auto c = static_cast<std::int64_t>(count);
  Buffer in = Buffer::allocate(count * static_cast<std::size_t>(n), dtype);
  for (std::size_t b = 0; b < static_cast<std::size_t>(n); ++b)
    for (std::size_t i = 0; i < count; ++i) set(in, b * count + i, value(comm.rank(), b, i));
  Buffer out = in_place ? in.slice(me * c, me * c + c) : Buffer::allocate(count, dtype);
  comm.reduce_scatter(in, out, op, options);
  expect_values(
      out, 0, count,
      [&](std::size_t i) {
        return fold_reference(op, n,
                              [&](int r) { return value(r, static_cast<std::size_t>(me), i); });
      },
      what + " x " + std::to_string(count) + (in_place ? ", in place" : ""));
}

/// The counts an allgather(v) test uses: `base` from every rank, or (variable) 0 from every rank r
/// with r % 3 == 1 and base + 3r from the others.
std::vector<std::size_t> allgather_counts(int n, std::size_t base, bool variable) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(n), base);
  if (variable)
    for (int r = 0; r < n; ++r)
      counts[static_cast<std::size_t>(r)] = r % 3 == 1 ? 0 : base + std::size_t(r) * 3;
  return counts;
}

/// Allgathers (allgatherv when `variable`) blocks of allgather_counts(size, base, variable), into
/// the output's own block in place or from a buffer of its own, and checks every block: element
/// i of rank r's block is (31r + i % 97) % 127, exact in every dtype and different for ranks
/// and neighbouring elements. Returns the output's count.
std::size_t allgather_and_check(Communicator& comm, DType dtype, std::size_t base, bool variable,
                                bool in_place, const CollectiveOptions& options,
                                const std::string& what) {
  const auto element = [](int r, std::size_t i) {
    return double((std::size_t(r) * 31 + i % 97) % 127);
  };
  const int n = comm.size();
  const std::vector<std::size_t> counts = allgather_counts(n, base, variable);
  std::vector<std::size_t> displs(static_cast<std::size_t>(n), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  const std::size_t total = displs.back() + counts.back();
  const auto me = static_cast<std::size_t>(comm.rank());
  Buffer out = Buffer::allocate(total, dtype);
  for (std::size_t i = 0; i < total; ++i) set(out, i, -1);
  Buffer in = in_place ? out.slice(static_cast<std::int64_t>(displs[me]),
                                   static_cast<std::int64_t>(displs[me] + counts[me]))
                       : Buffer::allocate(counts[me], dtype);
  for (std::size_t i = 0; i < counts[me]; ++i) set(in, i, element(comm.rank(), i));
  if (variable)
    comm.allgatherv(in, out, counts, options);
  else
    comm.allgather(in, out, options);
  for (int r = 0; r < n; ++r)
    expect_values(
        out, displs[static_cast<std::size_t>(r)], counts[static_cast<std::size_t>(r)],
        [&](std::size_t i) { return element(r, i); },
        what + (variable ? "v" : "") + " of " + std::to_string(base) + " " +
            std::string(dtype_name(dtype)) + (in_place ? ", in place" : "") + ": block of rank " +
            std::to_string(r));
  if (!in_place)
    expect_values(
        in, 0, counts[me], [&](std::size_t i) { return element(comm.rank(), i); },
        what + ": this rank's input afterwards");
  return total;
}

void sweep(const Environment& env, std::vector<int> host_of_rank, const std::string& dir) {
  cohort::test::become_simulated_host(host_of_rank[static_cast<std::size_t>(env.rank)]);
  // The count of records below assumes ops that move nothing are skipped, which debug mode
  // does not do.
  ::unsetenv("COHORT_DEBUG");
  auto comm = world(env);
  const int rank = comm->rank();
  const int n = comm->size();
  CollectiveOptions forced;
  forced.algorithm = Algorithm::Hierarchical;
  RanChecks ran(*comm, dir);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000},
                                std::size_t{300001}}) {
        for (bool in_place : {false, true}) {
          // Values 1..3, so products stay exact: element i of rank r is 1 + (r + i) % 3.
          allreduce_and_check(
              *comm, dtype, op, count, in_place, forced,
              [](int r, std::size_t i) { return 1 + double((r + i) % 3); },
              std::string("hierarchical allreduce of ") + std::string(dtype_name(dtype)));
          // An op that moves nothing takes no number and leaves no record (communicator.hpp).
          if (count > 0) {
            ran.expect("hierarchical", "allreduce");
          }
        }
      }
    }
  }
  // Broadcast from every root (so from leaders and from others, on every host): float32 in
  // place, int64 out of place (the root's input must reach its own output too).
  for (int root = 0; root < n; ++root) {
    for (DType dtype : {DType::Float32, DType::Int64}) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{300001}}) {
        const bool in_place = dtype == DType::Float32;
        const auto value = [&](std::size_t i) { return root * 1000 + double(i % 7); };
        Buffer in = Buffer::allocate(count, dtype);
        Buffer b = in_place ? in : Buffer::allocate(count, dtype);
        for (std::size_t i = 0; i < count; ++i) {
          if (rank == root) set(in, i, value(i));
          if (!in_place) set(b, i, -1.0);
        }
        if (in_place)
          comm->broadcast(b, root, forced);
        else
          comm->broadcast(in, b, root, forced);
        expect_values(
            b, 0, count, value,
            "hierarchical broadcast from " + std::to_string(root) + (in_place ? ", in place" : ""));
        if (rank == root && !in_place)
          expect_values(in, 0, count, value, "the root's input after its broadcast");
        if (count > 0) {  // as allreduce's
          ran.expect("hierarchical", "broadcast");
        }
      }
    }
  }
  // Reduce to every root (leaders and not, on every host), every dtype/op, in and out of place.
  for (int root = 0; root < n; ++root) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod, ReduceOp::Avg}) {
        if (op == ReduceOp::Avg && (dtype == DType::Int32 || dtype == DType::Int64)) continue;
        for (std::size_t count :
             {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{300001}}) {
          const bool in_place = (root + static_cast<int>(count)) % 2 == 0;
          reduce_and_check(
              *comm, dtype, op, count, root, in_place, forced,
              [](int r, std::size_t i) { return 1 + double((r + i) % 3); },
              "hierarchical reduce of " + std::string(dtype_name(dtype)));
          if (count > 0) {  // as allreduce's
            ran.expect("hierarchical", "reduce");
          }
        }
      }
    }
  }
  // Allgather and allgatherv (uneven counts, zeros among them), in and out of place.
  for (DType dtype : {DType::Float32, DType::Int64}) {
    for (std::size_t base :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{70001}}) {
      for (bool variable : {false, true}) {
        for (bool in_place : {false, true}) {
          const std::size_t total = allgather_and_check(*comm, dtype, base, variable, in_place,
                                                        forced, "hierarchical allgather");
          if (total > 0) {  // as allreduce's
            ran.expect("hierarchical", "allgather");
          }
        }
      }
    }
  }
  // Reduce_scatter: every dtype/op, in place (out is the rank's own slice of in) and not.
  // Element i of block b from rank r is 1 + (r + b + i) % 3 (products stay exact).
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod, ReduceOp::Avg}) {
      if (op == ReduceOp::Avg && (dtype == DType::Int32 || dtype == DType::Int64)) continue;
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000},
                                std::size_t{50001}}) {
        for (bool in_place : {false, true}) {
          reduce_scatter_and_check(
              *comm, dtype, op, count, in_place, forced,
              [](int r, std::size_t b, std::size_t i) { return 1 + double((r + b + i) % 3); },
              std::string("hierarchical reduce_scatter of ") + std::string(dtype_name(dtype)));
          if (count > 0) {  // as allreduce's
            ran.expect("hierarchical", "reduce_scatter");
          }
        }
      }
    }
  }
  // Barrier: nobody leaves before everyone arrived (each counts itself in first).
  auto store = connect_store(env);
  for (int round = 0; round < 3; ++round) {
    const std::string key = "test/hierarchical/barrier" + std::to_string(round);
    store->add(key, 1);
    comm->barrier(forced);
    const std::int64_t arrived = store->add(key, 0);
    RANK_CHECK(arrived == n, "left barrier " << round << " with " << arrived << " of " << n);
    ran.expect("hierarchical", "barrier");
  }
  // Chosen without being forced, too; and Avg (which it declines) still right.
  Buffer x = Buffer::allocate(64 * 1024, DType::Float32);
  for (std::size_t i = 0; i < x.count(); ++i) set(x, i, rank);
  comm->allreduce(x, ReduceOp::Sum);
  ran.expect("hierarchical", "an allreduce left to the table");
  expect_values(
      x, 0, x.count(), [&](std::size_t) { return double(n * (n - 1) / 2); }, "auto");
  comm->allreduce(x, ReduceOp::Avg, forced);
  expect_values(
      x, 0, x.count(), [&](std::size_t) { return double(n * (n - 1) / 2); }, "avg");
  ran.skip();
  Buffer gathered = Buffer::allocate(x.count() * static_cast<std::size_t>(n), DType::Float32);
  comm->allgather(x, gathered);
  ran.expect("hierarchical", "an allgather left to the table");
  comm->reduce_scatter(gathered, x, ReduceOp::Sum);
  ran.expect("hierarchical", "a reduce_scatter left to the table");
  expect_values(
      x, 0, x.count(), [&](std::size_t) { return double(n * n * (n - 1) / 2); },
      "auto reduce_scatter");
}

/// Hierarchical allreduces, reduces, allgathers, reduce_scatters and broadcasts cut into many
/// chunks (a testing chunk size of 4100 bytes: 1025 float32, 512 int64 and 4100 int8 elements, and
/// the vectors' last chunks shorter): on the pipelined schedules (engines/host_pipeline.hpp,
/// host_allgather_pipeline.hpp) where single copy is allowed, the phases one chunk after another
/// where it is not. Counts below, at, just above and far above one chunk (more chunks than the
/// leader's staging holds). `single_copy`: whether this rank's host allows it (its ranks set
/// COHORT_SINGLE_COPY=off otherwise), so hosts may differ.
void chunked(const Environment& env, std::vector<int> host_of_rank, bool single_copy,
             const std::string& dir) {
  const int host = host_of_rank[static_cast<std::size_t>(env.rank)];
  cohort::test::become_simulated_host(host);
  if (!single_copy) ::setenv("COHORT_SINGLE_COPY", "off", 1);
  algorithms::testing::set_hierarchical_chunk_bytes(4100);
  auto comm = world(env);
  const int rank = comm->rank();
  const int n = comm->size();
  const bool host_has_helpers = std::count(host_of_rank.begin(), host_of_rank.end(), host) > 1;
  CollectiveOptions forced;
  forced.algorithm = Algorithm::Hierarchical;
  RanChecks ran(*comm, dir);  // every op here moves data, so each has a number
  const std::uint64_t helped_before = algorithms::testing::helped_allreduces();
  std::uint64_t expected_helped = 0;
  for (DType dtype : {DType::Float32, DType::Int64, DType::Int8}) {
    const std::size_t chunk = std::max<std::size_t>(4100 / dtype_size(dtype), 1);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
      for (std::size_t count : {std::size_t{1}, chunk, chunk + 1, 2 * chunk + 7, 9 * chunk + 3}) {
        for (bool in_place : {false, true}) {
          // 1..11, different for every element and rank, so a chunk or slice out of place
          // shows (sums stay within int8 for up to 11 ranks).
          allreduce_and_check(
              *comm, dtype, op, count, in_place, forced,
              [](int r, std::size_t i) { return 1 + double((r * 7 + i * 3) % 11); },
              std::string("chunked hierarchical allreduce of ") + std::string(dtype_name(dtype)) +
                  " x " + std::to_string(count));
          ran.expect("hierarchical", "allreduce");
          if (single_copy && host_has_helpers && count > chunk) ++expected_helped;
        }
      }
    }
  }
  const std::uint64_t helped = algorithms::testing::helped_allreduces() - helped_before;
  RANK_CHECK(helped == expected_helped, "ran " << helped
                                               << " allreduces on the pipelined schedule, expected "
                                               << expected_helped);

  // Allgathers of shares (a host's blocks) below, at and above one chunk: pipelined where each
  // host's ranks are consecutive, the host has helpers and single copy is allowed; otherwise the
  // leaders exchange chunks (consecutive hosts) or whole shares.
  bool consecutive = true;
  for (std::size_t r = 1; r < host_of_rank.size(); ++r)
    consecutive = consecutive && host_of_rank[r] >= host_of_rank[r - 1];
  const std::uint64_t allgathers_helped_before = algorithms::testing::helped_allgathers();
  std::uint64_t expected_allgathers_helped = 0;
  for (DType dtype : {DType::Float32, DType::Int8}) {
    const std::size_t chunk = std::max<std::size_t>(4100 / dtype_size(dtype), 1);
    for (std::size_t base : {std::size_t{1}, chunk / 2, chunk, 3 * chunk + 5}) {
      for (bool variable : {false, true}) {
        for (bool in_place : {false, true}) {
          allgather_and_check(*comm, dtype, base, variable, in_place, forced,
                              "chunked hierarchical allgather");
          ran.expect("hierarchical", "allgather");
          const std::vector<std::size_t> counts = allgather_counts(n, base, variable);
          std::size_t largest_share = 0;
          for (int h : {0, 1}) {
            std::size_t share = 0;
            for (std::size_t r = 0; r < counts.size(); ++r)
              if (host_of_rank[r] == h) share += counts[r];
            largest_share = std::max(largest_share, share);
          }
          if (single_copy && host_has_helpers && consecutive && largest_share > chunk)
            ++expected_allgathers_helped;
        }
      }
    }
  }
  const std::uint64_t allgathers_helped =
      algorithms::testing::helped_allgathers() - allgathers_helped_before;
  RANK_CHECK(allgathers_helped == expected_allgathers_helped,
             "ran " << allgathers_helped << " allgathers on the pipelined schedule, expected "
                    << expected_allgathers_helped);

  // Reduces to every root, below, at and above one chunk: pipelined on hosts with helpers where
  // single copy is allowed, chunk by chunk in phases elsewhere.
  const std::uint64_t reduces_helped_before = algorithms::testing::helped_reduces();
  std::uint64_t expected_reduces_helped = 0;
  for (int root = 0; root < n; ++root) {
    for (DType dtype : {DType::Float32, DType::Int8}) {
      const std::size_t chunk = std::max<std::size_t>(4100 / dtype_size(dtype), 1);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
        for (std::size_t count : {std::size_t{1}, chunk, chunk + 1, 9 * chunk + 3}) {
          for (bool in_place : {false, true}) {
            reduce_and_check(
                *comm, dtype, op, count, root, in_place, forced,
                [](int r, std::size_t i) { return 1 + double((r * 7 + i * 3) % 11); },
                "chunked hierarchical reduce of " + std::string(dtype_name(dtype)));
            ran.expect("hierarchical", "reduce");
            if (single_copy && host_has_helpers && count > chunk) ++expected_reduces_helped;
          }
        }
      }
    }
  }
  const std::uint64_t reduces_helped =
      algorithms::testing::helped_reduces() - reduces_helped_before;
  RANK_CHECK(reduces_helped == expected_reduces_helped,
             "ran " << reduces_helped << " reduces on the pipelined schedule, expected "
                    << expected_reduces_helped);

  // Reduce_scatters whose shares (a host's blocks) are below, at and above one chunk: pipelined
  // where every host has as many ranks, each host's consecutive, single copy is allowed;
  // otherwise the leaders' reduce_scatters go chunk by chunk (hosts in that order) or whole.
  bool in_share_order = consecutive;
  for (int h : {0, 1})
    in_share_order =
        in_share_order && 2 * std::count(host_of_rank.begin(), host_of_rank.end(), h) ==
                              static_cast<std::ptrdiff_t>(host_of_rank.size());
  const std::uint64_t reduce_scatters_helped_before = algorithms::testing::helped_reduce_scatters();
  std::uint64_t expected_reduce_scatters_helped = 0;
  // Host 0's ranks: every host's where it matters (in share order), and the same on every rank.
  const auto host_ranks =
      static_cast<std::size_t>(std::count(host_of_rank.begin(), host_of_rank.end(), 0));
  for (DType dtype : {DType::Float32, DType::Int8}) {
    const std::size_t chunk = std::max<std::size_t>(4100 / dtype_size(dtype), 1);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
      for (std::size_t count :
           {std::size_t{1}, chunk / host_ranks, chunk / host_ranks + 1, 3 * chunk + 5}) {
        for (bool in_place : {false, true}) {
          // 1..11, different for every element, block and rank (sums stay within int8).
          reduce_scatter_and_check(
              *comm, dtype, op, count, in_place, forced,
              [](int r, std::size_t b, std::size_t i) {
                return 1 + double((r * 7 + b * 5 + i * 3) % 11);
              },
              "chunked hierarchical reduce_scatter of " + std::string(dtype_name(dtype)));
          ran.expect("hierarchical", "reduce_scatter");
          if (single_copy && in_share_order && count * host_ranks > chunk)
            ++expected_reduce_scatters_helped;
        }
      }
    }
  }
  const std::uint64_t reduce_scatters_helped =
      algorithms::testing::helped_reduce_scatters() - reduce_scatters_helped_before;
  RANK_CHECK(reduce_scatters_helped == expected_reduce_scatters_helped,
             "ran " << reduce_scatters_helped
                    << " reduce_scatters on the pipelined schedule, expected "
                    << expected_reduce_scatters_helped);

  // Broadcasts (in chunks, never pipelined) from every root (a leader or not, on either host),
  // in and out of place.
  for (int root = 0; root < n; ++root) {
    for (DType dtype : {DType::Float32, DType::Int8}) {
      const std::size_t chunk = std::max<std::size_t>(4100 / dtype_size(dtype), 1);
      for (std::size_t count : {std::size_t{1}, chunk, chunk + 1, 9 * chunk + 3}) {
        for (bool in_place : {false, true}) {
          const auto value = [&](std::size_t i) { return double((root * 5 + i * 7) % 101); };
          Buffer in = Buffer::allocate(count, dtype);
          Buffer b = in_place ? in : Buffer::allocate(count, dtype);
          for (std::size_t i = 0; i < count; ++i) {
            set(in, i, rank == root ? value(i) : -1.0);
            if (!in_place) set(b, i, -2.0);
          }
          if (in_place)
            comm->broadcast(b, root, forced);
          else
            comm->broadcast(in, b, root, forced);
          expect_values(b, 0, count, value,
                        "chunked hierarchical broadcast of " + std::to_string(count) + " " +
                            std::string(dtype_name(dtype)) + " from " + std::to_string(root) +
                            (in_place ? ", in place" : ""));
          if (rank == root && !in_place)
            expect_values(in, 0, count, value, "the root's input after its broadcast");
          ran.expect("hierarchical", "broadcast");
        }
      }
    }
  }
}

/// Which rank of the failing host the chunk hook fails (set in each rank before the op).
int g_failing_local_rank = -1;

void fail_at_chunk_three(int local_rank, std::size_t chunk) {
  if (local_rank == g_failing_local_rank && chunk == 3)
    throw std::runtime_error("injected failure of local rank " + std::to_string(local_rank));
}

enum class Pipelined { Allreduce, Allgather, ReduceScatter, Reduce };

/// One rank of host 0 (its leader, or a helper) fails at chunk 3 of a pipelined allreduce,
/// allgather, reduce_scatter or reduce (to host 0's first helper, which then copies results). Its
/// host's other ranks must fail with RemoteError rather than meet their deadline (a Timeout). Host
/// 1's ranks, whose leader learns nothing of it until its own deadline, fail too, unless an
/// allgather's helper failed (below).
void failing_pipeline(const Environment& env, std::vector<int> host_of_rank, int failing,
                      Pipelined which) {
  const bool allgather = which == Pipelined::Allgather;
  const int host = host_of_rank[static_cast<std::size_t>(env.rank)];
  cohort::test::become_simulated_host(host);
  algorithms::testing::set_hierarchical_chunk_bytes(4100);
  auto comm = world(env);
  CollectiveOptions options;
  options.algorithm = Algorithm::Hierarchical;
  options.timeout = std::chrono::seconds(5);
  // Allreduce and reduce: 10 chunks of 1025 float32. Allgather and reduce_scatter: blocks of
  // 2 x 1025, so 6 chunks of a host's share of three ranks.
  const bool whole_vector = which == Pipelined::Allreduce || which == Pipelined::Reduce;
  Buffer x = Buffer::allocate(whole_vector ? 9 * 1025 + 3 : 2 * 1025, DType::Float32);
  Buffer whole = Buffer::allocate(x.count() * host_of_rank.size(), DType::Float32);
  const auto run = [&] {
    if (which == Pipelined::Allgather)
      comm->allgather(x, whole, options);
    else if (which == Pipelined::ReduceScatter)
      comm->reduce_scatter(whole, x, ReduceOp::Sum, options);
    else if (which == Pipelined::Reduce)
      comm->reduce(x, x, ReduceOp::Sum, 1, options);
    else
      comm->allreduce(x, ReduceOp::Sum, options);
  };
  run();  // sets the groups up, before the hook
  const std::uint64_t helped =
      allgather                           ? algorithms::testing::helped_allgathers()
      : which == Pipelined::ReduceScatter ? algorithms::testing::helped_reduce_scatters()
      : which == Pipelined::Reduce        ? algorithms::testing::helped_reduces()
                                          : algorithms::testing::helped_allreduces();
  RANK_CHECK(helped == 1, "the pipelined schedule did not run");
  int local_rank = 0;
  for (int r = 0; r < env.rank; ++r)
    local_rank += host_of_rank[static_cast<std::size_t>(r)] == host;
  g_failing_local_rank = host == 0 ? failing : -1;
  algorithms::testing::set_pipeline_chunk_hook(&fail_at_chunk_three);
  // Host 1's ranks only wait out their deadline here: a shorter one keeps this test from idling
  // for most of its time. Host 0's stays long, so that its ranks' RemoteError (checked below)
  // cannot be a deadline's Timeout.
  if (host != 0) options.timeout = std::chrono::seconds(2);
  std::string error;
  ErrorCode code = ErrorCode::Internal;
  try {
    run();
  } catch (const Error& e) {
    error = e.what();
    code = e.code();
  } catch (const std::exception& e) {
    error = e.what();
  }
  algorithms::testing::set_pipeline_chunk_hook(nullptr);
  // Nobody leaves (which its peers would see as a process gone) before everyone has returned:
  // the host's ranks must learn of the failure from the op itself.
  auto store = connect_store(env);
  const std::string prefix = "test/failing_pipeline/" + std::to_string(failing) + "/" +
                             std::to_string(static_cast<int>(which)) + "/";
  store->set_string(prefix + std::to_string(env.rank), "returned");
  std::vector<std::string> everyone;
  for (int r = 0; r < env.world_size; ++r) everyone.push_back(prefix + std::to_string(r));
  store->wait(everyone, std::chrono::seconds(60));
  // An allgather's helper takes nothing its leader waits for: the leader may have sent its whole
  // share before it saw the failure, and then host 1's ranks have all they need.
  // A reduce's other hosts send and wait for nothing back.
  const bool may_succeed = host != 0 && ((allgather && failing != 0) || which == Pipelined::Reduce);
  RANK_CHECK(!error.empty() || may_succeed, "the op returned normally");
  if (host == 0 && local_rank == failing) {
    RANK_CHECK(error.find("injected failure") != std::string::npos, "failed with: " << error);
  } else if (host == 0) {
    // From its signal ("failed in this op") or its arena flags, whichever this rank meets first.
    RANK_CHECK(code == ErrorCode::RemoteError, "failed with: " << error);
  }
}

/// Rank 0 starts a hierarchical allreduce_async, then receives 2 MiB (a send that waits for its
/// receive) from the last rank, which joins the allreduce only after its send ended. The
/// receive must be posted from inside the allreduce's waits in the host groups' views and
/// arena (transport/side_work.hpp), or both wait out the 20 s deadline. (Rank 0 leads host 0:
/// it waits in its host's arena or among the leaders.)
void receive_behind_hierarchical_allreduce(const Environment& env, std::vector<int> host_of_rank) {
  cohort::test::become_simulated_host(host_of_rank[static_cast<std::size_t>(env.rank)]);
  auto comm = world(env);
  const int last = comm->size() - 1;
  CollectiveOptions o;
  o.timeout = std::chrono::seconds(20);
  o.algorithm = Algorithm::Hierarchical;
  Buffer x = Buffer::allocate(100000, DType::Float32);
  // The groups are set up (over the communicator's own transport) by a first op, so the waits
  // below are the groups' own.
  comm->allreduce(x, x, ReduceOp::Sum, o);
  for (std::size_t i = 0; i < x.count(); ++i) set(x, i, double(comm->rank()));
  constexpr std::size_t kLarge = 512 * 1024;  // float32: 2 MiB
  Buffer message = Buffer::allocate(kLarge, DType::Float32);
  if (comm->rank() == 0) {
    Work summed = comm->allreduce_async(x, x, ReduceOp::Sum, o);
    comm->recv(message, last, 2, o);
    summed.wait();
    expect_values(
        message, 0, kLarge, [](std::size_t i) { return double(i % 1000); }, "the message");
  } else if (comm->rank() == last) {
    for (std::size_t i = 0; i < kLarge; ++i) set(message, i, double(i % 1000));
    comm->send(message, 0, 2, o);
    comm->allreduce(x, x, ReduceOp::Sum, o);
  } else {
    comm->allreduce(x, x, ReduceOp::Sum, o);
  }
  const int n = comm->size();
  expect_values(
      x, 0, x.count(), [&](std::size_t) { return double(n * (n - 1) / 2); }, "the allreduce");
}

/// Hosts {0, 0, 1, 1}. Host 0's ranks run a hierarchical broadcast from rank 2 that host 1 joins
/// only after they failed: rank 0, host 0's leader, met its deadline among the leaders, waiting
/// on a receive from rank 2 posted into its output. Rank 0 then writes a sentinel there; host 1
/// runs the broadcast late (rank 2 sends to rank 0) and rank 2 then sends a token to rank 0 on a
/// healthy dup() of the world, over the same connection, after the data. The failure must have
/// cancelled the leaders' receive: once the token came, the sentinel is intact (the data landed
/// in the output, freed memory in an application, when only the communicator's own view was
/// cancelled).
void failed_hierarchical_cancels_its_receives(const Environment& env) {
  const std::vector<int> layout{0, 0, 1, 1};
  const int host = layout[static_cast<std::size_t>(env.rank)];
  cohort::test::become_simulated_host(host);
  auto comm = world(env);
  auto spare = comm->dup();
  const std::shared_ptr<Store> store = connect_store(env);
  CollectiveOptions o;
  o.algorithm = Algorithm::Hierarchical;
  o.timeout = std::chrono::seconds(20);
  constexpr std::size_t kCount = 100;  // 400 bytes: one eager message between the leaders
  Buffer x = Buffer::allocate(kCount, DType::Float32);
  comm->broadcast(x, x, 2, o);  // sets the groups up
  for (std::size_t i = 0; i < kCount; ++i) set(x, i, double(env.rank + 1));
  const std::string prefix = "test/hierarchical_cancel/";
  if (host == 0) {
    o.timeout = std::chrono::milliseconds(500);
    bool failed = false;
    try {
      comm->broadcast(x, x, 2, o);
    } catch (const Error&) {
      failed = true;
    }
    RANK_CHECK(failed, "host 0's broadcast finished without host 1");
    for (std::size_t i = 0; i < kCount; ++i) set(x, i, -7.0);
    store->set_string(prefix + std::to_string(env.rank), "failed");
  } else {
    store->wait({prefix + "0", prefix + "1"}, std::chrono::seconds(60));
    o.timeout = std::chrono::seconds(2);
    try {
      comm->broadcast(x, x, 2, o);  // may end either way: rank 0 is gone from it
    } catch (const Error&) {
    }
  }
  Buffer token = Buffer::allocate(1, DType::Int32);
  if (env.rank == 2) spare->send(token, 0, 9);
  if (env.rank == 0) {
    spare->recv(token, 2, 9);
    expect_values(
        x, 0, kCount, [](std::size_t) { return -7.0; },
        "the output of the failed broadcast, after rank 2's late data");
  }
  spare->barrier();
}

}  // namespace

TEST_CASE("a failed hierarchical broadcast cancels the receives of its host groups",
          "[hierarchical]") {
  REQUIRE_NOTHROW(run_ranks(4, failed_hierarchical_cancels_its_receives, std::chrono::seconds(60)));
}

TEST_CASE("a receive behind a hierarchical allreduce_async is posted from inside its waits",
          "[hierarchical]") {
  for (const std::vector<int>& layout : std::vector<std::vector<int>>{{0, 0, 1, 1}, {0, 1, 0}}) {
    CAPTURE(layout.size());
    REQUIRE_NOTHROW(run_ranks(
        static_cast<int>(layout.size()),
        [&](const Environment& env) { receive_behind_hierarchical_allreduce(env, layout); },
        std::chrono::seconds(120)));
  }
}

TEST_CASE(
    "chunked hierarchical allreduces, reduces, allgathers, reduce_scatters and broadcasts, "
    "pipelined and not (and one host of each), over 2 simulated hosts",
    "[hierarchical]") {
  cohort::test::TempDir dir;
  for (const bool single_copy : {true, false}) {
    for (const std::vector<int>& layout : std::vector<std::vector<int>>{
             {0, 0, 1, 1}, {0, 0, 0, 1, 1, 1}, {0, 1, 1, 0, 1}, {0, 0, 1}}) {
      CAPTURE(single_copy, layout);
      REQUIRE_NOTHROW(run_ranks(
          static_cast<int>(layout.size()),
          [&](const Environment& env) { chunked(env, layout, single_copy, dir.path()); },
          std::chrono::seconds(240)));
    }
  }
  // Single copy on host 0 only: its ranks run the pipelined schedules while host 1's run the
  // phases chunk by chunk, and the leaders' exchanges between them must still meet.
  for (const std::vector<int>& layout :
       std::vector<std::vector<int>>{{0, 0, 1, 1}, {0, 0, 0, 1, 1, 1}}) {
    CAPTURE(layout);
    REQUIRE_NOTHROW(run_ranks(
        static_cast<int>(layout.size()),
        [&](const Environment& env) {
          chunked(env, layout, layout[static_cast<std::size_t>(env.rank)] == 0, dir.path());
        },
        std::chrono::seconds(240)));
  }
}

TEST_CASE("a rank failing mid-pipeline fails its host's ranks at once", "[hierarchical]") {
  for (const Pipelined which :
       {Pipelined::Allreduce, Pipelined::Allgather, Pipelined::ReduceScatter, Pipelined::Reduce}) {
    // The reduce_scatter's pipeline needs hosts of as many ranks.
    const std::vector<int> layout = which == Pipelined::ReduceScatter
                                        ? std::vector<int>{0, 0, 0, 1, 1, 1}
                                        : std::vector<int>{0, 0, 0, 1, 1};
    for (const int failing : {0, 1}) {  // host 0's leader; one of its two helpers
      CAPTURE(static_cast<int>(which), failing);
      REQUIRE_NOTHROW(run_ranks(
          static_cast<int>(layout.size()),
          [&](const Environment& env) { failing_pipeline(env, layout, failing, which); },
          std::chrono::seconds(120)));
    }
  }
}

TEST_CASE("hierarchical collectives over 2 simulated hosts x 1-3 ranks and uneven hosts",
          "[hierarchical]") {
  cohort::test::TempDir dir;
  for (const std::vector<int>& layout : std::vector<std::vector<int>>{
           {0, 0, 1, 1}, {0, 1, 0}, {0, 0, 0, 1, 1, 1}, {0, 1, 1, 0, 1}, {0, 0, 1}}) {
    CAPTURE(layout.size());
    REQUIRE_NOTHROW(run_ranks(
        static_cast<int>(layout.size()),
        [&](const Environment& env) { sweep(env, layout, dir.path()); },
        std::chrono::seconds(240)));
  }
}

int main(int argc, char** argv) {
  // The ranks (forked from here) allocate 2.4 MB buffers per op: faulting them in afresh was a
  // third of the chunked test's time.
  cohort::test::keep_freed_memory_in_heap();
  if (!cohort::test::can_simulate_hosts()) {
    std::printf("needs root to simulate hosts with UTS namespaces: skipping\n");
    return 77;
  }
  return cohort::test::run_catch_session(argc, argv);
}
