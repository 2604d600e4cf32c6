#include "cohort_run/store_watch.hpp"

#include <exception>

namespace cohort::run {

JobStoreWatch::JobStoreWatch(LauncherStore& store, bool poll_remote,
                             std::chrono::milliseconds interval, std::string store_name)
    : store_(store),
      poll_remote_(poll_remote),
      interval_(interval),
      store_name_(std::move(store_name)),
      thread_([this] { run(); }) {}

JobStoreWatch::~JobStoreWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void JobStoreWatch::publish(JobAbort abort) {
  {
    std::lock_guard lock(mutex_);
    if (requested_) return;
    requested_ = std::move(abort);
  }
  changed_.notify_all();
}

std::optional<std::string> JobStoreWatch::stop_reason() {
  std::lock_guard lock(mutex_);
  if (remote_) return "node " + std::to_string(remote_->node_rank) + " stopped the job";
  if (lost_) return "lost the job store at " + store_name_ + " (" + *lost_ + ")";
  return std::nullopt;
}

JobStoreWatch::Settled JobStoreWatch::settle(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (requested_) {
    if (!changed_.wait_for(lock, wait, [this] { return publish_done_ || lost_.has_value(); }))
      return {true, requested_, std::nullopt};
    if (first_) return {false, first_, std::nullopt};
    return {false, requested_, lost_};
  }
  return {false, remote_, lost_};
}

void JobStoreWatch::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // A publication goes at once; polls wait out the interval.
    changed_.wait_for(lock, interval_,
                      [this] { return stopping_ || (requested_ && !publish_done_ && !lost_); });
    if (stopping_) return;
    if (lost_) continue;  // nothing more to learn; wait to be stopped
    if (requested_ && !publish_done_) {
      publish_requested(lock);
    } else if (poll_remote_ && !remote_ && !requested_) {
      poll_for_remote(lock);
    }
  }
}

// Both run with `lock` held on entry and exit, and release it across the store call so the
// supervisor's reads never wait for the store.
void JobStoreWatch::publish_requested(std::unique_lock<std::mutex>& lock) {
  const JobAbort request = *requested_;
  lock.unlock();
  std::optional<JobAbort> first;
  std::optional<std::string> error;
  try {
    first = store_.publish_abort(request);
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  publish_done_ = true;
  first_ = std::move(first);
  if (error) lost_ = std::move(error);
  changed_.notify_all();
}

void JobStoreWatch::poll_for_remote(std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  std::optional<JobAbort> remote;
  std::optional<std::string> error;
  try {
    remote = store_.published_abort();
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  if (remote) remote_ = std::move(remote);
  if (error) lost_ = std::move(error);
}

}  // namespace cohort::run
