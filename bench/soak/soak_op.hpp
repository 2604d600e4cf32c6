#pragma once

// One op of the plan on one rank: its buffers filled before the call (inputs from soak_data,
// outputs poisoned, guards around both), the call in its blocking or *_async form through the
// public Communicator, and the check afterwards. The check covers every output element, that
// inputs were not written, that buffers a rank passes but must not use (a non-root's reduce
// output, say) were left alone, and that nothing was written past any buffer's ends.
//
// In-place forms, as the Communicator documents them: the same buffer for allreduce, broadcast
// and alltoall; the input being this rank's block of the output for allgather(v) and, on the
// root, gather(v); the output being this rank's block of the input for reduce_scatter and, on
// the root, scatter(v).

#include "guarded_region.hpp"
#include "soak_data.hpp"
#include "soak_plan.hpp"

#include <cohort/communicator.hpp>
#include <cohort/work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cohort::soak {

/// A wrong result: the message names the op, the rank and the first wrong element.
class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PreparedOp {
 public:
  /// Allocates and fills this rank's buffers for `spec` on a communicator of `size` ranks where
  /// this rank is `rank`.
  PreparedOp(const OpSpec& spec, std::uint64_t seed, int rank, int size,
             std::chrono::milliseconds timeout);
  PreparedOp(const PreparedOp&) = delete;
  PreparedOp& operator=(const PreparedOp&) = delete;

  /// The blocking form (the ring exchange posts its send async, then receives blocking).
  void run(Communicator& comm);
  /// The *_async form: one Work, or two for the ring exchange (send, then receive).
  std::vector<Work> start(Communicator& comm);
  /// Throws CheckFailure when anything the op left is wrong.
  void check() const;

  const OpSpec& spec() const noexcept { return spec_; }
  /// "op #12 allreduce ... on <where> as rank r of n".
  std::string describe_on(const std::string& where) const;

 private:
  struct Expectation {
    const GuardedRegion* region;
    std::size_t first;
    std::size_t count;
    std::function<void(void*)> fill;  ///< writes the `count` expected elements
    std::string what;
  };

  void prepare();
  void expect(const GuardedRegion& region, std::size_t first, std::size_t count,
              std::function<void(void*)> fill, std::string what);
  /// `region` must still hold what `fill` wrote into it before the op.
  void expect_unchanged(const GuardedRegion& region, std::function<void(void*)> fill,
                        std::string what);
  /// `region` must still hold its poison.
  void expect_untouched(const GuardedRegion& region, std::string what);
  GuardedRegion make_region(std::size_t count) const;
  GuardedRegion make_filled(std::size_t count, const std::function<void(void*)>& fill) const;
  CollectiveOptions options() const;

  OpSpec spec_;
  DataSource source_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  GuardedRegion in_region_;
  GuardedRegion out_region_;
  Buffer in_;                             // what the call receives as its input
  Buffer out_;                            // and as its output
  std::vector<std::size_t> counts_;       // v-forms
  std::vector<std::size_t> recv_counts_;  // alltoallv
  std::vector<Expectation> expectations_;
};

}  // namespace cohort::soak
