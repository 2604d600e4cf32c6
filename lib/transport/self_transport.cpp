#include "transport/self_transport.hpp"

#include <cohort/error.hpp>

#include <cstring>

namespace cohort::transport {
namespace {

void check_self(int peer, const char* what) {
  if (peer != 0)
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": peer rank " +
                                                std::to_string(peer) +
                                                " is out of range [0, 1) (world of one)");
}

}  // namespace

Request SelfTransport::post_send(int peer, const void* data, std::size_t bytes, Tag tag) {
  check_self(peer, "post_send");
  if (!data && bytes)
    throw Error(ErrorCode::InvalidArgument,
                "post_send: null buffer for " + std::to_string(bytes) + " bytes");
  return post(Entry{true, with_source(tag, 0), data, nullptr, bytes, 0});
}

Request SelfTransport::post_recv(int peer, void* data, std::size_t bytes, Tag tag) {
  check_self(peer, "post_recv");
  if (!data && bytes)
    throw Error(ErrorCode::InvalidArgument,
                "post_recv: null buffer for " + std::to_string(bytes) + " bytes");
  return post(Entry{false, with_source(tag, 0), nullptr, data, bytes, 0});
}

Request SelfTransport::post(Entry entry) {
  entry.order = next_order_++;
  // The oldest unmatched partner (opposite direction, same tag) is the match.
  Entry* partner = nullptr;
  requests_.for_each([&](const Request&, Entry& other) {
    if (other.state == State::Unmatched && other.is_send != entry.is_send &&
        other.tag == entry.tag && (!partner || other.order < partner->order))
      partner = &other;
  });
  if (partner) {
    Entry& send = entry.is_send ? entry : *partner;
    Entry& recv = entry.is_send ? *partner : entry;
    send.state = State::Done;
    if (send.bytes != recv.bytes) {
      // As over the network: the sender is done, the receiver learns of the mismatch.
      recv.state = State::Failed;
      recv.error = "sizes disagree: " + describe(recv) + " got a " + std::to_string(send.bytes) +
                   "-byte message";
    } else {
      if (send.bytes) std::memcpy(recv.recv_data, send.send_data, send.bytes);
      recv.state = State::Done;
    }
  }
  return requests_.insert(std::move(entry));
}

std::string SelfTransport::describe(const Entry& entry) {
  return std::string(entry.is_send ? "send to rank 0" : "receive from rank 0") + " (" +
         std::to_string(entry.bytes) + " bytes, seq " + std::to_string(tag_seq(entry.tag)) +
         " step " + std::to_string(tag_step(entry.tag)) + ")";
}

SelfTransport::Entry& SelfTransport::find(const Request& request, const std::string& what) {
  Entry* entry = requests_.find(request);
  if (!entry)
    throw Error(ErrorCode::InvalidUsage,
                "stale or invalid request handle (slot " + std::to_string(request.slot) +
                    ", generation " + std::to_string(request.generation) + ")",
                ErrorContext{.op = what});
  return *entry;
}

void SelfTransport::finish(const Request& request, Entry& entry, const std::string& what) {
  const bool failed = entry.state == State::Failed;
  const std::string error = entry.error;
  requests_.release(request);
  // The only failure a loopback transfer has: a send and receive of different sizes.
  if (failed) throw Error(ErrorCode::InvalidArgument, error, ErrorContext{.op = what});
}

void SelfTransport::wait(std::span<const Request> requests, Deadline, const std::string& what) {
  interruption_.check(what, WaitKind::DrivesTransport);
  std::string unmatched;
  for (const Request& request : requests) {
    if (request.is_completed()) continue;
    const Entry& entry = find(request, what);
    if (entry.state == State::Unmatched)
      unmatched += (unmatched.empty() ? "" : ", ") + describe(entry);
  }
  if (!unmatched.empty())
    throw Error(
        ErrorCode::Timeout,
        "can never complete in a world of one, nothing matches: still pending: " + unmatched,
        ErrorContext{.op = what});
  for (const Request& request : requests)
    if (!request.is_completed()) finish(request, find(request, what), what);
}

bool SelfTransport::test(const Request& request) {
  if (request.is_completed()) return true;
  Entry& entry = find(request, "test");
  if (entry.state == State::Unmatched) return false;
  finish(request, entry, "test");
  return true;
}

void SelfTransport::cancel_all() noexcept {
  requests_.clear();
}

std::unique_ptr<Transport> SelfTransport::derive(std::span<const int> members, int rank,
                                                 TagIdClaim) {
  if (members.size() != 1 || members[0] != 0 || rank != 0)
    throw Error(ErrorCode::InvalidArgument,
                "derive: a world of one has only rank 0 to derive a transport from");
  return std::make_unique<SelfTransport>();
}

}  // namespace cohort::transport
