// TcpStore: the client half. One connection, one request in flight at a time (a gate serialises
// callers, each waiting for it no longer than its own deadline), each request
// answered by exactly one reply frame. Blocking get()/wait() send the time they have left to the
// server, which answers Missing when it passes; the client's own socket deadline is the
// caller's timeout plus a grace period, so a silent server still cannot hang a caller. A
// connection that failed mid-frame is marked broken and every later call fails fast.

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/name_lookup.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store_protocol.hpp"
#include "core/log.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace cohort {

using bootstrap::Deadline;
using bootstrap::FieldReader;
using bootstrap::FrameBuilder;
using bootstrap::MessageType;

namespace {

// Extra time the client allows beyond a get()/wait() timeout for the server's Missing reply
// (at most the io_timeout, when one is set).
constexpr std::chrono::milliseconds kReplyGrace{10000};
// The least a get()/wait() waits for a connection another thread's call is using: a probe with
// a timeout of 0 must not fail because a short call was in flight.
constexpr std::chrono::milliseconds kMinConnectionWait{100};
constexpr std::chrono::milliseconds kFirstRetryDelay{10};
constexpr std::chrono::milliseconds kMaxRetryDelay{500};

struct Reply {
  MessageType type;
  Bytes body;
};

/// A lock on the connection that a call waits for no longer than its deadline. A flag under a
/// mutex and a condition variable rather than std::timed_mutex, whose steady-clock wait
/// (pthread_mutex_clocklock) ThreadSanitizer does not see, so it reported every unlock.
class ConnectionGate {
 public:
  /// True once this caller holds the connection; false if it was still held at `deadline`.
  bool take_until(Deadline deadline) {
    std::unique_lock lock(mutex_);
    if (!released_.wait_until(lock, deadline, [this] { return !busy_; })) return false;
    busy_ = true;
    return true;
  }
  void give_back() noexcept {
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    released_.notify_one();
  }

  /// Gives the connection back when the call ends, however it ends.
  class Held {
   public:
    explicit Held(ConnectionGate& gate) : gate_(gate) {}
    ~Held() { gate_.give_back(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    ConnectionGate& gate_;
  };

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  bool busy_ = false;
};

}  // namespace

struct TcpStore::Impl {
  TcpStoreOptions options;
  std::string endpoint;
  UniqueFd fd;
  /// The connection, held by one call at a time.
  ConnectionGate gate;
  std::string broken;    // why the connection is unusable; empty while healthy
  bool hung_up = false;  // the last failed exchange failed because the server closed or reset

  void connect_with_retry();
  /// The server's addresses, by `deadline`. A name that does not exist is an error that may pass
  /// here (SystemError, so the caller retries), with a warning the first time; with
  /// retry_refused off it is final (RemoteError: the server is gone).
  bootstrap::AddressList look_up(Deadline deadline, bool& warned_no_such_name);
  /// The deadline of a call that waits for no key.
  Deadline io_deadline() const {
    return Clock::now() + options.io_timeout.value_or(default_store_timeout());
  }
  /// How long a get()/wait() waits beyond its own timeout for the server's answer.
  std::chrono::milliseconds reply_grace() const {
    return options.io_timeout ? std::min(kReplyGrace, *options.io_timeout) : kReplyGrace;
  }
  /// Until when a get()/wait() that started at `start` waits for the connection.
  static Deadline connection_deadline(Deadline start, std::chrono::milliseconds timeout) {
    return start + std::max(timeout, kMinConnectionWait);
  }
  /// Takes the connection for one call, or throws Timeout if another thread's call still holds
  /// it at `deadline` (nothing was sent: the connection stays usable).
  ConnectionGate::Held acquire(Deadline deadline, const std::string& what) {
    if (!gate.take_until(deadline))
      throw Error(ErrorCode::Timeout, what + " at " + endpoint +
                                          ": another thread's call held the connection until the "
                                          "deadline");
    return ConnectionGate::Held(gate);
  }
  Reply exchange(const Bytes& request, Deadline deadline, const char* op);
  /// exchange() for get/wait: a client-side Timeout (silent server) names the keys too.
  Reply exchange_naming_keys(const Bytes& request, Deadline deadline, const char* op,
                             const std::vector<std::string>& keys) {
    try {
      return exchange(request, deadline, op);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
      throw Error(ErrorCode::Timeout,
                  e.message() + " (waiting for " + bootstrap::quote_keys(keys) + ")");
    }
  }
  void check_size(std::string_view what, std::size_t size) const;
  void check_key(std::string_view key) const { check_size("key", key.size()); }
  [[noreturn]] void unexpected(const Reply& reply, const char* op) const;
};

TcpStore::TcpStore(TcpStoreOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.host.empty()) impl_->options.host = "127.0.0.1";
  if (impl_->options.port == 0)
    throw Error(ErrorCode::InvalidArgument,
                "TcpStore needs the server's port (got 0) for host '" + impl_->options.host + "'");
  if (impl_->options.io_timeout && impl_->options.io_timeout->count() <= 0)
    throw Error(ErrorCode::InvalidArgument, "TcpStore io_timeout must be positive (got " +
                                                std::to_string(impl_->options.io_timeout->count()) +
                                                " ms)");
  impl_->endpoint = bootstrap::format_endpoint(impl_->options.host, impl_->options.port);
  impl_->connect_with_retry();
}

TcpStore::~TcpStore() = default;

void TcpStore::Impl::connect_with_retry() {
  // One deadline for all of it: looking the host up, connecting, and the handshake.
  const auto deadline = Clock::now() + options.connect_timeout;
  auto delay = kFirstRetryDelay;
  int attempts = 0;
  bool warned_no_such_name = false;
  bootstrap::AddressList addresses;  // looked up again after an attempt that failed
  Reply reply;
  for (;;) {
    ++attempts;
    try {
      if (!addresses) addresses = look_up(deadline, warned_no_such_name);
      fd = bootstrap::connect_once(addresses.get(), endpoint, deadline);
      reply = exchange(FrameBuilder(MessageType::Hello).field(options.token).finish(), deadline,
                       "handshake");
      break;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::InvalidArgument) throw;  // the token refused
      // A server short of room hangs up on connections that have not shown a token yet (it
      // evicts the oldest when too many wait): connect again, as when nobody listened.
      // (No descriptor and nothing broken: the lookup or connect_once() failed.)
      if (fd || (!broken.empty() && !hung_up)) throw;
      // Refused (or its name gone), where a server is known to have listened: it is gone.
      if (!options.retry_refused && broken.empty() && e.code() == ErrorCode::RemoteError)
        throw Error(ErrorCode::RemoteError,
                    "nobody listens for the store at " + endpoint + " (" + e.message() + ")");
      broken.clear();
      if (addresses) {
        // They did not connect: the name may have moved (a restarted server's new address).
        bootstrap::forget_stream_addresses(options.host, options.port, addresses);
        addresses.reset();
      }
      if (Clock::now() + delay >= deadline)
        throw Error(ErrorCode::Timeout,
                    "could not connect to the store at " + endpoint + " within " +
                        std::to_string(options.connect_timeout.count()) + " ms (" +
                        std::to_string(attempts) + " attempts; last: " + e.message() + ")");
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, kMaxRetryDelay);
    }
  }
  if (reply.type != MessageType::Ok) unexpected(reply, "handshake");
  COHORT_LOG_DEBUG("connected to the store at {}", endpoint);
}

bootstrap::AddressList TcpStore::Impl::look_up(Deadline deadline, bool& warned_no_such_name) {
  try {
    return bootstrap::lookup_stream_addresses(options.host, options.port, deadline);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) throw;
    // An address known to have had a server (retry_refused off) had a name that resolved: gone
    // now, like a refusal, the server is gone.
    if (!options.retry_refused)
      throw Error(ErrorCode::RemoteError, "the store at " + endpoint + " is gone: " + e.message());
    // No such name, yet: a job's first node may enter DNS only once it runs (a Kubernetes pod's
    // name), so it is retried until the deadline, as torch.distributed's store does. Said once,
    // at once, so that a mistyped name shows before the deadline.
    if (!warned_no_such_name)
      COHORT_LOG_WARN("store host '{}' does not resolve ({}); retrying for up to {} ms",
                      options.host, e.message(), options.connect_timeout.count());
    warned_no_such_name = true;
    throw Error(ErrorCode::SystemError, e.message());
  }
}

void TcpStore::Impl::check_size(std::string_view what, std::size_t size) const {
  if (size > options.max_value_bytes)
    throw Error(ErrorCode::InvalidArgument,
                "store " + std::string(what) + " of " + std::to_string(size) +
                    " bytes exceeds max_value_bytes " + std::to_string(options.max_value_bytes));
}

Reply TcpStore::Impl::exchange(const Bytes& request, Deadline deadline, const char* op) {
  if (!broken.empty())
    throw Error(ErrorCode::RemoteError, "store connection to " + endpoint +
                                            " is unusable after an earlier failure: " + broken);
  Reply reply;
  try {
    bootstrap::send_all(fd.get(), request.data(), request.size(), deadline,
                        "store server at " + endpoint);
    std::uint8_t header[bootstrap::kFrameHeaderBytes];
    bootstrap::recv_exact(fd.get(), header, sizeof header, deadline, "store server at " + endpoint);
    const auto decoded =
        bootstrap::decode_header(header, bootstrap::max_body_bytes(options.max_value_bytes));
    reply.type = decoded.type;
    reply.body.resize(decoded.body_length);
    bootstrap::recv_exact(fd.get(), reply.body.data(), reply.body.size(), deadline,
                          "store server at " + endpoint);
  } catch (const Error& e) {
    // Part of a frame may have moved: the stream is out of step, so no later call may use it.
    broken = std::string(op) + ": " + e.message();
    hung_up = e.code() == ErrorCode::RemoteError;
    fd.reset();
    if (e.code() == ErrorCode::InvalidArgument)
      throw Error(ErrorCode::RemoteError,
                  "store server at " + endpoint + " sent a malformed reply: " + e.message());
    throw Error(e.code(), "store " + std::string(op) + ": " + e.message());
  }
  if (reply.type == MessageType::Failure) {
    FieldReader fields(reply.body, options.max_value_bytes);
    const auto code = static_cast<ErrorCode>(fields.integer());
    throw Error(code, "store at " + endpoint + ": " + fields.text());
  }
  return reply;
}

void TcpStore::Impl::unexpected(const Reply& reply, const char* op) const {
  throw Error(ErrorCode::RemoteError, "store server at " + endpoint + " answered " + op +
                                          " with '" + bootstrap::message_type_name(reply.type) +
                                          "'");
}

namespace {
// What is left of a deadline, in whole milliseconds, never negative.
std::chrono::milliseconds time_left(Deadline deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

std::int64_t integer_reply(const Reply& reply, std::size_t max_field) {
  FieldReader fields(reply.body, max_field);
  return fields.integer();
}
}  // namespace

void TcpStore::set(std::string_view key, const Bytes& value) {
  impl_->check_key(key);
  impl_->check_size("value", value.size());
  const Deadline deadline = impl_->io_deadline();
  const auto lock = impl_->acquire(deadline, "store set of '" + std::string(key) + "'");
  const Reply reply = impl_->exchange(
      FrameBuilder(MessageType::Set).field(key).field(value).finish(), deadline, "set");
  if (reply.type != MessageType::Ok) impl_->unexpected(reply, "set");
}

Bytes TcpStore::get(std::string_view key, std::chrono::milliseconds timeout) {
  impl_->check_key(key);
  if (timeout.count() < 0)
    throw Error(ErrorCode::InvalidArgument,
                "store get timeout " + std::to_string(timeout.count()) + " ms is negative");
  timeout = std::min<std::chrono::milliseconds>(timeout, bootstrap::kMaxWaitTimeout);
  const Clock::time_point start = Clock::now();
  const auto lock = impl_->acquire(Impl::connection_deadline(start, timeout),
                                   "store get timed out after " + std::to_string(timeout.count()) +
                                       " ms waiting for '" + std::string(key) + "'");
  const Reply reply = impl_->exchange_naming_keys(
      FrameBuilder(MessageType::Get)
          .integer(time_left(start + timeout).count())
          .field(key)
          .finish(),
      std::max(start + timeout, Clock::now()) + impl_->reply_grace(), "get", {std::string(key)});
  if (reply.type == MessageType::Missing)
    throw Error(ErrorCode::Timeout, "store get timed out after " + std::to_string(timeout.count()) +
                                        " ms waiting for '" + std::string(key) + "' at " +
                                        impl_->endpoint);
  if (reply.type != MessageType::Value) impl_->unexpected(reply, "get");
  FieldReader fields(reply.body, impl_->options.max_value_bytes);
  return fields.bytes();
}

std::int64_t TcpStore::add(std::string_view key, std::int64_t delta) {
  impl_->check_key(key);
  const Deadline deadline = impl_->io_deadline();
  const auto lock = impl_->acquire(deadline, "store add to '" + std::string(key) + "'");
  const Reply reply = impl_->exchange(
      FrameBuilder(MessageType::Add).field(key).integer(delta).finish(), deadline, "add");
  if (reply.type != MessageType::Integer) impl_->unexpected(reply, "add");
  return integer_reply(reply, impl_->options.max_value_bytes);
}

Bytes TcpStore::compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) {
  impl_->check_key(key);
  impl_->check_size("expected value", expected.size());
  impl_->check_size("desired value", desired.size());
  const Deadline deadline = impl_->io_deadline();
  const auto lock = impl_->acquire(deadline, "store compare_set of '" + std::string(key) + "'");
  const Reply reply = impl_->exchange(
      FrameBuilder(MessageType::CompareSet).field(key).field(expected).field(desired).finish(),
      deadline, "compare_set");
  if (reply.type != MessageType::Value) impl_->unexpected(reply, "compare_set");
  FieldReader fields(reply.body, impl_->options.max_value_bytes);
  return fields.bytes();
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (timeout.count() < 0)
    throw Error(ErrorCode::InvalidArgument,
                "store wait timeout " + std::to_string(timeout.count()) + " ms is negative");
  timeout = std::min<std::chrono::milliseconds>(timeout, bootstrap::kMaxWaitTimeout);
  const Clock::time_point start = Clock::now();
  // The frame's leading integer is the time left once we hold the connection; its size is
  // checked with the longest it can be.
  FrameBuilder keys_only(MessageType::Wait);
  keys_only.integer(timeout.count());
  for (const auto& key : keys) {
    impl_->check_key(key);
    keys_only.field(key);
  }
  if (keys_only.finish().size() - bootstrap::kFrameHeaderBytes >
      bootstrap::max_body_bytes(impl_->options.max_value_bytes))
    throw Error(ErrorCode::InvalidArgument, "store wait on " + std::to_string(keys.size()) +
                                                " keys exceeds the frame size limit");
  const auto lock = impl_->acquire(Impl::connection_deadline(start, timeout),
                                   "store wait timed out after " + std::to_string(timeout.count()) +
                                       " ms waiting for " + bootstrap::quote_keys(keys));
  FrameBuilder request(MessageType::Wait);
  request.integer(time_left(start + timeout).count());
  for (const auto& key : keys) request.field(key);
  const Reply reply = impl_->exchange_naming_keys(
      request.finish(), std::max(start + timeout, Clock::now()) + impl_->reply_grace(), "wait",
      keys);
  if (reply.type == MessageType::Missing) {
    FieldReader fields(reply.body, impl_->options.max_value_bytes);
    throw Error(ErrorCode::Timeout, "store wait timed out after " +
                                        std::to_string(timeout.count()) + " ms waiting for " +
                                        bootstrap::quote_keys(fields.remaining_texts()) + " at " +
                                        impl_->endpoint);
  }
  if (reply.type != MessageType::Ok) impl_->unexpected(reply, "wait");
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  FrameBuilder request(MessageType::Check);
  for (const auto& key : keys) {
    impl_->check_key(key);
    request.field(key);
  }
  const Deadline deadline = impl_->io_deadline();
  const auto lock = impl_->acquire(deadline, "store check of " + bootstrap::quote_keys(keys));
  const Reply reply = impl_->exchange(request.finish(), deadline, "check");
  if (reply.type != MessageType::Integer) impl_->unexpected(reply, "check");
  return integer_reply(reply, impl_->options.max_value_bytes) != 0;
}

bool TcpStore::erase(std::string_view key) {
  impl_->check_key(key);
  const Deadline deadline = impl_->io_deadline();
  const auto lock = impl_->acquire(deadline, "store erase of '" + std::string(key) + "'");
  const Reply reply =
      impl_->exchange(FrameBuilder(MessageType::Erase).field(key).finish(), deadline, "erase");
  if (reply.type != MessageType::Integer) impl_->unexpected(reply, "erase");
  return integer_reply(reply, impl_->options.max_value_bytes) != 0;
}

std::int64_t TcpStore::num_keys() {
  const Deadline deadline = impl_->io_deadline();
  const auto lock = impl_->acquire(deadline, "store num_keys");
  const Reply reply =
      impl_->exchange(FrameBuilder(MessageType::NumKeys).finish(), deadline, "num_keys");
  if (reply.type != MessageType::Integer) impl_->unexpected(reply, "num_keys");
  return integer_reply(reply, impl_->options.max_value_bytes);
}

}  // namespace cohort
