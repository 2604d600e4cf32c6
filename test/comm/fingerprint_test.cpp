// The debug fingerprint's wire form and verdict, without a network: every rank computes the
// verdict from the same table, so it must be a pure function of it.

#include "comm/fingerprint.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace cohort;
using namespace cohort::comm;

namespace {

Fingerprint allreduce_fp(std::uint64_t count) {
  return {Collective::Allreduce, DType::Float32, ReduceOp::Sum, -1, count, {}, {}};
}

}  // namespace

TEST_CASE("fingerprint wire form round-trips every field", "[comm][unit]") {
  const int size = 5;
  Fingerprint fp{Collective::Alltoallv, DType::BFloat16, std::nullopt, 3, 77,
                 {1, 2, 3, 4, 5},       {9, 8, 7, 6, 5}};
  std::vector<std::uint8_t> wire(fingerprint_wire_bytes(size));
  encode_fingerprint(fp, size, wire.data());
  const Fingerprint back = decode_fingerprint(wire.data(), size);
  CHECK(back.kind == fp.kind);
  CHECK(back.dtype == fp.dtype);
  CHECK_FALSE(back.reduce_op.has_value());
  CHECK(back.root == 3);
  CHECK(back.count == 77);
  CHECK(back.counts == fp.counts);
  CHECK(back.recv_counts == fp.recv_counts);
  CHECK_FALSE(back.on_device);
  fp.on_device = true;
  encode_fingerprint(fp, size, wire.data());
  CHECK(decode_fingerprint(wire.data(), size).on_device);

  const Fingerprint barrier{Collective::Barrier, std::nullopt, std::nullopt, -1, 0, {}, {}};
  encode_fingerprint(barrier, size, wire.data());
  const Fingerprint b = decode_fingerprint(wire.data(), size);
  CHECK(b.kind == Collective::Barrier);
  CHECK_FALSE(b.dtype.has_value());
  CHECK(b.root == -1);
  CHECK(b.counts.empty());
}

TEST_CASE("fingerprint verdict names the ranks and the first differing field", "[comm][unit]") {
  std::vector<Fingerprint> table(4, allreduce_fp(10));
  CHECK_FALSE(find_fingerprint_mismatch(table).has_value());

  table[2].count = 12;
  CHECK(find_fingerprint_mismatch(table).value() ==
        "ranks disagree: rank 0 has count=10, rank 2 has count=12");

  table[3].dtype = DType::Float64;  // dtype is reported before count
  CHECK(find_fingerprint_mismatch(table).value() ==
        "ranks disagree: rank 0 has dtype=float, rank 3 has dtype=double");

  // The path is compared last: equal arguments, but rank 1's buffers are on a device.
  std::vector<Fingerprint> paths(3, allreduce_fp(10));
  paths[1].on_device = true;
  CHECK_THAT(find_fingerprint_mismatch(paths).value(),
             Catch::StartsWith("ranks disagree: rank 0 passed host buffers (host algorithms), "
                               "rank 1 passed device buffers (NCCL)"));
  // A forced host algorithm against a device op (which names none) is still the path's fault.
  paths[0].algorithm = paths[2].algorithm = Algorithm::Ring;
  CHECK_THAT(find_fingerprint_mismatch(paths).value(),
             Catch::StartsWith("ranks disagree: rank 0 passed host buffers"));
  paths[2].count = 11;  // a count mismatch says more
  CHECK(find_fingerprint_mismatch(paths).value() ==
        "ranks disagree: rank 0 has count=10, rank 2 has count=11");

  table[1].kind = Collective::Broadcast;  // the op itself comes first
  CHECK(find_fingerprint_mismatch(table).value() ==
        "ranks disagree: rank 0 called allreduce, rank 1 called broadcast");
}

TEST_CASE("fingerprint verdict for v-collectives compares counts arrays and alltoallv pairs",
          "[comm][unit]") {
  std::vector<Fingerprint> table(
      3, Fingerprint{Collective::Gatherv, DType::Int32, std::nullopt, 1, 0, {1, 0, 4}, {}});
  CHECK_FALSE(find_fingerprint_mismatch(table).has_value());
  table[2].counts = {1, 0, 5};
  CHECK(find_fingerprint_mismatch(table).value() ==
        "ranks disagree: rank 0 has counts=[1,0,4], rank 2 has counts=[1,0,5]");

  // alltoallv: rank i's send_counts[j] must equal rank j's recv_counts[i].
  std::vector<Fingerprint> a2a(
      2, Fingerprint{Collective::Alltoallv, DType::Int32, std::nullopt, -1, 0, {1, 2}, {1, 2}});
  a2a[1].counts = {2, 3};
  a2a[1].recv_counts = {2, 3};
  CHECK_FALSE(find_fingerprint_mismatch(a2a).has_value());
  a2a[1].recv_counts = {4, 3};
  CHECK(find_fingerprint_mismatch(a2a).value() ==
        "ranks disagree: rank 0 sends 2 elements to rank 1, but rank 1 expects 4 "
        "from rank 0");
}
