// cohort-cast-bench: bandwidth of the training layer's conversion kernels (cast, GradScaler's
// unscale) beside memcpy on the same buffers, in cache (32 KiB buffers) and out of cache
// (256 MiB buffers).
//
// GB/s counts bytes touched: a conversion of n elements reads n x the source size and writes
// n x the destination size; memcpy reads and writes the whole buffer (2 x size); the in-place
// unscale (f32 x factor plus the non-finite check) reads and writes one buffer. n is chosen so
// the larger side of each conversion fills the buffer. "vs memcpy" divides by memcpy's GB/s, the
// machine's copy bandwidth: a ratio near 1 means the kernel moves bytes as fast as the memory
// system lets it. Each figure is the best of several timed runs.
//
// Usage: cohort-cast-bench [--all-isas] [--quick]
//   --all-isas  also time every other instruction set this CPU runs (default: the dispatched one)
//   --quick     smaller out-of-cache buffers (32 MiB) and fewer runs, for a smoke test

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "microbench_timing.hpp"
#include "reduce/dispatch.hpp"
#include "train/kernels/float_kernels.hpp"

namespace {

using cohort::DType;
namespace kernels = cohort::train::kernels;
namespace reduce = cohort::reduce;

using cohort::bench::best_seconds_per_call;
using cohort::bench::escape;

struct Size {
  const char* label;
  std::size_t bytes;
  double min_seconds;
  int repeats;
};

struct Conversion {
  const char* name;
  DType from;
  DType to;
};

constexpr Conversion kConversions[] = {
    {"f32 -> f16", DType::Float32, DType::Float16},
    {"f16 -> f32", DType::Float16, DType::Float32},
    {"f32 -> bf16", DType::Float32, DType::BFloat16},
    {"bf16 -> f32", DType::BFloat16, DType::Float32},
    {"f32 -> e4m3", DType::Float32, DType::Float8E4M3},
};

void print_row(const Size& size, const char* isa, const char* kernel, double gbs,
               double memcpy_gbs) {
  std::printf("%-14s %-8s %-24s %9.1f GB/s  %5.2f x memcpy\n", size.label, isa, kernel, gbs,
              gbs / memcpy_gbs);
}

void run(const Size& size, bool all_isas) {
  // Small finite values in every dtype (f32 ~0.012, f16/bf16 ~1.1 / ~0.011, e4m3 1.5); every
  // page touched before timing.
  std::vector<unsigned char> src(size.bytes), dst(size.bytes, 0);
  for (std::size_t i = 0; i < size.bytes; ++i) src[i] = static_cast<unsigned char>(0x3c + i % 3);
  const double bytes = static_cast<double>(size.bytes);

  const double memcpy_gbs = 2 * bytes / 1e9 /
                            best_seconds_per_call(
                                [&] {
                                  std::memcpy(dst.data(), src.data(), size.bytes);
                                  escape(dst.data());
                                },
                                size.min_seconds, size.repeats);
  std::printf("%-14s %-8s %-24s %9.1f GB/s\n", size.label, "-", "memcpy", memcpy_gbs);

  std::vector<reduce::Isa> isas{reduce::detected_isa()};
  if (all_isas)
    for (reduce::Isa isa : {reduce::Isa::Avx512, reduce::Isa::Avx2, reduce::Isa::Portable})
      if (isa != isas.front() && reduce::isa_available(isa)) isas.push_back(isa);

  for (reduce::Isa isa : isas) {
    reduce::force_isa(isa);
    for (const Conversion& c : kConversions) {
      const std::size_t in_size = cohort::dtype_size(c.from), out_size = cohort::dtype_size(c.to);
      const std::size_t count = size.bytes / std::max(in_size, out_size);
      const double seconds = best_seconds_per_call(
          [&] {
            kernels::convert(c.from, src.data(), c.to, dst.data(), count);
            escape(dst.data());
          },
          size.min_seconds, size.repeats);
      const double gbs = static_cast<double>(count * (in_size + out_size)) / 1e9 / seconds;
      print_row(size, reduce::isa_name(isa), c.name, gbs, memcpy_gbs);
    }
    // GradScaler's unscale: in place, times 1/65536 (exact, so the values never drift).
    const std::size_t count = size.bytes / 4;
    const double seconds = best_seconds_per_call(
        [&] {
          kernels::convert(DType::Float32, dst.data(), DType::Float32, dst.data(), count,
                           1.0f / 65536.0f);
          escape(dst.data());
        },
        size.min_seconds, size.repeats);
    print_row(size, reduce::isa_name(isa), "f32 x factor (in place)", 2 * bytes / 1e9 / seconds,
              memcpy_gbs);
  }
  reduce::force_isa(reduce::detected_isa());
}

}  // namespace

int main(int argc, char** argv) {
  bool all_isas = false;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--all-isas") {
      all_isas = true;
    } else if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--all-isas] [--quick]\n", argv[0]);
      return 2;
    }
  }
  std::printf("cohort-cast-bench: dispatched ISA %s; GB/s = bytes touched (reads + writes)\n",
              kernels::active_isa());
  std::printf("%-14s %-8s %-24s %14s\n", "buffer", "isa", "kernel", "bandwidth");
  const Size in_cache{"32KiB(cache)", 32 << 10, quick ? 0.02 : 0.1, quick ? 2 : 5};
  const Size out_of_cache{quick ? "32MiB(memory)" : "256MiB(memory)",
                          quick ? std::size_t{32} << 20 : std::size_t{256} << 20, quick ? 0.0 : 0.5,
                          quick ? 2 : 5};
  run(in_cache, all_isas);
  run(out_of_cache, all_isas);
  return 0;
}
