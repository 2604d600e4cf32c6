#pragma once

// The GPU path of one op, between the communicator and its DeviceBackend: numbered by the
// executor with the host ops (so errors, the flight record and poisoning are shared), queued on
// its stream by the backend, and ended (recorded, poisoning on failure) by whoever sees its
// completion.

#include <cohort/stream.hpp>
#include <cohort/work.hpp>

#include "algorithms/args.hpp"
#include "comm/executor.hpp"
#include "gpu/device_backend.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace cohort::comm {

/// What a send, a receive or a sendrecv on device buffers adds to its name in errors.
struct DevicePeers {
  std::string_view op;  ///< "sendrecv" for both halves in one group; empty: the op's kind
  std::optional<int> to_rank;
  std::optional<int> from_rank;
  int tag = 0;
};

/// Numbers `op`, queues `body` through `gpu` and returns its Work (async) or waits for it
/// (blocking; then the returned Work is empty). A failure while queueing (NCCL set-up timing
/// out, a device error) fails the op and poisons the communicator, as one seen later does.
/// `peers`: set for a send, receive or sendrecv, which its errors name.
Work run_device_op(Executor& executor, gpu::DeviceBackend& gpu, OpInfo op,
                   const gpu::DeviceBackend::Prepared& prepared, std::optional<Stream> stream,
                   bool async, const std::function<void(const gpu::Launch&)>& body,
                   std::vector<std::shared_ptr<void>> keepalive,
                   const std::optional<DevicePeers>& peers = std::nullopt);

/// alltoall on device buffers needs distinct input and output: NCCL has no in-place form.
/// InvalidArgument naming `op` otherwise (the host path stages aliased buffers itself).
void check_distinct_on_device(std::string_view op, const algorithms::AlltoallArgs& args);

}  // namespace cohort::comm
