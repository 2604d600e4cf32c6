#include "gil.hpp"

#include <mutex>
#include <utility>
#include <vector>

namespace cohort::python {
namespace {

// Owners dropped on threads without the GIL, waiting for a Python thread. At most one pending
// call is scheduled at a time, so the interpreter's small pending-call queue never fills up.
struct DeferredReleases {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> owners;
  bool call_scheduled = false;
};

DeferredReleases& deferred() {
  // Leaked on purpose: destroying it at exit would drop Python objects after the interpreter.
  static auto* releases = new DeferredReleases;
  return *releases;
}

int run_deferred_releases(void*) {
  drain_deferred_releases();
  return 0;
}

void defer(std::shared_ptr<void> owner) {
  DeferredReleases& releases = deferred();
  bool schedule = false;
  {
    std::lock_guard lock(releases.mutex);
    releases.owners.push_back(std::move(owner));
    schedule = !releases.call_scheduled;
    releases.call_scheduled = true;
  }
  // Py_AddPendingCall needs neither the GIL nor a thread state. If its queue is full, the next
  // deferred owner tries again and the next blocking call drains the queue anyway.
  if (schedule && Py_AddPendingCall(&run_deferred_releases, nullptr) != 0) {
    std::lock_guard lock(releases.mutex);
    releases.call_scheduled = false;
  }
}

}  // namespace

std::shared_ptr<void> release_under_gil(std::shared_ptr<void> owner) {
  void* const address = owner.get();
  return std::shared_ptr<void>(address, [owner = std::move(owner)](void*) mutable noexcept {
    if (Py_IsInitialized() == 0) {
      new std::shared_ptr<void>(std::move(owner));  // the interpreter is gone: leak
    } else if (PyGILState_Check() != 0) {
      owner.reset();
    } else {
      defer(std::move(owner));
    }
  });
}

void drain_deferred_releases() {
  std::vector<std::shared_ptr<void>> owners;
  {
    std::lock_guard lock(deferred().mutex);
    owners.swap(deferred().owners);
    deferred().call_scheduled = false;
  }
  owners.clear();  // with the GIL held, as the caller guarantees
}

}  // namespace cohort::python
