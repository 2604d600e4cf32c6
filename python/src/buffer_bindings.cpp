// cohort.DType and cohort.Buffer: cohort's own tensor, handed to numpy and torch through DLPack.

#include "arguments.hpp"
#include "bindings.hpp"
#include "tensor_import.hpp"

#include <cohort/dlpack_versioned.h>
#include <cohort/buffer.hpp>
#include <cohort/dlpack.hpp>
#include <cohort/error.hpp>

#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::python {
namespace {

using namespace pybind11::literals;

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";

// A capsule nobody consumed still owns its tensor: release it through the tensor's deleter. A
// consumer renames the capsule ("used_dltensor") and then owns the tensor itself.
template <class Managed>
void release_unconsumed(PyObject* capsule, const char* name) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);  // destructors may run while an exception propagates
  if (PyCapsule_IsValid(capsule, name) != 0) {
    auto* tensor = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
    if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  }
  PyErr_Restore(type, value, traceback);
}

void release_legacy(PyObject* capsule) {
  release_unconsumed<DLManagedTensor>(capsule, kLegacyName);
}
void release_versioned(PyObject* capsule) {
  release_unconsumed<DLManagedTensorVersioned>(capsule, kVersionedName);
}

template <class Managed>
py::object make_capsule(Managed* tensor, const char* name, PyCapsule_Destructor destructor) {
  PyObject* capsule = PyCapsule_New(tensor, name, destructor);
  if (capsule == nullptr) {
    tensor->deleter(tensor);  // no capsule, so no destructor will release it
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

// A pair of ints of __dlpack__'s keywords; ValueError naming the keyword otherwise.
std::pair<int, int> int_pair(py::handle value, const char* keyword, const char* shape) {
  try {
    return value.cast<std::pair<int, int>>();
  } catch (const py::cast_error&) {
    throw py::value_error(std::string("cohort.Buffer.__dlpack__: ") + keyword + " must be a " +
                          shape + " pair of ints, not " + py::repr(value).cast<std::string>());
  }
}

// Buffer.__dlpack__: the Python array API's export protocol, both capsule kinds.
py::object export_dlpack(const Buffer& buffer, py::handle stream, py::handle max_version,
                         py::handle dl_device, py::handle copy) {
  const Device device = buffer.device();
  if (!dl_device.is_none()) {
    const auto requested = int_pair(dl_device, "dl_device", "(device_type, device_id)");
    if (requested.first != static_cast<int>(device.type) || requested.second != device.id) {
      throw py::buffer_error(
          "cohort.Buffer on " + device.to_string() + " cannot be exported to DLPack device (" +
          std::to_string(requested.first) + ", " + std::to_string(requested.second) + ")");
    }
  }
  // Streams order work on a GPU; host memory has none (the protocol requires None there). On a
  // GPU the stream is not needed either: a collective's writes are complete when it returns or
  // when its Work.wait() returns. Managed memory is a GPU's too (consumers pass it a stream).
  if (!stream.is_none() && device.host_accessible() && device.type != DeviceType::CUDAManaged)
    throw py::buffer_error("cohort.Buffer.__dlpack__: stream must be None for host memory, got " +
                           py::repr(stream).cast<std::string>());

  bool versioned = false;
  if (!max_version.is_none()) {
    const auto version = int_pair(max_version, "max_version", "(major, minor)");
    versioned = version.first >= COHORT_DLPACK_MAJOR_VERSION;
  }

  Buffer source = buffer;
  const bool copied = !copy.is_none() && copy.cast<bool>();
  if (copied) {
    if (!device.host_accessible() || !buffer.is_contiguous())
      throw py::buffer_error(
          "cohort.Buffer.__dlpack__(copy=True) copies contiguous host "
          "buffers only; this one is on " +
          device.to_string() + (buffer.is_contiguous() ? "" : " and not contiguous"));
    source = Buffer::allocate(buffer.shape(), buffer.dtype());
    if (buffer.nbytes() > 0) std::memcpy(source.data(), buffer.data(), buffer.nbytes());
  }

  if (versioned) {
    DLManagedTensorVersioned* tensor = to_dlpack_versioned(source);
    if (copied) tensor->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
    return make_capsule(tensor, kVersionedName, release_versioned);
  }
  // A consumer of the legacy capsule (numpy 1.x, torch < 2.4) has no way to learn that the
  // memory must not be written, so a read-only buffer is refused rather than exposed.
  if (source.read_only())
    throw py::buffer_error(
        "cohort.Buffer is read-only, which a pre-1.0 DLPack capsule cannot "
        "signal; call __dlpack__(max_version=(1, 0)) or export a writable "
        "buffer");
  return make_capsule(to_dlpack(source), kLegacyName, release_legacy);
}

std::vector<std::int64_t> parse_shape(py::handle shape, std::string_view what) {
  try {
    if (PyIndex_Check(shape.ptr()) != 0) return {shape.cast<std::int64_t>()};
    if (!py::isinstance<py::str>(shape)) return shape.cast<std::vector<std::int64_t>>();
  } catch (const py::cast_error&) {  // reported below, as a cohort error naming the value
  }
  invalid(what,
          "shape must be an int or a sequence of ints, not " + py::repr(shape).cast<std::string>());
}

// "cpu", "cuda", "cuda:N", "cuda_host", "cuda_host:N" (Device::to_string's spellings; no index
// means 0).
Device parse_device(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string digits = text.substr(colon + 1);
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      throw Error(ErrorCode::InvalidArgument,
                  "Buffer.allocate: device '" + text + "' has no valid index after ':'");
    index = std::stoi(digits);
  }
  if (kind == "cpu" && index == 0) return Device::cpu();
  if (kind == "cuda") return Device::cuda(index);
  if (kind == "cuda_host") return Device{DeviceType::CUDAHost, index};
  if (kind == "cuda_managed") return Device{DeviceType::CUDAManaged, index};
  throw Error(ErrorCode::InvalidArgument,
              "Buffer.allocate: unknown device '" + text + "' (cpu, cuda:N or cuda_host)");
}

/// Elements of `shape`; InvalidArgument naming `fn` for a negative or overflowing one.
std::size_t element_count(const std::vector<std::int64_t>& shape, const char* fn) {
  std::int64_t count = 1;
  for (const std::int64_t extent : shape) {
    if (extent < 0 || __builtin_mul_overflow(count, extent, &count))
      throw Error(ErrorCode::InvalidArgument,
                  std::string(fn) + ": shape has a negative extent or too many elements");
  }
  return static_cast<std::size_t>(count);
}

// Buffer::allocate on `device`, which allocates 1-D; the shape is then a view of it.
Buffer allocate_on(const std::vector<std::int64_t>& shape, DType dtype, Device device) {
  if (device == Device::cpu()) return Buffer::allocate(shape, dtype);
  return Buffer::allocate(element_count(shape, "Buffer.allocate"), dtype, device).reshape(shape);
}

py::tuple as_tuple(const std::vector<std::int64_t>& values) {
  py::tuple tuple(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) tuple[i] = values[i];
  return tuple;
}

std::string describe(const Buffer& buffer) {
  std::string shape;
  for (std::size_t i = 0; i < buffer.shape().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(buffer.shape()[i]);
  if (buffer.shape().size() == 1) shape += ",";
  return "cohort.Buffer(shape=(" + shape + "), dtype=" + dtype_python_name(buffer.dtype()) +
         ", device=" + buffer.device().to_string() + (buffer.read_only() ? ", read_only" : "") +
         ")";
}

}  // namespace

void bind_buffer(py::module_& m) {
  py::enum_<DType> dtype(m, "DType", "Element type of a Buffer (cohort::DType).");
  for (DType d : kAllDTypes) dtype.value(dtype_python_name(d), d);
  dtype.def_property_readonly("itemsize", [](DType d) { return dtype_size(d); });

  py::class_<Buffer>(m, "Buffer", R"doc(
cohort's tensor: a typed, shaped view of memory, optionally keeping the memory's owner alive.

numpy.from_dlpack(buffer) and torch.from_dlpack(buffer) view the same memory without a copy
(__dlpack__ / __dlpack_device__, DLPack 0.x and 1.x capsules). Every collective accepts a Buffer
wherever it accepts a tensor. The memory lives as long as any Buffer or consumer shares it.
Thread safety: a Buffer is an immutable handle; writing its memory from several threads at once
is the caller's business, as for any array.)doc")
      .def_static(
          "allocate",
          [](py::handle shape, py::handle dtype, const std::string& device) {
            return allocate_on(parse_shape(shape, "Buffer.allocate"),
                               parse_dtype(dtype, "Buffer.allocate"), parse_device(device));
          },
          "shape"_a, "dtype"_a = "float32", py::kw_only(), "device"_a = "cpu", R"doc(
A new zero-filled allocation of `shape` (an int or a sequence): 64-byte-aligned host memory for
device="cpu"; device memory for "cuda:N" and pinned host memory for "cuda_host" through the CUDA
runtime. Raises cohort.UnsupportedError when cohort was built without CUDA or the device does not
exist, InvalidArgumentError for "cuda_managed" (not offered).)doc")
      .def_static(
          "allocate_mappable",
          [](py::handle shape, py::handle dtype) {
            const std::vector<std::int64_t> dims = parse_shape(shape, "Buffer.allocate_mappable");
            return Buffer::allocate_mappable(element_count(dims, "Buffer.allocate_mappable"),
                                             parse_dtype(dtype, "Buffer.allocate_mappable"))
                .reshape(dims);
          },
          "shape"_a, "dtype"_a = "float32", R"doc(
A new zero-filled host allocation of `shape` that the other ranks of this host can map: where
every rank's buffers of a collective are such memory, single-copy algorithms read and write them
in place instead of copying (README, "Mappable buffers"). One file descriptor each while it
lives. Freed when the last Buffer or consumer sharing it goes: kept for a later allocation of
about its size, so one allocated every step faults its pages in only once (COHORT_MAPPABLE_CACHE_MIB
bounds what a process keeps, default 1024; 0 keeps none), its pages returned beyond that.)doc")
      .def_static("kept_mappable_bytes", &Buffer::kept_mappable_bytes,
                  "The bytes of freed mappable buffers this process keeps for reuse now.")
      .def_static("release_kept_mappable", &Buffer::release_kept_mappable,
                  py::call_guard<py::gil_scoped_release>(), R"doc(
Lets go of every kept mappable buffer, returning its pages and file descriptor to the system now
(as torch.cuda.empty_cache() does for its cache); live buffers are not touched and later frees keep
again. Returns the bytes let go.)doc")
      .def_static(
          "from_dlpack",
          [](py::handle object) { return import_tensor(object, "Buffer.from_dlpack"); }, "tensor"_a,
          "A Buffer viewing the memory of any DLPack producer (numpy, torch, ...) or "
          "buffer-protocol "
          "object, without a copy. It keeps the producer's memory alive.")
      .def_property_readonly("shape", [](const Buffer& b) { return as_tuple(b.shape()); })
      .def_property_readonly(
          "strides",
          [](const Buffer& b) -> py::object {
            if (b.strides().empty()) return py::none();
            return as_tuple(b.strides());
          },
          "Strides in elements, or None for row-major contiguous.")
      .def_property_readonly("dtype", &Buffer::dtype)
      .def_property_readonly("device", [](const Buffer& b) { return b.device().to_string(); })
      .def_property_readonly("ndim", &Buffer::ndim)
      .def_property_readonly("count", &Buffer::count, "Number of elements.")
      .def_property_readonly("nbytes", &Buffer::nbytes)
      .def_property_readonly("read_only", &Buffer::read_only)
      .def_property_readonly(
          "data_ptr", [](const Buffer& b) { return reinterpret_cast<std::uintptr_t>(b.data()); },
          "Address of the first element.")
      .def("is_contiguous", &Buffer::is_contiguous)
      .def("flat", &Buffer::flat, "The same memory as a 1-D buffer (contiguous buffers only).")
      .def(
          "reshape",
          [](const Buffer& b, py::handle shape) {
            return b.reshape(parse_shape(shape, "Buffer.reshape"));
          },
          "shape"_a, "The same memory with another shape of equal element count.")
      .def("slice", &Buffer::slice, "begin"_a, "end"_a, "Rows [begin, end) along dim 0, shared.")
      .def("as_read_only", &Buffer::as_read_only, "A read-only handle to the same memory.")
      .def("__dlpack__", &export_dlpack, py::kw_only(), "stream"_a = py::none(),
           "max_version"_a = py::none(), "dl_device"_a = py::none(), "copy"_a = py::none(),
           "A DLPack capsule viewing this buffer: 'dltensor_versioned' when max_version >= (1, 0), "
           "else 'dltensor' (refused for read-only buffers, which it cannot mark).")
      .def(
          "__dlpack_device__",
          [](const Buffer& b) {
            return py::make_tuple(static_cast<int>(b.device().type), b.device().id);
          },
          "(DLPack device type, device id): (1, 0) for the CPU.")
      .def("__repr__", &describe);
}

}  // namespace cohort::python
