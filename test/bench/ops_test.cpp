// The ops table: names, busbw factors (nccl-tests' formulas, written out per op here), size
// semantics and which algorithms apply.

#include "ops.hpp"

#include <catch2/catch.hpp>

using namespace cohort;
using namespace cohort::bench;

TEST_CASE("op names round-trip and unknown names are rejected", "[bench][ops]") {
  for (BenchOp op : kAllBenchOps) {
    const auto parsed = bench_op_from_name(bench_op_name(op));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == op);
  }
  CHECK(bench_op_from_name("reducescatter") == BenchOp::ReduceScatter);
  CHECK_FALSE(bench_op_from_name("allreduc").has_value());
  CHECK_FALSE(bench_op_from_name("").has_value());
  CHECK(std::size(kAllBenchOps) == 10);
}

TEST_CASE("busbw factors follow nccl-tests for every op and world size", "[bench][ops]") {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16}) {
    INFO("world size " << n);
    const double nd = n;
    CHECK(busbw_factor(BenchOp::Allreduce, n) == Approx(2.0 * (nd - 1) / nd));
    CHECK(busbw_factor(BenchOp::Allgather, n) == Approx((nd - 1) / nd));
    CHECK(busbw_factor(BenchOp::ReduceScatter, n) == Approx((nd - 1) / nd));
    CHECK(busbw_factor(BenchOp::Alltoall, n) == Approx((nd - 1) / nd));
    CHECK(busbw_factor(BenchOp::Gather, n) == Approx((nd - 1) / nd));
    CHECK(busbw_factor(BenchOp::Scatter, n) == Approx((nd - 1) / nd));
    CHECK(busbw_factor(BenchOp::Broadcast, n) == 1.0);
    CHECK(busbw_factor(BenchOp::Reduce, n) == 1.0);
    CHECK(busbw_factor(BenchOp::Send, n) == 1.0);
    CHECK(busbw_factor(BenchOp::Barrier, n) == 0.0);
  }
  // Spot values: 4 ranks allreduce moves 1.5x the payload per link, 8 ranks allgather 7/8.
  CHECK(busbw_factor(BenchOp::Allreduce, 4) == Approx(1.5));
  CHECK(busbw_factor(BenchOp::Allgather, 8) == Approx(0.875));
  CHECK(busbw_factor(BenchOp::Allreduce, 1) == 0.0);
}

TEST_CASE("op properties", "[bench][ops]") {
  CHECK(op_reduces(BenchOp::Allreduce));
  CHECK(op_reduces(BenchOp::Reduce));
  CHECK(op_reduces(BenchOp::ReduceScatter));
  CHECK_FALSE(op_reduces(BenchOp::Allgather));
  CHECK_FALSE(op_reduces(BenchOp::Send));
  CHECK(op_has_root(BenchOp::Broadcast));
  CHECK(op_has_root(BenchOp::Gather));
  CHECK_FALSE(op_has_root(BenchOp::Alltoall));
  CHECK_FALSE(op_has_in_place(BenchOp::Send));
  CHECK_FALSE(op_has_in_place(BenchOp::Barrier));
  CHECK(op_has_in_place(BenchOp::Scatter));
  CHECK_FALSE(op_moves_data(BenchOp::Barrier));
  CHECK_FALSE(op_collective(BenchOp::Send).has_value());
  CHECK(op_collective(BenchOp::ReduceScatter) == Collective::ReduceScatter);
}

TEST_CASE("algorithms that apply to each op", "[bench][ops]") {
  CHECK(algorithm_applies(BenchOp::Allreduce, Algorithm::Ring));
  CHECK(algorithm_applies(BenchOp::Allreduce, Algorithm::Rabenseifner));
  CHECK_FALSE(algorithm_applies(BenchOp::Allreduce, Algorithm::Tree));
  CHECK(algorithm_applies(BenchOp::Broadcast, Algorithm::ScatterAllgather));
  CHECK(algorithm_applies(BenchOp::Alltoall, Algorithm::Pairwise));
  CHECK_FALSE(algorithm_applies(BenchOp::Alltoall, Algorithm::Ring));
  CHECK(algorithm_applies(BenchOp::Barrier, Algorithm::Dissemination));
  CHECK(op_algorithms(BenchOp::Send).empty());
  for (BenchOp op : kAllBenchOps) CHECK(algorithm_applies(op, Algorithm::Auto));
  // ring, recursive doubling, Bruck, shared memory, hierarchical, single copy.
  CHECK(op_algorithms(BenchOp::Allgather).size() == 6);
  CHECK(algorithm_applies(BenchOp::Alltoall, Algorithm::SingleCopy));
  CHECK(algorithm_applies(BenchOp::Allreduce, Algorithm::SingleCopy));
  CHECK(algorithm_applies(BenchOp::Reduce, Algorithm::SingleCopy));
  CHECK(algorithm_applies(BenchOp::ReduceScatter, Algorithm::SingleCopy));
  CHECK_FALSE(algorithm_applies(BenchOp::Barrier, Algorithm::SingleCopy));
  CHECK(algorithm_applies(BenchOp::ReduceScatter, Algorithm::Hierarchical));
  CHECK(algorithm_applies(BenchOp::Reduce, Algorithm::Hierarchical));
  CHECK_FALSE(algorithm_applies(BenchOp::Gather, Algorithm::Hierarchical));
  // Every collective has a shared-memory algorithm (the list comes from the library's registry;
  // a hand-kept copy here once missed alltoall's, gather's and scatter's).
  for (BenchOp op : {BenchOp::Allreduce, BenchOp::Broadcast, BenchOp::Reduce, BenchOp::Allgather,
                     BenchOp::ReduceScatter, BenchOp::Alltoall, BenchOp::Gather, BenchOp::Scatter,
                     BenchOp::Barrier})
    CHECK(algorithm_applies(op, Algorithm::SharedMemory));
  CHECK_FALSE(algorithm_applies(BenchOp::Send, Algorithm::SharedMemory));
}

TEST_CASE("sizes map to buffer counts as in nccl-tests", "[bench][ops]") {
  SECTION("allreduce: one count on both sides") {
    const OpShape s = op_shape(BenchOp::Allreduce, 1024, 4, 3, 1);
    CHECK(s.size_bytes == 1024);
    CHECK(s.count == 256);
    CHECK(s.in_count == 256);
    CHECK(s.out_count == 256);
    CHECK(s.inplace_count == 256);
    CHECK(s.in_offset == 0);
    CHECK(s.out_offset == 0);
  }
  SECTION("allgather: size is the gathered output, rounded to a multiple of the world") {
    const OpShape s = op_shape(BenchOp::Allgather, 1000, 4, 3, 2);
    // 1000 B = 250 floats -> 83 per rank -> 249 floats = 996 B.
    CHECK(s.in_count == 83);
    CHECK(s.out_count == 249);
    CHECK(s.count == 249);
    CHECK(s.size_bytes == 996);
    CHECK(s.in_offset == 2 * 83);
    CHECK(s.inplace_count == 249);
  }
  SECTION("reduce_scatter and scatter: size is the full input") {
    for (BenchOp op : {BenchOp::ReduceScatter, BenchOp::Scatter}) {
      const OpShape s = op_shape(op, 4096, 8, 4, 3);
      CHECK(s.in_count == 512);
      CHECK(s.out_count == 128);
      CHECK(s.out_offset == 3 * 128);
      CHECK(s.size_bytes == 4096);
    }
  }
  SECTION("alltoall: equal counts, divisible by the world") {
    const OpShape s = op_shape(BenchOp::Alltoall, 100, 2, 7, 0);
    CHECK(s.in_count == 49);
    CHECK(s.out_count == 49);
    CHECK(s.size_bytes == 98);
  }
  SECTION("a size too small for every rank rounds to zero") {
    const OpShape s = op_shape(BenchOp::Gather, 8, 4, 3, 0);
    CHECK(s.size_bytes == 0);
    CHECK(s.in_count == 0);
    CHECK(s.out_count == 0);
  }
  SECTION("odd bytes round down to whole elements") {
    CHECK(op_shape(BenchOp::Broadcast, 15, 4, 2, 0).size_bytes == 12);
    CHECK(op_shape(BenchOp::Send, 15, 1, 2, 0).count == 15);
  }
  SECTION("barrier moves nothing") {
    const OpShape s = op_shape(BenchOp::Barrier, 1 << 20, 4, 4, 0);
    CHECK(s.size_bytes == 0);
    CHECK(s.in_count == 0);
  }
}
