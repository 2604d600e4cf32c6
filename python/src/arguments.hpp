#pragma once

// Python arguments turned into the C++ API's types. Each parser throws
// cohort::Error(InvalidArgument) naming `what` (e.g. "allreduce: op") and the value it got, so
// bad input reaches Python as cohort.InvalidArgumentError before anything moves.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // the same casters in every translation unit (ODR)

#include <cohort/algorithm.hpp>
#include <cohort/communicator.hpp>
#include <cohort/dtype.hpp>
#include <cohort/stream.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::python {

namespace py = pybind11;

/// Throws cohort::Error(InvalidArgument) "<what>: <message>": how every binding refuses an
/// argument.
[[noreturn]] void invalid(std::string_view what, const std::string& message);

/// "numpy.ndarray", "torch.Tensor": the type of `object`, for messages.
std::string type_name(py::handle object);

/// Seconds (int or float, >= 0) as milliseconds, rounded up so a short positive timeout never
/// becomes zero. None: unset.
std::optional<std::chrono::milliseconds> parse_timeout(py::handle seconds, std::string_view what);

/// A ReduceOp, or its name in any case ("sum", "AVG", "band", ...).
ReduceOp parse_reduce_op(py::handle op, std::string_view what);

/// A DType, or a name: the Python names of dtype_python_name() ("float32", "bfloat16", ...) or
/// any spelling dtype_from_name() accepts ("f32", "half", "bf16", ...).
DType parse_dtype(py::handle dtype, std::string_view what);

/// An Algorithm, its name ("ring", "recursive_doubling", ...), or None for Auto.
Algorithm parse_algorithm(py::handle algorithm, std::string_view what);

/// A CUDA stream: an int (the bits of its cudaStream_t; 0 is the legacy default stream), or an
/// object exposing it (torch.cuda.Stream's `cuda_stream`, CuPy's Stream `ptr`). None: unset.
std::optional<Stream> parse_stream(py::handle stream, std::string_view what);

/// The per-op options of every collective binding (timeout in seconds, algorithm, stream).
CollectiveOptions parse_collective_options(py::handle timeout, py::handle algorithm,
                                           py::handle stream, std::string_view what);

/// An int argument (`name`, anything with __index__, never a float or a bool) as T, refused when
/// it does not fit T (a negative size, say). Bindings of collective helpers take such arguments
/// as handles and convert them here, inside their refusal-joining conversion, rather than let
/// pybind11 refuse them on one rank before the others' exchange starts.
template <class T>
T parse_integer(py::handle value, std::string_view what, std::string_view name) {
  if (PyIndex_Check(value.ptr()) == 0 || py::isinstance<py::bool_>(value))
    invalid(what, std::string(name) + " must be an int, not " + type_name(value));
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    invalid(what,
            std::string(name) + " " + py::repr(value).cast<std::string>() + " is out of range");
  }
}

/// A flag argument: what pybind11 converts to bool (True/False, numpy.bool_, None as False).
bool parse_flag(py::handle value, std::string_view what, std::string_view name);

/// A real-number argument (int, float, or anything with __float__, never None).
double parse_real(py::handle value, std::string_view what, std::string_view name);

/// A sequence of non-negative ints (element counts, one per rank).
std::vector<std::size_t> parse_counts(py::handle counts, std::string_view what);

/// The Python spelling of a dtype: torch's and numpy's names ("float32", "bfloat16",
/// "float8_e4m3fn", "int64", "bool", ...).
const char* dtype_python_name(DType dtype) noexcept;

}  // namespace cohort::python
