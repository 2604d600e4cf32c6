// all_to_all along dim 0 (ml-starter's _AllToAll, torch's all_to_all_single with equal splits).
//
// Dim 0 cut into comm.size() equal blocks of whole rows is, in a contiguous buffer, the flat
// buffer cut into equal blocks, so this is Communicator::alltoall on the flattened views after
// checking what the flat view would hide: rows must not be split between ranks (dim 0 divisible
// by the group size, not merely the element count), and the output must have the input's shape.
// Every check is local and runs before anything moves. Device buffers (cuda, or managed memory
// on a device the runtime sees) go through the communicator's device path like any collective.

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>
#include <cohort/train/mesh.hpp>

#include "train/buffer_checks.hpp"
#include "train/device_placement.hpp"
#include "train/shape_exchange.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::train {
namespace {

constexpr const char* kAllToAll = "all_to_all";

void check_input(const Communicator& comm, const Buffer& in) {
  // Device buffers go to the communicator's device path (NCCL), which refuses a host/device mix.
  require_kernel_access(kAllToAll, "the input", in);
  if (in.ndim() == 0) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(kAllToAll) + ": the input is 0-d; it needs a dim 0 to split");
  }
  if (in.shape()[0] % comm.size() != 0) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(kAllToAll) + ": dim 0 of the input " + shape_string(in.shape()) + " (" +
                    std::to_string(in.shape()[0]) + ") is not divisible by the group size " +
                    std::to_string(comm.size()));
  }
  require_contiguous(kAllToAll, "the input", in, /*written=*/false);
}

}  // namespace

void all_to_all(Communicator& comm, const Buffer& in, const Buffer& out,
                const CollectiveOptions& options) {
  check_input(comm, in);
  require_kernel_access(kAllToAll, "the output", out);
  if (out.shape() != in.shape() || out.dtype() != in.dtype()) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(kAllToAll) + ": the output " + shape_string(out.shape()) + " " +
                    std::string(dtype_name(out.dtype())) + " differs from the input " +
                    shape_string(in.shape()) + " " + std::string(dtype_name(in.dtype())));
  }
  require_contiguous(kAllToAll, "the output", out, /*written=*/true);
  comm.alltoall(in.flat(), out.flat(), options);
}

Buffer all_to_all(Communicator& comm, const Buffer& in, const CollectiveOptions& options) {
  check_input(comm, in);
  // A device input gets a device output (cuda:N, as cast_to does for managed memory too).
  Buffer out = on_device(in)
                   ? Buffer::allocate(in.count(), in.dtype(), Device::cuda(in.device().id))
                         .reshape(in.shape())
                   : Buffer::allocate(in.shape(), in.dtype());
  all_to_all(comm, in, out, options);
  return out;
}

void all_to_all(const ProcessMesh& mesh, MeshDim dim, const Buffer& in, const Buffer& out,
                const CollectiveOptions& options) {
  all_to_all(mesh.comm(dim), in, out, options);
}

}  // namespace cohort::train
