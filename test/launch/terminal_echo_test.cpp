// The launcher's terminal echo (launch/terminal_echo.hpp) on a pipe whose reader stops reading
// without closing it: writing lines never blocks (an alarm turns a blocked write into this
// test's failure instead of a hang), the oldest queued lines beyond the bound are dropped and
// the count is echoed where they were, and what is queued comes out whole and in order once
// the reader reads again.

#include "launch/terminal_echo.hpp"
#include "launch/pipes.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using cohort::launcher::make_pipe;
using cohort::launcher::TerminalEcho;

/// Fails the test process (SIGALRM) if the scope takes longer than `seconds`: a write that
/// blocked would otherwise hang the test.
struct AlarmGuard {
  explicit AlarmGuard(unsigned seconds) { ::alarm(seconds); }
  ~AlarmGuard() { ::alarm(0); }
};

std::string line_numbered(std::size_t i, std::size_t width) {
  std::string line = "line " + std::to_string(i) + " ";
  line.resize(width - 1, 'x');
  line.push_back('\n');
  return line;
}

/// Everything readable from `fd` now (non-blocking).
std::string read_available(int fd) {
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return out;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

/// 200 KB of lines into `echo`, more than its pipe (nobody reads) holds: the rest stays queued.
void fill_past_pipe(TerminalEcho& echo) {
  for (std::size_t i = 0; i < 2000; ++i) echo.write_line(line_numbered(i, 100));
  REQUIRE(echo.queued_bytes() > 0);
}

}  // namespace

TEST_CASE("a terminal that stops reading never blocks the echo; dropped lines are counted") {
  ::signal(SIGPIPE, SIG_IGN);
  auto pipe = make_pipe();
  REQUIRE(::fcntl(pipe.read.get(), F_SETFL, O_NONBLOCK) == 0);
  TerminalEcho echo(pipe.write.get());

  // 100-byte lines: 6 MiB of them, where the pipe holds 64 KiB and the queue 4 MiB.
  constexpr std::size_t kWidth = 100;
  constexpr std::size_t kLines = (std::size_t{6} << 20) / kWidth;
  {
    const AlarmGuard guard(60);
    for (std::size_t i = 0; i < kLines; ++i) echo.write_line(line_numbered(i, kWidth));
  }
  CHECK(echo.queued_bytes() <= TerminalEcho::kMaxQueuedBytes);
  CHECK(echo.queued_bytes() > TerminalEcho::kMaxQueuedBytes - kWidth);
  const std::size_t dropped = echo.dropped_lines();
  CHECK(dropped > 0);

  // The reader comes back: every queued line comes out, after the note where the gap is.
  std::string out;
  {
    const AlarmGuard guard(60);
    while (echo.queued_bytes() > 0) {
      out += read_available(pipe.read.get());
      echo.flush_ready();
    }
    out += read_available(pipe.read.get());
  }
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < out.size();) {
    const std::size_t end = out.find('\n', start);
    REQUIRE(end != std::string::npos);  // nothing cut off mid-line
    lines.push_back(out.substr(start, end - start));
    start = end + 1;
  }
  const std::regex note(R"(\[cohort-run: (\d+) lines of rank output not shown: .*\])");
  std::size_t expected = 0;
  std::size_t notes = 0;
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_match(line, m, note)) {
      ++notes;
      CHECK(std::stoul(m[1]) == dropped);
      expected += dropped;
      continue;
    }
    REQUIRE(line + "\n" == line_numbered(expected, kWidth));  // whole, and in order
    ++expected;
  }
  CHECK(notes == 1);
  CHECK(expected == kLines);
}

TEST_CASE("the end of a job waits for a stalled terminal only as long as asked") {
  ::signal(SIGPIPE, SIG_IGN);
  auto pipe = make_pipe();
  TerminalEcho echo(pipe.write.get());
  const AlarmGuard guard(60);
  fill_past_pipe(echo);
  echo.drain(std::chrono::milliseconds(100));
  CHECK(echo.queued_bytes() == 0);
  const std::size_t dropped = echo.dropped_lines();
  CHECK(dropped > 0);
  // Shown stalled once, it is not waited for again: a drain of an hour returns (the alarm
  // fails a test that hangs) and drops what came since.
  echo.write_line(line_numbered(0, 100));
  echo.drain(std::chrono::hours(1));
  CHECK(echo.dropped_lines() == dropped + 1);
}

TEST_CASE("a closed terminal stops the echo and nothing else") {
  ::signal(SIGPIPE, SIG_IGN);
  auto pipe = make_pipe();
  pipe.read.reset();
  TerminalEcho echo(pipe.write.get());
  const AlarmGuard guard(60);
  echo.write_line("first\n");
  CHECK(echo.broken());
  echo.write_line("second\n");
  CHECK(echo.queued_bytes() == 0);  // nothing is queued for a terminal that is gone
  CHECK(echo.dropped_lines() == 0);
}

TEST_CASE("a full pipe whose reader goes away breaks the echo at once; drain does not wait") {
  ::signal(SIGPIPE, SIG_IGN);
  auto pipe = make_pipe();
  TerminalEcho echo(pipe.write.get());
  const AlarmGuard guard(60);
  fill_past_pipe(echo);
  REQUIRE_FALSE(echo.broken());
  pipe.read.reset();
  echo.flush_ready();  // poll reports the error, not room: the write must be tried to learn it
  CHECK(echo.broken());
  CHECK(echo.queued_bytes() == 0);
  // And the job's end does not wait out its bound on it (the alarm fails a test that hangs).
  echo.drain(std::chrono::hours(1));
}

TEST_CASE("two descriptors of one pipe share one echo, so their lines keep one order") {
  auto pipe = make_pipe();
  const int second = ::dup(pipe.write.get());
  REQUIRE(second >= 0);
  const auto a = TerminalEcho::shared(pipe.write.get());
  const auto b = TerminalEcho::shared(second);
  CHECK(a.get() == b.get());
  ::close(second);
}

TEST_CASE("threads writing through one echo keep every line whole and each thread's in order") {
  // The launcher's supervisor echoes rank output while its store threads log through the same
  // echo. Everything written (about 3.3 MB) fits the queue, so nothing may be dropped however
  // slowly the reader runs; writers drain now and then, waiting alongside the others (the lock
  // is released while a drain waits).
  ::signal(SIGPIPE, SIG_IGN);
  AlarmGuard alarm_guard(60);
  auto pipe = make_pipe();
  auto echo = std::make_unique<TerminalEcho>(pipe.write.get());
  constexpr int kThreads = 3;
  constexpr int kLines = 15000;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&echo = *echo, t] {
      for (int i = 0; i < kLines; ++i) {
        echo.write_line("thread " + std::to_string(t) + " line " + std::to_string(i) + " " +
                        std::string(static_cast<std::size_t>(i % 97), 'z') + "\n");
        if (i % 1000 == 0) echo.drain(std::chrono::seconds(30));
      }
    });
  }
  std::string out;
  std::thread reader([&out, fd = pipe.read.get()] {
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n <= 0) return;
      out.append(buffer, static_cast<std::size_t>(n));
    }
  });
  for (std::thread& writer : writers) writer.join();
  echo->drain(std::chrono::seconds(30));
  CHECK(echo->queued_bytes() == 0);
  CHECK(echo->dropped_lines() == 0);
  // Both write ends closed (ours and the echo's own description): the reader sees the end.
  pipe.write.reset();
  echo.reset();
  reader.join();

  std::vector<int> next(kThreads, 0);
  static const std::regex line_re(R"(thread (\d) line (\d+) (z*))");
  std::istringstream lines(out);
  std::size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    std::smatch m;
    REQUIRE(std::regex_match(line, m, line_re));
    const int t = std::stoi(m[1]);
    const int i = std::stoi(m[2]);
    REQUIRE(i == next[t]);
    REQUIRE(m[3].length() == i % 97);
    ++next[t];
  }
  CHECK(count == static_cast<std::size_t>(kThreads * kLines));
}
