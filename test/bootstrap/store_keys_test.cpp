// The job's store does not grow with the communicators a job makes. Every key the library
// writes is either erased once its last reader has read it (a world's transport addresses and
// id) or one of a bounded set that lives as long as the store:
//   cohort/world/created/<rank>   one counter per rank: how many worlds it has created
//   cohort/comm/next_id           the communicator id counter
// cohort::launch() itself writes no key. So after any number of worlds (each split and dup'ed,
// which must not touch the store at all) the count is world size + 1.

#include "comm/rank_checks.hpp"

#include <cohort/environment.hpp>

#include <catch2/catch.hpp>

namespace {

using namespace cohort;
using namespace cohort::test;

// Every rank has finished everything before this call, and starts nothing before every rank
// has returned from it.
void barrier(Communicator& world) {
  std::int64_t one = 1;
  world.allreduce(Buffer::view(&one, 1, DType::Int64), ReduceOp::Sum);
  RANK_CHECK(one == world.size(), "barrier allreduce gave " << one);
}

}  // namespace

TEST_CASE("creating and destroying worlds leaves a bounded number of store keys",
          "[store][multiproc]") {
  const int size = GENERATE(1, 2, 3);
  constexpr int kWorlds = 12;
  INFO(size << " ranks");
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    const std::int64_t expected = env.world_size + 1;
    const std::shared_ptr<Store> store = connect_store(env);
    for (int i = 0; i < kWorlds; ++i) {
      const std::shared_ptr<Communicator> world = Communicator::create(env, store);
      const std::shared_ptr<Communicator> half = world->split(world->rank() % 2, 0);
      const std::shared_ptr<Communicator> copy = world->dup();
      barrier(*copy);
      // From the second world on the id counter exists (the first may not need it).
      if (i == 0) continue;
      // Count between two barriers: every rank has finished creating this world (and erased
      // what it could), and none has started the next.
      barrier(*world);
      if (env.rank == 0) {
        const std::int64_t keys = store->num_keys();
        RANK_CHECK(keys == expected, "after world " << i + 1 << " the store holds " << keys
                                                    << " keys, expected " << expected);
      }
      barrier(*world);
    }
  }));
}
