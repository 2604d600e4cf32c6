#pragma once

// The blocking primitives algorithms are written with. Each posts its requests, then waits on
// all of them with the op's deadline; on failure (Timeout, RemoteError, ...) the Error
// propagates and requests still pending stay with the transport: the caller's error path calls
// Transport::cancel_all() before the buffers go away.

#include "transport/transport.hpp"

#include <cohort/dtype.hpp>

#include <cstddef>
#include <string>

namespace cohort::transport {

/// Sends `bytes` at `data` to `peer` and waits until the buffer may be reused.
void send(Transport& transport, int peer, const void* data, std::size_t bytes, Tag tag,
          Deadline deadline, const std::string& what);

/// Receives exactly `bytes` from `peer` into `data`.
void recv(Transport& transport, int peer, void* data, std::size_t bytes, Tag tag, Deadline deadline,
          const std::string& what);

/// Receives `recv_bytes` from `recv_peer` while sending `send_bytes` to `send_peer` (both with
/// `tag`). The receive is posted first, so two ranks exchanging with each other never depend on
/// eager delivery. The buffers must not overlap.
void sendrecv(Transport& transport, int send_peer, const void* send_data, std::size_t send_bytes,
              int recv_peer, void* recv_data, std::size_t recv_bytes, Tag tag, Deadline deadline,
              const std::string& what);

/// Receives `count` elements of `dtype` from `peer` into `scratch` (at least count *
/// dtype_size(dtype) bytes, not overlapping `dst`), then dst[i] = dst[i] op scratch[i].
void recv_reduce(Transport& transport, int peer, void* dst, void* scratch, std::size_t count,
                 DType dtype, ReduceOp op, Tag tag, Deadline deadline, const std::string& what);

}  // namespace cohort::transport
