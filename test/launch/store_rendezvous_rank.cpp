// One rank of a job started by a real launcher (mpirun, cohort-run): resolves its placement
// from the launcher's variables, reaches the job's store, and checks that every rank counted
// itself. Usage: store_rendezvous_rank <expected launcher source> (e.g. "openmpi", "cohort").
// Exits 0 when all checks pass; prints what failed otherwise.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace std::chrono_literals;

// The keys "<prefix>/0" .. "<prefix>/<world_size - 1>".
std::vector<std::string> rank_keys(const std::string& prefix, int world_size) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(prefix + "/" + std::to_string(r));
  return keys;
}

// Blocks until every key exists; false (after printing why) if `timeout` passes first.
bool wait_for_keys(cohort::Store& store, const std::vector<std::string>& keys,
                   std::chrono::milliseconds timeout, const char* what) {
  try {
    store.wait(keys, timeout);
    return true;
  } catch (const cohort::Error& e) {
    if (e.code() != cohort::ErrorCode::Timeout) throw;
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    return false;
  }
}

int run(const std::string& expected_source) {
  const cohort::Environment env = cohort::resolve_environment();
  std::printf("rank %d of %d via %s\n", env.rank, env.world_size,
              cohort::launch_source_name(env.source));
  if (expected_source != cohort::launch_source_name(env.source)) {
    std::fprintf(stderr, "expected launcher '%s', resolved '%s'\n", expected_source.c_str(),
                 cohort::launch_source_name(env.source));
    return 2;
  }
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "COHORT_RANK"}) {
    const char* value = std::getenv(name);
    if (value && std::atoi(value) != env.rank) {
      std::fprintf(stderr, "%s=%s but resolved rank %d\n", name, value, env.rank);
      return 3;
    }
  }

  const std::shared_ptr<cohort::Store> store = cohort::connect_store(env);
  // Each rank adds rank+1, so a rank counted twice or missed changes the total; then it says it
  // has arrived under its own key.
  store->add("rendezvous-test/sum", env.rank + 1);
  store->set_string("rendezvous-test/arrived/" + std::to_string(env.rank),
                    std::to_string(::getpid()));
  if (!wait_for_keys(*store, rank_keys("rendezvous-test/arrived", env.world_size), 60s,
                     "not every rank arrived"))
    return 4;
  const std::int64_t sum = store->add("rendezvous-test/sum", 0);
  const std::int64_t expected = std::int64_t{env.world_size} * (env.world_size + 1) / 2;
  if (sum != expected) {
    std::fprintf(stderr, "sum %lld, expected %lld\n", static_cast<long long>(sum),
                 static_cast<long long>(expected));
    return 5;
  }
  // Whoever hosts the store (rank 0 under mpirun) must outlive everyone's last call.
  store->set_string("rendezvous-test/done/" + std::to_string(env.rank), "1");
  if (env.rank == 0 && !wait_for_keys(*store, rank_keys("rendezvous-test/done", env.world_size),
                                      60s, "not every rank finished"))
    return 6;
  std::printf("rank %d: sum %lld ok\n", env.rank, static_cast<long long>(sum));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <expected launcher source>\n", argv[0]);
    return 64;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
