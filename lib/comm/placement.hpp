#pragma once

// Where an op runs, from where its buffers live: host memory (cpu, cuda_host) takes the host
// path, cuda and cuda_managed buffers the GPU path on their device. Decided on the caller's
// thread before the op is numbered; mixing is refused then, naming both buffers.

#include <cohort/algorithm.hpp>
#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>

#include <cstdint>
#include <string_view>

namespace cohort::comm {

struct Placement {
  static constexpr std::int32_t kHost = -1;
  /// barrier() given a stream: the device the communicator's GPU ops use.
  static constexpr std::int32_t kAnyDevice = -2;
  std::int32_t cuda_device = kHost;

  bool on_device() const noexcept { return cuda_device != kHost; }
};

/// The placement of collective `kind` from the buffers it reads or
/// writes on this rank: both, except where `root` decides (broadcast's and scatter's input and
/// reduce's and gather's output matter on the root only). Throws InvalidArgument naming both
/// buffers when one is host memory and the other device memory, or they are on two devices.
Placement placement_of(Collective kind, int rank, int root, const Buffer& in, const Buffer& out);
/// Point-to-point: the one buffer's placement.
Placement placement_of(const Buffer& buffer);
/// barrier(): on the device when given a stream.
Placement barrier_placement(const CollectiveOptions& options);

}  // namespace cohort::comm
