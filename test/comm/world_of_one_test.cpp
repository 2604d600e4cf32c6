// init() with no launcher and no variables: a world of one whose collectives are copies, plus
// argument checks that need no peers. Runs in-process.

#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include "core/tunables.hpp"
#include "reduce/dispatch.hpp"
#include "reduce/reduce.hpp"
#include "support/scoped_env.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using cohort::test::clear_launcher_variables;

using namespace cohort;

std::vector<float> iota(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("init() without a launcher gives a world of one whose collectives copy", "[comm][unit]") {
  clear_launcher_variables();
  auto c = init();
  REQUIRE(c);
  CHECK(c->rank() == 0);
  CHECK(c->size() == 1);
  CHECK(c->id() == 0);
  CHECK(c->default_timeout() == std::chrono::seconds(600));

  std::vector<float> in = iota(100, 1.0f), out(100, 0.0f);
  const Buffer bin = Buffer::view(static_cast<const void*>(in.data()), 100, DType::Float32);
  const Buffer bout = Buffer::view(out.data(), 100, DType::Float32);

  c->allreduce(bin, bout, ReduceOp::Sum);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->allreduce(bin, bout, ReduceOp::Avg);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->broadcast(bin, bout, 0);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->reduce(bin, bout, ReduceOp::Max, 0);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->allgather(bin, bout);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->gather(bin, bout, 0);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->scatter(bin, bout, 0);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->reduce_scatter(bin, bout, ReduceOp::Sum);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->alltoall(bin, bout);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  const std::size_t counts[] = {100};
  c->allgatherv(bin, bout, counts);
  CHECK(out == in);
  std::fill(out.begin(), out.end(), 0.0f);
  c->alltoallv(bin, counts, bout, counts);
  CHECK(out == in);
  c->barrier();
  Work w = c->allreduce_async(bout, bout, ReduceOp::Prod);
  w.wait();
  CHECK(w.test());
  CHECK(out == in);

  // Sub-communicators of a world of one.
  auto copy = c->dup();
  REQUIRE(copy);
  CHECK(copy->size() == 1);
  CHECK(copy->id() != c->id());
  CHECK_FALSE(c->split(Communicator::kNoColor, 0));

  // Argument checks that need no peers, each naming the bad value.
  const auto invalid = [](auto&& fn, const char* needle) {
    try {
      fn();
      FAIL("no error for " << needle);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.message(), Catch::Contains(needle));
    }
  };
  invalid([&] { c->broadcast(bout, 1); }, "root 1 is out of range for a communicator of size 1");
  invalid([&] { c->allreduce(bout, bin, ReduceOp::Sum); }, "output is read-only");
  invalid([&] { c->allreduce(bin, Buffer::allocate(7, DType::Float32), ReduceOp::Sum); },
          "output has 7 elements, expected 100");
  invalid([&] { c->allreduce(bin, Buffer::allocate(100, DType::Int32), ReduceOp::Sum); },
          "input dtype float differs from output dtype int32");
  invalid([&] { c->allreduce(bout, ReduceOp::BAnd); }, "band is not defined for dtype float");
  const std::size_t two[] = {50, 50};
  invalid([&] { c->allgatherv(bin, bout, two); }, "counts has 2 entries, expected 1");
  // Partial overlap that is not an in-place form.
  invalid(
      [&] {
        c->allreduce(Buffer::view(out.data(), 50, DType::Float32),
                     Buffer::view(out.data() + 10, 50, DType::Float32), ReduceOp::Sum);
      },
      "overlap");
  // A broadcast root's input partly overlapping its output (the same buffer is in place).
  invalid(
      [&] {
        c->broadcast(Buffer::view(out.data(), 50, DType::Float32),
                     Buffer::view(out.data() + 1, 50, DType::Float32), 0);
      },
      "broadcast: input and output overlap");
  // Deadlines beyond a year would overflow the clock arithmetic: refused, op and wait alike.
  CollectiveOptions forever;
  forever.timeout = std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max());
  invalid([&] { c->allreduce(bout, ReduceOp::Sum, forever); }, "more than one year");
  forever.timeout = kMaxTimeout;
  c->allreduce(bout, ReduceOp::Sum, forever);  // a year itself is accepted
  invalid([&] { c->barrier_async().wait(kMaxTimeout + std::chrono::milliseconds(1)); },
          "not between 0 and one year");
  // A poisoned-free communicator still works after all that.
  c->allreduce(bout, ReduceOp::Sum);
  CHECK(out == in);
  // Point-to-point needs another rank, for sendrecv as for send and recv.
  invalid([&] { c->sendrecv(bin, 0, bout, 0, 3); }, "peer 0 is this rank");
}

TEST_CASE("COHORT_TIMEOUT sets the default timeout; a bad value is named", "[comm][unit]") {
  clear_launcher_variables();
  ::setenv("COHORT_TIMEOUT", "2.5", 1);
  CHECK(init()->default_timeout() == std::chrono::milliseconds(2500));
  InitOptions options;
  options.communicator.timeout = std::chrono::milliseconds(1234);
  CHECK(init(options)->default_timeout() == std::chrono::milliseconds(1234));
  ::setenv("COHORT_TIMEOUT", "soon", 1);
  try {
    init();
    FAIL("COHORT_TIMEOUT=soon accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("COHORT_TIMEOUT='soon'"));
  }
  ::unsetenv("COHORT_TIMEOUT");
}

TEST_CASE("init() applies COHORT_KERNEL_ISA after the kernels have run", "[comm][unit]") {
  // A kernel that ran before init used the widest ISA (nothing set); init must switch to the
  // one set since, as it does for every tunable it reads afresh.
  clear_launcher_variables();
  ::unsetenv("COHORT_KERNEL_ISA");
  reload_tunables();
  reduce::apply_kernel_isa_tunable();
  float sum[4] = {1, 2, 3, 4};
  const float more[4] = {4, 3, 2, 1};
  reduce::reduce_into(ReduceOp::Sum, DType::Float32, sum, more, 4);
  CHECK(sum[0] == 5.0f);
  REQUIRE(std::string(reduce::active_isa()) == reduce::isa_name(reduce::detected_isa()));
  ::setenv("COHORT_KERNEL_ISA", "portable", 1);
  auto c = init();
  CHECK(std::string(reduce::active_isa()) == "portable");
  std::vector<float> in = iota(1031, 1.0f), out(1031, 0.0f);
  c->allreduce(Buffer::view(static_cast<const void*>(in.data()), in.size(), DType::Float32),
               Buffer::view(out.data(), out.size(), DType::Float32), ReduceOp::Sum);
  CHECK(out == in);
  ::unsetenv("COHORT_KERNEL_ISA");
  CHECK(init());
  CHECK(std::string(reduce::active_isa()) == reduce::isa_name(reduce::detected_isa()));
}

TEST_CASE(
    "a forced algorithm of another collective is refused on the caller's thread and leaves "
    "the communicator usable",
    "[comm][unit]") {
  clear_launcher_variables();
  auto c = init();
  auto data = iota(8, 1.0f);
  const Buffer buf = Buffer::view(data.data(), data.size(), DType::Float32);
  CollectiveOptions tree;
  tree.algorithm = Algorithm::Tree;  // broadcast/reduce/gather/scatter have it; allreduce does not
  try {
    c->allreduce(buf, buf, ReduceOp::Sum, tree);
    FAIL("allreduce accepted a forced tree");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    const std::string m = e.message();
    CHECK(m.find("'tree'") != std::string::npos);
    CHECK(m.find("allreduce") != std::string::npos);
    CHECK(m.find("ring") != std::string::npos);  // lists what allreduce does implement
  }
  CollectiveOptions pairwise;
  pairwise.algorithm = Algorithm::Pairwise;
  CHECK_THROWS_AS(c->allgather_async(buf, buf, pairwise), Error);
  // Nothing was queued or poisoned: later ops (including a valid forced one) run.
  c->allreduce(buf, buf, ReduceOp::Sum);
  tree.algorithm = Algorithm::Ring;
  c->allreduce(buf, buf, ReduceOp::Sum, tree);
  c->barrier();
  CHECK(data[0] == 1.0f);  // a world of one sums one contribution
  CHECK(data[7] == 8.0f);
}
