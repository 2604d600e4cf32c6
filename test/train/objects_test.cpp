// objects.hpp on real processes (worlds of 1-5, every root): TRAINING.md's cases (root 1's
// ["cfg", "", 1 MiB of 0xAB]; r0 ["a","b"], r1 [], r2 ["c"] gathered to ["a","b","c"]; an int64
// 16777217 from fn on the root; fn1 = r*r + 1 reduced by max to 5), exact bytes of plain values,
// broadcast_buffer's dtype and shape, and every failure: a throwing callback is RemoteError
// naming its rank and message elsewhere (well within the timeout), a bad root or timeout is
// InvalidArgument, a bad root buffer fails every rank. Each failure is followed by a good call to
// show the ranks stayed in step. Expected bytes come from the small generators below.

#include "train_test_support.hpp"

#include <cohort/train/objects.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using namespace cohort::train;
using namespace std::chrono_literals;

Blob blob(std::string_view text) {
  Blob out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

Blob repeated(std::size_t n, int value) {
  return Blob(n, static_cast<std::byte>(value));
}

// n bytes that differ with the seed and the position, so a blob from the wrong rank shows.
Blob pattern(std::size_t n, int seed) {
  Blob out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed) * 7 + 1) % 251);
  }
  return out;
}

std::string show(const Blob& b) {
  std::ostringstream out;
  out << b.size() << " bytes";
  if (b.size() <= 16) {
    out << " '";
    for (std::byte c : b) out << static_cast<char>(c);
    out << "'";
  }
  return out.str();
}

void expect_blobs(const std::vector<Blob>& got, const std::vector<Blob>& want,
                  const std::string& where) {
  RANK_CHECK(got.size() == want.size(),
             where << ": " << got.size() << " items, expected " << want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    RANK_CHECK(got[i] == want[i],
               where << ": item " << i << " is " << show(got[i]) << ", expected " << show(want[i]));
  }
}

// A world whose ops wait 60 s, not the default 600: a rank a failure leaves hanging fails the test
// with Timeout well within meson's limit.
std::shared_ptr<Communicator> patient_world(const Environment& env) {
  CommunicatorOptions slow;
  slow.timeout = 60s;
  return world(env, slow);
}

// A good call after an error: ranks left behind in an earlier exchange would mismatch or hang.
void expect_in_step(Communicator& comm, const std::string& where) {
  const std::int64_t got = compute_and_broadcast(comm, [] { return std::int64_t{-42}; });
  RANK_CHECK(got == -42, where << ", then a good call: got " << got);
}

TEST_CASE("TRAINING.md: broadcast from root 1 of ['cfg', '', 1 MiB of 0xAB] on 3 ranks",
          "[train][objects][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const std::vector<Blob> sent = {blob("cfg"), Blob{}, repeated(1 << 20, 0xAB)};
    // Receivers hold lists of other lengths: they are resized to the root's count.
    std::vector<Blob> items =
        r == 1 ? sent : std::vector<Blob>(static_cast<std::size_t>(r) + 2, blob("stale"));
    broadcast_bytes_list(*comm, items, 1);
    expect_blobs(items, sent, "broadcast_bytes_list");
  }));
}

TEST_CASE("broadcast_bytes and broadcast_bytes_list from every root of worlds of 1-5",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    for (int root = 0; root < comm->size(); ++root) {
      const std::string where = "root " + std::to_string(root);
      Blob one = r == root ? pattern(1000 + root, root) : pattern(3, 100 + r);
      broadcast_bytes(*comm, one, root);
      RANK_CHECK(one == pattern(1000 + root, root),
                 where << ": broadcast_bytes gave " << show(one));

      Blob none = r == root ? Blob{} : blob("stale");
      broadcast_bytes(*comm, none, root, 30s);
      RANK_CHECK(none.empty(), where << ": empty broadcast_bytes gave " << show(none));

      // root k sends k + 1 items; item i is pattern(i * 50, k).
      std::vector<Blob> want;
      for (int i = 0; i <= root; ++i)
        want.push_back(pattern(static_cast<std::size_t>(i) * 50, root));
      std::vector<Blob> items = r == root ? want : std::vector<Blob>{blob("stale")};
      broadcast_bytes_list(*comm, items, root);
      expect_blobs(items, want, where + ": broadcast_bytes_list");

      std::vector<Blob> empty = r == root ? std::vector<Blob>{} : std::vector<Blob>(2);
      broadcast_bytes_list(*comm, empty, root);
      RANK_CHECK(empty.empty(), where << ": the root's empty list left " << empty.size());
    }
  }));
}

TEST_CASE("TRAINING.md: r0 ['a','b'], r1 [], r2 ['c'] gather to ['a','b','c'] on every rank",
          "[train][objects][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const std::vector<Blob> mine = r == 0   ? std::vector<Blob>{blob("a"), blob("b")}
                                   : r == 1 ? std::vector<Blob>{}
                                            : std::vector<Blob>{blob("c")};
    expect_blobs(allgather_bytes_list(*comm, mine), {blob("a"), blob("b"), blob("c")},
                 "allgather_bytes_list");
    expect_blobs(allgather_bytes_list(*comm, {}), {}, "nobody has items");
    // Items that are themselves empty still count.
    expect_blobs(allgather_bytes_list(
                     *comm, r == 2 ? std::vector<Blob>{Blob{}, blob("z")} : std::vector<Blob>{}),
                 {Blob{}, blob("z")}, "an empty item");
  }));
}

TEST_CASE("allgather_bytes, allgather_bytes_list and gather_bytes on worlds of 1-5",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [size](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();

    // Rank k contributes k bytes of value k (rank 0 nothing).
    std::vector<Blob> per_rank;
    for (int k = 0; k < size; ++k) per_rank.push_back(repeated(static_cast<std::size_t>(k), k));
    expect_blobs(allgather_bytes(*comm, repeated(static_cast<std::size_t>(r), r)), per_rank,
                 "allgather_bytes");
    // A large blob from the last rank only.
    std::vector<Blob> large(static_cast<std::size_t>(size));
    large.back() = pattern(100003, size);
    expect_blobs(allgather_bytes(*comm, r == size - 1 ? pattern(100003, size) : Blob{}), large,
                 "allgather_bytes, one large blob");

    // Rank k contributes k items "k:0", "k:1", ...; the result is all of them in rank order.
    std::vector<Blob> mine, everyone;
    for (int k = 0; k < size; ++k) {
      for (int i = 0; i < k; ++i) {
        const Blob item = blob(std::to_string(k) + ":" + std::to_string(i));
        everyone.push_back(item);
        if (k == r) mine.push_back(item);
      }
    }
    expect_blobs(allgather_bytes_list(*comm, mine), everyone, "allgather_bytes_list");

    for (int root = 0; root < size; ++root) {
      const std::string where = "gather_bytes to root " + std::to_string(root);
      const std::vector<Blob> got =
          gather_bytes(*comm, pattern(static_cast<std::size_t>(r) * 7, r), root);
      std::vector<Blob> want;
      if (r == root) {
        for (int k = 0; k < size; ++k) want.push_back(pattern(static_cast<std::size_t>(k) * 7, k));
      }
      expect_blobs(got, want, where);
    }
  }));
}

TEST_CASE("broadcast_buffer: receivers learn dtype and shape from the root",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int root = comm->size() > 1 ? 1 : 0;
    const bool is_root = r == root;

    // Root: a 2x3 int64 matrix {0, 1, 2, 10, 11, 12}. Receivers pass nothing.
    std::int64_t matrix[6] = {0, 1, 2, 10, 11, 12};
    const Buffer in = Buffer::view(matrix, {2, 3}, DType::Int64, Device::cpu());
    const Buffer got = broadcast_buffer(*comm, is_root ? in : Buffer{}, root);
    RANK_CHECK(got.dtype() == DType::Int64, "dtype " << dtype_name(got.dtype()));
    RANK_CHECK(got.shape() == (std::vector<std::int64_t>{2, 3}), "shape of " << got.ndim());
    const std::int64_t want[6] = {0, 1, 2, 10, 11, 12};
    for (int i = 0; i < 6; ++i) {
      RANK_CHECK(got.data_as<std::int64_t>()[i] == want[i], "element " << i);
    }
    // The root gets its own memory back; receivers a new allocation.
    RANK_CHECK((got.data() == in.data()) == is_root, "root's result is not its own buffer");

    // A read-only bf16 vector, and a float16 buffer with no elements.
    const std::uint16_t bf16[3] = {0x3F80, 0xC000, 0x7FC0};  // 1, -2, NaN
    const Buffer ro = Buffer::view(static_cast<const void*>(bf16), 3, DType::BFloat16);
    const Buffer got_ro = broadcast_buffer(*comm, is_root ? ro : Buffer{}, root);
    RANK_CHECK(got_ro.dtype() == DType::BFloat16 && got_ro.count() == 3, "bf16 vector");
    RANK_CHECK(std::memcmp(got_ro.data(), bf16, sizeof bf16) == 0, "bf16 bytes differ");
    std::uint16_t unused = 0;
    const Buffer none = Buffer::view(&unused, {4, 0, 2}, DType::Float16, Device::cpu());
    const Buffer got_none = broadcast_buffer(*comm, is_root ? none : Buffer{}, root, 30s);
    RANK_CHECK(got_none.dtype() == DType::Float16 &&
                   got_none.shape() == (std::vector<std::int64_t>{4, 0, 2}),
               "empty float16 buffer");

    // Managed memory on the root (here host memory labelled so; no device is needed): it goes
    // as host memory, which is what the receivers hold, not to the device path.
    std::int32_t managed_values[3] = {7, -8, 9};
    const Buffer managed =
        Buffer::view(managed_values, {3}, DType::Int32, Device{DeviceType::CUDAManaged, 0});
    const Buffer got_managed = broadcast_buffer(*comm, is_root ? managed : Buffer{}, root, 30s);
    RANK_CHECK(got_managed.count() == 3 && got_managed.data_as<std::int32_t>()[1] == -8 &&
                   got_managed.data_as<std::int32_t>()[2] == 9,
               "managed root buffer");
  }));
}

TEST_CASE("broadcast_buffer: a root buffer it cannot send fails every rank",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 3);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int root = comm->size() - 1;
    const std::string root_name = "root " + std::to_string(root) + "'s buffer";
    const bool is_root = comm->rank() == root;

    float grid[4] = {1, 2, 3, 4};
    // The transpose of a 2x2 matrix: strides {1, 2}.
    const Buffer transposed = Buffer::view(grid, {2, 2}, DType::Float32, Device::cpu(), {1, 2});
    expect_error([&] { broadcast_buffer(*comm, is_root ? transposed : Buffer{}, root); },
                 ErrorCode::InvalidArgument, {root_name, "not contiguous"}, "strided root");
    const Buffer device = Buffer::view(grid, 4, DType::Float32, Device::cuda(0));
    expect_error([&] { broadcast_buffer(*comm, is_root ? device : Buffer{}, root); },
                 ErrorCode::Unsupported, {root_name, "cuda:0"}, "root on a GPU");
    expect_in_step(*comm, "refused root buffers");
  }));
}

TEST_CASE("TRAINING.md: fn on the root returns int64 16777217, exact on every rank",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    for (int root = 0; root < comm->size(); ++root) {
      int runs = 0;
      const std::int64_t got = compute_and_broadcast(
          *comm,
          [&] {
            ++runs;
            return std::int64_t{16777217};  // 2^24 + 1: a float32 would round it to 16777216
          },
          root);
      RANK_CHECK(got == 16777217, "root " << root << ": got " << got);
      RANK_CHECK(runs == (r == root ? 1 : 0), "root " << root << ": fn ran " << runs << " times");
    }

    // A struct's exact bytes: -0.0 and a NaN with a payload survive, which no float path keeps.
    struct Stats {
      double mean;
      double spread;
      std::int32_t steps;
      char tag[4];
    };
    const auto stats = compute_and_broadcast(*comm, [] {
      return Stats{-0.0, std::bit_cast<double>(std::uint64_t{0x7FF8000000000123}), 7, "abc"};
    });
    RANK_CHECK(std::bit_cast<std::uint64_t>(stats.mean) == 0x8000000000000000ull, "-0.0 changed");
    RANK_CHECK(std::bit_cast<std::uint64_t>(stats.spread) == 0x7FF8000000000123ull,
               "the NaN payload changed");
    RANK_CHECK(stats.steps == 7 && std::string(stats.tag) == "abc", "steps or tag changed");
  }));
}

TEST_CASE("compute_and_broadcast: fn throwing on the root is RemoteError elsewhere, fast",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = patient_world(env);
    const int r = comm->rank();
    const int root = comm->size() > 1 ? 1 : 0;
    const auto count_tokens = [&]() -> std::int64_t {
      throw std::runtime_error("tokenizer file missing");
    };
    const auto start = std::chrono::steady_clock::now();
    if (r == root) {
      expect_own_exception([&] { compute_and_broadcast(*comm, count_tokens, root); },
                           "tokenizer file missing", "root");
    } else {
      expect_error(
          [&] { compute_and_broadcast(*comm, count_tokens, root); }, ErrorCode::RemoteError,
          {"compute_and_broadcast: fn threw on root 1: tokenizer file missing"}, "receiver");
      const auto waited = std::chrono::steady_clock::now() - start;
      RANK_CHECK(waited < 30s,
                 "the error took "
                     << std::chrono::duration_cast<std::chrono::seconds>(waited).count()
                     << " s of a 60 s timeout");
    }
    expect_in_step(*comm, "fn threw on the root");
  }));
}

TEST_CASE("broadcast_bytes_from: a root that cannot make its bytes fails every rank at once",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = patient_world(env);
    const int r = comm->rank();
    const int root = comm->size() - 1;
    // Made on the root: every rank gets it, and a rank calling plain broadcast_bytes pairs with
    // one calling broadcast_bytes_from.
    Blob made;
    const auto make = [](Blob& out) { out = blob("made on the root"); };
    if (r == 0 && r != root)
      broadcast_bytes(*comm, made, root);
    else
      broadcast_bytes_from(*comm, made, make, root);
    RANK_CHECK(made == blob("made on the root"), "rank " << r << " got another blob");

    Blob none;
    const auto fail = [](Blob&) { throw std::runtime_error("config file missing"); };
    if (r == root) {
      expect_own_exception([&] { broadcast_bytes_from(*comm, none, fail, root); },
                           "config file missing", "root");
    } else {
      expect_error([&] { broadcast_bytes_from(*comm, none, fail, root); }, ErrorCode::RemoteError,
                   {"broadcast_bytes: the root's data threw on root " + std::to_string(root) +
                    ": config file missing"},
                   "receiver");
    }
    expect_in_step(*comm, "the root's bytes failed");
  }));
}

TEST_CASE(
    "allgather_bytes_from and gather_bytes_from: a rank that cannot make its bytes fails "
    "every rank at once",
    "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = patient_world(env);
    const int r = comm->rank(), n = comm->size();
    // Made in the call: the same result, and a rank calling the plain form pairs with them.
    const auto make = [r](Blob& out) { out = blob("rank " + std::to_string(r)); };
    const auto all =
        r == 0 ? allgather_bytes(*comm, blob("rank 0")) : allgather_bytes_from(*comm, make);
    RANK_CHECK(all.size() == static_cast<std::size_t>(n), all.size() << " blobs");
    for (int k = 0; k < n; ++k)
      RANK_CHECK(all[static_cast<std::size_t>(k)] == blob("rank " + std::to_string(k)),
                 "blob " << k);
    const auto gathered = gather_bytes_from(*comm, make, n - 1);
    RANK_CHECK(gathered.size() == (r == n - 1 ? static_cast<std::size_t>(n) : 0u),
               gathered.size() << " blobs gathered");

    // The last rank cannot make its bytes.
    const int bad = n - 1;
    const auto fail_on_bad = [&](Blob& out) {
      if (r == bad) throw std::runtime_error("no metrics file");
      make(out);
    };
    for (const bool all_ranks : {true, false}) {
      const auto call = [&] {
        if (all_ranks)
          allgather_bytes_from(*comm, fail_on_bad);
        else
          gather_bytes_from(*comm, fail_on_bad, 0);
      };
      if (r == bad)
        expect_own_exception(call, "no metrics file", "the failing rank");
      else
        expect_error(call, ErrorCode::InvalidArgument,
                     {"ranks " + std::to_string(bad) + " could not make their bytes"},
                     "the others");
    }
    expect_in_step(*comm, "a rank's bytes failed");
  }));
}

TEST_CASE("gather_from_all: every rank's exact value on the root, nothing elsewhere",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [size](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    // 2^53 + 1 + r: none of these is a double, let alone a float.
    constexpr std::int64_t kBase = 9007199254740993;
    for (int root : {0, size - 1}) {
      const std::vector<std::int64_t> got = gather_from_all(*comm, kBase + r, root);
      if (r == root) {
        RANK_CHECK(got.size() == static_cast<std::size_t>(size), "root got " << got.size());
        for (int k = 0; k < size; ++k) {
          RANK_CHECK(got[static_cast<std::size_t>(k)] == kBase + k,
                     "root " << root << ": value of rank " << k << " is " << got[k]);
        }
      } else {
        RANK_CHECK(got.empty(), "rank " << r << " got " << got.size() << " values");
      }
    }
  }));
}

TEST_CASE("TRAINING.md: fn1 = r*r + 1, fn2 = max gives 5 on 3 ranks; worlds of 1-5",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  REQUIRE_NOTHROW(run_ranks(size, [size](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    // max over r of r*r + 1 for r < size, and the values the root must see, by hand.
    const std::int32_t want_max[] = {0, 1, 2, 5, 10, 17};
    const std::vector<std::int32_t> all_values = {1, 2, 5, 10, 17};
    const std::vector<std::int32_t> want_values(all_values.begin(), all_values.begin() + size);

    for (int root : {0, size - 1}) {
      int fn2_runs = 0;
      const std::int32_t got = reduce_and_broadcast(
          *comm, [r] { return std::int32_t(r * r + 1); },
          [&](const std::vector<std::int32_t>& values) {
            ++fn2_runs;
            RANK_CHECK(values == want_values, "fn2 got " << values.size() << " values");
            return *std::max_element(values.begin(), values.end());
          },
          root);
      RANK_CHECK(got == want_max[size], "root " << root << ": got " << got);
      RANK_CHECK(fn2_runs == (r == root ? 1 : 0), "fn2 ran " << fn2_runs << " times");
    }

    // Another result type: the mean as a double. 3 ranks: (1 + 2 + 5) / 3.
    const double means[] = {0.0, 1.0, 1.5, 8.0 / 3.0, 4.5, 7.0};
    const double mean = reduce_and_broadcast(
        *comm, [r] { return std::int32_t(r * r + 1); },
        [](const std::vector<std::int32_t>& values) {
          double total = 0;
          for (std::int32_t v : values) total += v;
          return total / static_cast<double>(values.size());
        });
    RANK_CHECK(mean == means[size], "mean " << mean);
  }));
}

TEST_CASE("reduce_and_broadcast: fn1 or fn2 throwing is RemoteError naming the rank",
          "[train][objects][multiproc]") {
  const int size = GENERATE(1, 2, 3, 5);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int failing = comm->size() - 1;
    int fn2_runs = 0;
    const auto count = [](const std::vector<std::int32_t>& v) {
      return static_cast<std::int64_t>(v.size());
    };

    // fn1 fails on the last rank: fn2 runs nowhere.
    const auto fn1 = [&] {
      if (r == failing) throw std::runtime_error("no batches on this rank");
      return std::int32_t{1};
    };
    const auto counting_fn2 = [&](const std::vector<std::int32_t>& v) {
      ++fn2_runs;
      return count(v);
    };
    if (r == failing) {
      expect_own_exception([&] { reduce_and_broadcast(*comm, fn1, counting_fn2); },
                           "no batches on this rank", "fn1's rank");
    } else {
      expect_error([&] { reduce_and_broadcast(*comm, fn1, counting_fn2); }, ErrorCode::RemoteError,
                   {"reduce_and_broadcast: fn1 threw on rank " + std::to_string(failing) +
                    ": no batches on this rank"},
                   "fn1 failed elsewhere");
    }
    RANK_CHECK(fn2_runs == 0, "fn2 ran after fn1 failed");

    // fn2 fails on the root (rank 0).
    const auto fn2 = [](const std::vector<std::int32_t>&) -> std::int64_t {
      throw std::runtime_error("reduction overflowed");
    };
    const auto one = [] { return std::int32_t{1}; };
    if (r == 0) {
      expect_own_exception([&] { reduce_and_broadcast(*comm, one, fn2); }, "reduction overflowed",
                           "the root");
    } else {
      expect_error([&] { reduce_and_broadcast(*comm, one, fn2); }, ErrorCode::RemoteError,
                   {"reduce_and_broadcast: fn2 threw on root 0: reduction overflowed"},
                   "fn2 failed on the root");
    }
    expect_in_step(*comm, "fn1 and fn2 threw");
  }));
}

TEST_CASE("a root out of range or a negative timeout is InvalidArgument on every rank",
          "[train][objects][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = world(env);
    Blob b = blob("x");
    std::vector<Blob> items = {b};
    int runs = 0;
    const auto fn = [&] {
      ++runs;
      return std::int32_t{1};
    };
    const auto fn2 = [&](const std::vector<std::int32_t>&) {
      ++runs;
      return 0;
    };
    for (int root : {-1, 2}) {
      const std::string bad = "root " + std::to_string(root) + " is out of range";
      expect_error([&] { broadcast_bytes(*comm, b, root); }, ErrorCode::InvalidArgument,
                   {"broadcast_bytes", bad, "size 2"}, "broadcast_bytes");
      expect_error([&] { broadcast_bytes_list(*comm, items, root); }, ErrorCode::InvalidArgument,
                   {"broadcast_bytes_list", bad}, "broadcast_bytes_list");
      expect_error([&] { gather_bytes(*comm, b, root); }, ErrorCode::InvalidArgument,
                   {"gather_bytes", bad}, "gather_bytes");
      expect_error([&] { broadcast_buffer(*comm, Buffer{}, root); }, ErrorCode::InvalidArgument,
                   {"broadcast_buffer", bad}, "broadcast_buffer");
      expect_error([&] { compute_and_broadcast(*comm, fn, root); }, ErrorCode::InvalidArgument,
                   {"compute_and_broadcast", bad}, "compute_and_broadcast");
      expect_error([&] { gather_from_all(*comm, 1, root); }, ErrorCode::InvalidArgument,
                   {"gather_from_all", bad}, "gather_from_all");
      expect_error([&] { reduce_and_broadcast(*comm, fn, fn2, root); }, ErrorCode::InvalidArgument,
                   {"reduce_and_broadcast", bad}, "reduce_and_broadcast");
    }
    expect_error([&] { allgather_bytes(*comm, b, -7ms); }, ErrorCode::InvalidArgument,
                 {"allgather_bytes", "-7 ms"}, "allgather_bytes");
    expect_error([&] { allgather_bytes_list(*comm, items, -7ms); }, ErrorCode::InvalidArgument,
                 {"allgather_bytes_list", "-7 ms"}, "allgather_bytes_list");
    expect_error([&] { compute_and_broadcast(*comm, fn, 0, -7ms); }, ErrorCode::InvalidArgument,
                 {"compute_and_broadcast", "-7 ms"}, "compute_and_broadcast timeout");
    RANK_CHECK(runs == 0, "a callback ran in a refused call");
    RANK_CHECK(b == blob("x") && items.size() == 1, "a refused call changed its arguments");
    expect_in_step(*comm, "refused calls");
  }));
}

}  // namespace
