// reduce, gather_rows, all_gather_stacked, pad_across and gather_for_metrics on real processes:
// TRAINING.md's hand-computed cases, an evaluation loop over batch_shard's batches whose gathered
// results are written out by hand, sweeps over worlds of 1 to 5 against values built in the test,
// and every error on every rank (shapes, dtypes and arguments that disagree, a rank passing
// device or non-contiguous memory), each followed by a good call to show the ranks stayed in step.

#include "comm/rank_checks.hpp"

#include <cohort/train/metrics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;
using cohort::train::all_gather_stacked;
using cohort::train::batch_shard;
using cohort::train::BatchShardOptions;
using cohort::train::gather_for_metrics;
using cohort::train::gather_rows;
using cohort::train::pad_across;
using cohort::train::reduce;
using Shape = std::vector<std::int64_t>;

// A new host buffer of `shape` holding `values` (converted to the dtype).
Buffer make(DType dtype, Shape shape, const std::vector<double>& values) {
  Buffer b = Buffer::allocate(std::move(shape), dtype);
  RANK_CHECK(b.count() == values.size(),
             "test bug: " << values.size() << " values for " << b.count() << " elements");
  for (std::size_t i = 0; i < values.size(); ++i) set(b, i, values[i]);
  return b;
}

Buffer i32(Shape shape, const std::vector<double>& values) {
  return make(DType::Int32, std::move(shape), values);
}

std::string show(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// Requires `b` to have exactly `shape`, `dtype` and `values` (row-major).
void expect_buffer(const Buffer& b, DType dtype, const Shape& shape,
                   const std::vector<double>& values, const std::string& what) {
  RANK_CHECK(b.dtype() == dtype, what << ": dtype " << dtype_name(b.dtype()));
  RANK_CHECK(b.shape() == shape,
             what << ": shape " << show(b.shape()) << ", expected " << show(shape));
  RANK_CHECK(b.is_contiguous(), what << ": not contiguous");
  expect_values(
      b, 0, values.size(), [&](std::size_t i) { return values[i]; }, what);
}

// A gather that must succeed after an error: a rank left behind in an earlier exchange would
// mismatch or hang here.
void expect_in_step(Communicator& comm, const std::string& where) {
  const int r = comm.rank();
  const Buffer all = gather_rows(comm, i32({1}, {static_cast<double>(r)}));
  std::vector<double> want;
  for (int k = 0; k < comm.size(); ++k) want.push_back(k);
  expect_buffer(all, DType::Int32, {comm.size()}, want, where + ", then a good gather");
}

// A 2x2 int32 view with swapped strides: not contiguous.
Buffer transposed(std::vector<std::int32_t>& storage) {
  storage.assign(4, 0);
  return Buffer::view(storage.data(), {2, 2}, DType::Int32, Device::cpu(), {1, 2});
}

// A view that claims to be GPU memory; it is never dereferenced (the call must refuse it first).
Buffer on_gpu(std::vector<std::int32_t>& storage, Shape shape) {
  storage.assign(8, 0);
  return Buffer::view(storage.data(), std::move(shape), DType::Int32, Device::cuda(0));
}

}  // namespace

// ---- reduce

TEST_CASE("reduce: int32 [r] on 3 ranks, Avg -> [1]; the input is untouched",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const double r = comm->rank();
    const Buffer in = i32({1}, {r});

    const Buffer avg = reduce(*comm, in, ReduceOp::Avg);
    expect_buffer(avg, DType::Int32, {1}, {1}, "avg");  // (0 + 1 + 2) / 3
    RANK_CHECK(avg.data() != in.data(), "avg: the result shares the input's memory");
    expect_buffer(in, DType::Int32, {1}, {r}, "input after avg");
    // Accelerate's "sum" and "max"; read-only inputs are fine, nothing writes to them.
    expect_buffer(reduce(*comm, in.as_read_only(), ReduceOp::Sum), DType::Int32, {1}, {3}, "sum");
    expect_buffer(reduce(*comm, in, ReduceOp::Max), DType::Int32, {1}, {2}, "max");
    // Integer Avg divides the sum and truncates: (2 + 4 + 6) / 3 = 4, (1 + 0 + 0) / 3 = 0.
    expect_buffer(reduce(*comm, i32({1}, {2 * r + 2}), ReduceOp::Avg), DType::Int32, {1}, {4},
                  "avg of 2, 4, 6");
    expect_buffer(reduce(*comm, i32({1}, {r == 0 ? 1.0 : 0.0}), ReduceOp::Avg), DType::Int32, {1},
                  {0}, "avg of 1, 0, 0 truncates");
    // A 0-d buffer stays 0-d; a float mean is exact here.
    const Buffer scalar = make(DType::Float32, {}, {r + 0.5});
    expect_buffer(reduce(*comm, scalar, ReduceOp::Avg), DType::Float32, {}, {1.5}, "0-d avg");
  }));
}

TEST_CASE("reduce: Sum, Prod, Min, Max, Avg x f32, f64, i32, i64, shape [2,3], worlds 1-5",
          "[train][metrics][multiproc]") {
  for (int size = 1; size <= 5; ++size) {
    INFO("world " << size);
    REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
      auto comm = world(env);
      const int world_size = comm->size();
      // Element i of rank r: small integers in [-5, 5], different on every rank and position,
      // so every operator's result is exact in every dtype.
      const auto value = [](int r, std::size_t i) {
        return static_cast<double>((r * 7 + static_cast<int>(i) * 3) % 11 - 5);
      };
      for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
        std::vector<double> mine;
        for (std::size_t i = 0; i < 6; ++i) mine.push_back(value(comm->rank(), i));
        const Buffer in = make(dtype, {2, 3}, mine);
        for (ReduceOp op :
             {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
          std::vector<double> want;
          for (std::size_t i = 0; i < 6; ++i) {
            double acc = value(0, i);
            double sum = value(0, i);
            for (int r = 1; r < world_size; ++r) {
              const double v = value(r, i);
              sum += v;
              if (op == ReduceOp::Sum) acc += v;
              if (op == ReduceOp::Prod) acc *= v;
              if (op == ReduceOp::Min) acc = std::min(acc, v);
              if (op == ReduceOp::Max) acc = std::max(acc, v);
            }
            if (op == ReduceOp::Avg) {
              // Integers truncate toward zero; floats divide exactly enough for 1e-5.
              const bool integer = dtype == DType::Int32 || dtype == DType::Int64;
              acc = integer ? static_cast<double>(static_cast<std::int64_t>(sum) / world_size)
                            : sum / world_size;
            }
            want.push_back(acc);
          }
          const std::string what =
              std::string(dtype_name(dtype)) + " " + std::string(reduce_op_name(op));
          expect_buffer(reduce(*comm, in, op), dtype, {2, 3}, want, what);
          expect_buffer(in, dtype, {2, 3}, mine, what + ": input after");
        }
      }
      // An empty buffer reduces to an empty buffer of the same shape.
      expect_buffer(reduce(*comm, Buffer::allocate(Shape{0, 4}, DType::Float32), ReduceOp::Sum),
                    DType::Float32, {0, 4}, {}, "empty");
    }));
  }
}

TEST_CASE("reduce: device memory, non-contiguous buffers and unsupported operators are refused",
          "[train][metrics][multiproc]") {
  for (int size : {1, 2}) {
    INFO("world " << size);
    REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
      auto comm = world(env);
      std::vector<std::int32_t> storage;
      expect_error([&] { reduce(*comm, on_gpu(storage, {2}), ReduceOp::Sum); },
                   ErrorCode::Unsupported, {"reduce", "cuda:0"}, "device memory");
      expect_error([&] { reduce(*comm, transposed(storage), ReduceOp::Sum); },
                   ErrorCode::InvalidArgument, {"reduce", "not contiguous"}, "transposed");
      expect_error([&] { reduce(*comm, Buffer::allocate(3, DType::Bool), ReduceOp::Avg); },
                   ErrorCode::InvalidArgument, {"reduce", "avg", "bool"}, "avg on bool");
      expect_error([&] { reduce(*comm, Buffer::allocate(3, DType::Float32), ReduceOp::BXor); },
                   ErrorCode::InvalidArgument, {"reduce", "bxor", "float"}, "bxor on float");
      expect_buffer(reduce(*comm, i32({2}, {1, 2}), ReduceOp::Sum), DType::Int32, {2},
                    {1.0 * comm->size(), 2.0 * comm->size()}, "a good reduce after");
    }));
  }
}

// ---- gather_rows and all_gather_stacked

TEST_CASE("gather_rows: shapes [1,2], [3,2], [2,2] on 3 ranks; 0-d values; a rank with no rows",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const std::vector<Buffer> parts = {i32({1, 2}, {1, 2}), i32({3, 2}, {10, 11, 12, 13, 14, 15}),
                                       i32({2, 2}, {20, 21, 22, 23})};
    const Buffer all = gather_rows(*comm, parts[static_cast<std::size_t>(r)]);
    expect_buffer(all, DType::Int32, {6, 2}, {1, 2, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23},
                  "uneven rows");

    // A 0-d buffer is one row: int64 scalars 100 + r gather to [100, 101, 102].
    const Buffer scalar = make(DType::Int64, {}, {100.0 + r});
    expect_buffer(gather_rows(*comm, scalar), DType::Int64, {3}, {100, 101, 102}, "0-d");
    // 0-d on one rank and [k] on the others is the same rule.
    const Buffer mixed =
        r == 1 ? make(DType::Int64, {}, {7}) : make(DType::Int64, {2}, {1.0 * r, 1.0 * r});
    expect_buffer(gather_rows(*comm, mixed), DType::Int64, {5}, {0, 0, 7, 2, 2}, "0-d and 1-d");

    // Rank 1 contributes no rows.
    const Buffer some = r == 1 ? Buffer::allocate(Shape{0, 3}, DType::Float32)
                               : make(DType::Float32, {1, 3}, {r + 0.25, r + 0.5, r + 0.75});
    expect_buffer(gather_rows(*comm, some), DType::Float32, {2, 3},
                  {0.25, 0.5, 0.75, 2.25, 2.5, 2.75}, "no rows on rank 1");
    // No rank has rows: nothing to move, the trailing dims are kept.
    expect_buffer(gather_rows(*comm, Buffer::allocate(Shape{0, 3}, DType::Float32)), DType::Float32,
                  {0, 3}, {}, "no rows anywhere");
    // The input is untouched and not aliased.
    expect_buffer(parts[1], DType::Int32, {3, 2}, {10, 11, 12, 13, 14, 15}, "input after");
    RANK_CHECK(all.data() != parts[static_cast<std::size_t>(r)].data(), "result aliases input");
  }));
}

TEST_CASE("gather_rows and all_gather_stacked: worlds 1-5, rank r contributes r rows",
          "[train][metrics][multiproc]") {
  for (int size = 1; size <= 5; ++size) {
    INFO("world " << size);
    REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
      auto comm = world(env);
      const int r = comm->rank();
      const int world_size = comm->size();
      // Rank r: r rows of [1000 r + 10 row + col] for col < 3, as f64.
      const auto cell = [](int rank, int row, int col) { return 1000.0 * rank + 10 * row + col; };
      std::vector<double> mine;
      for (int row = 0; row < r; ++row) {
        for (int col = 0; col < 3; ++col) mine.push_back(cell(r, row, col));
      }
      std::vector<double> want;
      std::int64_t rows = 0;
      for (int k = 0; k < world_size; ++k) {
        for (int row = 0; row < k; ++row, ++rows) {
          for (int col = 0; col < 3; ++col) want.push_back(cell(k, row, col));
        }
      }
      expect_buffer(gather_rows(*comm, make(DType::Float64, {r, 3}, mine)), DType::Float64,
                    {rows, 3}, want, "gather_rows");

      // Stacked: [2, 2] int32 of 10 r + i on every rank -> [world, 2, 2].
      std::vector<double> square;
      for (int i = 0; i < 4; ++i) square.push_back(10 * r + i);
      std::vector<double> stacked;
      for (int k = 0; k < world_size; ++k) {
        for (int i = 0; i < 4; ++i) stacked.push_back(10 * k + i);
      }
      expect_buffer(all_gather_stacked(*comm, i32({2, 2}, square)), DType::Int32,
                    {world_size, 2, 2}, stacked, "stacked");
      // A 0-d input stacks to [world].
      std::vector<double> ranks;
      for (int k = 0; k < world_size; ++k) ranks.push_back(k);
      expect_buffer(all_gather_stacked(*comm, make(DType::Int64, {}, {1.0 * r})), DType::Int64,
                    {world_size}, ranks, "stacked 0-d");
      // Empty inputs stack to an empty [world, 0].
      expect_buffer(all_gather_stacked(*comm, Buffer::allocate(Shape{0}, DType::Int32)),
                    DType::Int32, {world_size, 0}, {}, "stacked empty");
    }));
  }
}

TEST_CASE("gather_rows: mismatched shapes and dtypes are InvalidArgument on every rank",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();

    // Trailing dims: rank 1 has 3 columns, the others 2.
    const Buffer columns = r == 1 ? i32({1, 3}, {0, 0, 0}) : i32({1, 2}, {0, 0});
    expect_error([&] { gather_rows(*comm, columns); }, ErrorCode::InvalidArgument,
                 {"gather_rows", "beyond dim 0", "rank 0 [1, 2]", "rank 1 [1, 3]", "rank 2 [1, 2]"},
                 "trailing dims");
    expect_in_step(*comm, "trailing dims");

    // Number of dimensions: rank 2 passes [2] against [1, 2].
    const Buffer flat = r == 2 ? i32({2}, {0, 0}) : i32({1, 2}, {0, 0});
    expect_error([&] { gather_rows(*comm, flat); }, ErrorCode::InvalidArgument,
                 {"rank 0 [1, 2]", "rank 1 [1, 2]", "rank 2 [2]"}, "ndim");
    expect_in_step(*comm, "ndim");

    // dtypes: rank 0 float, the others int32.
    const Buffer typed = r == 0 ? make(DType::Float32, {1}, {0}) : i32({1}, {0});
    expect_error([&] { gather_rows(*comm, typed); }, ErrorCode::InvalidArgument,
                 {"dtypes differ", "rank 0 float", "rank 1 int32", "rank 2 int32"}, "dtype");
    expect_in_step(*comm, "dtype");

    // all_gather_stacked needs dim 0 to agree too.
    const Buffer rows = i32({r + 1}, std::vector<double>(static_cast<std::size_t>(r) + 1, 0));
    expect_error([&] { all_gather_stacked(*comm, rows); }, ErrorCode::InvalidArgument,
                 {"all_gather_stacked", "rank 0 [1]", "rank 1 [2]", "rank 2 [3]"}, "stacked");
    expect_in_step(*comm, "stacked shapes");
    const Buffer stacked_typed = r == 2 ? make(DType::Int64, {1}, {0}) : i32({1}, {0});
    expect_error([&] { all_gather_stacked(*comm, stacked_typed); }, ErrorCode::InvalidArgument,
                 {"all_gather_stacked", "rank 2 int64"}, "stacked dtype");
    expect_in_step(*comm, "stacked dtype");
  }));
}

TEST_CASE("managed memory is host memory to gather_rows, all_gather_stacked and reduce",
          "[train][metrics][multiproc]") {
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const int n = comm->size();
    // Host memory labelled cuda_managed (no device is needed): the helpers take it as host
    // memory, as they promise, rather than handing it to the device path.
    std::int32_t values[2] = {r, 10 * r};
    const Buffer managed =
        Buffer::view(values, Shape{1, 2}, DType::Int32, Device{DeviceType::CUDAManaged, 0});
    std::vector<double> rows;
    for (int k = 0; k < n; ++k) rows.insert(rows.end(), {double(k), 10.0 * k});
    expect_buffer(gather_rows(*comm, managed), DType::Int32, {n, 2}, rows, "gather_rows");
    expect_buffer(all_gather_stacked(*comm, managed), DType::Int32, {n, 1, 2}, rows,
                  "all_gather_stacked");
    const double sum = n * (n - 1) / 2.0;
    expect_buffer(reduce(*comm, managed, ReduceOp::Sum), DType::Int32, {1, 2}, {sum, 10 * sum},
                  "reduce");
  }));
}

TEST_CASE("a rank passing device or non-contiguous memory fails every rank, naming it",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    std::vector<std::int32_t> storage;
    const Buffer good = i32({1, 2}, {0, 0});

    // Rank 1's buffer is GPU memory: it throws its own Unsupported, the others one naming it.
    const Buffer device = r == 1 ? on_gpu(storage, {1, 2}) : good;
    if (r == 1) {
      expect_error([&] { gather_rows(*comm, device); }, ErrorCode::Unsupported,
                   {"gather_rows", "cuda:0"}, "device, own");
    } else {
      expect_error([&] { gather_rows(*comm, device); }, ErrorCode::Unsupported,
                   {"gather_rows", "rank 1's buffer is in device memory"}, "device, peer");
    }
    expect_in_step(*comm, "device memory");

    // Ranks 0 and 2 pass transposed views: each throws its own error, rank 1 names both.
    const Buffer strided = r == 1 ? i32({2, 2}, {0, 0, 0, 0}) : transposed(storage);
    if (r == 1) {
      expect_error(
          [&] { pad_across(*comm, strided); }, ErrorCode::InvalidArgument,
          {"pad_across", "rank 0's buffer is not contiguous", "rank 2's buffer is not contiguous"},
          "strided, peer");
    } else {
      expect_error([&] { pad_across(*comm, strided); }, ErrorCode::InvalidArgument,
                   {"pad_across", "not contiguous"}, "strided, own");
    }
    expect_in_step(*comm, "non-contiguous");

    // The same in all_gather_stacked, where the device rank is 2.
    const Buffer device2 = r == 2 ? on_gpu(storage, {1, 2}) : good;
    expect_error([&] { all_gather_stacked(*comm, device2); }, ErrorCode::Unsupported,
                 {"all_gather_stacked", r == 2 ? "cuda:0" : "rank 2's buffer"}, "stacked device");
    expect_in_step(*comm, "stacked device memory");
  }));
}

// ---- pad_across

TEST_CASE("pad_across: int32 [1,2], [3,2], [2,2] with fill -100 (TRAINING.md)",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const std::vector<Buffer> parts = {i32({1, 2}, {1, 2}), i32({3, 2}, {10, 11, 12, 13, 14, 15}),
                                       i32({2, 2}, {7, 8, 9, 10})};
    const Buffer& in = parts[static_cast<std::size_t>(r)];
    // Rank 2 pads first; the others after their data.
    const Buffer padded = pad_across(*comm, in, 0, -100, /*pad_first=*/r == 2);
    if (r == 0) {
      expect_buffer(padded, DType::Int32, {3, 2}, {1, 2, -100, -100, -100, -100}, "rank 0");
    } else if (r == 1) {
      RANK_CHECK(padded.data() == in.data(), "rank 1 is at the largest extent: same memory");
      expect_buffer(padded, DType::Int32, {3, 2}, {10, 11, 12, 13, 14, 15}, "rank 1");
    } else {
      expect_buffer(padded, DType::Int32, {3, 2}, {-100, -100, 7, 8, 9, 10}, "rank 2");
    }
    expect_buffer(in, DType::Int32, in.shape(),
                  r == 0   ? std::vector<double>{1, 2}
                  : r == 2 ? std::vector<double>{7, 8, 9, 10}
                           : std::vector<double>{10, 11, 12, 13, 14, 15},
                  "input after");

    // Along dim 1 (and -1, the same dim): [2,1], [2,3], [2,2] become [2,3] with f32 fill 0.5.
    const std::vector<Buffer> wide = {make(DType::Float32, {2, 1}, {1, 2}),
                                      make(DType::Float32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                                      make(DType::Float32, {2, 2}, {1, 2, 3, 4})};
    const std::vector<std::vector<double>> want = {
        {1, 0.5, 0.5, 2, 0.5, 0.5}, {1, 2, 3, 4, 5, 6}, {1, 2, 0.5, 3, 4, 0.5}};
    for (int dim : {1, -1}) {
      const Buffer out = pad_across(*comm, wide[static_cast<std::size_t>(r)], dim, 0.5);
      expect_buffer(out, DType::Float32, {2, 3}, want[static_cast<std::size_t>(r)],
                    "dim " + std::to_string(dim));
    }
    // Other dims may differ between ranks: [r+1, 2] padded along dim 1 keeps each rank's rows.
    const Buffer tall =
        i32({r + 1, 2}, std::vector<double>(2 * static_cast<std::size_t>(r) + 2, 1));
    RANK_CHECK(pad_across(*comm, tall, 1).data() == tall.data(), "dim 1 is 2 everywhere");

    // dim out of range for every rank's buffer, and 0-d buffers: returned as they are.
    RANK_CHECK(pad_across(*comm, in, 2, -100).data() == in.data(), "dim 2 of a 2-d buffer");
    RANK_CHECK(pad_across(*comm, in, -3, -100).data() == in.data(), "dim -3 of a 2-d buffer");
    const Buffer scalar = make(DType::Float64, {}, {1.0 * r});
    RANK_CHECK(pad_across(*comm, scalar).data() == scalar.data(), "0-d");
  }));
}

TEST_CASE("pad_across: worlds 1-5, rank r has r + 1 rows", "[train][metrics][multiproc]") {
  for (int size = 1; size <= 5; ++size) {
    INFO("world " << size);
    REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
      auto comm = world(env);
      const int r = comm->rank();
      const int world_size = comm->size();
      std::vector<double> mine;
      for (int i = 0; i < 2 * (r + 1); ++i) mine.push_back(100 * r + i);
      const Buffer in = make(DType::Int64, {r + 1, 2}, mine);
      for (bool first : {false, true}) {
        const Buffer out = pad_across(*comm, in, 0, -1, first);
        // world rows: the data after (or before) 2 (world - r - 1) fill values.
        std::vector<double> want(2 * static_cast<std::size_t>(world_size - r - 1), -1);
        want.insert(first ? want.end() : want.begin(), mine.begin(), mine.end());
        expect_buffer(out, DType::Int64, {world_size, 2}, want, first ? "pad_first" : "pad after");
        RANK_CHECK((out.data() == in.data()) == (r == world_size - 1),
                   "only the last rank, at the largest extent, gets its own buffer back");
      }
    }));
  }
}

TEST_CASE("pad_across: ranks that differ in dimensions or dim fail on every rank",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    // Rank 1's buffer is 1-d: Accelerate would skip the exchange on the others' dim 1 and hang.
    const Buffer in = r == 1 ? i32({2}, {0, 0}) : i32({1, 2}, {0, 0});
    expect_error([&] { pad_across(*comm, in, 1); }, ErrorCode::InvalidArgument,
                 {"number of dimensions", "rank 0 [1, 2]", "rank 1 [2]", "rank 2 [1, 2]"}, "ndim");
    expect_in_step(*comm, "ndim");
    // The same when one rank is 0-d.
    const Buffer scalar = r == 0 ? make(DType::Int32, {}, {0}) : i32({1}, {0});
    expect_error([&] { pad_across(*comm, scalar); }, ErrorCode::InvalidArgument,
                 {"rank 0 []", "rank 1 [1]"}, "0-d");
    expect_in_step(*comm, "0-d");
    // Rank 2 pads dim 1, the others dim 0.
    const Buffer square = i32({2, 2}, {0, 0, 0, 0});
    expect_error([&] { pad_across(*comm, square, r == 2 ? 1 : 0); }, ErrorCode::InvalidArgument,
                 {"different dims", "rank 0 dim 0", "rank 1 dim 0", "rank 2 dim 1"}, "dims");
    expect_in_step(*comm, "dims");
  }));
}

// ---- gather_for_metrics

namespace {

// An evaluation step's output for a batch of sample indices: rows [i, 10 i] (int64).
Buffer predictions(const std::vector<std::int64_t>& indices) {
  std::vector<double> values;
  for (std::int64_t i : indices) {
    values.push_back(static_cast<double>(i));
    values.push_back(10.0 * static_cast<double>(i));
  }
  return make(DType::Int64, {static_cast<std::int64_t>(indices.size()), 2}, values);
}

std::vector<double> rows_of(const std::vector<int>& samples) {
  std::vector<double> out;
  for (int i : samples) {
    out.push_back(i);
    out.push_back(10.0 * i);
  }
  return out;
}

// Every round of `shard`'s evaluation loop gathered; returns the gathered rows, round by round.
std::vector<Buffer> evaluate(Communicator& comm, std::int64_t n, std::int64_t batch,
                             const BatchShardOptions& options) {
  const auto shard = batch_shard(n, batch, comm.size(), comm.rank(), options);
  std::vector<Buffer> gathered;
  for (std::int64_t round = 0; round < shard.rounds(); ++round) {
    gathered.push_back(gather_for_metrics(comm, predictions(shard.batch(round)),
                                          {round + 1 == shard.rounds(), shard.remainder()}));
  }
  return gathered;
}

}  // namespace

TEST_CASE("gather_for_metrics: n=10, batch 2, world 3 keeps [6,7,8,9] in the last round",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    // Batches r0 [0,1] [6,7], r1 [2,3] [8,9], r2 [4,5] [0,1]; remainder 10 mod 6 = 4.
    std::vector<Buffer> rounds = evaluate(*comm, 10, 2, {});
    RANK_CHECK(rounds.size() == 2, rounds.size() << " rounds");
    expect_buffer(rounds[0], DType::Int64, {6, 2}, rows_of({0, 1, 2, 3, 4, 5}), "round 0");
    expect_buffer(rounds[1], DType::Int64, {4, 2}, rows_of({6, 7, 8, 9}), "last round");

    // Without even batches rank 2 joins the last round with no rows: the same result.
    BatchShardOptions uneven;
    uneven.even_batches = false;
    rounds = evaluate(*comm, 10, 2, uneven);
    expect_buffer(rounds[1], DType::Int64, {4, 2}, rows_of({6, 7, 8, 9}), "uneven last round");
    // split_batches with a global batch of 6: the same slices, the same result.
    BatchShardOptions split;
    split.split_batches = true;
    rounds = evaluate(*comm, 10, 6, split);
    expect_buffer(rounds[1], DType::Int64, {4, 2}, rows_of({6, 7, 8, 9}), "split last round");
    // drop_last: one round [0..5], nothing dropped from it.
    BatchShardOptions drop;
    drop.drop_last = true;
    rounds = evaluate(*comm, 10, 2, drop);
    RANK_CHECK(rounds.size() == 1, rounds.size() << " rounds with drop_last");
    expect_buffer(rounds[0], DType::Int64, {6, 2}, rows_of({0, 1, 2, 3, 4, 5}), "drop_last");

    // Remainder -1 (unknown) and 0 keep every row of the last round, as does a round that is
    // not the last whatever its remainder.
    const auto shard = batch_shard(10, 2, 3, comm->rank());
    const Buffer last = predictions(shard.batch(1));
    const std::vector<double> everything = rows_of({6, 7, 8, 9, 0, 1});
    expect_buffer(gather_for_metrics(*comm, last, {true, -1}), DType::Int64, {6, 2}, everything,
                  "remainder -1");
    expect_buffer(gather_for_metrics(*comm, last, {true, 0}), DType::Int64, {6, 2}, everything,
                  "remainder 0");
    expect_buffer(gather_for_metrics(*comm, last, {false, 4}), DType::Int64, {6, 2}, everything,
                  "not the last batch");
    expect_buffer(gather_for_metrics(*comm, last), DType::Int64, {6, 2}, everything, "defaults");
  }));
}

TEST_CASE("gather_for_metrics: n=9, batch 5, world 2 keeps [0..8]; n=3, batch 2 on one rank",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(2, [](const Environment& env) {
    auto comm = world(env);
    // Batches [0..4] and [5,6,7,8,0]; remainder 9 mod 10 = 9 drops the repeated 0.
    const std::vector<Buffer> rounds = evaluate(*comm, 9, 5, {});
    RANK_CHECK(rounds.size() == 1, rounds.size() << " rounds");
    expect_buffer(rounds[0], DType::Int64, {9, 2}, rows_of({0, 1, 2, 3, 4, 5, 6, 7, 8}),
                  "last round");
  }));
  REQUIRE_NOTHROW(run_ranks(1, [](const Environment& env) {
    auto comm = world(env);
    // Batches [0,1], [2,0]; remainder 3 mod 2 = 1 keeps [2].
    const std::vector<Buffer> rounds = evaluate(*comm, 3, 2, {});
    RANK_CHECK(rounds.size() == 2, rounds.size() << " rounds");
    expect_buffer(rounds[0], DType::Int64, {2, 2}, rows_of({0, 1}), "round 0");
    expect_buffer(rounds[1], DType::Int64, {1, 2}, rows_of({2}), "last round");
  }));
}

TEST_CASE("gather_for_metrics: disagreeing or invalid remainders fail on every rank",
          "[train][metrics][multiproc]") {
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    auto comm = world(env);
    const int r = comm->rank();
    const Buffer two_rows = predictions({2 * r, 2 * r + 1});

    // Rank 1 believes this is not the last batch.
    expect_error(
        [&] {
          gather_for_metrics(*comm, two_rows, {r != 1, 4});
        },
        ErrorCode::InvalidArgument,
        {"disagree", "rank 0 (last_batch true, remainder 4)",
         "rank 1 (last_batch false, remainder 4)"},
        "last_batch");
    expect_in_step(*comm, "last_batch");
    // Rank 2 computed another remainder.
    expect_error(
        [&] {
          gather_for_metrics(*comm, two_rows, {true, r == 2 ? 5 : 4});
        },
        ErrorCode::InvalidArgument, {"rank 2 (last_batch true, remainder 5)"}, "remainder");
    expect_in_step(*comm, "remainder");
    // Rank 0 passes a negative remainder other than -1: its own message, the others name it.
    const std::int64_t remainder = r == 0 ? -5 : 4;
    expect_error(
        [&] {
          gather_for_metrics(*comm, two_rows, {true, remainder});
        },
        ErrorCode::InvalidArgument,
        {r == 0 ? "remainder -5 is invalid" : "rank 0 passed an invalid argument"}, "remainder -5");
    expect_in_step(*comm, "remainder -5");
    // A remainder larger than the 6 rows gathered cannot be right.
    expect_error(
        [&] {
          gather_for_metrics(*comm, two_rows, {true, 7});
        },
        ErrorCode::InvalidArgument, {"remainder 7 exceeds the 6 rows"}, "remainder 7");
    expect_in_step(*comm, "remainder 7");
  }));
}
