// TcpStoreServer: one thread, one poll() loop, every client a non-blocking socket with its own
// input and output buffers. Blocking get()/wait() never block the loop: the request is parked
// as a Waiter indexed under one key it still misses; whenever a key appears, the waiters indexed
// under it are re-checked (and re-indexed under their next missing key, or answered). Deadlines
// of parked requests bound the poll() timeout, and expired ones are answered with Missing.
// An eventfd wakes the loop for shutdown.
//
// Strangers (connections that have not shown the token) are bounded in number and in time, and
// running out of descriptors or kernel memory pauses accepting instead of spinning on a readable
// listener (the rules, and why, in bootstrap/store_admission.hpp). Each accepted connection is
// read at once: an honest client sends its token as soon as it connects, so it is usually there
// already, and the client leaves the pending set before a burst of later arrivals could evict it.

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/key_value_table.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store_admission.hpp"
#include "bootstrap/store_protocol.hpp"
#include "core/log.hpp"
#include "core/system_error.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

namespace cohort {

using bootstrap::FieldReader;
using bootstrap::FrameBuilder;
using bootstrap::MessageType;
using cohort::UniqueFd;

namespace {

// Stop reading a client while this much of its output is still unsent (back-pressure).
constexpr std::size_t kOutputHighWater = 4u << 20;
constexpr std::size_t kReadChunk = 64u << 10;
constexpr std::uint64_t kMaxHandshakeBytes = 64u << 10;
constexpr const char* kHungUp = "client hung up";
constexpr const char* kHandshakeRefused = "handshake refused";
// Longest timeout a client may ask for; larger values are clamped (avoids overflow).
// Connections accepted per loop iteration, so a flood of arrivals cannot starve the clients
// already connected.
constexpr std::size_t kAcceptBatch = 64;

}  // namespace

// Named, not anonymous: TcpStoreServer::Impl holds these, and a class with external linkage
// holding types of an anonymous namespace is an error once a unity build (the sanitizer builds
// of CI, a meson subproject) puts this file into a larger translation unit.
namespace store_server {

struct Connection {
  UniqueFd fd;
  std::string peer;
  bool authenticated = false;
  bool closing = false;  // send what is queued, then close (after a refused handshake)
  bool parked = false;   // a get()/wait() is waiting for keys; later frames wait their turn
  bool gone = false;     // dropped: its descriptor is closed, its entry goes at the iteration's end
  Bytes in;
  Bytes out;
  std::size_t out_sent = 0;
};

struct Waiter {
  MessageType type;  // Get or Wait
  std::vector<std::string> keys;
  std::chrono::milliseconds timeout;
  Clock::time_point deadline;
  std::string indexed_under;  // the missing key whose arrival re-checks this waiter
};

// A request the server refuses by dropping the connection (malformed, oversized, unauthenticated).
struct ProtocolViolation {
  std::string reason;
};

}  // namespace store_server

using store_server::Connection;
using store_server::ProtocolViolation;
using store_server::Waiter;

namespace {

bool tokens_equal(const std::string& a, const std::string& b) {
  // Compare every byte so the time taken does not reveal the length of a matching prefix.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

struct TcpStoreServer::Impl {
  TcpStoreOptions options;
  UniqueFd listener;
  UniqueFd wake;
  std::string bound_host;
  std::uint16_t bound_port = 0;
  std::atomic<bool> stopping{false};
  std::thread thread;

  // Loop state, touched only by the server thread.
  bootstrap::KeyValueTable table;
  std::map<std::uint64_t, Connection> connections;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, Waiter> waiters;  // one per parked connection
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiting_on;
  std::vector<std::uint64_t> resumable;
  std::vector<std::uint64_t> to_close;
  std::optional<bootstrap::PendingHandshakes> pending;  // made once the options are checked
  bootstrap::AcceptBackoff backoff;
  bootstrap::WarningLimiter accept_warnings;
  bootstrap::WarningLimiter stranger_warnings;

  void run() noexcept;
  void accept_clients();
  void admit(UniqueFd fd, const sockaddr_storage& address, socklen_t length);
  void pause_accepting(int err);
  void expire_handshakes();
  void read_from(std::uint64_t id, Connection& c);
  void process_input(std::uint64_t id, Connection& c);
  void handle(std::uint64_t id, Connection& c, MessageType type, FieldReader& fields);
  void park(std::uint64_t id, Connection& c, Waiter waiter);
  void key_created(const std::string& key);
  void answer_waiter(std::uint64_t id, Connection& c, const Waiter& w);
  void expire_waiters();
  void reply(Connection& c, Bytes frame);
  void flush(std::uint64_t id, Connection& c);
  void drop(std::uint64_t id, const std::string& reason);
  bool dropped(std::uint64_t id) const {
    const auto it = connections.find(id);
    return it == connections.end() || it->second.gone;
  }
  void warn_about_stranger(const Connection& c, const std::string& what);
  void forget_waiter(std::uint64_t id);
};

TcpStoreServer::TcpStoreServer(TcpStoreOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  if (s.options.max_value_bytes == 0)
    throw Error(ErrorCode::InvalidArgument, "TcpStoreOptions::max_value_bytes must be positive");
  if (s.options.handshake_timeout.count() <= 0)
    throw Error(ErrorCode::InvalidArgument, "TcpStoreOptions::handshake_timeout must be positive");
  if (s.options.max_pending_handshakes == 0)
    throw Error(ErrorCode::InvalidArgument,
                "TcpStoreOptions::max_pending_handshakes must be positive");
  s.pending.emplace(s.options.max_pending_handshakes, s.options.handshake_timeout);
  const std::string host = s.options.host.empty() ? "127.0.0.1" : s.options.host;
  s.listener = bootstrap::listen_on(host, s.options.port);
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(s.listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw system_error("getsockname on the store listener", errno);
  s.bound_host = bootstrap::numeric_host(reinterpret_cast<sockaddr*>(&address), length);
  s.bound_port = bootstrap::address_port(reinterpret_cast<sockaddr*>(&address));
  s.wake = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s.wake) throw system_error("eventfd for the store server", errno);
  s.thread = std::thread([&s] { s.run(); });
  COHORT_LOG_INFO("store server listening on {}",
                  bootstrap::format_endpoint(s.bound_host, s.bound_port));
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stopping.store(true);
  const std::uint64_t one = 1;
  if (::write(impl_->wake.get(), &one, sizeof one) < 0)
    COHORT_LOG_ERROR("cannot wake the store server thread: {}", std::strerror(errno));
  impl_->thread.join();
}

std::uint16_t TcpStoreServer::port() const {
  return impl_->bound_port;
}
std::string TcpStoreServer::host() const {
  return impl_->bound_host;
}

void TcpStoreServer::Impl::run() noexcept {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  while (!stopping.load()) {
    fds.clear();
    ids.clear();
    const bool accepting = backoff.accepting(Clock::now());
    fds.push_back({wake.get(), POLLIN, 0});
    fds.push_back({accepting ? listener.get() : -1, POLLIN, 0});  // poll() skips a negative fd
    for (auto& [id, c] : connections) {
      short events = POLLRDHUP;  // notice a client that hangs up even while we ignore its input
      if (!c.parked && !c.closing && c.out.size() - c.out_sent < kOutputHighWater) events |= POLLIN;
      if (c.out_sent < c.out.size()) events |= POLLOUT;
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
    }
    // Wake for the first of: a parked request's deadline, the oldest stranger's handshake
    // deadline, the end of an accept back-off.
    int timeout_ms = -1;
    const auto wake_by = [&timeout_ms](Clock::time_point deadline) {
      const int ms = bootstrap::poll_timeout_ms(deadline);
      if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
    };
    for (const auto& [id, w] : waiters) wake_by(w.deadline);
    if (const auto deadline = pending->next_deadline()) wake_by(*deadline);
    if (!accepting) wake_by(backoff.resumes());
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      COHORT_LOG_ERROR("store server poll failed: {}; stopping", std::strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) accept_clients();
    for (std::size_t i = 2; i < fds.size(); ++i) {
      const short revents = fds[i].revents;
      if (revents == 0) continue;
      const auto it = connections.find(ids[i - 2]);
      // Dropped since poll() returned (evicted by an arrival, say): its descriptor is closed.
      if (it == connections.end() || it->second.gone) continue;
      Connection& c = it->second;
      if (revents & (POLLERR | POLLNVAL)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        drop(it->first, err == ECONNRESET || err == 0
                            ? kHungUp
                            : std::string("socket error: ") + std::strerror(err));
        continue;
      }
      if (revents & POLLOUT) flush(it->first, c);
      if (revents & (POLLIN | POLLRDHUP | POLLHUP)) read_from(it->first, c);
    }
    expire_waiters();
    expire_handshakes();
    while (!resumable.empty()) {
      const std::uint64_t id = resumable.back();
      resumable.pop_back();
      if (const auto it = connections.find(id); it != connections.end())
        process_input(id, it->second);
    }
    for (const std::uint64_t id : to_close) {
      forget_waiter(id);
      connections.erase(id);
    }
    to_close.clear();
  }
}

void TcpStoreServer::Impl::accept_clients() {
  for (std::size_t accepted = 0; accepted < kAcceptBatch; ++accepted) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    UniqueFd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&address), &length,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (bootstrap::lost_before_accept(err)) continue;
      // Out of descriptors or memory, or something unforeseen: either way the connection stays
      // queued, and polling the listener again at once would spin.
      pause_accepting(err);
      return;
    }
    if (const auto run = backoff.succeeded(Clock::now()))
      COHORT_LOG_DEBUG("store server: accepting again after {} failed accept() calls in {} ms",
                       run->failures,
                       std::chrono::duration_cast<std::chrono::milliseconds>(run->lasted).count());
    admit(std::move(fd), address, length);
  }
}

void TcpStoreServer::Impl::pause_accepting(int err) {
  const auto now = Clock::now();
  std::uint64_t held_back = 0;
  if (!backoff.failed(now) || !accept_warnings.allow(now, held_back)) return;
  COHORT_LOG_WARN(
      "store server {}: cannot accept connections: {} ({} clients connected); retrying every {} "
      "ms or when a client leaves, serving the connected ones meanwhile{}",
      bootstrap::format_endpoint(bound_host, bound_port), std::strerror(err), connections.size(),
      bootstrap::kAcceptBackoff.count(), bootstrap::held_back_note(held_back));
}

void TcpStoreServer::Impl::admit(UniqueFd fd, const sockaddr_storage& address, socklen_t length) {
  try {
    bootstrap::set_no_delay(fd.get());
  } catch (const Error& e) {
    COHORT_LOG_WARN("store server: {}", e.what());
  }
  const std::uint64_t id = next_id++;
  // Evicting closes the oldest strangers' descriptors now, before the newcomer counts.
  const std::size_t waiting = pending->size();
  for (const std::uint64_t old : pending->admit(id, Clock::now()))
    drop(old,
         "evicted: " + std::to_string(waiting) + " connections were waiting for their handshake");
  Connection c;
  c.fd = std::move(fd);
  c.peer = bootstrap::format_endpoint(
      bootstrap::numeric_host(reinterpret_cast<const sockaddr*>(&address), length),
      bootstrap::address_port(reinterpret_cast<const sockaddr*>(&address)));
  COHORT_LOG_DEBUG("store server: client {} connected", c.peer);
  Connection& admitted = connections.emplace(id, std::move(c)).first->second;
  // An honest client's token is usually here already: take it now (see the top of this file).
  read_from(id, admitted);
}

void TcpStoreServer::Impl::expire_handshakes() {
  for (const std::uint64_t id : pending->expired(Clock::now()))
    drop(id, "no handshake within " + std::to_string(options.handshake_timeout.count()) + " ms");
}

void TcpStoreServer::Impl::read_from(std::uint64_t id, Connection& c) {
  std::uint8_t chunk[kReadChunk];
  for (;;) {
    const ssize_t got = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (got > 0) {
      c.in.insert(c.in.end(), chunk, chunk + got);
      // Validate headers as soon as they arrive, so an oversized claim is refused before the
      // rest of the frame is buffered or its body allocated.
      if (c.parked || c.closing) {
        if (c.in.size() > kReadChunk) break;  // do not buffer unbounded pipelined requests
        continue;
      }
      process_input(id, c);
      if (dropped(id)) return;
      if (c.parked || c.out.size() - c.out_sent >= kOutputHighWater) break;
      continue;
    }
    if (got == 0) {
      drop(id, kHungUp);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == ECONNRESET)
      drop(id, kHungUp);
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
      drop(id, std::string("recv: ") + std::strerror(errno));
    return;
  }
}

void TcpStoreServer::Impl::process_input(std::uint64_t id, Connection& c) {
  std::size_t consumed = 0;
  try {
    while (!c.parked && !c.closing && c.in.size() - consumed >= bootstrap::kFrameHeaderBytes) {
      // Until it has shown the token, a client may only send a small handshake: strangers
      // cannot make the server reserve value-sized buffers.
      const std::uint64_t max_body =
          c.authenticated ? bootstrap::max_body_bytes(options.max_value_bytes) : kMaxHandshakeBytes;
      const auto header = bootstrap::decode_header(c.in.data() + consumed, max_body);
      const std::size_t frame = bootstrap::kFrameHeaderBytes + header.body_length;
      if (c.in.size() - consumed < frame) {
        if (consumed == 0) c.in.reserve(frame);  // the header is validated: the size is bounded
        break;
      }
      FieldReader fields(
          std::span(c.in.data() + consumed + bootstrap::kFrameHeaderBytes, header.body_length),
          options.max_value_bytes);
      handle(id, c, header.type, fields);
      if (dropped(id)) return;
      consumed += frame;
    }
  } catch (const Error& e) {
    drop(id, e.message());
    return;
  } catch (const ProtocolViolation& v) {
    drop(id, v.reason);
    return;
  } catch (const std::bad_alloc&) {
    drop(id, "out of memory buffering its request");
    return;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(consumed));
}

void TcpStoreServer::Impl::handle(std::uint64_t id, Connection& c, MessageType type,
                                  FieldReader& fields) {
  const auto require_end = [&] {
    if (!fields.done())
      throw ProtocolViolation{std::string("extra fields in ") + bootstrap::message_type_name(type)};
  };
  if (!c.authenticated) {
    if (type != MessageType::Hello)
      throw ProtocolViolation{std::string("'") + bootstrap::message_type_name(type) +
                              "' before the handshake"};
    const std::string token = fields.text();
    require_end();
    if (!tokens_equal(token, options.token)) {
      warn_about_stranger(c, "refused: wrong token");
      reply(c, FrameBuilder(MessageType::Failure)
                   .integer(static_cast<std::int64_t>(ErrorCode::InvalidArgument))
                   .field("the store server refused the token (COHORT_TOKEN differs)")
                   .finish());
      c.closing = true;
      flush(id, c);
      return;
    }
    c.authenticated = true;
    pending->remove(id);
    reply(c, FrameBuilder(MessageType::Ok).finish());
    flush(id, c);
    return;
  }
  switch (type) {
    case MessageType::Set: {
      std::string key = fields.text();
      Bytes value = fields.bytes();
      require_end();
      const bool created = !table.contains(key);
      table.set(key, std::move(value));
      reply(c, FrameBuilder(MessageType::Ok).finish());
      if (created) key_created(key);
      break;
    }
    case MessageType::Get:
    case MessageType::Wait: {
      const auto requested = std::chrono::milliseconds(fields.integer());
      if (requested.count() < 0) throw ProtocolViolation{"negative timeout"};
      const auto timeout =
          std::min<std::chrono::milliseconds>(requested, bootstrap::kMaxWaitTimeout);
      std::vector<std::string> keys = fields.remaining_texts();
      if (type == MessageType::Get && keys.size() != 1)
        throw ProtocolViolation{"get with " + std::to_string(keys.size()) + " keys"};
      Waiter w{type, std::move(keys), timeout, Clock::now() + timeout};
      if (table.missing(w.keys).empty()) {
        answer_waiter(id, c, w);
      } else {
        park(id, c, std::move(w));
      }
      break;
    }
    case MessageType::Add: {
      std::string key = fields.text();
      const std::int64_t delta = fields.integer();
      require_end();
      const bool created = !table.contains(key);
      try {
        reply(c, FrameBuilder(MessageType::Integer).integer(table.add(key, delta)).finish());
      } catch (const Error& e) {
        reply(c, FrameBuilder(MessageType::Failure)
                     .integer(static_cast<std::int64_t>(e.code()))
                     .field(e.message())
                     .finish());
      }
      if (created && table.contains(key)) key_created(key);
      break;
    }
    case MessageType::CompareSet: {
      std::string key = fields.text();
      Bytes expected = fields.bytes();
      Bytes desired = fields.bytes();
      require_end();
      const bool created = !table.contains(key);
      reply(c, FrameBuilder(MessageType::Value)
                   .field(table.compare_set(key, expected, desired))
                   .finish());
      if (created && table.contains(key)) key_created(key);
      break;
    }
    case MessageType::Check: {
      const auto keys = fields.remaining_texts();
      reply(c, FrameBuilder(MessageType::Integer).integer(table.missing(keys).empty()).finish());
      break;
    }
    case MessageType::Erase: {
      const std::string key = fields.text();
      require_end();
      reply(c, FrameBuilder(MessageType::Integer).integer(table.erase(key)).finish());
      break;
    }
    case MessageType::NumKeys:
      require_end();
      reply(c, FrameBuilder(MessageType::Integer).integer(table.size()).finish());
      break;
    default:
      throw ProtocolViolation{std::string("unexpected '") + bootstrap::message_type_name(type) +
                              "' from a client"};
  }
  flush(id, c);
}

void TcpStoreServer::Impl::park(std::uint64_t id, Connection& c, Waiter waiter) {
  c.parked = true;
  waiter.indexed_under = table.missing(waiter.keys).front();
  waiting_on[waiter.indexed_under].push_back(id);
  waiters[id] = std::move(waiter);
}

void TcpStoreServer::Impl::forget_waiter(std::uint64_t id) {
  const auto w = waiters.find(id);
  if (w == waiters.end()) return;
  if (const auto index = waiting_on.find(w->second.indexed_under); index != waiting_on.end()) {
    auto& ids = index->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) waiting_on.erase(index);
  }
  waiters.erase(w);
}

void TcpStoreServer::Impl::key_created(const std::string& key) {
  const auto it = waiting_on.find(key);
  if (it == waiting_on.end()) return;
  const std::vector<std::uint64_t> ids = std::move(it->second);
  waiting_on.erase(it);
  for (const std::uint64_t id : ids) {
    const auto w = waiters.find(id);
    const auto c = connections.find(id);
    if (w == waiters.end() || c == connections.end()) continue;  // answered or gone since
    const auto absent = table.missing(w->second.keys);
    if (!absent.empty()) {
      w->second.indexed_under = absent.front();
      waiting_on[absent.front()].push_back(id);
      continue;
    }
    const Waiter done = w->second;
    forget_waiter(id);
    c->second.parked = false;
    answer_waiter(id, c->second, done);
    flush(id, c->second);
    resumable.push_back(id);
  }
}

void TcpStoreServer::Impl::answer_waiter(std::uint64_t, Connection& c, const Waiter& w) {
  if (w.type == MessageType::Get)
    reply(c, FrameBuilder(MessageType::Value).field(*table.find(w.keys.front())).finish());
  else
    reply(c, FrameBuilder(MessageType::Ok).finish());
}

void TcpStoreServer::Impl::expire_waiters() {
  const auto now = Clock::now();
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    const std::uint64_t id = it->first;
    FrameBuilder missing(MessageType::Missing);
    for (const auto& key : table.missing(it->second.keys)) missing.field(key);
    // Forgotten before the reply is sent: a send that fails drops the connection, which forgets
    // its waiter too, and would leave `it` pointing at an erased entry.
    ++it;
    forget_waiter(id);
    if (const auto c = connections.find(id); c != connections.end()) {
      c->second.parked = false;
      reply(c->second, missing.finish());
      flush(id, c->second);
      resumable.push_back(id);
    }
  }
}

void TcpStoreServer::Impl::reply(Connection& c, Bytes frame) {
  if (c.out_sent == c.out.size()) {
    c.out = std::move(frame);
    c.out_sent = 0;
  } else {
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }
}

void TcpStoreServer::Impl::flush(std::uint64_t id, Connection& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t sent =
        ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (sent > 0) {
      c.out_sent += static_cast<std::size_t>(sent);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else if (errno != EINTR) {
      drop(id, std::string("send: ") + std::strerror(errno));
      return;
    }
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.closing) drop(id, kHandshakeRefused);
}

void TcpStoreServer::Impl::drop(std::uint64_t id, const std::string& reason) {
  const auto it = connections.find(id);
  if (it == connections.end() || it->second.gone) return;
  Connection& c = it->second;
  // Stop all further work on it; the map entry goes at the end of the iteration so references
  // held by callers stay valid, but the descriptor closes now: it may be the one the next
  // accept() needs.
  c.gone = true;
  c.parked = true;
  c.closing = true;
  c.in.clear();
  c.out.clear();
  c.out_sent = 0;
  c.fd.reset();
  forget_waiter(id);
  pending->remove(id);
  backoff.descriptor_freed();
  // Hang-ups are ordinary; a refused handshake was already logged when it was refused.
  if (reason == kHungUp || reason == kHandshakeRefused)
    COHORT_LOG_DEBUG("store server: {} ({})", reason, c.peer);
  else if (!c.authenticated)
    warn_about_stranger(c, "dropped: " + reason);
  else
    COHORT_LOG_WARN("store server {}: dropped client {}: {}",
                    bootstrap::format_endpoint(bound_host, bound_port), c.peer, reason);
  to_close.push_back(id);
}

void TcpStoreServer::Impl::warn_about_stranger(const Connection& c, const std::string& what) {
  std::uint64_t held_back = 0;
  if (!stranger_warnings.allow(Clock::now(), held_back)) {
    COHORT_LOG_DEBUG("store server: client {} (no handshake yet) {}", c.peer, what);
    return;
  }
  COHORT_LOG_WARN("store server {}: client {} (no handshake yet) {}{}",
                  bootstrap::format_endpoint(bound_host, bound_port), c.peer, what,
                  bootstrap::held_back_note(held_back));
}

}  // namespace cohort
