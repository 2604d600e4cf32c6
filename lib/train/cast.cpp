// cast / cast_to / to_fp32: float-format conversion of whole buffers.
//
// How it works: after validation, a contiguous input is one call of the element-wise kernel
// (kernels::convert). A strided input is first simplified — size-1 dimensions dropped and
// dimensions that step through memory like one merged — and then walked in row-major order:
// rows whose elements are adjacent (inner stride 1) and long enough go to the kernel directly;
// anything else is gathered element by element into a small stack block that the kernel
// converts in one call. The output is always contiguous, so it advances linearly.
//
// Device memory (cuda, or managed on a device the runtime sees, when both sides are) takes one
// device convert of a contiguous input on the device's stream 0, waited for before returning
// (device_placement.hpp).
//
// Cost: one read of the input and one write of the output; the gather path adds a copy of each
// element into a block that stays in L1.

#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/invalid_argument.hpp"
#include "train/buffer_checks.hpp"
#include "train/device_placement.hpp"
#include "train/kernels/float_kernels.hpp"

namespace cohort::train {
namespace {

// Elements gathered per kernel call on the strided path (at most 4 KiB of f64: fits in L1).
constexpr std::size_t kGatherElements = 512;
// A row with adjacent elements shorter than this is gathered instead of converted in place, so
// e.g. a transposed view with short rows does not pay one kernel call per handful of elements.
constexpr std::int64_t kMinDirectRow = 64;

std::string name_of(DType dtype) {
  return std::string(dtype_name(dtype));
}

void require_floating(DType dtype, const char* role) {
  if (!kernels::supported(dtype))
    invalid_argument(
        std::string("cast: ") + role + " dtype " + name_of(dtype) +
        " is not a floating type (float, double, half, bfloat16, fp8_e4m3 or fp8_e5m2)");
}

// One dimension of a strided walk: extent and stride in bytes.
struct Dim {
  std::int64_t extent;
  std::int64_t byte_stride;
};

// The input's dimensions with size-1 ones dropped and neighbours merged where the outer one
// steps exactly over the inner one (so a contiguous tail becomes one long row).
std::vector<Dim> simplified_dims(const Buffer& in) {
  const auto esize = static_cast<std::int64_t>(in.element_size());
  const std::vector<std::int64_t>& shape = in.shape();
  std::vector<std::int64_t> strides = in.strides();
  if (strides.empty()) {  // row-major contiguous
    strides.assign(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  }
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    const Dim dim{shape[i], strides[i] * esize};
    if (!dims.empty() && dims.back().byte_stride == dim.extent * dim.byte_stride) {
      dims.back() = {dims.back().extent * dim.extent, dim.byte_stride};
    } else {
      dims.push_back(dim);
    }
  }
  if (dims.empty()) dims.push_back({1, esize});
  return dims;
}

// Lowest and one-past-highest byte address the input's elements occupy.
std::pair<std::uintptr_t, std::uintptr_t> byte_span(const Buffer& in,
                                                    const std::vector<Dim>& dims) {
  auto low = reinterpret_cast<std::uintptr_t>(in.data());
  std::uintptr_t high = low;
  for (const Dim& dim : dims) {
    const std::int64_t reach = (dim.extent - 1) * dim.byte_stride;
    if (reach < 0)
      low -= static_cast<std::uintptr_t>(-reach);
    else
      high += static_cast<std::uintptr_t>(reach);
  }
  return {low, high + in.element_size()};
}

// Converts a strided input into the contiguous `out` in row-major order (see the file comment).
void cast_strided(const Buffer& in, const std::vector<Dim>& dims, DType dst_dtype,
                  unsigned char* out) {
  const DType src_dtype = in.dtype();
  const std::size_t in_size = in.element_size();
  const std::size_t out_size = dtype_size(dst_dtype);
  const Dim inner = dims.back();
  const std::size_t outer_dims = dims.size() - 1;
  const bool direct_rows =
      inner.byte_stride == static_cast<std::int64_t>(in_size) && inner.extent >= kMinDirectRow;

  alignas(64) unsigned char block[kGatherElements * sizeof(double)];
  std::size_t gathered = 0;
  auto flush = [&] {
    kernels::convert(src_dtype, block, dst_dtype, out, gathered);
    out += gathered * out_size;
    gathered = 0;
  };

  // Odometer over the outer dimensions; `row` is the address of the current row's first element.
  std::vector<std::int64_t> index(outer_dims, 0);
  const auto* row = static_cast<const unsigned char*>(in.data());
  const std::size_t rows = in.count() / static_cast<std::size_t>(inner.extent);
  for (std::size_t r = 0; r < rows; ++r) {
    if (direct_rows) {
      const auto n = static_cast<std::size_t>(inner.extent);
      kernels::convert(src_dtype, row, dst_dtype, out, n);
      out += n * out_size;
    } else {
      const unsigned char* element = row;
      for (std::int64_t i = 0; i < inner.extent; ++i, element += inner.byte_stride) {
        std::memcpy(block + gathered * in_size, element, in_size);
        if (++gathered == kGatherElements) flush();
      }
    }
    // Advance the odometer: bump the innermost outer dimension, carrying outward.
    for (std::size_t d = outer_dims; d-- > 0;) {
      row += dims[d].byte_stride;
      if (++index[d] < dims[d].extent) break;
      row -= dims[d].extent * dims[d].byte_stride;
      index[d] = 0;
    }
  }
  if (gathered != 0) flush();
}

// Device memory (cuda, or managed memory on a device the runtime sees): one convert on the
// device's stream 0, waited for. Only contiguous inputs: a strided walk would cost a launch per
// row.
void cast_on_device(const Buffer& in, const Buffer& out, int device) {
  if (!in.is_contiguous())
    throw Error(ErrorCode::Unsupported,
                "cast: the input (" + name_of(in.dtype()) + ") is strided device memory on " +
                    in.device().to_string() + "; only contiguous device buffers are cast");
  const auto in_low = reinterpret_cast<std::uintptr_t>(in.data());
  const auto out_low = reinterpret_cast<std::uintptr_t>(out.data());
  const bool overlap = in_low < out_low + out.nbytes() && out_low < in_low + in.nbytes();
  if (overlap && !(in_low == out_low && in.element_size() == out.element_size()))
    invalid_argument("cast: the output (" + name_of(out.dtype()) + ") overlaps the input (" +
                     name_of(in.dtype()) + ") other than element for element");
  if (in.count() == 0) return;
  gpu::DeviceRuntime& runtime = device_runtime_for("cast", "the input", in);
  DeviceScope scope(runtime, device);
  runtime.convert(in.dtype(), in.data(), out.dtype(), out.data(), in.count(), 1.0f, nullptr,
                  gpu::StreamHandle{});
  runtime.synchronize_stream(gpu::StreamHandle{});
}

}  // namespace

void cast(const Buffer& in, const Buffer& out) {
  require_floating(in.dtype(), "input");
  require_floating(out.dtype(), "output");
  if (in.count() != out.count())
    invalid_argument("cast: input has " + std::to_string(in.count()) + " elements of " +
                     name_of(in.dtype()) + " but output has " + std::to_string(out.count()) +
                     " elements of " + name_of(out.dtype()));
  if (out.read_only())
    invalid_argument("cast: the output buffer (" + name_of(out.dtype()) + ") is read-only");
  out.require_contiguous("cast output");
  if (!in.device().host_accessible()) device_runtime_for("cast", "the input", in);
  if (!out.device().host_accessible()) device_runtime_for("cast", "the output", out);
  const Buffer both[] = {in, out};
  const int device = common_place(
      "cast", both, [](std::size_t i) { return std::string(i == 0 ? "the input" : "the output"); });
  if (device >= 0) {
    cast_on_device(in, out, device);
    return;
  }
  if (in.count() == 0) return;

  const std::vector<Dim> dims = simplified_dims(in);
  const bool contiguous =
      dims.size() == 1 && dims[0].byte_stride == static_cast<std::int64_t>(in.element_size());

  // The kernel reads each element before writing its result, so identical memory is fine when
  // the element sizes agree; any other overlap would overwrite input not yet read.
  const auto [in_low, in_high] = byte_span(in, dims);
  const auto out_low = reinterpret_cast<std::uintptr_t>(out.data());
  const std::uintptr_t out_high = out_low + out.nbytes();
  const bool overlap = in_low < out_high && out_low < in_high;
  const bool in_place =
      contiguous && in.data() == out.data() && in.element_size() == out.element_size();
  if (overlap && !in_place)
    invalid_argument("cast: the output (" + name_of(out.dtype()) + ") overlaps the input (" +
                     name_of(in.dtype()) + ") other than element for element");

  if (contiguous) {
    kernels::convert(in.dtype(), in.data(), out.dtype(), out.data(), in.count());
  } else {
    cast_strided(in, dims, out.dtype(), static_cast<unsigned char*>(out.data()));
  }
}

Buffer cast_to(const Buffer& in, DType dtype) {
  require_floating(in.dtype(), "input");
  require_floating(dtype, "target");
  // Device input: the result is device memory of the same device (managed memory is not
  // offered by Buffer::allocate, so a managed input gives a cuda buffer).
  if (!in.device().host_accessible()) device_runtime_for("cast_to", "the input", in);
  Buffer result =
      on_device(in)
          ? Buffer::allocate(in.count(), dtype, Device::cuda(in.device().id)).reshape(in.shape())
          : Buffer::allocate(in.shape(), dtype);
  cast(in, result);
  return result;
}

Buffer to_fp32(const Buffer& b) {
  if (b.dtype() != DType::Float16 && b.dtype() != DType::BFloat16) return b;
  return cast_to(b, DType::Float32);
}

}  // namespace cohort::train
