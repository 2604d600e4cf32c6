#pragma once

// A small exchange (a set-up round, a debug fingerprint) whose messages live in memory the
// transport keeps should the exchange fail. Such exchanges post into and from buffers of their
// own, not the op's; if one failed and its buffers were the caller's frame, a request UCX had
// already begun serving (a matched receive, a send not yet packed) could still write or read
// them after the frame is gone, and a late peer message would land in freed memory before the
// communicator's failure handling cancelled anything.

#include "transport/tag.hpp"
#include "transport/transport.hpp"

#include <memory>
#include <string>
#include <vector>

namespace cohort::transport {

/// Calls `post(requests)`, which posts the exchange's sends and receives on `transport` (into
/// and from memory `keep` owns) and appends them, then waits for them until `deadline`. On any
/// failure, posting included: cancels the transport's requests, leaves `keep` to the transport
/// until nothing on its connections can touch it (retain_until_quiet, for the tag id in `tag`),
/// and rethrows.
template <class Post>
void exchange_keeping(Transport& transport, Tag tag, std::shared_ptr<void> keep, Post&& post,
                      Deadline deadline, const std::string& what) {
  std::vector<Request> requests;
  try {
    post(requests);
    transport.wait(requests, deadline, what);
  } catch (...) {
    transport.cancel_all();
    transport.retain_until_quiet(tag_comm(tag), std::move(keep));
    throw;
  }
}

}  // namespace cohort::transport
