// connect_store(): every rank of a job reaching the same store.
//
//  * Address known and hosted by a launcher or the caller: connect (with retries).
//  * Address known and nobody hosts it (mpirun/srun/torchrun with COHORT_STORE_ADDR or
//    MASTER_ADDR): rank 0 binds it and the others connect.
//  * No address (or no port): rank 0 binds a free port and publishes "host, port, token" in
//    "<COHORT_RENDEZVOUS_DIR or temp dir>/cohort-<job id>.addr", written to a temporary file and
//    renamed so readers never see half of it. The token is random, made by rank 0 for this job,
//    so a stale file left by an earlier job with the same id names a dead port or a server that
//    refuses our token; readers then re-read the file until rank 0 has replaced it. Should the
//    earlier job's server still be alive (its rank 0 hung), the token in the stale file works,
//    so each rank also claims the key "cohort/rendezvous/rank/<r>" with compare_set: finding it
//    already held by another process marks the store as an earlier incarnation's.
//
// Binding: rank 0 listens where the other ranks are told to connect, not on every interface
// (bootstrap::store_bind_address): the store address when one is known, loopback on one node,
// and otherwise this host's own address, which the rendezvous file then names. Only when that
// address cannot be known here does it bind the wildcard: a host name resolving to loopback
// locally but not on the peers (Debian maps the own host name to 127.0.1.1), or an address that
// is not this host's (NAT). The token keeps strangers out either way; the interface narrows who
// can try.

#include <cohort/environment.hpp>
#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include "bootstrap/forwarding_store.hpp"
#include "bootstrap/socket.hpp"
#include "core/log.hpp"
#include "core/system_error.hpp"
#include "core/tunables.hpp"
#include "core/unique_fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

namespace cohort {
namespace {

namespace fs = std::filesystem;

// One attempt on a published store, the handshake included: rank 0's server may have many
// ranks' handshakes to answer at once.
constexpr std::chrono::milliseconds kRendezvousAttemptTimeout{5000};
constexpr std::chrono::milliseconds kFirstPollDelay{5};
constexpr std::chrono::milliseconds kMaxPollDelay{200};

struct Published {
  std::string host;
  std::uint16_t port = 0;
  std::string token;
  bool operator==(const Published&) const = default;
};

std::string random_token() {
  std::random_device device;  // getrandom()/urandom on Linux
  std::string token;
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) token += kHex[device() & 15u];
  return token;
}

std::string file_safe(const std::string& text) {
  std::string safe = text;
  for (char& ch : safe)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_')
      ch = '_';
  return safe;
}

std::string rank_slot_key(int rank) {
  return "cohort/rendezvous/rank/" + std::to_string(rank);
}

// Unique to this process across hosts and pid reuse.
Bytes process_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string text =
      std::string(host) + ":" + std::to_string(::getpid()) + ":" + random_token();
  return Bytes(text.begin(), text.end());
}

fs::path rendezvous_path(const Environment& env) {
  std::string job = env.job_id;
  if (job.empty()) {
    // Ranks on one node share their launcher as parent (mpirun, hydra proxy, slurmstepd, a
    // forking test), so its pid is a job id they all agree on.
    if (env.num_nodes > 1)
      throw Error(ErrorCode::InvalidArgument,
                  "no job id to name the rendezvous file for a " + std::to_string(env.num_nodes) +
                      "-node job: set COHORT_JOB_ID, or COHORT_STORE_ADDR and COHORT_STORE_PORT");
    job = "ppid" + std::to_string(::getppid());
  }
  const std::optional<std::string>& dir = tunables().rendezvous_dir;
  // The temp directory is each node's own: ranks on other nodes would wait out the store
  // timeout for a file they can never see.
  if (env.num_nodes > 1 && !dir)
    throw Error(ErrorCode::InvalidArgument,
                "a " + std::to_string(env.num_nodes) +
                    "-node job with no store address meets through a file, which needs a "
                    "directory every node sees: set COHORT_RENDEZVOUS_DIR to one on a shared file "
                    "system, or set COHORT_STORE_ADDR and COHORT_STORE_PORT (or MASTER_ADDR and "
                    "MASTER_PORT) to an address of the node of rank 0");
  const fs::path base = dir ? fs::path(*dir) : fs::temp_directory_path();
  return base / ("cohort-" + file_safe(job) + ".addr");
}

void publish(const fs::path& path, const Published& what) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  // The token inside is a secret: the file is created readable by the job's user only (a
  // file created with the umask's mode and narrowed afterwards could be opened in between, and
  // an open descriptor keeps reading after the narrowing). O_EXCL | O_NOFOLLOW: never write
  // through a file or link someone else put there.
  ::unlink(tmp.c_str());  // our own leftover, if any: the name holds our pid
  const UniqueFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR));
  if (!fd) throw system_error("create rendezvous file " + tmp.string(), errno);
  const std::string text = what.host + '\n' + std::to_string(what.port) + '\n' + what.token + '\n';
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::unlink(tmp.c_str());
      throw system_error("write rendezvous file " + tmp.string(), err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw system_error("publish rendezvous file " + path.string() +
                           (err == EPERM || err == EACCES
                                ? " (a file of that name belonging to another user is in the way: "
                                  "remove it, or set COHORT_RENDEZVOUS_DIR)"
                                : ""),
                       err);
  }
}

/// Whether anyone may create files in `dir` (the temp directory): a file there of another user's
/// may have been put there first, naming a store of theirs. Elsewhere (a directory only the job's
/// users write to) the file is trusted whoever owns it: on NFS with root_squash the job's own file
/// looks like nobody's.
bool open_to_everyone(const fs::path& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0;
}

/// The published address, or nothing while the file is absent or incomplete. With
/// `check_owner`, a file of another user's in a directory open to everyone is refused.
std::optional<Published> read_published(const fs::path& path, bool check_owner = true) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::nullopt;
  if (check_owner && st.st_uid != ::geteuid() && open_to_everyone(path.parent_path()))
    throw Error(ErrorCode::InvalidArgument,
                "the rendezvous file " + path.string() + " belongs to uid " +
                    std::to_string(st.st_uid) + ", not to this job's user (uid " +
                    std::to_string(::geteuid()) +
                    "): remove it, or set COHORT_RENDEZVOUS_DIR to a directory of your own");
  std::string text(4096, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
  }
  text.resize(size);
  std::istringstream in(text);
  Published p;
  std::string port;
  if (!std::getline(in, p.host) || !std::getline(in, port) || !std::getline(in, p.token))
    return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(port.c_str(), &end, 10);
  if (end == port.c_str() || *end != '\0' || value <= 0 || value > 65535 || p.host.empty())
    return std::nullopt;
  p.port = static_cast<std::uint16_t>(value);
  return p;
}

std::string local_address_of(const TcpStoreServer& server) {
  if (!bootstrap::is_wildcard_address(server.host())) return server.host();
  return server.host() == "::" ? "::1" : "127.0.0.1";
}

// Rank 0's store: the server plus rank 0's own client of it. Destroying it closes the client,
// removes the rendezvous file (if it is still ours) and then stops the server.
class HostedStore final : public bootstrap::ForwardingStore {
 public:
  HostedStore(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<TcpStore> client,
              fs::path file, std::string token)
      : ForwardingStore(std::move(client)),
        server_(std::move(server)),
        file_(std::move(file)),
        token_(std::move(token)) {}

  ~HostedStore() override {
    release_inner();  // the client, while its server is still up
    if (file_.empty()) return;
    const auto published = read_published(file_, /*check_owner=*/false);
    if (published && published->token == token_ && std::remove(file_.c_str()) != 0)
      COHORT_LOG_WARN("cannot remove rendezvous file {}: {}", file_.string(), std::strerror(errno));
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // stopped after the body above: outlives the client
  fs::path file_;
  std::string token_;
};

std::shared_ptr<Store> host_store(const Environment& env, std::uint16_t port, std::string token,
                                  const fs::path& file) {
  TcpStoreOptions options;
  options.host = bootstrap::store_bind_address(env.store_addr, env.num_nodes);
  options.port = port;
  options.token = token;
  auto server = std::make_unique<TcpStoreServer>(options);
  options.host = local_address_of(*server);
  options.port = server->port();
  auto client = std::make_shared<TcpStore>(options);
  if (!file.empty()) {
    client->compare_set(rank_slot_key(0), {}, process_identity());
    // Peers connect to the address bound; only the wildcard needs this host's name instead.
    std::string advertised = env.store_addr;
    if (advertised.empty()) {
      char name[256] = {};
      advertised = bootstrap::is_wildcard_address(server->host()) &&
                           ::gethostname(name, sizeof name - 1) == 0
                       ? std::string(name)
                       : options.host;
    }
    publish(file, {advertised, server->port(), token});
    COHORT_LOG_INFO("rank 0 hosts the store on {}, published in {}",
                    bootstrap::format_endpoint(advertised, server->port()), file.string());
  }
  return std::make_shared<HostedStore>(std::move(server), std::move(client), file,
                                       std::move(token));
}

std::shared_ptr<Store> join_published(const Environment& env, const fs::path& file) {
  const auto timeout = default_store_timeout();
  const auto deadline = Clock::now() + timeout;
  auto delay = kFirstPollDelay;
  std::optional<Published> last_refused;
  std::string last_error = "the file does not exist yet";
  while (Clock::now() < deadline) {
    const auto published = read_published(file);
    if (published && published != last_refused) {
      TcpStoreOptions options;
      options.host = published->host;
      options.port = published->port;
      options.token = published->token;
      // A published address had a server: a refusal means it is gone (a stale file), not that
      // it is not up yet, so the attempt ends at once and the file is read again. Any attempt
      // ends by the loop's deadline: a rank never waits beyond the store timeout.
      options.retry_refused = false;
      options.connect_timeout =
          std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                     std::chrono::milliseconds(1), kRendezvousAttemptTimeout);
      try {
        auto store = std::make_shared<TcpStore>(options);
        const Bytes me = process_identity();
        const Bytes holder = store->compare_set(rank_slot_key(env.rank), {}, me);
        if (holder == me) return store;
        last_error = "rank " + std::to_string(env.rank) + "'s slot at " +
                     bootstrap::format_endpoint(published->host, published->port) +
                     " is held by another process (an earlier job's store)";
        last_refused = published;
        COHORT_LOG_DEBUG("rendezvous file {}: {}; waiting for rank 0", file.string(), last_error);
      } catch (const Error& e) {
        // A stale file from an earlier job: its server is gone or refuses our token. Rank 0
        // will replace the file; try again once it has. An attempt that ran out of time (a
        // slow name service, rank 0's server busy with many ranks' handshakes) is tried again
        // as it stands.
        last_error = e.message();
        if (e.code() != ErrorCode::Timeout) last_refused = published;
        COHORT_LOG_DEBUG("rendezvous file {} names an unusable store ({}); waiting for rank 0",
                         file.string(), e.message());
      }
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, kMaxPollDelay);
  }
  throw Error(ErrorCode::Timeout, "rank " + std::to_string(env.rank) + " waited " +
                                      std::to_string(timeout.count()) +
                                      " ms for rank 0 to publish the store in " + file.string() +
                                      " (last: " + last_error + ")");
}

}  // namespace

std::shared_ptr<Store> connect_store(const Environment& env) {
  // The first step of a job's start-up (init(), or connect_store then Communicator::create):
  // tunables set in-process before it count, and a malformed one fails here, named.
  reload_tunables();
  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size)
    throw Error(ErrorCode::InvalidArgument, "connect_store: rank " + std::to_string(env.rank) +
                                                " is not in a world of " +
                                                std::to_string(env.world_size));
  if (env.world_size == 1 && (env.store_addr.empty() || env.source == LaunchSource::Standalone))
    return make_local_store();

  if (!env.store_addr.empty() && env.store_port != 0) {
    if (env.host_store && env.rank == 0) return host_store(env, env.store_port, env.token, {});
    TcpStoreOptions options;
    options.host = env.store_addr;
    options.port = env.store_port;
    options.token = env.token;
    options.connect_timeout = default_store_timeout();
    return std::make_shared<TcpStore>(options);
  }

  const fs::path file = rendezvous_path(env);
  if (env.rank == 0) return host_store(env, 0, random_token(), file);
  return join_published(env, file);
}

}  // namespace cohort
