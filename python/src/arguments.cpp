#include "arguments.hpp"

#include <cohort/error.hpp>

#include <cctype>
#include <cmath>
#include <limits>

namespace cohort::python {

void invalid(std::string_view what, const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, std::string(what) + ": " + message);
}

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string shown(py::handle object) {
  return py::repr(object).cast<std::string>();
}

// True, numpy.bool_, a bool tensor: flags have __float__ too, but are not numbers of seconds.
bool is_boolean(py::handle value) {
  if (py::isinstance<py::bool_>(value)) return true;
  if (!py::hasattr(value, "dtype")) return false;
  const std::string dtype = lower(py::str(value.attr("dtype")).cast<std::string>());
  return dtype.size() >= 4 && dtype.compare(dtype.size() - 4, 4, "bool") == 0;
}

}  // namespace

std::string type_name(py::handle object) {
  const py::handle type = py::type::handle_of(object);
  const std::string module = py::str(type.attr("__module__")).cast<std::string>();
  const std::string name = py::str(type.attr("__qualname__")).cast<std::string>();
  return module == "builtins" ? name : module + "." + name;
}

std::optional<std::chrono::milliseconds> parse_timeout(py::handle seconds, std::string_view what) {
  if (seconds.is_none()) return std::nullopt;
  // Any real number (numpy and torch scalars too), but not a bool: True is not a duration.
  const bool real = PyFloat_Check(seconds.ptr()) != 0 || PyIndex_Check(seconds.ptr()) != 0 ||
                    py::hasattr(seconds, "__float__");
  if (!real || is_boolean(seconds) || py::isinstance<py::str>(seconds))
    invalid(what, "timeout must be a number of seconds or None, not " + type_name(seconds));
  const double value = PyFloat_AsDouble(seconds.ptr());
  if (value == -1.0 && PyErr_Occurred() != nullptr) {
    const std::string message = py::error_already_set().what();
    invalid(what, "timeout " + shown(seconds) + " is not a number of seconds: " + message);
  }
  if (!std::isfinite(value) || value < 0)
    invalid(what, "timeout " + shown(seconds) + " s must be finite and >= 0");
  const double ms = std::ceil(value * 1000.0);
  if (ms > static_cast<double>(kMaxTimeout.count()))
    invalid(what, "timeout " + shown(seconds) + " s is more than one year, the longest accepted");
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

ReduceOp parse_reduce_op(py::handle op, std::string_view what) {
  if (py::isinstance<ReduceOp>(op)) return op.cast<ReduceOp>();
  if (py::isinstance<py::str>(op)) {
    if (const auto parsed = reduce_op_from_name(lower(op.cast<std::string>()))) return *parsed;
    invalid(what, "unknown reduce op " + shown(op) +
                      "; expected one of sum, prod, min, max, avg, band, bor, bxor");
  }
  invalid(what, "op must be a cohort.ReduceOp or its name, not " + type_name(op));
}

DType parse_dtype(py::handle dtype, std::string_view what) {
  if (py::isinstance<DType>(dtype)) return dtype.cast<DType>();
  if (dtype.is_none()) invalid(what, "dtype must not be None");
  if (PyType_Check(dtype.ptr()) != 0) {
    // A type, as numpy accepts one (np.float32, np.bool_, or a builtin): builtins mean what
    // they mean to numpy and torch (float is float64, int is int64); numpy's scalar types
    // are named after their dtype, with a trailing '_' where the name is a Python keyword.
    const auto* type = reinterpret_cast<PyTypeObject*>(dtype.ptr());
    if (type == &PyFloat_Type) return DType::Float64;
    if (type == &PyLong_Type) return DType::Int64;
    if (type == &PyBool_Type) return DType::Bool;
    std::string name = lower(py::str(dtype.attr("__name__")).cast<std::string>());
    if (!name.empty() && name.back() == '_') name.pop_back();
    // C's long long, named so by numpy where long is the int64 too (Linux, macOS).
    if (name == "longlong") return DType::Int64;
    if (name == "ulonglong") return DType::UInt64;
    if (const auto parsed = dtype_from_name(name)) return *parsed;
    invalid(what, "unknown dtype " + shown(dtype));
  }
  // str() covers names and foreign dtype objects alike: numpy.dtype('int32') prints "int32",
  // torch.int32 prints "torch.int32".
  std::string name = lower(py::str(dtype).cast<std::string>());
  if (name.rfind("torch.", 0) == 0) name.erase(0, 6);
  if (const auto parsed = dtype_from_name(name)) return *parsed;
  invalid(what, "unknown dtype " + shown(dtype));
}

Algorithm parse_algorithm(py::handle algorithm, std::string_view what) {
  if (algorithm.is_none()) return Algorithm::Auto;
  if (py::isinstance<Algorithm>(algorithm)) return algorithm.cast<Algorithm>();
  if (py::isinstance<py::str>(algorithm)) {
    if (const auto parsed = algorithm_from_name(lower(algorithm.cast<std::string>())))
      return *parsed;
    invalid(what, "unknown algorithm " + shown(algorithm));
  }
  invalid(what,
          "algorithm must be a cohort.Algorithm, its name or None, not " + type_name(algorithm));
}

std::optional<Stream> parse_stream(py::handle stream, std::string_view what) {
  if (stream.is_none()) return std::nullopt;
  py::handle bits = stream;
  py::object held;  // keeps an attribute's value alive while it is read
  // torch.cuda.Stream and CuPy's Stream carry their handle as an int attribute; an int itself
  // (or a 0-d integer array) has __index__. Floats and bools are not handles.
  if (PyIndex_Check(stream.ptr()) == 0 || py::isinstance<py::bool_>(stream)) {
    for (const char* attribute : {"cuda_stream", "ptr"}) {
      if (py::hasattr(stream, attribute)) {
        held = stream.attr(attribute);
        bits = held;
        break;
      }
    }
  }
  if (PyIndex_Check(bits.ptr()) == 0 || py::isinstance<py::bool_>(bits))
    invalid(what,
            "stream must be an int (a cudaStream_t's bits, e.g. torch.cuda.Stream's "
            "cuda_stream), a torch or CuPy stream, or None; not " +
                type_name(stream));
  try {
    return Stream{bits.cast<std::uintptr_t>()};
  } catch (const py::cast_error&) {
    invalid(what, "stream " + shown(bits) + " is not a stream handle (negative or too large)");
  }
}

CollectiveOptions parse_collective_options(py::handle timeout, py::handle algorithm,
                                           py::handle stream, std::string_view what) {
  CollectiveOptions options;
  options.timeout = parse_timeout(timeout, what);
  options.algorithm = parse_algorithm(algorithm, what);
  options.stream = parse_stream(stream, what);
  return options;
}

bool parse_flag(py::handle value, std::string_view what, std::string_view name) {
  try {
    return value.cast<bool>();
  } catch (const py::cast_error&) {
    invalid(what, std::string(name) + " must be a bool, not " + type_name(value));
  }
}

double parse_real(py::handle value, std::string_view what, std::string_view name) {
  if (!value.is_none() && !py::isinstance<py::str>(value)) {
    try {
      return value.cast<double>();
    } catch (const py::cast_error&) {  // reported below
    }
  }
  invalid(what, std::string(name) + " must be a number, not " + type_name(value));
}

std::vector<std::size_t> parse_counts(py::handle counts, std::string_view what) {
  if (!py::isinstance<py::sequence>(counts) || py::isinstance<py::str>(counts))
    invalid(what, "expected a sequence of element counts, not " + type_name(counts));
  std::vector<std::size_t> parsed;
  std::size_t index = 0;
  for (py::handle count : counts) {
    // Anything with __index__ (int, numpy.int64, a 0-d integer tensor), never a float.
    std::optional<std::size_t> value;
    if (PyIndex_Check(count.ptr()) != 0) {
      try {
        value = count.cast<std::size_t>();
      } catch (const py::cast_error&) {  // negative or too large: reported below
      }
    }
    if (!value) {
      invalid(what, "entry " + std::to_string(index) + " is " + shown(count) +
                        ", not a non-negative int");
    }
    parsed.push_back(*value);
    ++index;
  }
  return parsed;
}

const char* dtype_python_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float8E4M3: return "float8_e4m3fn";
    case DType::Float8E5M2: return "float8_e5m2";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

}  // namespace cohort::python
