#include "tensor_import.hpp"

#include "arguments.hpp"
#include "gil.hpp"

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>
#include <cohort/error.hpp>

#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cohort::python {
namespace {

// The same view with its owner wrapped so the producer's memory is released under the GIL.
Buffer with_gil_safe_owner(const Buffer& buffer) {
  return Buffer::view(buffer.data(), buffer.shape(), buffer.dtype(), buffer.device(),
                      buffer.strides(), 0, release_under_gil(buffer.owner()), buffer.read_only());
}

// Takes the managed tensor out of a DLPack capsule (renaming the capsule as consumed).
Buffer from_capsule(py::handle capsule, std::string_view what, const std::string& producer) {
  PyObject* const object = capsule.ptr();
  try {
    if (PyCapsule_IsValid(object, "dltensor_versioned") != 0) {
      auto* tensor = static_cast<DLManagedTensorVersioned*>(
          PyCapsule_GetPointer(object, "dltensor_versioned"));
      if (PyCapsule_SetName(object, "used_dltensor_versioned") != 0) throw py::error_already_set();
      // A producer that could not share its memory may hand over a copy (flagged, and only
      // readable once the major version is known to be ours). An op returns the caller's own
      // tensor, never the copy, so a result written there would be lost: we choose to treat
      // the copy as read-only everywhere (Buffer.from_dlpack's result included).
      const bool copied = tensor != nullptr &&
                          tensor->version.major == COHORT_DLPACK_MAJOR_VERSION &&
                          (tensor->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
      Buffer buffer = with_gil_safe_owner(from_dlpack(tensor));
      return copied ? buffer.as_read_only() : buffer;
    }
    if (PyCapsule_IsValid(object, "dltensor") != 0) {
      auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(object, "dltensor"));
      if (PyCapsule_SetName(object, "used_dltensor") != 0) throw py::error_already_set();
      return with_gil_safe_owner(from_dlpack(tensor));
    }
  } catch (const Error& error) {  // from_dlpack refused the tensor (and released it)
    invalid(what, producer + ": " + error.message());
  }
  const char* name = PyCapsule_CheckExact(object) != 0 ? PyCapsule_GetName(object) : nullptr;
  PyErr_Clear();
  invalid(what, producer + ".__dlpack__() returned " +
                    (name != nullptr ? "a capsule named '" + std::string(name) + "'"
                                     : "a " + type_name(capsule)) +
                    ", not an unused DLPack capsule ('dltensor' or 'dltensor_versioned')");
}

// A buffer-protocol format character as a dtype (native byte order only).
std::optional<DType> dtype_from_format(const char* format, Py_ssize_t itemsize) {
  if (format == nullptr) return itemsize == 1 ? std::optional(DType::UInt8) : std::nullopt;
  std::string_view code(format);
  const bool little = std::endian::native == std::endian::little;
  if (!code.empty() && (code[0] == '@' || code[0] == '=' || (code[0] == '<' && little) ||
                        (code[0] == '>' && !little) || (code[0] == '!' && !little)))
    code.remove_prefix(1);
  if (code.size() != 1) return std::nullopt;
  const char c = code[0];
  if (c == 'e' && itemsize == 2) return DType::Float16;
  if (c == 'f' && itemsize == 4) return DType::Float32;
  if (c == 'd' && itemsize == 8) return DType::Float64;
  if (c == '?' && itemsize == 1) return DType::Bool;
  // Integer codes by size: 'l' is 8 bytes on LP64, 4 on Windows.
  constexpr std::string_view kSigned = "bhilq", kUnsigned = "BHILQ";
  if (kSigned.find(c) != std::string_view::npos) {
    switch (itemsize) {
      case 1: return DType::Int8;
      case 2: return DType::Int16;
      case 4: return DType::Int32;
      case 8: return DType::Int64;
      default: return std::nullopt;
    }
  }
  if (kUnsigned.find(c) != std::string_view::npos) {
    switch (itemsize) {
      case 1: return DType::UInt8;
      case 4: return DType::UInt32;
      case 8: return DType::UInt64;
      default: return std::nullopt;  // cohort has no uint16
    }
  }
  if (c == 'c' && itemsize == 1) return DType::UInt8;
  return std::nullopt;
}

// Producer types whose __dlpack__ has no max_version keyword (before DLPack 1.0: numpy 1.x,
// torch < 2.4), learnt from their first TypeError, so later calls skip the failing attempt (the
// exception's round trip through C++ costs microseconds per call). The types are held, so their
// addresses are never reused; leaked, so nothing is released after the interpreter. GIL-guarded.
std::vector<py::object>& legacy_producer_types() {
  static auto* types = new std::vector<py::object>;
  return *types;
}

bool is_legacy_producer(py::handle type) {
  for (const py::object& known : legacy_producer_types())
    if (known.is(type)) return true;
  return false;
}

// The protocol's `stream` value for the op's stream. DLPack reserves 0 (ambiguous between CUDA
// and ROCm) and spells CUDA's legacy default stream 1, its per-thread default stream 2, which
// are also those streams' own handles (cudaStreamLegacy, cudaStreamPerThread).
std::uintptr_t dlpack_stream_code(Stream stream) {
  return stream.handle == 0 ? 1 : stream.handle;
}

// Whether `object` says (through __dlpack_device__) that it lives on a CUDA device, where the
// protocol's stream argument applies. CPU producers (numpy) refuse any stream but None.
bool on_cuda_device(py::handle object, std::string_view what, const std::string& producer) {
  if (!py::hasattr(object, "__dlpack_device__")) return false;
  py::tuple device;
  try {
    device = py::tuple(object.attr("__dlpack_device__")());
  } catch (py::error_already_set& error) {
    invalid(what, producer + ".__dlpack_device__() failed: " + error.what());
  }
  if (device.size() < 1 || PyIndex_Check(device[0].ptr()) == 0)
    invalid(what, producer + ".__dlpack_device__() returned " +
                      py::repr(device).cast<std::string>() + ", not (device_type, device_id)");
  const int type = device[0].cast<int>();
  return type == kDLCUDA || type == kDLCUDAManaged;
}

// The producer's capsule: versioned when it can make one, legacy otherwise. `stream`, when set,
// is passed as the stream keyword (only to producers on a CUDA device).
py::object export_capsule(py::handle object, std::optional<std::uintptr_t> stream) {
  const py::object export_method = object.attr("__dlpack__");
  const py::handle type = py::type::handle_of(object);
  const auto call = [&](bool versioned) {
    py::dict keywords;
    if (stream) keywords["stream"] = py::int_(*stream);
    if (versioned) keywords["max_version"] = py::make_tuple(1, 1);
    return export_method(**keywords);
  };
  if (is_legacy_producer(type)) return call(false);
  try {
    return call(true);
  } catch (py::error_already_set& error) {
    if (!error.matches(PyExc_TypeError)) throw;
  }
  py::object capsule = call(false);  // succeeded without max_version: remember the type
  legacy_producer_types().push_back(py::reinterpret_borrow<py::object>(type));
  return capsule;
}

Buffer from_buffer_protocol(py::handle object, std::string_view what) {
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(object.ptr(), view.get(), PyBUF_RECORDS_RO) != 0) {
    const std::string message = py::error_already_set().what();
    invalid(what, type_name(object) + " refused its buffer: " + message);
  }
  std::shared_ptr<Py_buffer> held(view.release(), [](Py_buffer* released) {
    PyBuffer_Release(released);  // always with the GIL: held only through release_under_gil
    delete released;
  });
  const std::optional<DType> dtype = dtype_from_format(held->format, held->itemsize);
  if (!dtype) {
    invalid(what, type_name(object) + " has element format '" +
                      std::string(held->format != nullptr ? held->format : "B") + "' of " +
                      std::to_string(held->itemsize) +
                      " bytes, which no cohort dtype matches (or not in native byte order)");
  }
  std::vector<std::int64_t> shape(held->shape, held->shape + held->ndim);
  std::vector<std::int64_t> strides;
  for (int d = 0; d < held->ndim; ++d) {
    // A dimension of one element or none is never stepped along: its stride is meaningless
    // (numpy leaves a packed record's field width there), as is_contiguous() ignores it.
    if (held->shape[d] <= 1) {
      strides.push_back(1);
      continue;
    }
    if (held->strides[d] % held->itemsize != 0)
      invalid(what, type_name(object) + " has a stride of " + std::to_string(held->strides[d]) +
                        " bytes, not a multiple of its element size " +
                        std::to_string(held->itemsize));
    strides.push_back(held->strides[d] / held->itemsize);
  }
  void* const data = held->buf;
  const bool read_only = held->readonly != 0;
  return Buffer::view(data, std::move(shape), *dtype, Device::cpu(), std::move(strides), 0,
                      release_under_gil(std::move(held)), read_only);
}

}  // namespace

Buffer import_tensor(py::handle object, std::string_view what, std::optional<Stream> stream) {
  if (py::isinstance<Buffer>(object)) return object.cast<const Buffer&>();
  if (object.is_none()) invalid(what, "expected a tensor, got None");

  if (py::hasattr(object, "__dlpack__")) {
    const std::string producer = type_name(object);
    // A CUDA producer is always told the stream: the op's, else the legacy default stream (1),
    // which an op without a stream is ordered after. Passing none asks for no synchronisation at
    // all (torch's reading of the protocol: pending writes on another stream would race the op).
    // Without stream= the tensor is exported first as it is, and only a CUDA one is exported
    // again with the stream: host tensors, the common case, pay no __dlpack_device__ call.
    std::optional<std::uintptr_t> stream_code;
    if (stream && on_cuda_device(object, what, producer)) stream_code = dlpack_stream_code(*stream);
    const auto exported = [&](std::optional<std::uintptr_t> code) -> std::optional<Buffer> {
      py::object capsule;
      try {
        capsule = export_capsule(object, code);
      } catch (py::error_already_set& error) {
        // numpy 1.24 refuses read-only and bool arrays (BufferError) but has the buffer protocol.
        if (error.matches(PyExc_BufferError) && PyObject_CheckBuffer(object.ptr()) != 0)
          return std::nullopt;
        invalid(what, producer + " cannot be exported through DLPack: " + error.what());
      }
      return from_capsule(capsule, what, producer);
    };
    std::optional<Buffer> buffer = exported(stream_code);
    if (!buffer) return from_buffer_protocol(object, what);
    const DeviceType type = buffer->device().type;
    if (!stream && (type == DeviceType::CUDA || type == DeviceType::CUDAManaged)) {
      buffer.reset();  // the unordered export goes back to its producer first
      buffer = exported(dlpack_stream_code(Stream{0}));
      if (!buffer) return from_buffer_protocol(object, what);
    }
    return *std::move(buffer);
  }
  if (PyObject_CheckBuffer(object.ptr()) != 0) return from_buffer_protocol(object, what);
  invalid(what, type_name(object) +
                    " is not a tensor: it has no __dlpack__ method and no buffer protocol");
}

std::vector<Buffer> import_tensors(py::handle sequence, std::string_view what, NoneItems none) {
  // A tensor is iterable too (over its rows), which is never what the caller meant.
  if (py::isinstance<Buffer>(sequence) || py::hasattr(sequence, "__dlpack__") ||
      !py::isinstance<py::iterable>(sequence))
    invalid(what, "expected a sequence of tensors, not a " + type_name(sequence));
  std::vector<Buffer> buffers;
  for (py::handle item : sequence) {
    if (item.is_none() && none == NoneItems::AsEmpty) {
      buffers.emplace_back();
      continue;
    }
    buffers.push_back(
        import_tensor(item, std::string(what) + "[" + std::to_string(buffers.size()) + "]"));
  }
  return buffers;
}

}  // namespace cohort::python
