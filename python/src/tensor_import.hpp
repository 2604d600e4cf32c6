#pragma once

// Any Python tensor as a cohort::Buffer over the same memory, without copies.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // the same casters in every translation unit (ODR)

#include <cohort/buffer.hpp>
#include <cohort/stream.hpp>

#include <optional>
#include <string_view>
#include <vector>

namespace cohort::python {

namespace py = pybind11;

/// The Buffer viewing `object`'s memory. `what` names the argument in errors ("allreduce:
/// tensor"). Accepted, in this order:
/// - a cohort.Buffer (the same handle);
/// - any object with __dlpack__ (numpy, torch, JAX, CuPy, ...): called with max_version=(1, 1)
///   first and without it when the producer predates DLPack 1.0 (TypeError), so both capsule
///   kinds ("dltensor_versioned", "dltensor") are taken. The capsule is renamed "used_..." as
///   the protocol says; the Buffer then owns the producer's managed tensor and calls its deleter
///   once, with the GIL held, when the last Buffer sharing it goes away (see gil.hpp);
/// - an object with the buffer protocol (bytes, bytearray, memoryview, array.array), and a
///   DLPack producer that refuses with BufferError but has the buffer protocol too: numpy 1.24
///   exports neither read-only nor bool arrays through DLPack. The view's read-only flag is kept.
/// Anything else throws cohort::Error(InvalidArgument) naming `what` and the object's type.
/// CUDA tensors (kDLCUDA, kDLCUDAManaged) come through as such, and the op routes them to NCCL.
/// `stream` is the op's stream: for a producer on a CUDA device it is passed on as
/// `__dlpack__(stream=...)` (the protocol's way to have the producer order its pending writes
/// before the consumer's stream; CUDA's legacy default stream 0 is spelled 1 there). Without
/// one, the legacy default stream (1) is passed, the stream cohort orders an op without a
/// stream after (see cohort/communicator.hpp): passing no stream would ask the producer for no
/// synchronisation at all (torch: "None or -1: no synchronization"): such a tensor is exported
/// once as it is, and when that export says CUDA, again with stream 1 (host tensors pay nothing
/// more; with stream= the device is asked for first, through __dlpack_device__).
/// The GIL must be held.
Buffer import_tensor(py::handle object, std::string_view what,
                     std::optional<Stream> stream = std::nullopt);

/// What import_tensors does with an item that is None.
enum class NoneItems {
  Refuse,  ///< an error naming the item
  /// Stands as an empty buffer, which the gradient helpers pass over, as torch's leave out
  /// parameters without a gradient (p.grad is None: a parameter unused this step), which one
  /// rank may have and another not. The items after it keep their index in the helpers' errors.
  AsEmpty,
};

/// import_tensor() of every item of a sequence (a list of gradients), naming the item
/// ("GradScaler.unscale: grads[3]") in errors.
std::vector<Buffer> import_tensors(py::handle sequence, std::string_view what,
                                   NoneItems none = NoneItems::Refuse);

}  // namespace cohort::python
