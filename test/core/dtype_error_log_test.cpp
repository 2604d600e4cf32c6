// Name tables and small contracts of lib/core: dtype names and aliases, reduce-op names and
// support, error-code names, Error::what() format, errno conversion, log level parsing.

#include <cohort/dtype.hpp>
#include <cohort/error.hpp>
#include <cohort/log.hpp>

#include "core/decimal_count_up.hpp"
#include "core/log.hpp"
#include "core/system_error.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <string>

using namespace cohort;

TEST_CASE("dtype names round trip and match nccl-tests", "[dtype]") {
  // Written out from the contract in dtype.hpp, not derived from the table under test.
  const struct {
    DType dtype;
    const char* name;
    std::size_t size;
  } expected[] = {
      {DType::Float32, "float", 4},       {DType::Float64, "double", 8},
      {DType::Float16, "half", 2},        {DType::BFloat16, "bfloat16", 2},
      {DType::Float8E4M3, "fp8_e4m3", 1}, {DType::Float8E5M2, "fp8_e5m2", 1},
      {DType::Int8, "int8", 1},           {DType::UInt8, "uint8", 1},
      {DType::Int16, "int16", 2},         {DType::Int32, "int32", 4},
      {DType::Int64, "int64", 8},         {DType::UInt32, "uint32", 4},
      {DType::UInt64, "uint64", 8},       {DType::Bool, "bool", 1},
  };
  REQUIRE(std::size(expected) == std::size(kAllDTypes));
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    const auto& e = expected[i];
    INFO(e.name);
    CHECK(kAllDTypes[i] == e.dtype);
    CHECK(dtype_name(e.dtype) == e.name);
    CHECK(dtype_size(e.dtype) == e.size);
    CHECK(dtype_from_name(e.name) == e.dtype);
  }
}

TEST_CASE("dtype aliases parse, unknown names do not", "[dtype]") {
  const struct {
    const char* alias;
    DType dtype;
  } aliases[] = {{"f32", DType::Float32},     {"float32", DType::Float32},
                 {"fp32", DType::Float32},    {"f64", DType::Float64},
                 {"float64", DType::Float64}, {"fp16", DType::Float16},
                 {"float16", DType::Float16}, {"f16", DType::Float16},
                 {"bf16", DType::BFloat16},   {"float8_e4m3fn", DType::Float8E4M3},
                 {"e4m3", DType::Float8E4M3}, {"float8_e5m2", DType::Float8E5M2},
                 {"e5m2", DType::Float8E5M2}, {"i8", DType::Int8},
                 {"u8", DType::UInt8},        {"i32", DType::Int32},
                 {"int", DType::Int32},       {"i64", DType::Int64},
                 {"u64", DType::UInt64},      {"boolean", DType::Bool}};
  for (const auto& a : aliases) {
    INFO(a.alias);
    CHECK(dtype_from_name(a.alias) == a.dtype);
  }
  for (const char* bad : {"", "float128", "FLOAT", "uint16", "complex64", " float", "f 32"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(dtype_from_name(bad).has_value());
  }
}

TEST_CASE("dtype classification", "[dtype]") {
  const std::set<DType> floating{DType::Float32,  DType::Float64,    DType::Float16,
                                 DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2};
  for (const DType d : kAllDTypes) {
    INFO(dtype_name(d));
    CHECK(dtype_is_floating(d) == (floating.count(d) == 1));
    CHECK(dtype_is_integer(d) == (floating.count(d) == 0 && d != DType::Bool));
  }
}

TEST_CASE("reduce op names and support", "[dtype]") {
  const char* names[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};
  REQUIRE(std::size(names) == std::size(kAllReduceOps));
  for (std::size_t i = 0; i < std::size(names); ++i) {
    CHECK(reduce_op_name(kAllReduceOps[i]) == names[i]);
    CHECK(reduce_op_from_name(names[i]) == kAllReduceOps[i]);
  }
  CHECK(reduce_op_from_name("mean") == ReduceOp::Avg);
  CHECK_FALSE(reduce_op_from_name("add").has_value());
  CHECK_FALSE(reduce_op_from_name("").has_value());
  for (const DType d : kAllDTypes) {
    INFO(dtype_name(d));
    const bool floating = dtype_is_floating(d);
    CHECK(reduce_op_supports(ReduceOp::Sum, d));
    CHECK(reduce_op_supports(ReduceOp::Max, d));
    CHECK(reduce_op_supports(ReduceOp::BXor, d) == !floating);
    CHECK(reduce_op_supports(ReduceOp::BAnd, d) == !floating);
    CHECK(reduce_op_supports(ReduceOp::Avg, d) == (d != DType::Bool));
  }
}

TEST_CASE("error codes have stable names and Error::what is '<code>: <message>'", "[error]") {
  const struct {
    ErrorCode code;
    const char* name;
  } codes[] = {{ErrorCode::InvalidArgument, "invalid_argument"},
               {ErrorCode::InvalidUsage, "invalid_usage"},
               {ErrorCode::Unsupported, "unsupported"},
               {ErrorCode::Timeout, "timeout"},
               {ErrorCode::RemoteError, "remote_error"},
               {ErrorCode::SystemError, "system_error"},
               {ErrorCode::Internal, "internal"}};
  for (const auto& c : codes) {
    CHECK(error_code_name(c.code) == c.name);
    const Error e(c.code, "root 7 is out of range");
    CHECK(e.code() == c.code);
    CHECK(e.message() == "root 7 is out of range");
    CHECK(std::string(e.what()) == std::string(c.name) + ": root 7 is out of range");
  }
  // Catchable as the standard base class.
  CHECK_THROWS_AS(throw Error(ErrorCode::Timeout, "x"), std::runtime_error);
}

TEST_CASE("an error's context is fields, formatted once; outer layers add what they know",
          "[error]") {
  // What a transport knows: the op's label and the peer.
  const Error inner(ErrorCode::Timeout, "deadline passed waiting for rank 2",
                    ErrorContext{.op = "allreduce #17", .peers = {2}});
  CHECK(inner.message() == "allreduce #17: deadline passed waiting for rank 2");
  CHECK(inner.detail() == "deadline passed waiting for rank 2");
  // The dispatcher adds the algorithm that was running.
  const Error with_algorithm = inner.with_context(ErrorContext{.algorithm = "ring"});
  CHECK(with_algorithm.message() == "allreduce #17 (ring): deadline passed waiting for rank 2");
  // The communicator names the op as fields; algorithm and peers from below are kept.
  const Error full = with_algorithm.with_context(
      ErrorContext{.op = "allreduce", .sequence = 17, .communicator = 3, .algorithm = "tree"});
  CHECK(full.message() == "allreduce #17 (ring): deadline passed waiting for rank 2");
  CHECK(full.context().op == "allreduce");
  CHECK(full.context().sequence == 17u);
  CHECK(full.context().communicator == 3u);
  CHECK(full.context().algorithm == "ring");
  REQUIRE(full.context().peers.size() == 1);
  CHECK(full.context().peers[0] == 2);
  CHECK(full.code() == ErrorCode::Timeout);
  CHECK(std::string(full.what()) ==
        "timeout: allreduce #17 (ring): deadline passed waiting for rank 2");
  // An error from a layer that named nothing gets the op's prefix exactly once.
  const Error bare(ErrorCode::SystemError, "poll failed");
  const Error named = bare.with_context(ErrorContext{.op = "barrier", .sequence = 4});
  CHECK(named.message() == "barrier #4: poll failed");
  CHECK(named.with_context(ErrorContext{.op = "barrier", .sequence = 4}).message() ==
        "barrier #4: poll failed");
}

TEST_CASE("a send's or receive's context names its counterpart and tag", "[error]") {
  CHECK(format_context(ErrorContext{.op = "send", .sequence = 3, .to_rank = 1, .tag = 7}) ==
        "send #3 to rank 1 (tag 7)");
  CHECK(format_context(ErrorContext{.op = "recv", .sequence = 4, .from_rank = 0, .tag = 0}) ==
        "recv #4 from rank 0 (tag 0)");
  CHECK(format_context(ErrorContext{
            .op = "sendrecv", .sequence = 5, .to_rank = 1, .from_rank = 2, .tag = 9}) ==
        "sendrecv #5 (send to rank 1, recv from rank 2, tag 9)");
  CHECK(format_context(ErrorContext{.op = "recv", .from_rank = 2}) == "recv from rank 2");
  CHECK(format_context(ErrorContext{.to_rank = 1, .tag = 7}).empty());  // no op: no name

  // A layer below named the op by its label; the executor's fields replace the op's identity
  // as a whole (op, number, counterpart, tag), and the peers from below stay.
  const Error below(ErrorCode::Timeout, "timed out",
                    ErrorContext{.op = "recv #4 from rank 0 (tag 7)", .peers = {0}});
  const Error named = below.with_context(
      ErrorContext{.op = "recv", .sequence = 4, .communicator = 2, .from_rank = 0, .tag = 7});
  CHECK(named.message() == "recv #4 from rank 0 (tag 7): timed out");
  CHECK(named.context().op == "recv");
  CHECK(named.context().sequence == 4u);
  CHECK(named.context().communicator == 2u);
  CHECK(named.context().from_rank == 0);
  CHECK_FALSE(named.context().to_rank);
  CHECK(named.context().tag == 7);
  CHECK(named.context().peers == std::vector<int>{0});
  // A collective's context over a send's leaves no counterpart or tag behind.
  const Error send_failed(ErrorCode::RemoteError, "rank 1 died",
                          ErrorContext{.op = "send", .sequence = 2, .to_rank = 1, .tag = 3});
  const Error in_barrier = send_failed.with_context(ErrorContext{.op = "barrier", .sequence = 8});
  CHECK(in_barrier.message() == "barrier #8: rank 1 died");
  CHECK_FALSE(in_barrier.context().to_rank);
  CHECK_FALSE(in_barrier.context().tag);
}

TEST_CASE("errno conversion names the call and the errno", "[error]") {
  const Error refused = system_error("connect to 10.0.0.1:29500", ECONNREFUSED);
  CHECK(refused.code() == ErrorCode::SystemError);
  CHECK(refused.message().find("connect to 10.0.0.1:29500: ") == 0);
  CHECK(refused.message().find("(errno " + std::to_string(ECONNREFUSED) + ")") !=
        std::string::npos);
  for (const int gone : {ECONNRESET, EPIPE, ECONNABORTED})
    CHECK(system_error("send", gone).code() == ErrorCode::RemoteError);
  CHECK(system_error("open", ENOENT).code() == ErrorCode::SystemError);
}

TEST_CASE("log levels parse and reject unknown names", "[log]") {
  CHECK(log_level_from_name("trace") == LogLevel::Trace);
  CHECK(log_level_from_name("debug") == LogLevel::Debug);
  CHECK(log_level_from_name("info") == LogLevel::Info);
  CHECK(log_level_from_name("warn") == LogLevel::Warn);
  CHECK(log_level_from_name("warning") == LogLevel::Warn);
  CHECK(log_level_from_name("error") == LogLevel::Error);
  CHECK(log_level_from_name("off") == LogLevel::Off);
  for (const char* bad : {"verbose", "", "INFO", "warn "}) {
    INFO("'" << bad << "'");
    try {
      log_level_from_name(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(e.message().find("'" + std::string(bad) + "'") != std::string::npos);
    }
  }
}

namespace {
// Runs `fn` with stderr redirected to a temporary file and returns what was written.
template <class Fn>
std::string capture_stderr(Fn&& fn) {
  std::fflush(stderr);
  std::FILE* sink = std::tmpfile();
  REQUIRE(sink != nullptr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(sink), STDERR_FILENO);
  fn();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text;
  std::rewind(sink);
  for (int c; (c = std::fgetc(sink)) != EOF;) text += static_cast<char>(c);
  std::fclose(sink);
  return text;
}
}  // namespace

TEST_CASE("log lines carry the rank prefix and respect the level", "[log]") {
  set_log_rank(2, 5);
  set_log_level(LogLevel::Warn);
  const std::string shown = capture_stderr([] {
    COHORT_LOG_WARN("peer {} is slow", 3);
    COHORT_LOG_INFO("hidden at warn level");
  });
  CHECK(shown.find("[cohort r2/5]") != std::string::npos);
  CHECK(shown.find("peer 3 is slow") != std::string::npos);
  CHECK(shown.find("hidden") == std::string::npos);
  set_log_level(LogLevel::Off);
  CHECK(capture_stderr([] { COHORT_LOG_ERROR("silenced"); }).empty());
  set_log_level(LogLevel::Warn);
}

TEST_CASE("decimal_count_up adds one in place, carrying, and declines when the number grows",
          "[decimal]") {
  const std::size_t name = std::string("allreduce #").size();
  const struct {
    const char* before;
    std::size_t first;
    bool counted;
    const char* after;
  } cases[] = {
      {"allreduce #41", name, true, "allreduce #42"},
      {"allreduce #1299", name, true, "allreduce #1300"},
      {"allreduce #0", name, true, "allreduce #1"},
      // 999 + 1 needs a fourth digit: declined, the text as it was.
      {"allreduce #999", name, false, "allreduce #999"},
      // The digits from `first` only: the name before them is never touched.
      {"op 9#9", 5, false, "op 9#9"},
      {"abc", 3, false, "abc"},
  };
  for (const auto& c : cases) {
    INFO(c.before);
    std::string text = c.before;
    CHECK(decimal_count_up(text, c.first) == c.counted);
    CHECK(text == c.after);
  }
}
