#include "transport/host_span.hpp"

#include <cohort/error.hpp>

namespace cohort::transport {
namespace {

std::string first_key(const std::string& prefix) {
  return prefix + "/host_span/first";
}
std::string elsewhere_key(const std::string& prefix) {
  return prefix + "/host_span/elsewhere";
}
std::string arrived_key(const std::string& prefix) {
  return prefix + "/host_span/arrived";
}
std::string verdict_key(const std::string& prefix) {
  return prefix + "/host_span/verdict";
}

}  // namespace

bool ranks_span_hosts(Store& store, const std::string& prefix, const std::string& identity,
                      int size, std::chrono::milliseconds timeout) {
  if (size <= 1) return false;
  const Bytes mine(identity.begin(), identity.end());
  // The value now stored: ours if we came first, else the first rank's.
  const Bytes first = store.compare_set(first_key(prefix), Bytes{}, mine);
  // Counted before arriving, so the last to arrive sees every rank's count.
  if (first != mine) store.add(elsewhere_key(prefix), 1);
  if (store.add(arrived_key(prefix), 1) == size) {
    const bool several = store.add(elsewhere_key(prefix), 0) > 0;
    store.set_string(verdict_key(prefix), several ? "several" : "one");
  }
  try {
    return store.get_string(verdict_key(prefix), timeout) == "several";
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    throw Error(ErrorCode::Timeout, "waiting for every rank to say which host it is on (" +
                                        std::to_string(store.add(arrived_key(prefix), 0)) + " of " +
                                        std::to_string(size) + " ranks arrived): " + e.what());
  }
}

void forget_host_span(Store& store, const std::string& prefix) {
  for (const std::string& key :
       {first_key(prefix), elsewhere_key(prefix), arrived_key(prefix), verdict_key(prefix)})
    store.erase(key);
}

}  // namespace cohort::transport
