// The extension module cohort._cohort. cohort/__init__.py is the public face: it imports this
// module, registers the exception classes and adds the pickle object collectives.

#include "bindings.hpp"

#include <cohort/version.hpp>

PYBIND11_MODULE(_cohort, m) {
  namespace python = cohort::python;
  m.doc() = "cohort's C++ API bound with pybind11 (use the package cohort, not this module).";
  m.attr("__version__") = cohort::kVersion;
  python::bind_errors(m);
  python::bind_buffer(m);
  python::bind_work(m);
  python::bind_communicator(m);
  pybind11::module_ train = m.def_submodule("train", "cohort::train (see cohort.train).");
  python::bind_train_precision(train);
  python::bind_train_gradients(train);
  python::bind_train_objects_random(train);
}
