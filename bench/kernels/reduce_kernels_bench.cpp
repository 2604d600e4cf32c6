// cohort-reduce-bench: bandwidth of the Sum reduction kernels beside memcpy on the same
// buffers, in cache (32 KiB per buffer) and out of cache (256 MiB per buffer).
//
// GB/s counts bytes touched: memcpy reads one buffer and writes one (2 x size);
// reduce_to(dst, a, b) reads two and writes one, and reduce_into(dst, src) reads dst and src
// and writes dst (3 x size each). "vs memcpy" divides by memcpy's GB/s: memcpy is the
// machine's copy bandwidth, so a ratio near 1 means the kernel moves bytes as fast as the
// memory system lets it. Each figure is the best of several timed runs.
//
// Usage: cohort-reduce-bench [--all-isas] [--quick] [--fan-out]
//   --all-isas  also time every other instruction set this CPU runs (default: the dispatched one)
//   --quick     smaller out-of-cache buffers (32 MiB) and fewer runs, for a smoke test
//   --fan-out   instead: fold_to_all of two inputs into 1-32 outputs (float32, float16,
//               bfloat16), streaming and cached stores (what a mapped allreduce does on that
//               many ranks); GB/s counts every input read and output written

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "microbench_timing.hpp"
#include "reduce/dispatch.hpp"
#include "reduce/reduce.hpp"

namespace {

using cohort::DType;
using cohort::ReduceOp;
namespace reduce = cohort::reduce;

struct Buffers {
  explicit Buffers(std::size_t bytes) : a(bytes), b(bytes), dst(bytes) {
    // Touch every page (and give the floats small, finite values) before timing.
    for (std::size_t i = 0; i < bytes; ++i) {
      a[i] = static_cast<unsigned char>(0x3c + (i % 3));
      b[i] = static_cast<unsigned char>(0x3b + (i % 5));
      dst[i] = 0;
    }
  }
  std::vector<unsigned char> a, b, dst;
};

using cohort::bench::best_seconds_per_call;

/// The detected instruction set, then (with --all-isas) every other this CPU runs.
std::vector<reduce::Isa> isas_to_time(bool all_isas) {
  std::vector<reduce::Isa> isas{reduce::detected_isa()};
  if (all_isas)
    for (reduce::Isa isa : {reduce::Isa::Avx2, reduce::Isa::Portable})
      if (isa != isas.front() && reduce::isa_available(isa)) isas.push_back(isa);
  return isas;
}
using cohort::bench::escape;

struct Size {
  const char* label;
  std::size_t bytes;
  double min_seconds;
  int repeats;
};

void run(const Size& size, bool all_isas) {
  Buffers buffers(size.bytes);
  unsigned char* a = buffers.a.data();
  unsigned char* b = buffers.b.data();
  unsigned char* dst = buffers.dst.data();
  const double bytes = static_cast<double>(size.bytes);

  const double memcpy_gbs = 2 * bytes / 1e9 /
                            best_seconds_per_call(
                                [&] {
                                  std::memcpy(dst, a, size.bytes);
                                  escape(dst);
                                },
                                size.min_seconds, size.repeats);
  std::printf("%-14s %-9s %-8s %-26s %9.1f GB/s\n", size.label, "-", "-", "memcpy", memcpy_gbs);

  const std::vector<reduce::Isa> isas = isas_to_time(all_isas);

  for (reduce::Isa isa : isas) {
    reduce::force_isa(isa);
    for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
      const std::size_t count = size.bytes / cohort::dtype_size(dtype);
      const double to_gbs = 3 * bytes / 1e9 /
                            best_seconds_per_call(
                                [&] {
                                  reduce::reduce_to(ReduceOp::Sum, dtype, dst, a, b, count);
                                  escape(dst);
                                },
                                size.min_seconds, size.repeats);
      // reduce_into keeps adding b into dst; the values stay finite for the run's length, and
      // the kernel's speed does not depend on them anyway.
      const double into_gbs = 3 * bytes / 1e9 /
                              best_seconds_per_call(
                                  [&] {
                                    reduce::reduce_into(ReduceOp::Sum, dtype, dst, b, count);
                                    escape(dst);
                                  },
                                  size.min_seconds, size.repeats);
      const char* name = cohort::dtype_name(dtype).data();
      std::printf("%-14s %-9s %-8s %-26s %9.1f GB/s  %5.2f x memcpy\n", size.label, name,
                  reduce::isa_name(isa), "sum reduce_to(dst,a,b)", to_gbs, to_gbs / memcpy_gbs);
      std::printf("%-14s %-9s %-8s %-26s %9.1f GB/s  %5.2f x memcpy\n", size.label, name,
                  reduce::isa_name(isa), "sum reduce_into(dst,src)", into_gbs,
                  into_gbs / memcpy_gbs);
    }
  }
  reduce::force_isa(reduce::detected_isa());
}

/// fold_to_all(Sum) of two inputs into n outputs of `bytes` each, for n up to kMaxOutputs, with
/// both kinds of stores, on every instruction set asked for.
void run_fan_out(std::size_t bytes, bool all_isas, double min_seconds, int repeats) {
  constexpr std::size_t kMaxOutputs = 32;
  // Page-aligned, so alike modulo 64 bytes: the streamed case (a mapped allreduce's outputs are
  // when the ranks' buffers are, as those of Buffer::allocate_mappable).
  constexpr std::size_t kAlign = 4096;
  const std::size_t stride = (bytes + kAlign - 1) / kAlign * kAlign;
  std::vector<unsigned char> storage((kMaxOutputs + 2) * stride + kAlign);
  unsigned char* base =
      storage.data() +
      (kAlign - reinterpret_cast<std::uintptr_t>(storage.data()) % kAlign) % kAlign;
  for (std::size_t i = 0; i < storage.size() - (base - storage.data()); ++i)
    base[i] = static_cast<unsigned char>(0x3c + (i % 3));
  const void* inputs[2] = {base, base + stride};
  void* outputs[kMaxOutputs];
  for (std::size_t j = 0; j < kMaxOutputs; ++j) outputs[j] = base + (j + 2) * stride;

  const std::vector<reduce::Isa> isas = isas_to_time(all_isas);
  std::printf(
      "fold_to_all, sum of 2 inputs of %zu MiB into n outputs; GB/s = (2 + n) x size / "
      "time\n",
      bytes >> 20);
  std::printf("%-8s %-9s %8s %14s %14s %10s\n", "isa", "dtype", "outputs", "streaming", "cached",
              "ratio");
  for (reduce::Isa isa : isas) {
    reduce::force_isa(isa);
    for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
      const std::size_t count = bytes / cohort::dtype_size(dtype);
      for (std::size_t n : {1, 2, 4, 8, 12, 16, 24, 32}) {
        double gbs[2];
        for (int k = 0; k < 2; ++k) {
          const reduce::Stores stores = k == 0 ? reduce::Stores::Streaming : reduce::Stores::Cached;
          gbs[k] =
              static_cast<double>((2 + n) * bytes) / 1e9 /
              best_seconds_per_call(
                  [&] {
                    reduce::fold_to_all(ReduceOp::Sum, dtype, outputs, n, inputs, 2, count, stores);
                    escape(outputs[0]);
                  },
                  min_seconds, repeats);
        }
        std::printf("%-8s %-9s %8zu %9.1f GB/s %9.1f GB/s %9.2fx\n", reduce::isa_name(isa),
                    cohort::dtype_name(dtype).data(), n, gbs[0], gbs[1], gbs[0] / gbs[1]);
      }
    }
  }
  reduce::force_isa(reduce::detected_isa());
}

}  // namespace

int main(int argc, char** argv) {
  bool all_isas = false;
  bool quick = false;
  bool fan_out = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--all-isas") {
      all_isas = true;
    } else if (arg == "--quick") {
      quick = true;
    } else if (arg == "--fan-out") {
      fan_out = true;
    } else {
      std::fprintf(stderr, "usage: %s [--all-isas] [--quick] [--fan-out]\n", argv[0]);
      return 2;
    }
  }
  std::printf("cohort-reduce-bench: dispatched ISA %s; GB/s = bytes touched (reads + writes)\n",
              reduce::active_isa());
  if (fan_out) {
    run_fan_out(quick ? std::size_t{1} << 20 : std::size_t{16} << 20, all_isas, quick ? 0.0 : 0.3,
                quick ? 1 : 3);
    return 0;
  }
  std::printf("%-14s %-9s %-8s %-26s %14s\n", "buffer", "dtype", "isa", "kernel", "bandwidth");
  const Size in_cache{"32KiB(cache)", 32 << 10, quick ? 0.02 : 0.1, quick ? 2 : 5};
  const Size out_of_cache{quick ? "32MiB(memory)" : "256MiB(memory)",
                          quick ? std::size_t{32} << 20 : std::size_t{256} << 20, quick ? 0.0 : 0.5,
                          quick ? 2 : 5};
  run(in_cache, all_isas);
  run(out_of_cache, all_isas);
  return 0;
}
