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
#include <thread>

namespace {

using namespace std::chrono_literals;

// Polls a counter (add 0) until it reaches `target`; false after `timeout`.
bool wait_for_count(cohort::Store& store, const std::string& key, std::int64_t target,
                    std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (store.add(key, 0) < target) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
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
  // Each rank adds rank+1, so a rank counted twice or missed changes the total.
  store->add("rendezvous-test/sum", env.rank + 1);
  store->add("rendezvous-test/arrived", 1);
  if (!wait_for_count(*store, "rendezvous-test/arrived", env.world_size, 60s)) {
    std::fprintf(stderr, "not every rank arrived\n");
    return 4;
  }
  const std::int64_t sum = store->add("rendezvous-test/sum", 0);
  const std::int64_t expected = std::int64_t{env.world_size} * (env.world_size + 1) / 2;
  if (sum != expected) {
    std::fprintf(stderr, "sum %lld, expected %lld\n", static_cast<long long>(sum),
                 static_cast<long long>(expected));
    return 5;
  }
  // Whoever hosts the store (rank 0 under mpirun) must outlive everyone's last call.
  store->add("rendezvous-test/done", 1);
  if (!wait_for_count(*store, "rendezvous-test/done", env.rank == 0 ? env.world_size : 0, 60s)) {
    std::fprintf(stderr, "not every rank finished\n");
    return 6;
  }
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
