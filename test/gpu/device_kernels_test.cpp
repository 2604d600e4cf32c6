// The training layer's device kernels (lib/gpu/kernels/*.cu) on a real GPU, through the device
// runtime the training layer uses, against the CPU kernels (train::kernels) as the reference:
// convert for all 36 dtype pairs x counts 0, 1 and 1000003 x factors (1, the unscale 2^-16, an
// overflowing 3, and 0 which makes inf * 0), with NaN, inf, subnormal and overflowing inputs,
// compared bit for bit with the non-finite flag; convert in place; norm_part for every dtype and
// part (max |x| exactly, the sums to rounding since the GPU adds in another order, NaN and inf
// propagated, the value already in the result combined); scale. Exits 77 (meson: SKIP) when
// there is no runtime or no device.

#include "catch_session.hpp"

#include <catch2/catch.hpp>
#include <cohort/dtype.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/device_runtime.hpp"
#include "train/kernels/float_kernels.hpp"

namespace cohort::gpu {
namespace {

constexpr DType kFloatDTypes[] = {DType::Float32,  DType::Float64,    DType::Float16,
                                  DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2};
constexpr std::size_t kCounts[] = {0, 1, 1000003};
constexpr StreamHandle kDefaultStream{};

DeviceRuntime& runtime() {
  return *device_runtime();
}

// Device memory for the length of a test.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes)
      : bytes_(bytes), data_(runtime().allocate_device(bytes == 0 ? 1 : bytes, 0)) {}
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() { runtime().free_device(data_); }

  void* get() const { return data_; }
  void upload(const void* host) {
    runtime().copy_async(data_, host, bytes_, kDefaultStream);
    runtime().synchronize_stream(kDefaultStream);
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    runtime().copy_async(host.data(), data_, bytes_, kDefaultStream);
    runtime().synchronize_stream(kDefaultStream);
    return host;
  }

 private:
  std::size_t bytes_;
  void* data_;
};

template <class T>
T read_back(const DeviceBytes& device) {
  T value;
  const std::vector<unsigned char> bytes = device.download();
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

// `count` elements of `dtype`: random bit patterns (every NaN payload, inf, subnormals) with
// specials planted at the start and the end so the last, partial block meets them too.
std::vector<unsigned char> source_bytes(DType dtype, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> bytes(count * size);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bits = rng();
    std::memcpy(&bytes[i * size], &bits, size);
  }
  // Specials as doubles, narrowed by the CPU kernel (this only builds inputs).
  const double specials[] = {NAN,   -NAN,    INFINITY, -INFINITY, 0.0,     -0.0,   65520.0,
                             464.0, 61440.0, 1e39,     0x1p-149,  0x1p-24, 1e-300, 1e300};
  const std::size_t n = std::min<std::size_t>(count, std::size(specials));
  std::vector<unsigned char> narrowed(std::size(specials) * size);
  train::kernels::convert(DType::Float64, specials, dtype, narrowed.data(), std::size(specials));
  std::memcpy(bytes.data(), narrowed.data(), n * size);
  if (count > 2 * n) std::memcpy(&bytes[(count - n) * size], narrowed.data(), n * size);
  return bytes;
}

// Finite values of moderate size for the norms: uniform in [-4, 4], rounded into `dtype`.
std::vector<unsigned char> finite_bytes(DType dtype, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  std::vector<double> values(count);
  for (double& v : values) v = value(rng);
  std::vector<unsigned char> bytes(count * dtype_size(dtype));
  train::kernels::convert(DType::Float64, values.data(), dtype, bytes.data(), count);
  return bytes;
}

std::string first_difference(DType dtype, const std::vector<unsigned char>& want,
                             const std::vector<unsigned char>& got) {
  const std::size_t size = dtype_size(dtype);
  for (std::size_t i = 0; i * size < want.size(); ++i) {
    if (std::memcmp(&want[i * size], &got[i * size], size) == 0) continue;
    std::uint64_t w = 0, g = 0;
    std::memcpy(&w, &want[i * size], size);
    std::memcpy(&g, &got[i * size], size);
    std::ostringstream out;
    out << "element " << i << ": cpu 0x" << std::hex << w << ", device 0x" << g;
    return out.str();
  }
  return "";
}

TEST_CASE("device convert equals the CPU's bit for bit, with the non-finite flag",
          "[gpu][kernels]") {
  for (DType s : kFloatDTypes) {
    for (std::size_t count : kCounts) {
      const std::vector<unsigned char> src = source_bytes(s, count, 17 + count);
      DeviceBytes device_src(src.size());
      device_src.upload(src.data());
      for (DType d : kFloatDTypes) {
        for (float factor : {1.0f, 1.0f / 65536.0f, 3.0f, 0.0f}) {
          INFO(dtype_name(s) << " -> " << dtype_name(d) << " count " << count << " factor "
                             << factor);
          std::vector<unsigned char> want(count * dtype_size(d));
          const bool want_flag =
              train::kernels::convert(s, src.data(), d, want.data(), count, factor);

          DeviceBytes device_dst(want.size());
          DeviceBytes flag(sizeof(std::int32_t));
          runtime().fill_async(flag.get(), 0, sizeof(std::int32_t), kDefaultStream);
          runtime().convert(s, device_src.get(), d, device_dst.get(), count, factor,
                            static_cast<std::int32_t*>(flag.get()), kDefaultStream);
          CHECK(first_difference(d, want, device_dst.download()) == "");
          CHECK((read_back<std::int32_t>(flag) != 0) == want_flag);
        }
      }
    }
  }
}

TEST_CASE("device convert in place equals the CPU's", "[gpu][kernels]") {
  for (DType s : kFloatDTypes) {
    for (DType d : kFloatDTypes) {
      if (dtype_size(s) != dtype_size(d)) continue;
      INFO(dtype_name(s) << " -> " << dtype_name(d));
      std::vector<unsigned char> data = source_bytes(s, 1000003, 5);
      DeviceBytes device(data.size());
      device.upload(data.data());
      runtime().convert(s, device.get(), d, device.get(), 1000003, 0.5f, nullptr, kDefaultStream);
      train::kernels::convert(s, data.data(), d, data.data(), 1000003, 0.5f);
      CHECK(first_difference(d, data, device.download()) == "");
    }
  }
}

TEST_CASE("device convert never clears the flag", "[gpu][kernels]") {
  const std::vector<unsigned char> clean = finite_bytes(DType::Float32, 1000, 3);
  DeviceBytes src(clean.size()), dst(clean.size()), flag(sizeof(std::int32_t));
  src.upload(clean.data());
  const std::int32_t one = 1;
  flag.upload(&one);
  runtime().convert(DType::Float32, src.get(), DType::Float16, dst.get(), 1000, 1.0f,
                    static_cast<std::int32_t*>(flag.get()), kDefaultStream);
  CHECK(read_back<std::int32_t>(flag) == 1);
}

double cpu_part(DType dtype, const std::vector<unsigned char>& data, std::size_t count,
                DeviceNormPart part) {
  using train::kernels::NormPart;
  const NormPart cpu = part == DeviceNormPart::SumSquares ? NormPart::SumSquares
                       : part == DeviceNormPart::SumAbs   ? NormPart::SumAbs
                                                          : NormPart::MaxAbs;
  return train::kernels::norm_part(dtype, data.data(), count, cpu);
}

double device_part(DType dtype, const std::vector<unsigned char>& data, std::size_t count,
                   DeviceNormPart part, double start) {
  DeviceBytes device(data.size()), result(sizeof(double));
  device.upload(data.data());
  result.upload(&start);
  runtime().norm_part(dtype, device.get(), count, part, static_cast<double*>(result.get()),
                      kDefaultStream);
  return read_back<double>(result);
}

TEST_CASE("device norm_part equals the CPU's and combines with the value there", "[gpu][kernels]") {
  for (DType dtype : kFloatDTypes) {
    for (std::size_t count : kCounts) {
      const std::vector<unsigned char> data = finite_bytes(dtype, count, 23 + count);
      for (DeviceNormPart part :
           {DeviceNormPart::SumSquares, DeviceNormPart::SumAbs, DeviceNormPart::MaxAbs}) {
        INFO(dtype_name(dtype) << " count " << count << " part " << static_cast<int>(part));
        const double cpu = cpu_part(dtype, data, count, part);
        if (part == DeviceNormPart::MaxAbs) {
          CHECK(device_part(dtype, data, count, part, 0.0) == cpu);
          CHECK(device_part(dtype, data, count, part, 100.0) == 100.0);
        } else {
          // Another summation order: equal to rounding (n * 2^-53 relative at worst).
          CHECK(device_part(dtype, data, count, part, 0.0) == Approx(cpu).epsilon(1e-9));
          CHECK(device_part(dtype, data, count, part, 0.5) == Approx(cpu + 0.5).epsilon(1e-9));
        }
      }
    }
  }
}

TEST_CASE("device norm_part propagates NaN and inf", "[gpu][kernels]") {
  for (DType dtype : kFloatDTypes) {
    for (double special : {NAN, INFINITY}) {
      if (dtype == DType::Float8E4M3 && std::isinf(special)) continue;  // no inf in e4m3
      std::vector<unsigned char> data = finite_bytes(dtype, 1000003, 29);
      const double value = special;
      train::kernels::convert(DType::Float64, &value, dtype, &data[500000 * dtype_size(dtype)], 1);
      for (DeviceNormPart part :
           {DeviceNormPart::SumSquares, DeviceNormPart::SumAbs, DeviceNormPart::MaxAbs}) {
        INFO(dtype_name(dtype) << " " << special << " part " << static_cast<int>(part));
        const double got = device_part(dtype, data, 1000003, part, 0.0);
        if (std::isnan(special)) {
          CHECK(std::isnan(got));
        } else {
          CHECK(got == INFINITY);
        }
      }
    }
  }
}

TEST_CASE("device scale equals the host clipping's multiply", "[gpu][kernels]") {
  for (DType dtype : kFloatDTypes) {
    for (std::size_t count : kCounts) {
      for (double factor : {0.3, 1e-3}) {
        INFO(dtype_name(dtype) << " count " << count << " factor " << factor);
        std::vector<unsigned char> data = source_bytes(dtype, count, 31);
        DeviceBytes device(data.size());
        device.upload(data.data());
        runtime().scale(dtype, device.get(), count, factor, kDefaultStream);
        // clipping.cpp's host path: the factor rounded to float, convert in place.
        train::kernels::convert(dtype, data.data(), dtype, data.data(), count,
                                static_cast<float>(factor));
        CHECK(first_difference(dtype, data, device.download()) == "");
      }
    }
  }
}

}  // namespace
}  // namespace cohort::gpu

int main(int argc, char** argv) {
  cohort::gpu::DeviceRuntime* runtime = cohort::gpu::device_runtime();
  if (runtime == nullptr || runtime->device_count() == 0) {
    std::printf("no CUDA device (%s): skipping\n",
                runtime == nullptr ? "cohort built without CUDA" : runtime->describe().c_str());
    return 77;
  }
  return cohort::test::run_catch_session(argc, argv);
}
