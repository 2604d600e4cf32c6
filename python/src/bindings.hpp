#pragma once

// The pieces of the extension module cohort._cohort, one function per concept, called in this
// order by module.cpp (later ones refer to the types the earlier ones register).

#include <pybind11/pybind11.h>
// stl.h in every translation unit: pybind11's casters must be the same everywhere (ODR).
#include <pybind11/stl.h>

#include <cohort/communicator.hpp>

#include <memory>
#include <vector>

namespace cohort::python {

namespace py = pybind11;

/// What Python holds for a cohort::Communicator. A wrapper rather than the class itself because
/// pybind11 builds the holder of an enable_shared_from_this type from shared_from_this(), which
/// would bypass a custom deleter; this one drops its reference with the GIL released (the last
/// reference waits for queued ops and joins the progress thread).
struct CommunicatorHandle {
  explicit CommunicatorHandle(std::shared_ptr<Communicator> c) : comm(std::move(c)) {}
  ~CommunicatorHandle();
  CommunicatorHandle(const CommunicatorHandle&) = delete;
  CommunicatorHandle& operator=(const CommunicatorHandle&) = delete;

  std::shared_ptr<Communicator> comm;  ///< never null
};

/// What Python holds for an async op (cohort.Work): the Work, the Python objects the op reads or
/// writes (held until it has finished, so they stay alive and unchanged in the caller's view
/// however the caller drops its own references), and what wait() returns (the output tensor).
struct WorkHandle {
  Work work;
  std::vector<py::object> keep;
  py::object result;
};

/// ErrorCode, the translation of cohort::Error into the classes of cohort/errors.py.
void bind_errors(py::module_& m);
/// DType, Device names, and cohort.Buffer with __dlpack__ / __dlpack_device__.
void bind_buffer(py::module_& m);
/// cohort.Work.
void bind_work(py::module_& m);
/// ReduceOp, Algorithm, init(), Communicator (properties, split, dup); calls bind_collectives.
void bind_communicator(py::module_& m);
/// Every collective and send/recv on `communicator`, blocking and *_async.
void bind_collectives(py::class_<CommunicatorHandle>& communicator);
/// The submodule _cohort.train: precision (GradScaler), gradients (GradientSynchronizer,
/// broadcast_parameters, clip_grad_norm, ...), objects and random (byte collectives, set_seed,
/// RngStateSync).
void bind_train_precision(py::module_& train);
void bind_train_gradients(py::module_& train);
void bind_train_objects_random(py::module_& train);

}  // namespace cohort::python
