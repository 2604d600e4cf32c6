// Catch2 v2's implementation (it is header-only), compiled once for every test executable: those
// with Catch's usual main link catch_main.cpp as well, those with a main of their own (a skip
// check before the session starts) call run_catch_session.
#define CATCH_CONFIG_RUNNER
#include "catch_session.hpp"

#include <catch2/catch.hpp>

int cohort::test::run_catch_session(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}
