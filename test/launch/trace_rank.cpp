// One rank of a job that goes wrong in a chosen way, for cohort-run's flight-record tests
// (cohort_run_trace_test.cpp). Usage: trace_rank <mode>, 3 ranks, every rank first running
// collectives #0-#2 together; then
//   ok        nothing more: the job succeeds (prints "trace dir: $COHORT_TRACE_DIR")
//   skip      rank 2 never calls allreduce #3 and blocks reading a pipe nobody writes; ranks
//             0 and 1 call it with a 2 s timeout and fail
//   mismatch  rank 1 calls broadcast #3 where ranks 0 and 2 call allreduce #3 (2 s timeouts)
// A rank whose collective fails exits 1 with the error on stderr.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <unistd.h>

namespace {

using namespace cohort;
using namespace std::chrono_literals;

// Collectives #0 (allreduce), #1 (barrier) and #2 (broadcast), the same on every rank.
void agree(Communicator& c) {
  Buffer b = Buffer::allocate(10, DType::Int32);
  c.allreduce(b, ReduceOp::Sum);
  c.barrier();
  c.broadcast(b, 0);
}

[[noreturn]] void block_forever() {
  int fds[2];
  if (::pipe(fds) != 0) std::exit(5);
  char byte;
  // Nobody writes: read() blocks until the launcher stops this rank (SIGUSR1 for the flight
  // record interrupts nothing: cohort's handler restarts the read).
  while (::read(fds[0], &byte, 1) != 0) {
  }
  std::exit(6);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_rank ok|skip|mismatch\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    auto c = init();
    agree(*c);
    CollectiveOptions two_seconds;
    two_seconds.timeout = 2s;
    Buffer f4 = Buffer::allocate(4, DType::Float32);
    if (mode == "ok") {
      const char* dir = std::getenv("COHORT_TRACE_DIR");
      std::printf("trace dir: %s\n", dir ? dir : "(unset)");
      return 0;
    }
    if (mode == "skip") {
      if (c->rank() == 2) block_forever();
      c->allreduce(f4, ReduceOp::Sum, two_seconds);
      return 0;
    }
    if (mode == "mismatch") {
      if (c->rank() == 1) {
        c->broadcast(f4, 0, two_seconds);
      } else {
        c->allreduce(f4, ReduceOp::Sum, two_seconds);
      }
      // A rank whose mismatched call happened to complete waits in the next one, as a real
      // program would, until the launcher stops it.
      c->barrier(two_seconds);
      return 0;
    }
    std::fprintf(stderr, "trace_rank: unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_rank: %s\n", e.what());
    return 1;
  }
}
