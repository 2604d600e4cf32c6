#include <catch2/catch.hpp>
TEST_CASE("p2p in-flight placeholder") { SUCCEED(); }
