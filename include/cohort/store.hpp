#pragma once

/// Key-value rendezvous store used to bootstrap communicators: ranks publish addresses and
/// counters here before any collective moves data. Values are bytes. Every blocking call has a
/// deadline; when it passes the call throws Error(Timeout) naming the keys still missing.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

using Bytes = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

/// Default deadline for store waits when the caller gives none (COHORT_STORE_TIMEOUT seconds
/// overrides it; 300 s otherwise).
std::chrono::milliseconds default_store_timeout();

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(std::string_view key, const Bytes& value) = 0;
  /// Blocks until `key` exists, then returns its value; Timeout after `timeout` (0: looks once,
  /// without waiting, as cohort's callers expect of every store).
  virtual Bytes get(std::string_view key, std::chrono::milliseconds timeout) = 0;
  Bytes get(std::string_view key) { return get(key, default_store_timeout()); }
  /// Atomically adds `delta` to the 64-bit counter at `key` (created as 0) and returns the result.
  /// Counters are stored as decimal ASCII text ("42"), so get() reads them and set_string("5")
  /// seeds one; add() on any other value throws Error(InvalidArgument) naming the key.
  virtual std::int64_t add(std::string_view key, std::int64_t delta) = 0;
  /// Sets `key` to `desired` if its value equals `expected` (an empty `expected` means "key
  /// absent"). Returns the value now stored (empty when the key is absent and stays absent).
  virtual Bytes compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) = 0;
  /// Blocks until every key exists; Timeout after `timeout` (0: looks once).
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  /// True if every key exists, without blocking.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Removes `key`; returns whether it existed.
  virtual bool erase(std::string_view key) = 0;
  virtual std::int64_t num_keys() = 0;

  // Conveniences over bytes.
  void set_string(std::string_view key, std::string_view value);
  std::string get_string(std::string_view key, std::chrono::milliseconds timeout);
  std::string get_string(std::string_view key) { return get_string(key, default_store_timeout()); }
};

/// A view of another store that prefixes every key with "<prefix>/", so communicators and
/// subsystems sharing one store never collide.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner);

  void set(std::string_view key, const Bytes& value) override;
  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override;
  using Store::get;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  Bytes compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool erase(std::string_view key) override;
  /// Counts keys of the inner store (all prefixes).
  std::int64_t num_keys() override;

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& inner() const { return inner_; }

 private:
  std::string full(std::string_view key) const;
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

struct TcpStoreOptions {
  /// Address to bind (server) or connect to (client). The server binds loopback when empty.
  std::string host;
  /// 0 (server only) picks a free port; port() reports it.
  std::uint16_t port = 0;
  /// Shared secret required in the handshake (COHORT_TOKEN). Empty means no token.
  std::string token;
  /// Upper bound on a key or value, in bytes; larger frames are refused before allocating.
  std::size_t max_value_bytes = 64u << 20;
  /// Client: the one deadline for connecting, from the constructor's start: looking the host
  /// up (a name service that does not answer is not waited for beyond it), connecting (retried
  /// with backoff while refused, while the lookup fails in a way that may pass, such as
  /// EAI_AGAIN, and while the name does not exist, with a warning: a job's first node may enter
  /// DNS only once it runs, as a Kubernetes pod does), and the token handshake.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  /// Client: whether a refused connection (nobody listens at the address), or a host name that
  /// does not exist, is retried until connect_timeout, as when the server is not up yet. False
  /// for an address known to have had a server listening (one published by a server that had
  /// started): either then means it is gone, and the constructor throws Error(RemoteError) at
  /// once.
  bool retry_refused = true;
  /// Client: how long a call that waits for no key (set, add, check, compare_set, erase,
  /// num_keys) may take, from entering the call to the server's answer, before it throws
  /// Error(Timeout), and at most how long a get()/wait() waits beyond its own timeout for the
  /// server's answer (10 s otherwise). A call that timed out waiting for the server leaves the
  /// connection unusable. Unset: default_store_timeout(). A watchdog that must notice a silent
  /// server soon (a launcher polling node 0) sets it short.
  std::optional<std::chrono::milliseconds> io_timeout;
  /// Server: a connection that has not completed the token handshake this long after it was
  /// accepted is closed, so idle or slow strangers cannot hold descriptors. Must be positive.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
  /// Server: most connections waiting for their handshake at once. A connection accepted beyond
  /// it evicts the oldest waiting one (an honest client shows its token in its first round trip,
  /// so the oldest is the likeliest stranger). Authenticated clients are never counted or
  /// evicted. Must be positive.
  std::size_t max_pending_handshakes = 128;
};

/// The server half of TcpStore: one thread serving many clients with poll(), never a thread per
/// client. Stops and joins in its destructor. Strangers are bounded: at most
/// max_pending_handshakes unauthenticated connections, each for at most handshake_timeout. When
/// the process runs out of descriptors (or the kernel of buffers) the server stops accepting for
/// a short back-off, or until a client leaves, and keeps serving the clients it has; connections
/// waiting meanwhile stay in the kernel's backlog and are served once a descriptor frees.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(TcpStoreOptions options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port actually bound.
  std::uint16_t port() const;
  /// The address actually bound (numeric).
  std::string host() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The client half: one connection to a TcpStoreServer. Safe to share between threads: calls
/// are serialised, and a call's deadline covers its wait for the connection too, so a long get()
/// in one thread makes another thread's short call time out (Error(Timeout), connection still
/// usable) rather than overrun; a get()/wait() waits for the connection at least 100 ms even
/// when its timeout is shorter. A vanished server turns calls into Error(RemoteError).
class TcpStore final : public Store {
 public:
  /// Connects (retrying with backoff until options.connect_timeout) and authenticates. Throws
  /// Error(Timeout) when connect_timeout passes first (naming the last failure, such as a host
  /// that does not exist), Error(InvalidArgument) for a port of 0, an io_timeout that is not
  /// positive or a refused token.
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;

  void set(std::string_view key, const Bytes& value) override;
  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override;
  using Store::get;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  Bytes compare_set(std::string_view key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool erase(std::string_view key) override;
  std::int64_t num_keys() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
