#pragma once

// The transport of a world of one: every message goes from rank 0 to itself inside the process.
// A send and a receive with the same tag match in posting order (FIFO per tag); the copy happens
// when the second of the pair is posted, and both complete then. Nothing completes without its
// partner, so waiting on an unmatched request can never succeed: wait() says so at once
// (Error(Timeout)) instead of sleeping until the deadline.

#include "transport/cpu_set.hpp"
#include "transport/interruption.hpp"
#include "transport/request_table.hpp"
#include "transport/transport.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

namespace cohort::transport {

class SelfTransport final : public Transport {
 public:
  SelfTransport() = default;

  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  Request post_send(int peer, const void* data, std::size_t bytes, Tag tag) override;
  Request post_recv(int peer, void* data, std::size_t bytes, Tag tag) override;
  void wait(std::span<const Request> requests, Deadline deadline, const std::string& what) override;
  bool test(const Request& request) override;
  void cancel_all() noexcept override;
  void interrupt(const std::string& reason) noexcept override { interruption_.raise(reason); }
  void set_side_work(SideWork* side_work) noexcept override {
    interruption_.set_side_work(side_work);
  }
  std::string description() const override { return "self (in-process, world of one)"; }
  unsigned host_cpus() const noexcept override { return host_cpus_; }
  /// Another world of one (with its own queue: nothing is shared, so no tag id is needed).
  std::unique_ptr<Transport> derive(std::span<const int> members, int rank,
                                    TagIdClaim tag) override;

 private:
  enum class State { Unmatched, Done, Failed };
  struct Entry {
    bool is_send;
    Tag tag;
    const void* send_data;
    void* recv_data;
    std::size_t bytes;
    std::uint64_t order;  // posting order, for FIFO matching
    State state = State::Unmatched;
    std::string error;  // why it failed
  };

  Request post(Entry entry);
  Entry& find(const Request& request, const std::string& what);
  /// Releases a finished entry; throws Error(InvalidArgument) if it failed (sizes disagreed).
  void finish(const Request& request, Entry& entry, const std::string& what);
  static std::string describe(const Entry& entry);

  RequestTable<Entry> requests_;
  std::uint64_t next_order_ = 0;
  Interruption interruption_;
  unsigned host_cpus_ =
      cpus_in_union(std::array{affinity_cpus()}, std::thread::hardware_concurrency());
};

}  // namespace cohort::transport
