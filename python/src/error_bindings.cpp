// cohort::Error in Python: ErrorCode, and a translator raising the exception class that
// cohort/errors.py registers for each code (cohort.TimeoutError, cohort.InvalidArgumentError, ...).

#include "bindings.hpp"

#include <cohort/error.hpp>

#include <array>
#include <cctype>
#include <exception>
#include <string>

namespace cohort::python {
namespace {

constexpr ErrorCode kAllErrorCodes[] = {
    ErrorCode::InvalidArgument, ErrorCode::InvalidUsage, ErrorCode::Unsupported, ErrorCode::Timeout,
    ErrorCode::RemoteError,     ErrorCode::SystemError,  ErrorCode::Internal,
};

// The Python class per code (new references, null until registered). Leaked on purpose: a
// static destructor would drop them after the interpreter is gone.
std::array<PyObject*, std::size(kAllErrorCodes)>& error_classes() {
  static auto* classes = new std::array<PyObject*, std::size(kAllErrorCodes)>{};
  return *classes;
}

// "invalid_argument" -> "INVALID_ARGUMENT": Python's spelling of enum members.
const char* python_name(ErrorCode code) {
  static const auto* names = [] {
    auto* table = new std::array<std::string, std::size(kAllErrorCodes)>;
    for (ErrorCode c : kAllErrorCodes) {
      std::string name(error_code_name(c));
      for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      (*table)[static_cast<std::size_t>(c)] = name;
    }
    return table;
  }();
  return (*names)[static_cast<std::size_t>(code)].c_str();
}

void raise(const Error& error) {
  PyObject* type = error_classes()[static_cast<std::size_t>(error.code())];
  // Before cohort/__init__.py registered the classes (importing _cohort alone): RuntimeError.
  PyErr_SetString(type != nullptr ? type : PyExc_RuntimeError, error.what());
}

}  // namespace

void bind_errors(py::module_& m) {
  py::enum_<ErrorCode> codes(m, "ErrorCode", "What kind of failure a cohort.Error reports.");
  for (ErrorCode code : kAllErrorCodes) codes.value(python_name(code), code);
  codes.def_property_readonly("code_name",
                              [](ErrorCode code) { return std::string(error_code_name(code)); });

  m.def(
      "_register_error_class",
      [](ErrorCode code, py::object type) {
        if (PyExceptionClass_Check(type.ptr()) == 0)
          throw py::type_error("_register_error_class needs an exception class");
        PyObject*& slot = error_classes()[static_cast<std::size_t>(code)];
        Py_XDECREF(slot);
        slot = type.release().ptr();
      },
      py::arg("code"), py::arg("type"),
      "Makes cohort errors with `code` raise `type` (cohort/errors.py calls it once per code).");

  py::register_exception_translator([](std::exception_ptr pending) {
    try {
      if (pending) std::rethrow_exception(pending);
    } catch (const Error& error) {
      raise(error);
    }
  });
}

}  // namespace cohort::python
