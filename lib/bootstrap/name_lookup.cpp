#include "bootstrap/name_lookup.hpp"

#include <cohort/error.hpp>

#include "core/system_error.hpp"

#include <sys/socket.h>
#include <cerrno>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace cohort::bootstrap {

namespace {

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

// One lookup, shared by the thread doing it and the caller waiting for it; whichever lets go
// last frees it (and the addresses, when the caller gave up before they came).
struct PendingLookup {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  int rc = 0;
  int saved_errno = 0;
  addrinfo* result = nullptr;

  ~PendingLookup() {
    if (result) freeaddrinfo(result);
  }
};

}  // namespace

AddressList lookup_stream_addresses(const std::string& host, std::uint16_t port,
                                    std::chrono::steady_clock::time_point deadline) {
  const std::string service = std::to_string(port);
  addrinfo* result = nullptr;
  const addrinfo numeric = stream_hints(AI_NUMERICHOST);
  if (getaddrinfo(host.c_str(), service.c_str(), &numeric, &result) == 0)
    return AddressList(result);

  auto lookup = std::make_shared<PendingLookup>();
  try {
    std::thread([lookup, host, service] {
      const addrinfo hints = stream_hints(0);
      addrinfo* found = nullptr;
      const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
      const int saved_errno = errno;
      {
        std::lock_guard lock(lookup->mutex);
        lookup->rc = rc;
        lookup->saved_errno = saved_errno;
        lookup->result = found;
        lookup->done = true;
      }
      lookup->finished.notify_one();
    }).detach();
  } catch (const std::system_error& e) {
    throw Error(ErrorCode::SystemError,
                "cannot start looking up store host '" + host + "': " + e.what());
  }

  std::unique_lock lock(lookup->mutex);
  if (!lookup->finished.wait_until(lock, deadline, [&] { return lookup->done; }))
    throw Error(ErrorCode::Timeout, "looking up store host '" + host +
                                        "' did not finish by the deadline (the name service "
                                        "is not answering)");
  if (lookup->rc != 0) throw_lookup_failure(host, lookup->rc, lookup->saved_errno);
  return AddressList(std::exchange(lookup->result, nullptr));
}

}  // namespace cohort::bootstrap
