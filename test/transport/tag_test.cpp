// Tag layout (pure): fields land in their documented bit ranges, wrap instead of spilling into
// neighbours, and the source bits are what the transport adds.

#include "transport/tag.hpp"

#include <catch2/catch.hpp>

using namespace cohort::transport;

TEST_CASE("op_tag places communicator, sequence and step in their bit ranges", "[tag]") {
  const Tag tag = op_tag(0x5, 0x12345, 0xabc);
  CHECK(tag == ((Tag{0x5} << 52) | (Tag{0x12345} << 32) | (Tag{0xabc} << 20)));
  CHECK(tag_source(tag) == 0);
  CHECK(tag_seq(tag) == 0x12345);
  CHECK(tag_step(tag) == 0xabc);
  CHECK((tag & kP2PFlag) == 0);
}

TEST_CASE("op_tag fields wrap within their widths", "[tag]") {
  // 2^11 communicators, 2^20 sequence numbers, 2^12 steps.
  CHECK(op_tag(0x800, 0, 0) == op_tag(0, 0, 0));
  CHECK(op_tag(0x801, 7, 9) == op_tag(1, 7, 9));
  CHECK(op_tag(3, 0x100000 + 42, 5) == op_tag(3, 42, 5));
  CHECK(op_tag(3, 42, 0x1000 + 5) == op_tag(3, 42, 5));
  CHECK(tag_seq(op_tag(0x7ff, 0xfffff, 0xfff)) == 0xfffff);
  CHECK(tag_step(op_tag(0x7ff, 0xfffff, 0xfff)) == 0xfff);
  CHECK(op_tag(0x7ff, 0xfffff, 0xfff) == 0x7ffffffffff00000ULL);
}

TEST_CASE("distinct fields give distinct tags", "[tag]") {
  CHECK(op_tag(1, 2, 3) != op_tag(2, 2, 3));
  CHECK(op_tag(1, 2, 3) != op_tag(1, 3, 3));
  CHECK(op_tag(1, 2, 3) != op_tag(1, 2, 4));
  CHECK(p2p_tag(1, 2) != op_tag(1, 0, 2));
}

TEST_CASE("p2p_tag sets the flag and keeps the user tag in bits 51..20", "[tag]") {
  const Tag tag = p2p_tag(9, 0xdeadbeef);
  CHECK((tag & kP2PFlag) != 0);
  CHECK(tag == (Tag{1} << 63 | Tag{9} << 52 | Tag{0xdeadbeef} << 20));
  CHECK(tag_source(tag) == 0);
  CHECK(tag_user(tag) == 0xdeadbeef);
  CHECK(tag_user(with_source(p2p_tag(2047, 7), kMaxRanks - 1)) == 7);
}

TEST_CASE("with_source replaces only the 20 source bits", "[tag]") {
  const Tag base = op_tag(7, 1000, 17);
  CHECK(tag_source(with_source(base, 0)) == 0);
  CHECK(tag_source(with_source(base, 123456)) == 123456);
  CHECK(tag_source(with_source(base, kMaxRanks - 1)) == kMaxRanks - 1);
  CHECK((with_source(base, kMaxRanks - 1) & ~kSourceMask) == base);
  // Re-stamping overwrites, it does not OR.
  CHECK(with_source(with_source(base, 0xfffff), 5) == with_source(base, 5));
  CHECK(kSourceMask == 0xfffff);
  CHECK(kMaxRanks == 1048576u);
}
