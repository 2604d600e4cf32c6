#include "launch/echo_log_sink.hpp"

#include "core/log_sink.hpp"
#include "launch/terminal_echo.hpp"

#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>

namespace cohort::launcher {
namespace {

class EchoSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit EchoSink(std::shared_ptr<TerminalEcho> echo) : echo_(std::move(echo)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    echo_->write_line(std::string(formatted.data(), formatted.size()));
  }
  // spdlog flushes at warn and above; the echo writes what the terminal takes now, never waits.
  void flush_() override { echo_->flush_ready(); }

 private:
  std::shared_ptr<TerminalEcho> echo_;
};

}  // namespace

void log_through_terminal_echo(int fd) {
  log::send_to(std::make_shared<EchoSink>(TerminalEcho::shared(fd)));
}

}  // namespace cohort::launcher
