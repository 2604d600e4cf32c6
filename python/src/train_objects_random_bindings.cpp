// cohort.train's byte collectives (include/cohort/train/objects.hpp), on which cohort/objects.py
// builds the pickle object collectives, and its randomness helpers (train/random.hpp): set_seed,
// derive_seed and RngStateSync over the engine's generators given as Python callables.

#include "arguments.hpp"
#include "bindings.hpp"

#include <cohort/error.hpp>
#include <cohort/train/objects.hpp>
#include <cohort/train/random.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace cohort::python {
namespace {

using namespace pybind11::literals;
using train::Blob;

// Any contiguous bytes-like object (bytes, bytearray, memoryview, a numpy byte array) copied.
Blob blob_of(py::handle data, std::string_view what) {
  Py_buffer view;
  if (PyObject_CheckBuffer(data.ptr()) == 0 ||
      PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    throw Error(
        ErrorCode::InvalidArgument,
        std::string(what) + ": expected contiguous bytes-like data, not " + type_name(data));
  }
  Blob blob(static_cast<std::size_t>(view.len));
  if (view.len > 0) std::memcpy(blob.data(), view.buf, blob.size());
  PyBuffer_Release(&view);
  return blob;
}

py::bytes bytes_of(const Blob& blob) {
  return py::bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
}

py::list bytes_list(const std::vector<Blob>& blobs) {
  py::list list;
  for (const Blob& blob : blobs) list.append(bytes_of(blob));
  return list;
}

// RngStateSync's generators are Python callables; cohort calls them from synchronize(), on the
// calling thread, with the GIL released around the communication, so they take it back. A Python
// exception travels through cohort as pybind11's error_already_set and is re-raised unchanged on
// the rank that raised it (the other ranks get cohort.RemoteError naming it).
void add_generator(train::RngStateSync& sync, const std::string& name, py::function get,
                   py::function set) {
  // Shared, so copies of the callbacks never touch Python reference counts without the GIL;
  // the last owner is the registry, destroyed with its Python object (GIL held).
  auto getter = [get = std::make_shared<py::function>(std::move(get)),
                 name]() -> std::vector<std::byte> {
    py::gil_scoped_acquire acquire;
    return blob_of((*get)(), "RngStateSync getter '" + name + "'");
  };
  auto setter =
      [set = std::make_shared<py::function>(std::move(set))](std::span<const std::byte> state) {
        py::gil_scoped_acquire acquire;
        (*set)(py::bytes(reinterpret_cast<const char*>(state.data()), state.size()));
      };
  sync.add(name, std::move(getter), std::move(setter));
}

}  // namespace

void bind_train_objects_random(py::module_& train) {
  train.def(
      "broadcast_bytes",
      [](CommunicatorHandle& comm, py::handle data, int root, py::handle timeout) {
        const auto limit = parse_timeout(timeout, "broadcast_bytes");
        Blob blob;
        {
          // The root reads `data` inside the call: data it cannot read (a str, None) then fails
          // every rank at once rather than leaving them waiting for its length.
          py::gil_scoped_release release;
          train::broadcast_bytes_from(
              *comm.comm, blob,
              [&data](Blob& out) {
                py::gil_scoped_acquire acquire;
                out = blob_of(data, "broadcast_bytes: data");
              },
              root, limit);
        }
        return bytes_of(blob);
      },
      "comm"_a, "data"_a, "root"_a = 0, "timeout"_a = py::none(),
      "Collective: the root's bytes on every rank (data is read on the root only).");
  train.def(
      "allgather_bytes",
      [](CommunicatorHandle& comm, py::handle data, py::handle timeout) {
        const auto limit = parse_timeout(timeout, "allgather_bytes");
        std::vector<Blob> all;
        {
          // Each rank reads its `data` inside the call: data one rank cannot read (a str, None)
          // then fails every rank at once rather than leaving them waiting for its size.
          py::gil_scoped_release release;
          all = train::allgather_bytes_from(
              *comm.comm,
              [&data](Blob& out) {
                py::gil_scoped_acquire acquire;
                out = blob_of(data, "allgather_bytes: data");
              },
              limit);
        }
        return bytes_list(all);
      },
      "comm"_a, "data"_a, "timeout"_a = py::none(),
      "Collective: every rank's bytes, in rank order, on every rank.");
  train.def(
      "gather_bytes",
      [](CommunicatorHandle& comm, py::handle data, int root, py::handle timeout) {
        const auto limit = parse_timeout(timeout, "gather_bytes");
        std::vector<Blob> all;
        {
          py::gil_scoped_release release;  // as allgather_bytes
          all = train::gather_bytes_from(
              *comm.comm,
              [&data](Blob& out) {
                py::gil_scoped_acquire acquire;
                out = blob_of(data, "gather_bytes: data");
              },
              root, limit);
        }
        return bytes_list(all);
      },
      "comm"_a, "data"_a, "root"_a = 0, "timeout"_a = py::none(),
      "Collective: on the root, every rank's bytes in rank order; elsewhere an empty list.");

  train.def("derive_seed", &train::derive_seed, "seed"_a, "stream"_a, "index"_a,
            "Philox4x32-10 of (index, stream) under seed: the same 64-bit value on every rank, "
            "without communication.");
  train.def(
      "set_seed",
      [](CommunicatorHandle& comm, std::uint64_t seed, bool device_specific,
         std::optional<py::function> apply) {
        const std::uint64_t chosen = train::set_seed(*comm.comm, seed, device_specific);
        if (apply) (*apply)(chosen);
        return chosen;
      },
      "comm"_a, "seed"_a, "device_specific"_a = false, "apply"_a = py::none(),
      "Accelerate's set_seed: the seed this rank should use (seed, or seed + rank when "
      "device_specific), passed to apply(seed) when given (e.g. torch.manual_seed).");

  py::class_<train::RngStateSync>(train, "RngStateSync", R"doc(
The engine's random generators by name, broadcast from one rank so every rank draws the same
stream (Accelerate's synchronize_rng_states). cohort never owns the generators: each is a pair of
callables, get() -> bytes and set(bytes). torch's CPU generator:

    sync = cohort.train.RngStateSync()
    sync.add("torch_cpu", lambda: torch.get_rng_state().numpy().tobytes(),
             lambda state: torch.set_rng_state(
                 torch.frombuffer(bytearray(state), dtype=torch.uint8)))
    sync.synchronize(comm)        # every rank now has rank 0's torch generator state
    # cohort.train.add_torch_generator(sync) registers any torch.Generator the same way.

The names and state sizes are checked across ranks before any setter runs. One thread at a
time.)doc")
      .def(py::init<>())
      .def("add", &add_generator, "name"_a, "get"_a, "set"_a,
           "Registers (or replaces) generator `name`.")
      .def("remove", &train::RngStateSync::remove, "name"_a)
      .def("names", &train::RngStateSync::names, "The registered names, sorted.")
      .def(
          "synchronize",
          [](train::RngStateSync& sync, CommunicatorHandle& comm, std::vector<std::string> names,
             int root) {
            py::gil_scoped_release release;  // the callables take the GIL back themselves
            sync.synchronize(*comm.comm, names, root);
          },
          "comm"_a, "names"_a = std::vector<std::string>{}, "root"_a = 0,
          "Collective: the root's state of each named generator (all when empty) is installed "
          "on every rank.");
}

}  // namespace cohort::python
