// cohort-soak: thousands of random collectives, every result checked, for runs longer than the
// soak test's. Run it under a launcher:
//
//   cohort-run -n 4 -- cohort-soak --ops 100000 --seed 7
//   cohort-run -n 4 --grace 120 -- cohort-soak --ops 5000 --seed 7 --kill-at 2500 --timeout 20
//
// Every rank draws the same plan from --seed (see soak_plan.hpp). With --kill-at, one rank
// (--kill-rank, or one the seed picks) SIGKILLs itself at that op and every other rank must end
// with a clear error within --timeout. cohort-run then SIGTERMs the survivors, which ignore it
// so they can report: give cohort-run a --grace longer than three op timeouts. A failure names
// the op, its communicator and the seed; rerunning with the same seed and rank count replays it.

#include "soak_session.hpp"

#include <cohort/communicator.hpp>
#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

namespace {

using namespace cohort;
using namespace cohort::soak;

struct CommandLine {
  std::uint64_t ops = 2000;
  std::uint64_t seed = 1;
  double timeout_s = 30;
  std::size_t max_count = 1u << 17;
  std::optional<std::uint64_t> kill_at;
  std::optional<int> kill_rank;
  std::string kill_moment = "before";
  std::uint64_t progress = 500;
};

int run(const CommandLine& cli) {
  const Environment env = resolve_environment();
  SessionOptions session;
  session.soak.seed = cli.seed;
  session.soak.ops = cli.ops;
  session.soak.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cli.timeout_s * 1000));
  session.soak.max_count = cli.max_count;
  session.progress_every = cli.progress;
  if (cli.kill_at) {
    if (env.world_size < 2)
      throw Error(ErrorCode::InvalidArgument, "--kill-at needs 2 or more ranks");
    if (*cli.kill_at >= cli.ops)
      throw Error(ErrorCode::InvalidArgument, "--kill-at must be below --ops");
    KillPlan kill = kill_for_seed(cli.seed, env.world_size, cli.ops);
    kill.at_op = *cli.kill_at;
    if (cli.kill_rank) {
      if (*cli.kill_rank < 0 || *cli.kill_rank >= env.world_size)
        throw Error(ErrorCode::InvalidArgument, "--kill-rank is not a rank of this job");
      kill.victim = *cli.kill_rank;
    }
    kill.moment = cli.kill_moment == "during" ? KillMoment::DuringOp : KillMoment::BeforeOp;
    session.soak.kill = kill;
    // The launcher stops the job once the victim dies; survivors stay to report their error.
    std::signal(SIGTERM, SIG_IGN);
  }
  if (env.rank == 0) {
    std::cout << "cohort-soak: " << env.world_size << " ranks, seed " << cli.seed << ", " << cli.ops
              << " ops, timeout " << cli.timeout_s << " s";
    if (session.soak.kill)
      std::cout << ", rank " << session.soak.kill->victim << " killed "
                << (session.soak.kill->moment == KillMoment::DuringOp ? "during" : "before")
                << " op #" << session.soak.kill->at_op;
    std::cout << std::endl;
  }
  std::shared_ptr<Store> store = connect_store(env);
  CommunicatorOptions comm_options;
  comm_options.timeout = session.soak.timeout;
  auto world = Communicator::create(env, store, comm_options);
  return run_session(world, *store, session, std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cohort-soak: random collectives on every rank, every result checked",
               "cohort-soak"};
  CommandLine cli;
  app.add_option("--ops", cli.ops, "ops to draw")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", cli.seed, "plan seed (the same on every rank)")->capture_default_str();
  app.add_option("--timeout", cli.timeout_s, "op timeout in seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-count", cli.max_count, "largest element count an op draws")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--kill-at", cli.kill_at,
                 "a rank SIGKILLs itself at this op index; the others must fail cleanly");
  app.add_option("--kill-rank", cli.kill_rank, "the rank --kill-at kills (default: seed-chosen)");
  app.add_option("--kill-moment", cli.kill_moment, "before|during the op")
      ->capture_default_str()
      ->check(CLI::IsMember({"before", "during"}));
  app.add_option("--progress", cli.progress, "rank 0 prints progress every this many ops (0: off)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(cli);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort-soak: error: %s\n", e.what());
    return 2;
  }
}
