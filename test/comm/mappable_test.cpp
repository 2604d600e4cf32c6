// Allreduces over mappable buffers (Buffer::allocate_mappable) through the public API on real
// processes: where a rank fails in the middle of the in-place scheme, its peers write nothing
// more into its output, and no rank hands the op's buffers out again after freeing them. The
// ordering comes from store keys and a testing hook in the
// algorithm, never from sleeping.

#include "rank_checks.hpp"
#include "support/cross_process_reads.hpp"
#include "support/scoped_env.hpp"

#include "algorithms/engines/single_copy.hpp"
#include "core/mappable_memory.hpp"

#include <cohort/store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

/// 2 MiB of float32: 8 pieces of 128 KiB per rank's share on 2 ranks.
constexpr std::size_t kCount = 512 * 1024;
constexpr float kPoison = -7.0f;

/// The store the hooks below order the ranks through (one per rank process).
std::shared_ptr<Store> g_store;

/// Rank 0 fails as it is about to write its first piece; the others wait, before writing
/// theirs, until rank 0's call has returned with that failure.
void fail_rank_zero_first(int rank, std::size_t piece) {
  if (piece != 0) return;
  if (rank == 0) throw std::runtime_error("injected failure before rank 0's first piece");
  g_store->wait({"rank 0 failed"}, 30s);
}

}  // namespace

TEST_CASE("mappable buffers: peers stop writing the output of a rank that failed mid-op",
          "[comm][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  const ScopedEnv shared{"COHORT_SHARED_MEMORY", "auto"};
  const ScopedEnv single{"COHORT_SINGLE_COPY", "auto"};
  const ScopedEnv algo{"COHORT_ALGO", std::nullopt};
  const ScopedEnv kept{"COHORT_MAPPABLE_CACHE_MIB", std::nullopt};  // the default: keeps
  if (!siblings_can_read_each_other()) {
    WARN("this machine does not let ranks read each other's memory: no single copy to test");
    return;
  }
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    g_store = connect_store(env);
    auto c = Communicator::create(env, g_store);
    cohort::release_cached_mappable();  // anything kept by the process this rank forked from
    Buffer in = Buffer::allocate_mappable(kCount, DType::Float32);
    Buffer out = Buffer::allocate_mappable(kCount, DType::Float32);
    auto* data = static_cast<float*>(in.data());
    auto* result = static_cast<float*>(out.data());
    for (std::size_t i = 0; i < kCount; ++i) {
      data[i] = 1.0f;
      result[i] = kPoison;
    }
    algorithms::testing::set_mapped_piece_hook(&fail_rank_zero_first);
    CollectiveOptions options;
    options.algorithm = Algorithm::SingleCopy;
    options.timeout = 60s;
    bool failed = false;
    try {
      c->allreduce(in, out, ReduceOp::Sum, options);
    } catch (const std::exception& e) {
      failed = true;
      if (env.rank == 0) {
        RANK_CHECK(std::string(e.what()).find("injected failure") != std::string::npos,
                   "rank 0 failed with: " << e.what());
      } else {
        // A peer learns of rank 0's failure at its check before writing, not at a deadline.
        const auto* error = dynamic_cast<const Error*>(&e);
        RANK_CHECK(error != nullptr && error->code() == ErrorCode::RemoteError,
                   "rank " << env.rank << " failed with: " << e.what());
      }
    }
    algorithms::testing::set_mapped_piece_hook(nullptr);
    if (env.rank != 0) g_store->set_string("rank " + std::to_string(env.rank) + " returned", "1");
    RANK_CHECK(failed, "rank " << env.rank << "'s allreduce returned normally");
    RANK_CHECK(algorithms::testing::mapped_allreduces() == 0,
               "an allreduce counted as done in place");
    if (env.rank == 0) {
      g_store->set_string("rank 0 failed", "1");
      // Every peer has returned from its call: nothing of theirs may have reached this output.
      for (int r = 1; r < env.world_size; ++r)
        g_store->wait({"rank " + std::to_string(r) + " returned"}, 60s);
      for (std::size_t i = 0; i < kCount; ++i)
        RANK_CHECK(result[i] == kPoison,
                   "element " << i << " of rank 0's output was written: " << result[i]);
    }
    // Buffers live at the failure are not kept for reuse (a peer may still be writing into
    // them); one allocated after it is.
    in = Buffer();
    out = Buffer();
    RANK_CHECK(cohort::cached_mappable_bytes() == 0,
               "rank " << env.rank << " kept a buffer of the failed op for reuse");
    Buffer::allocate_mappable(kCount, DType::Float32);
    RANK_CHECK(cohort::cached_mappable_bytes() == kCount * sizeof(float),
               "rank " << env.rank << " kept " << cohort::cached_mappable_bytes()
                       << " bytes after freeing a buffer allocated after the failure");
    g_store.reset();
  }));
}
