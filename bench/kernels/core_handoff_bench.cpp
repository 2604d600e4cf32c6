// cohort-handoff-bench: what moving cache lines between two cores costs the shared-memory
// allreduce on this host.
//
// The arena's share scheme on 2 ranks (lib/algorithms/engines/shared_memory_reduction.cpp) does,
// for every 256 KiB piece, on each rank: copy the peer's half of its input into a data slot;
// reduce its own half (its input and the peer's data slot) into a result slot; copy its own
// result and the peer's into its output (streaming stores from 8 MiB on). Two threads pinned to
// two CPUs run exactly those copies and reductions, with the library's own kernels, over a
// float32 vector, in two modes:
//   shared   each reads the halves of the slots the other wrote, as the ranks do: the slots'
//            cache lines move from one core to the other and back;
//   private  each reads the halves it wrote itself: the same amounts and instructions, and no
//            slot line moves between the cores.
// Both modes wait on the other thread's flags, so they keep the same lockstep.
// shared / private estimates the share of the allreduce's time that the cores' cache-to-cache
// transfers cost. Near 1, the arena runs at the memory's speed; at 2 or more, reading a peer's
// memory once (the single-copy and UCX paths, which read large buffers from memory instead of
// the peer's cache) can beat the arena's two copies. bench/PERFORMANCE-LOG.md has the figures.
// Two SMT siblings share their caches, so pick CPUs on separate cores (--cpus).
//
// Then the ceiling of a 2-rank allreduce on this host: the same two threads on plain memory of
// one process, each reading its half of both inputs once and writing the sums into both outputs
// in one fused pass (streaming stores out of place), out of place and in place; and the same
// work done the way the allreduce over mappable buffers does it (allreduce/single_copy.cpp,
// run_mapped: reduce::fold_to_all, one pass per piece). cohort-bench's busbw over the
// ceiling is how near the memory's limit cohort runs.
//
// Then the same two CPUs stream tiny messages, as a tiny broadcast's root and its reader do
// through the arena's eager lines: 8-byte messages through 16 rotating cache lines, the reader
// announcing its progress and the writer reading that only once its lines run out; and again
// with one line more that the writer writes and the reader reads at every message. The first
// figure is what a line's trip between the cores costs a stream (tiny rooted ops on 2 ranks
// cost a few times it); the second shows what a line both cores touch at every step adds (it
// moves back and forth instead of along). The host's figures moved by 4x within an hour on
// 2026-11-28, so a tiny op's timing says little without them.
//
// Usage: cohort-handoff-bench [--mib N] [--repeats R] [--cpus A,B] [--quick]
//   --mib      vector size in MiB (default 64)
//   --repeats  timed runs per mode; the median is printed (default 7)
//   --cpus     the two CPUs to pin the threads to (default: the first two it may run on)
//   --quick    8 MiB and 2 runs, and fewer tiny messages, for a smoke test

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include "core/copy_bytes.hpp"
#include "core/stream_copy.hpp"
#include "reduce/reduce.hpp"

namespace {

using cohort::DType;
using cohort::ReduceOp;

constexpr std::size_t kPieceBytes = 256 * 1024;  // SharedArena::kSlotBytes
constexpr std::size_t kHalf = kPieceBytes / 2;
constexpr std::size_t kStreamMinBytes = cohort::kStreamOutputMinBytes;  // as the engine's

/// One flag per cache line, as the arena's.
struct alignas(64) Flag {
  std::atomic<std::uint64_t> value{0};
};

/// Anonymous memory advised to huge pages, as Buffer::allocate's, touched before timing.
class Memory {
 public:
  explicit Memory(std::size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    bytes_ptr_ = static_cast<std::byte*>(p);
    std::memset(p, 0, bytes);
  }
  ~Memory() { munmap(bytes_ptr_, bytes_); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  std::byte* get() const { return bytes_ptr_; }

 private:
  std::size_t bytes_;
  std::byte* bytes_ptr_ = nullptr;
};

/// A rank: its input and output, two data and two result slots (pieces alternate), and its
/// flags: Arrived(g) after its copy-in, Reduced(g) after its reduction, Done(g) after its
/// copy-out (the peer may then rewrite the slots of piece g).
struct Rank {
  explicit Rank(std::size_t bytes) : in(bytes), out(bytes), slots(4 * kPieceBytes) {}
  std::byte* input() { return in.get(); }
  std::byte* output() { return out.get(); }
  std::byte* data(std::uint64_t g) { return slots.get() + (g % 2) * kPieceBytes; }
  std::byte* result(std::uint64_t g) { return slots.get() + (2 + g % 2) * kPieceBytes; }

  Memory in, out, slots;
  Flag arrived, reduced, done;
};

void wait_for(const Flag& flag, std::uint64_t g) {
  while (flag.value.load(std::memory_order_acquire) < g) {
  }
}

void publish(Flag& flag, std::uint64_t g) {
  flag.value.store(g, std::memory_order_release);
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/// Rank `me`'s part of one allreduce with `peer`; in private mode it reads its own slots where it
/// would read the peer's.
void run_rank(Rank& mine, Rank& peer, int me, bool shared, std::size_t bytes) {
  const std::size_t own = static_cast<std::size_t>(me) * kHalf;
  const std::size_t theirs = kHalf - own;
  const std::uint64_t pieces = bytes / kPieceBytes;
  const auto copy_out = bytes >= kStreamMinBytes ? cohort::stream_copy : cohort::copy_bytes;
  auto copy_in = [&](std::uint64_t g) {
    if (g > 2) wait_for(peer.reduced, g - 2);  // the reader of data slot g % 2 is done with it
    cohort::copy_bytes(mine.data(g) + theirs, mine.input() + (g - 1) * kPieceBytes + theirs, kHalf);
    publish(mine.arrived, g);
  };
  copy_in(1);
  for (std::uint64_t g = 1; g <= pieces; ++g) {
    std::byte* piece_in = mine.input() + (g - 1) * kPieceBytes;
    std::byte* piece_out = mine.output() + (g - 1) * kPieceBytes;
    wait_for(peer.arrived, g);
    if (g > 2) wait_for(peer.done, g - 2);  // result slot g % 2 was copied out of
    // The peer's copy of this rank's half, or (private) the half this rank copied in itself.
    const std::byte* operand = shared ? peer.data(g) + own : mine.data(g) + theirs;
    cohort::reduce::reduce_to(ReduceOp::Sum, DType::Float32, mine.result(g) + own, piece_in + own,
                              operand, kHalf / sizeof(float));
    publish(mine.reduced, g);
    if (g < pieces) copy_in(g + 1);
    copy_out(piece_out + own, mine.result(g) + own, kHalf);
    wait_for(peer.reduced, g);
    // The peer's result for its half, or (private) this rank's own result again.
    const std::byte* result = shared ? peer.result(g) + theirs : mine.result(g) + own;
    copy_out(piece_out + theirs, result, kHalf);
    publish(mine.done, g);
  }
}

/// Nanoseconds per message of `messages` 8-byte messages streamed from a thread on cpus[0] to
/// one on cpus[1] through 16 rotating lines (see the header); with `line_both_touch`, the writer
/// also stores each message's number into one more line, which the reader waits for too.
double stream_ns(bool line_both_touch, std::uint64_t messages, const int (&cpus)[2]) {
  // SharedArena::kEagerDepth until 2026-11-30 (256 since); kept at 16 so this figure compares
  // with the ones logged before, and it measures a line's trip, which the depth does not change.
  constexpr std::uint64_t kLines = 16;
  // Each on a 128-byte pair of its own (the adjacent-line prefetch moves lines in pairs), and
  // nothing else either thread touches while streaming shares one: the threads keep their own
  // counters in locals and publish the checksum once, at the end.
  struct alignas(128) Line {
    std::atomic<std::uint64_t> value{0};
    std::uint64_t payload = 0;
  };
  struct Stream {
    Line lines[kLines];
    Line consumed;
    Line every_message;
    Line checksum;
  };
  auto stream = std::make_unique<Stream>();
  const auto start = std::chrono::steady_clock::now();
  std::thread writer([&stream, line_both_touch, messages, cpu = cpus[0]] {
    pin_to(cpu);
    Stream& st = *stream;
    std::uint64_t consumed_seen = 0;
    for (std::uint64_t m = 1; m <= messages; ++m) {
      if (m > kLines + consumed_seen) {
        while ((consumed_seen = st.consumed.value.load(std::memory_order_acquire)) + kLines < m) {
        }
      }
      if (line_both_touch) st.every_message.value.store(m, std::memory_order_release);
      Line& line = st.lines[m % kLines];
      line.payload = m;
      line.value.store(m, std::memory_order_release);
    }
  });
  std::thread reader([&stream, line_both_touch, messages, cpu = cpus[1]] {
    pin_to(cpu);
    Stream& st = *stream;
    std::uint64_t sum = 0;
    for (std::uint64_t m = 1; m <= messages; ++m) {
      const Line& line = st.lines[m % kLines];
      while (line.value.load(std::memory_order_acquire) != m) {
      }
      if (line_both_touch) {
        while (st.every_message.value.load(std::memory_order_acquire) < m) {
        }
      }
      sum += line.payload;
      st.consumed.value.store(m, std::memory_order_release);
    }
    st.checksum.payload = sum;
  });
  writer.join();
  reader.join();
  const double elapsed =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  if (stream->checksum.payload != messages * (messages + 1) / 2) {
    std::fprintf(stderr, "cohort-handoff-bench: the reader read a stale payload\n");
    std::exit(1);
  }
  return elapsed / static_cast<double>(messages);
}

/// Median seconds of `repeats` allreduces of `bytes` on two threads pinned to `cpus`.
double median_seconds(bool shared, std::size_t bytes, int repeats, const int (&cpus)[2]) {
  Rank ranks[2]{Rank(bytes), Rank(bytes)};
  std::vector<double> seconds;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms the pages up, untimed
    for (Rank& rank : ranks) {
      publish(rank.arrived, 0);
      publish(rank.reduced, 0);
      publish(rank.done, 0);
    }
    const auto start = std::chrono::steady_clock::now();
    auto body = [&](int me) {
      pin_to(cpus[me]);
      run_rank(ranks[me], ranks[1 - me], me, shared, bytes);
    };
    std::thread first(body, 0);
    std::thread second(body, 1);
    first.join();
    second.join();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) seconds.push_back(elapsed);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

/// d0 = d1 = a + b over n floats in one pass (streaming stores when `stream`, 64-byte-aligned
/// destinations), the loop a hand-written allreduce of two ranks' floats would run: AVX-512 where
/// the CPU has it, else SSE (every x86-64 has it).
__attribute__((target("avx512f"))) void sum_twice_avx512(float* d0, float* d1, const float* a,
                                                         const float* b, std::size_t n,
                                                         bool stream) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    if (stream) {
      _mm512_stream_ps(d0 + i, v);
      _mm512_stream_ps(d1 + i, v);
    } else {
      _mm512_storeu_ps(d0 + i, v);
      _mm512_storeu_ps(d1 + i, v);
    }
  }
  for (; i < n; ++i) d0[i] = d1[i] = a[i] + b[i];
  _mm_sfence();
}

void sum_twice_sse(float* d0, float* d1, const float* a, const float* b, std::size_t n,
                   bool stream) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i));
    if (stream) {
      _mm_stream_ps(d0 + i, v);
      _mm_stream_ps(d1 + i, v);
    } else {
      _mm_storeu_ps(d0 + i, v);
      _mm_storeu_ps(d1 + i, v);
    }
  }
  for (; i < n; ++i) d0[i] = d1[i] = a[i] + b[i];
  _mm_sfence();
}

/// Median seconds of `repeats` allreduces of `bytes` on two threads of one process pinned to
/// `cpus`, each reading its half of both ranks' inputs and writing it into both outputs (in
/// place: into the inputs), either in one hand-written fused pass per element (`fused`,
/// sum_twice_*: the ceiling) or as the allreduce over mappable buffers does it
/// (lib/algorithms/allreduce/single_copy.cpp, run_mapped: reduce::fold_to_all over 128 KiB at a
/// time, streaming stores from 8 MiB out of place). No copy and no cache line moves between the
/// cores but the inputs' and outputs' own.
double direct_median_seconds(bool fused, bool in_place, std::size_t bytes, int repeats,
                             const int (&cpus)[2]) {
  constexpr std::size_t kChunk = 128 * 1024;
  const auto sum_twice = __builtin_cpu_supports("avx512f") ? sum_twice_avx512 : sum_twice_sse;
  Rank ranks[2]{Rank(bytes), Rank(bytes)};
  std::vector<double> seconds;
  const auto stores = bytes >= kStreamMinBytes && !in_place ? cohort::reduce::Stores::Streaming
                                                            : cohort::reduce::Stores::Cached;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms the pages up, untimed
    const auto start = std::chrono::steady_clock::now();
    auto body = [&](int me) {
      pin_to(cpus[me]);
      std::byte* outputs[2] = {in_place ? ranks[0].input() : ranks[0].output(),
                               in_place ? ranks[1].input() : ranks[1].output()};
      const std::size_t half = bytes / 2;
      if (fused) {
        const std::size_t at = static_cast<std::size_t>(me) * half;
        sum_twice(
            reinterpret_cast<float*>(outputs[0] + at), reinterpret_cast<float*>(outputs[1] + at),
            reinterpret_cast<const float*>(ranks[0].input() + at),
            reinterpret_cast<const float*>(ranks[1].input() + at), half / sizeof(float), !in_place);
        return;
      }
      for (std::size_t done = 0; done < half; done += kChunk) {
        const std::size_t at = static_cast<std::size_t>(me) * half + done;
        const std::size_t length = std::min(kChunk, half - done);
        const void* inputs[2] = {ranks[0].input() + at, ranks[1].input() + at};
        void* pieces[2] = {outputs[1 - me] + at, outputs[me] + at};
        cohort::reduce::fold_to_all(ReduceOp::Sum, DType::Float32, pieces, 2, inputs, 2,
                                    length / sizeof(float), stores);
      }
    };
    std::thread first(body, 0);
    std::thread second(body, 1);
    first.join();
    second.join();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) seconds.push_back(elapsed);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 64;
  int repeats = 7;
  int cpus[2] = {-1, -1};
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      quick = true;
      mib = 8;
      repeats = 2;
    } else if (arg == "--mib" && i + 1 < argc) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (arg == "--cpus" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d,%d", &cpus[0], &cpus[1]) != 2 || cpus[0] < 0 || cpus[1] < 0 ||
          cpus[0] >= CPU_SETSIZE || cpus[1] >= CPU_SETSIZE || cpus[0] == cpus[1]) {
        std::fprintf(stderr, "%s: --cpus takes two different CPU numbers, as 0,1\n", argv[0]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--mib N] [--repeats R] [--cpus A,B] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (mib == 0 || mib > 4096 || repeats < 1 || repeats > 1000) {
    std::fprintf(stderr, "%s: --mib must be 1-4096 and --repeats 1-1000\n", argv[0]);
    return 2;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  if (cpus[0] < 0) {
    for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c)
      if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  }
  if (cpus[1] < 0 || !CPU_ISSET(cpus[0], &allowed) || !CPU_ISSET(cpus[1], &allowed)) {
    std::fprintf(stderr, "%s: needs two CPUs it may run on (its affinity mask)\n", argv[0]);
    return 1;
  }
  const std::size_t bytes = mib << 20;
  std::printf(
      "cohort-handoff-bench: 2-rank share scheme over %zu MiB float32, threads on CPUs %d "
      "and %d, median of %d\n",
      mib, cpus[0], cpus[1], repeats);
  double times[2] = {0, 0};
  for (bool shared : {true, false}) {
    const double s = median_seconds(shared, bytes, repeats, cpus);
    times[shared ? 0 : 1] = s;
    std::printf("%-8s %9.2f ms  busbw %6.2f GB/s\n", shared ? "shared" : "private", s * 1e3,
                static_cast<double>(bytes) / s / 1e9);
  }
  std::printf("shared / private: %.2f\n", times[0] / times[1]);
  // The ceiling, and the mappable allreduce's scheme, on plain memory in one process.
  for (bool fused : {true, false}) {
    for (bool in_place : {false, true}) {
      const double s = direct_median_seconds(fused, in_place, bytes, repeats, cpus);
      std::printf("%-26s %-12s %9.2f ms  busbw %6.2f GB/s\n",
                  fused ? "ceiling (one fused pass)" : "mappable allreduce's way",
                  in_place ? "in place" : "out of place", s * 1e3,
                  static_cast<double>(bytes) / s / 1e9);
    }
  }
  const std::uint64_t messages = quick ? 200'000 : 5'000'000;
  const double rotating = stream_ns(false, messages, cpus);
  const double both_touch = stream_ns(true, messages, cpus);
  std::printf(
      "tiny messages through 16 rotating lines: %.1f ns each; with a line both touch at "
      "every message: %.1f ns (one run each)\n",
      rotating, both_touch);
  return 0;
}
