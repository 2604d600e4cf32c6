#pragma once

// Runs the Catch2 session (catch_session.cpp holds Catch's implementation). For test executables
// with a main of their own: Catch2 v2 declares Catch::Session only where its implementation is
// compiled.

namespace cohort::test {

/// Catch::Session().run(argc, argv): runs the selected test cases and returns the exit status.
int run_catch_session(int argc, char** argv);

}  // namespace cohort::test
