// cohort.Work: what every *_async collective returns.

#include "arguments.hpp"
#include "bindings.hpp"
#include "gil.hpp"

#include <cohort/error.hpp>

#include <optional>

namespace cohort::python {
namespace {

using namespace pybind11::literals;

// Once the op has finished, nothing needs the Python objects any more.
void drop_if_finished(WorkHandle& handle) {
  if (handle.work.test()) handle.keep.clear();
}

py::object wait(WorkHandle& handle, py::handle timeout) {
  const auto limit = parse_timeout(timeout, "Work.wait");
  try {
    py::gil_scoped_release release;
    handle.work.wait(limit);
  } catch (...) {
    drain_deferred_releases();
    drop_if_finished(handle);  // the op failed (finished) or the wait timed out (still running)
    throw;
  }
  drain_deferred_releases();
  handle.keep.clear();
  return handle.result;
}

void make_stream_wait(WorkHandle& handle, py::handle stream) {
  const std::optional<Stream> parsed = parse_stream(stream, "Work.make_stream_wait");
  if (!parsed)
    throw Error(ErrorCode::InvalidArgument,
                "Work.make_stream_wait: stream must not be None (pass the stream to order)");
  try {
    // A host op's Work waits here (nothing to order on a device), so the GIL is released.
    py::gil_scoped_release release;
    handle.work.make_stream_wait(*parsed);
  } catch (...) {
    drain_deferred_releases();
    drop_if_finished(handle);
    throw;
  }
  drain_deferred_releases();
  // The tensors stay held until the op finished on the device (test() or wait() drop them):
  // the stream only waits, so the memory is still in use.
  drop_if_finished(handle);
}

}  // namespace

void bind_work(py::module_& m) {
  py::class_<WorkHandle>(m, "Work", R"doc(
The handle of an asynchronous collective (every Communicator.*_async method returns one).

The op runs in the background, in call order with the communicator's other collectives (a send
or receive on host tensors does not wait for them, see Communicator). The Work keeps
the tensors it reads and writes alive until the op has finished, even when the caller drops
them; their memory must not be used for anything else until then. Dropping the Work does not
cancel the op. One thread at a time per Work.)doc")
      .def("wait", &wait, "timeout"_a = py::none(), R"doc(
Blocks (without the GIL) until the op finished and returns its output tensor (None for barrier
and send). Raises the op's error, if any. With a timeout in seconds, raises cohort.TimeoutError
if the op has not finished by then; the op keeps running under its own deadline and can be
waited for again. Waiting again after success returns at once.)doc")
      .def("make_stream_wait", &make_stream_wait, "stream"_a, R"doc(
Orders the work queued on `stream` (an int cudaStream_t handle, or a torch/CuPy stream) after
this op without blocking the host: for an op on CUDA tensors the stream waits on the device for
its completion. For an op on host tensors there is nothing to order on a device, so this waits
like wait(). Raises the op's error if it already failed. The Work keeps its tensors alive until
the op finished (test() or wait() observe that).)doc")
      .def(
          "test",
          [](WorkHandle& handle) {
            drain_deferred_releases();
            drop_if_finished(handle);
            return handle.work.test();
          },
          "True once the op finished (successfully or not). Never blocks.")
      .def("__repr__", [](WorkHandle& handle) {
        return std::string("<cohort.Work ") + (handle.work.test() ? "finished" : "running") + ">";
      });
}

}  // namespace cohort::python
