#include "transport/primitives.hpp"

#include "reduce/reduce.hpp"

#include <array>

namespace cohort::transport {

void send(Transport& transport, int peer, const void* data, std::size_t bytes, Tag tag,
          Deadline deadline, const std::string& what) {
  const Request request = transport.post_send(peer, data, bytes, tag);
  transport.wait(std::span<const Request>(&request, 1), deadline, what);
}

void recv(Transport& transport, int peer, void* data, std::size_t bytes, Tag tag, Deadline deadline,
          const std::string& what) {
  const Request request = transport.post_recv(peer, data, bytes, tag);
  transport.wait(std::span<const Request>(&request, 1), deadline, what);
}

void sendrecv(Transport& transport, int send_peer, const void* send_data, std::size_t send_bytes,
              int recv_peer, void* recv_data, std::size_t recv_bytes, Tag tag, Deadline deadline,
              const std::string& what) {
  std::array<Request, 2> requests;
  requests[0] = transport.post_recv(recv_peer, recv_data, recv_bytes, tag);
  requests[1] = transport.post_send(send_peer, send_data, send_bytes, tag);
  transport.wait(requests, deadline, what);
}

void recv_reduce(Transport& transport, int peer, void* dst, void* scratch, std::size_t count,
                 DType dtype, ReduceOp op, Tag tag, Deadline deadline, const std::string& what) {
  recv(transport, peer, scratch, count * dtype_size(dtype), tag, deadline, what);
  reduce::reduce_into(op, dtype, dst, scratch, count);
}

}  // namespace cohort::transport
