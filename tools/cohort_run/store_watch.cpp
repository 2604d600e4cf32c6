// JobStoreWatch (store_watch.hpp): one thread, one mutex; the lock is never held across a
// store call, so the supervisor's reads never wait for the store.

#include "cohort_run/store_watch.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace cohort::run {
namespace {
// How long the watch's end waits for a store call in flight before leaving the thread be.
constexpr std::chrono::seconds kJoinWait{1};
}  // namespace

struct JobStoreWatch::State {
  std::shared_ptr<LauncherStore> store;
  bool poll_remote = false;
  std::chrono::milliseconds interval{};
  std::string store_name;

  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  bool thread_done = false;
  std::optional<JobAbort> requested;  // what publish() asked for
  bool publish_done = false;          // `requested` went to the store (or failed to)
  std::optional<JobAbort> first;      // the job's first abort, per the store
  std::optional<JobAbort> remote;     // another launcher's abort, seen by polling
  std::optional<std::string> lost;    // why the store is unusable

  void run();
  void publish_requested(std::unique_lock<std::mutex>& lock);
  void poll_for_remote(std::unique_lock<std::mutex>& lock);
};

JobStoreWatch::JobStoreWatch(std::shared_ptr<LauncherStore> store, bool poll_remote,
                             std::chrono::milliseconds interval, std::string store_name)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->poll_remote = poll_remote;
  state_->interval = interval;
  state_->store_name = std::move(store_name);
  std::thread([state = state_] { state->run(); }).detach();
}

JobStoreWatch::~JobStoreWatch() {
  std::unique_lock lock(state_->mutex);
  state_->stopping = true;
  state_->changed.notify_all();
  // Its end is awaited through the state (a detached thread cannot be joined with a bound).
  state_->changed.wait_for(lock, kJoinWait, [this] { return state_->thread_done; });
}

void JobStoreWatch::publish(JobAbort abort) {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->requested) return;
    state_->requested = std::move(abort);
  }
  state_->changed.notify_all();
}

std::optional<std::string> JobStoreWatch::stop_reason() {
  std::lock_guard lock(state_->mutex);
  if (state_->remote)
    return "node " + std::to_string(state_->remote->node_rank) + " stopped the job";
  if (state_->lost)
    return "lost the job store at " + state_->store_name + " (" + *state_->lost + ")";
  return std::nullopt;
}

JobStoreWatch::Settled JobStoreWatch::settle(std::chrono::milliseconds wait) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  if (s.requested) {
    if (!s.changed.wait_for(lock, wait, [&s] { return s.publish_done || s.lost.has_value(); }))
      return {true, s.requested, std::nullopt};
    if (s.first) return {false, s.first, std::nullopt};
    return {false, s.requested, s.lost};
  }
  return {false, s.remote, s.lost};
}

void JobStoreWatch::State::run() {
  std::unique_lock lock(mutex);
  for (;;) {
    // A publication goes at once; polls wait out the interval.
    changed.wait_for(lock, interval,
                     [this] { return stopping || (requested && !publish_done && !lost); });
    if (stopping) break;
    if (lost) continue;  // nothing more to learn; wait to be stopped
    if (requested && !publish_done) {
      publish_requested(lock);
    } else if (poll_remote && !remote && !requested) {
      poll_for_remote(lock);
    }
  }
  thread_done = true;
  changed.notify_all();
}

// Both run with `lock` held on entry and exit, and release it across the store call.
void JobStoreWatch::State::publish_requested(std::unique_lock<std::mutex>& lock) {
  const JobAbort request = *requested;
  lock.unlock();
  std::optional<JobAbort> published;
  std::optional<std::string> error;
  try {
    published = store->publish_abort(request);
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  publish_done = true;
  first = std::move(published);
  if (error) lost = std::move(error);
  changed.notify_all();
}

void JobStoreWatch::State::poll_for_remote(std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  std::optional<JobAbort> seen;
  std::optional<std::string> error;
  try {
    seen = store->published_abort();
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  if (seen) remote = std::move(seen);
  if (error) lost = std::move(error);
}

}  // namespace cohort::run
