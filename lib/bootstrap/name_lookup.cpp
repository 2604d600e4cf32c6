#include "bootstrap/name_lookup.hpp"

#include <cohort/error.hpp>

#include "core/quiet_thread.hpp"
#include "core/system_error.hpp"

#include <pthread.h>
#include <sys/socket.h>
#include <cerrno>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace cohort::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;

// How long a lookup's answer serves later callers for the same host and port, and how long a
// running lookup is joined. A rank retrying with short attempts (the file rendezvous tries for
// at most 5 s at a time) must be able to use an answer that came between two of them, or a name
// service slower than one attempt could never be used; a name may move (forget_stream_addresses
// drops an answer that did not connect), and an NSS module may hang for good, so neither lasts.
constexpr std::chrono::seconds kAnswerKeptFor{30};
// How old an answer must be before a failed connect drops it: a server not up yet refuses too, and
// asking the name service again at every retry (every 10-500 ms) would load it for nothing.
constexpr std::chrono::seconds kAnswerKeptAtLeast{2};

addrinfo stream_hints(int extra_flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | extra_flags;
  return hints;
}

// What getaddrinfo said, turned into the error the header promises.
[[noreturn]] void throw_lookup_failure(const std::string& host, int rc, int saved_errno) {
  const std::string what = "cannot resolve store host '" + host + "'";
  switch (rc) {
    case EAI_SYSTEM: throw system_error(what, saved_errno);
    case EAI_AGAIN:
    case EAI_MEMORY:
      throw Error(ErrorCode::SystemError,
                  what + ": " + gai_strerror(rc) + " (a failure that may pass)");
    default: throw Error(ErrorCode::InvalidArgument, what + ": " + gai_strerror(rc));
  }
}

// One getaddrinfo call for a host and port, shared by the thread making it and every caller
// waiting for it (a caller that gave up at its deadline and came back finds it still running,
// or its answer). Fields are guarded by Lookups::mutex.
struct PendingLookup {
  std::condition_variable finished;
  bool done = false;
  int rc = 0;
  int saved_errno = 0;
  std::shared_ptr<const addrinfo> result;  // freed with the last holder
  Clock::time_point started_at = Clock::now();
  Clock::time_point done_at;
};

// The lookups running or recently answered, by "host\0port". Never destroyed: a lookup thread
// still inside getaddrinfo at exit must find it.
struct Lookups {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<PendingLookup>> by_endpoint;
};
Lookups& lookups() {
  static Lookups* const all = [] {
    auto* table = new Lookups;
    // A child forked while a lookup runs has no thread finishing it: it forgets the lookups
    // still running (the mutex is held across the fork, so the child's copy is consistent).
    pthread_atfork([] { lookups().mutex.lock(); }, [] { lookups().mutex.unlock(); },
                   [] {
                     Lookups& mine = lookups();
                     std::erase_if(mine.by_endpoint,
                                   [](const auto& entry) { return !entry.second->done; });
                     mine.mutex.unlock();
                   });
    return table;
  }();
  return *all;
}

std::string endpoint_key(const std::string& host, const std::string& service) {
  return host + '\0' + service;
}

// getaddrinfo on a helper thread that signals meant for the application never reach.
void start_lookup(const std::shared_ptr<PendingLookup>& lookup, const std::string& host,
                  const std::string& service) {
  try {
    start_quiet_detached([lookup, host, service] {
      const addrinfo hints = stream_hints(0);
      addrinfo* found = nullptr;
      const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
      const int saved_errno = errno;
      {
        std::lock_guard lock(lookups().mutex);
        lookup->rc = rc;
        lookup->saved_errno = saved_errno;
        if (found) lookup->result = std::shared_ptr<const addrinfo>(found, freeaddrinfo);
        lookup->done = true;
        lookup->done_at = Clock::now();
      }
      lookup->finished.notify_all();
    });
  } catch (const std::system_error& e) {
    throw Error(ErrorCode::SystemError,
                "cannot start looking up store host '" + host + "': " + e.what());
  }
}

// host:port parsed as a literal, without the name service; null when it is not one.
AddressList parse_numeric(const std::string& host, const std::string& service) {
  addrinfo* parsed = nullptr;
  const addrinfo numeric = stream_hints(AI_NUMERICHOST);
  if (getaddrinfo(host.c_str(), service.c_str(), &numeric, &parsed) != 0) return nullptr;
  return AddressList(parsed, freeaddrinfo);
}

}  // namespace

bool is_numeric_address(const std::string& host) {
  return parse_numeric(host, "0") != nullptr;
}

AddressList lookup_stream_addresses(const std::string& host, std::uint16_t port,
                                    std::chrono::steady_clock::time_point deadline) {
  const std::string service = std::to_string(port);
  if (AddressList parsed = parse_numeric(host, service)) return parsed;

  Lookups& all = lookups();
  std::unique_lock lock(all.mutex);
  const std::string key = endpoint_key(host, service);
  auto found = all.by_endpoint.find(key);
  // Joined while it runs, and its answer used while fresh (both for a while only); a failure is
  // for the callers that waited for it (whoever comes next asks again).
  const auto now = Clock::now();
  const bool usable =
      found != all.by_endpoint.end() &&
      (found->second->done ? found->second->rc == 0 && now - found->second->done_at < kAnswerKeptFor
                           : now - found->second->started_at < kAnswerKeptFor);
  if (!usable) {
    auto fresh = std::make_shared<PendingLookup>();
    start_lookup(fresh, host, service);  // only a lookup whose thread started enters the table
    found = all.by_endpoint.insert_or_assign(key, std::move(fresh)).first;
  }
  const std::shared_ptr<PendingLookup> lookup = found->second;
  if (!lookup->finished.wait_until(lock, deadline, [&] { return lookup->done; }))
    throw Error(ErrorCode::Timeout, "looking up store host '" + host +
                                        "' did not finish by the deadline (the name service "
                                        "is not answering)");
  if (lookup->rc != 0) throw_lookup_failure(host, lookup->rc, lookup->saved_errno);
  return lookup->result;
}

void forget_stream_addresses(const std::string& host, std::uint16_t port,
                             const AddressList& failed) {
  Lookups& all = lookups();
  std::lock_guard lock(all.mutex);
  const auto found = all.by_endpoint.find(endpoint_key(host, std::to_string(port)));
  if (found != all.by_endpoint.end() && found->second->done && found->second->result == failed &&
      Clock::now() - found->second->done_at >= kAnswerKeptAtLeast)
    all.by_endpoint.erase(found);
}

}  // namespace cohort::bootstrap
