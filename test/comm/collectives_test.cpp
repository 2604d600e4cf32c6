// Every collective through the public Communicator API on real processes (world sizes 1-5),
// in-place and out-of-place, against references computed here from closed-form inputs. The
// algorithms' own tests sweep algorithms x sizes exhaustively; this checks the communicator's
// layer: argument normalisation, own-block copies, staging, Avg, counts and displacements.

#include "algorithms/selection.hpp"
#include "rank_checks.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace cohort;
using namespace cohort::test;

// Small integers (negative too), so every dtype and every partial sum is exact.
double value(int rank, std::size_t i) {
  return static_cast<double>((rank * 13 + static_cast<int>(i % 1000) * 7) % 41) - 10;
}
// Products of 1s and 2s stay exact for any world size used here.
double prod_value(int rank, std::size_t i) {
  return 1.0 + static_cast<double>((rank + i) % 2);
}

double input_for(ReduceOp op, int rank, std::size_t i) {
  return op == ReduceOp::Prod ? prod_value(rank, i) : value(rank, i);
}

double reference(ReduceOp op, DType dtype, int size, std::size_t i) {
  double acc = input_for(op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = input_for(op, r, i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc += v; break;
      case ReduceOp::Prod: acc *= v; break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      default: throw std::runtime_error("reference: op not used in this test");
    }
  }
  if (op == ReduceOp::Avg) {
    const bool integer = dtype == DType::Int32 || dtype == DType::Int64;
    acc = integer ? std::trunc(acc / size) : acc / size;
  }
  return acc;
}

template <class F>
Buffer filled(std::size_t count, DType dtype, F fn) {
  Buffer b = Buffer::allocate(count, dtype);
  for (std::size_t i = 0; i < count; ++i) set(b, i, fn(i));
  return b;
}

std::string label(std::string_view op, DType dtype, std::size_t count, bool in_place) {
  return std::string(op) + " " + std::string(dtype_name(dtype)) +
         " count=" + std::to_string(count) + (in_place ? " in-place" : " out-of-place");
}

void check_allreduce(Communicator& c) {
  for (DType dtype : {DType::Float32, DType::Int32, DType::Float64}) {
    for (ReduceOp op :
         {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg, ReduceOp::Prod}) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{37}, std::size_t{3001}}) {
        const auto input = [&](std::size_t i) { return input_for(op, c.rank(), i); };
        const auto want = [&](std::size_t i) { return reference(op, dtype, c.size(), i); };
        const std::string what = label(reduce_op_name(op), dtype, count, false);
        Buffer in = filled(count, dtype, input);
        Buffer out = Buffer::allocate(count, dtype);
        c.allreduce(in.as_read_only(), out, op);
        expect_values(out, 0, count, want, "allreduce " + what);
        expect_values(in, 0, count, input, "allreduce input untouched " + what);
        c.allreduce(in, op);
        expect_values(in, 0, count, want,
                      "allreduce " + label(reduce_op_name(op), dtype, count, true));
      }
    }
  }
}

void check_broadcast(Communicator& c) {
  const std::size_t count = 1000;
  for (int root = 0; root < c.size(); ++root) {
    const auto want = [&](std::size_t i) { return value(root, i); };
    Buffer in = c.rank() == root ? filled(count, DType::Float64, want) : Buffer();
    Buffer out = Buffer::allocate(count, DType::Float64);
    c.broadcast(in.as_read_only(), out, root);
    expect_values(out, 0, count, want, "broadcast out-of-place root " + std::to_string(root));

    Buffer inout = c.rank() == root ? filled(count, DType::Float64, want)
                                    : Buffer::allocate(count, DType::Float64);
    c.broadcast(inout, root);
    expect_values(inout, 0, count, want, "broadcast in-place root " + std::to_string(root));
  }
}

void check_reduce(Communicator& c) {
  const std::size_t count = 129;
  for (int root = 0; root < c.size(); ++root) {
    for (DType dtype : {DType::Int32, DType::Float32}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
        const auto input = [&](std::size_t i) { return value(c.rank(), i); };
        const auto want = [&](std::size_t i) { return reference(op, dtype, c.size(), i); };
        const std::string what = std::string(reduce_op_name(op)) + " root " + std::to_string(root);
        Buffer in = filled(count, dtype, input);
        // Non-roots pass no output at all: it is ignored there.
        Buffer out = c.rank() == root ? Buffer::allocate(count, dtype) : Buffer();
        c.reduce(in.as_read_only(), out, op, root);
        if (c.rank() == root) expect_values(out, 0, count, want, "reduce out-of-place " + what);
        expect_values(in, 0, count, input, "reduce input untouched " + what);

        c.reduce(in, in, op, root);
        if (c.rank() == root) expect_values(in, 0, count, want, "reduce in-place " + what);
      }
    }
  }
}

// Per-rank counts for the v-collectives: uneven, with zeros (rank 1 and every fourth).
std::vector<std::size_t> uneven_counts(int size) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    counts[static_cast<std::size_t>(r)] = static_cast<std::size_t>((r * 3 + 1) % 4) * 5;
  return counts;
}

std::size_t offset_of(const std::vector<std::size_t>& counts, int rank) {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
  return offset;
}

void expect_blocks(const Buffer& out, const std::vector<std::size_t>& counts,
                   const std::string& what) {
  for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
    expect_values(
        out, offset_of(counts, r), counts[static_cast<std::size_t>(r)],
        [&](std::size_t i) { return value(r, i); }, what + " block of rank " + std::to_string(r));
  }
}

void check_allgather(Communicator& c) {
  const std::size_t count = 5;
  const std::vector<std::size_t> uniform(static_cast<std::size_t>(c.size()), count);
  const auto mine = [&](std::size_t i) { return value(c.rank(), i); };
  {
    Buffer in = filled(count, DType::Float32, mine);
    Buffer out = Buffer::allocate(count * static_cast<std::size_t>(c.size()), DType::Float32);
    c.allgather(in.as_read_only(), out);
    expect_blocks(out, uniform, "allgather out-of-place");
  }
  {
    Buffer out = Buffer::allocate(count * static_cast<std::size_t>(c.size()), DType::Float32);
    const auto start = static_cast<std::int64_t>(count) * c.rank();
    Buffer own = out.slice(start, start + static_cast<std::int64_t>(count));
    for (std::size_t i = 0; i < count; ++i) set(own, i, mine(i));
    c.allgather(own, out);
    expect_blocks(out, uniform, "allgather in-place");
  }
  const std::vector<std::size_t> counts = uneven_counts(c.size());
  const std::size_t total = offset_of(counts, c.size());
  const std::size_t my_count = counts[static_cast<std::size_t>(c.rank())];
  {
    Buffer in = filled(my_count, DType::Int32, mine);
    Buffer out = Buffer::allocate(total, DType::Int32);
    c.allgatherv(in, out, counts);
    expect_blocks(out, counts, "allgatherv out-of-place");
  }
  {
    Buffer out = Buffer::allocate(total, DType::Int32);
    const auto start = static_cast<std::int64_t>(offset_of(counts, c.rank()));
    Buffer own = out.slice(start, start + static_cast<std::int64_t>(my_count));
    for (std::size_t i = 0; i < my_count; ++i) set(own, i, mine(i));
    c.allgatherv(own, out, counts);
    expect_blocks(out, counts, "allgatherv in-place");
  }
}

void check_gather(Communicator& c) {
  const std::size_t count = 6;
  const std::vector<std::size_t> uniform(static_cast<std::size_t>(c.size()), count);
  const std::vector<std::size_t> counts = uneven_counts(c.size());
  const auto mine = [&](std::size_t i) { return value(c.rank(), i); };
  for (int root = 0; root < c.size(); ++root) {
    const bool is_root = c.rank() == root;
    const std::string at = " root " + std::to_string(root);
    {
      Buffer in = filled(count, DType::Float32, mine);
      Buffer out =
          is_root ? Buffer::allocate(count * static_cast<std::size_t>(c.size()), DType::Float32)
                  : Buffer();
      c.gather(in, out, root);
      if (is_root) expect_blocks(out, uniform, "gather out-of-place" + at);
    }
    if (is_root) {
      Buffer out = Buffer::allocate(count * static_cast<std::size_t>(c.size()), DType::Float32);
      const auto start = static_cast<std::int64_t>(count) * root;
      Buffer own = out.slice(start, start + static_cast<std::int64_t>(count));
      for (std::size_t i = 0; i < count; ++i) set(own, i, mine(i));
      c.gather(own, out, root);
      expect_blocks(out, uniform, "gather in-place" + at);
    } else {
      c.gather(filled(count, DType::Float32, mine), Buffer(), root);
    }
    {
      Buffer in = filled(counts[static_cast<std::size_t>(c.rank())], DType::Int32, mine);
      Buffer out = is_root ? Buffer::allocate(offset_of(counts, c.size()), DType::Int32) : Buffer();
      c.gatherv(in, out, counts, root);
      if (is_root) expect_blocks(out, counts, "gatherv" + at);
    }
  }
}

void check_scatter(Communicator& c) {
  const std::size_t count = 4;
  const std::vector<std::size_t> uniform(static_cast<std::size_t>(c.size()), count);
  const std::vector<std::size_t> counts = uneven_counts(c.size());
  const auto mine = [&](std::size_t i) { return value(c.rank(), i); };
  const auto source = [&](const std::vector<std::size_t>& layout, DType dtype) {
    Buffer in = Buffer::allocate(offset_of(layout, c.size()), dtype);
    for (int r = 0; r < c.size(); ++r)
      for (std::size_t i = 0; i < layout[static_cast<std::size_t>(r)]; ++i)
        set(in, offset_of(layout, r) + i, value(r, i));
    return in;
  };
  for (int root = 0; root < c.size(); ++root) {
    const bool is_root = c.rank() == root;
    const std::string at = " root " + std::to_string(root);
    {
      Buffer in = is_root ? source(uniform, DType::Float64) : Buffer();
      Buffer out = Buffer::allocate(count, DType::Float64);
      c.scatter(in, out, root);
      expect_values(out, 0, count, mine, "scatter out-of-place" + at);
    }
    {
      // In place on root: its output is its own block of the input.
      Buffer in = is_root ? source(uniform, DType::Float64) : Buffer();
      const auto start = static_cast<std::int64_t>(count) * c.rank();
      Buffer out = is_root ? in.slice(start, start + static_cast<std::int64_t>(count))
                           : Buffer::allocate(count, DType::Float64);
      c.scatter(in, out, root);
      expect_values(out, 0, count, mine, "scatter in-place" + at);
    }
    {
      Buffer in = is_root ? source(counts, DType::Int32) : Buffer();
      Buffer out = Buffer::allocate(counts[static_cast<std::size_t>(c.rank())], DType::Int32);
      c.scatterv(in, out, counts, root);
      expect_values(out, 0, out.count(), mine, "scatterv" + at);
    }
  }
}

void check_reduce_scatter(Communicator& c) {
  const std::size_t count = 7;
  const std::size_t total = count * static_cast<std::size_t>(c.size());
  const std::size_t mine_at = count * static_cast<std::size_t>(c.rank());
  for (DType dtype : {DType::Int32, DType::Float32}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
      const auto input = [&](std::size_t i) { return value(c.rank(), i); };
      const auto want = [&](std::size_t i) { return reference(op, dtype, c.size(), mine_at + i); };
      const std::string what =
          std::string(reduce_op_name(op)) + " " + std::string(dtype_name(dtype));
      Buffer in = filled(total, dtype, input);
      Buffer out = Buffer::allocate(count, dtype);
      c.reduce_scatter(in.as_read_only(), out, op);
      expect_values(out, 0, count, want, "reduce_scatter out-of-place " + what);

      const auto start = static_cast<std::int64_t>(mine_at);
      Buffer own = in.slice(start, start + static_cast<std::int64_t>(count));
      c.reduce_scatter(in, own, op);
      expect_values(in, mine_at, count, want, "reduce_scatter in-place " + what);
    }
  }
}

// Element i of the block rank `from` sends to rank `to`.
double exchange_value(int from, int to, std::size_t i) {
  return from * 100.0 + to * 10.0 + static_cast<double>(i);
}

void check_alltoall(Communicator& c) {
  const std::size_t block = 3;
  const std::size_t total = block * static_cast<std::size_t>(c.size());
  const auto sent = [&](std::size_t i) {
    return exchange_value(c.rank(), static_cast<int>(i / block), i % block);
  };
  const auto received = [&](std::size_t i) {
    return exchange_value(static_cast<int>(i / block), c.rank(), i % block);
  };
  Buffer in = filled(total, DType::Int32, sent);
  Buffer out = Buffer::allocate(total, DType::Int32);
  c.alltoall(in.as_read_only(), out);
  expect_values(out, 0, total, received, "alltoall out-of-place");
  c.alltoall(in, in);  // the same buffer: staged by the communicator
  expect_values(in, 0, total, received, "alltoall in-place");

  // alltoallv: rank r sends (r + j) % 3 elements to rank j, zeros included.
  std::vector<std::size_t> send_counts, recv_counts;
  for (int j = 0; j < c.size(); ++j) {
    send_counts.push_back(static_cast<std::size_t>((c.rank() + j) % 3));
    recv_counts.push_back(static_cast<std::size_t>((j + c.rank()) % 3));
  }
  Buffer vin = Buffer::allocate(offset_of(send_counts, c.size()), DType::Float32);
  for (int j = 0; j < c.size(); ++j)
    for (std::size_t i = 0; i < send_counts[static_cast<std::size_t>(j)]; ++i)
      set(vin, offset_of(send_counts, j) + i, exchange_value(c.rank(), j, i));
  Buffer vout = Buffer::allocate(offset_of(recv_counts, c.size()), DType::Float32);
  c.alltoallv(vin, send_counts, vout, recv_counts);
  for (int j = 0; j < c.size(); ++j) {
    expect_values(
        vout, offset_of(recv_counts, j), recv_counts[static_cast<std::size_t>(j)],
        [&](std::size_t i) { return exchange_value(j, c.rank(), i); },
        "alltoallv block from rank " + std::to_string(j));
  }
}

/// Every collective whose counts leave nothing to move, each blocking and async, in and out of
/// place where both exist: `none` is a 0-element view, `counts` all zeros (one per rank).
void call_every_empty_collective(Communicator& c, const Buffer& none,
                                 std::span<const std::size_t> counts) {
  const int root = c.size() - 1;
  const std::vector<Work> works = {
      c.allreduce_async(none, none, ReduceOp::Sum),
      c.broadcast_async(none, none, root),
      c.reduce_async(none, none, ReduceOp::Max, root),
      c.allgather_async(none, none),
      c.allgatherv_async(none, none, counts),
      c.gather_async(none, none, root),
      c.gatherv_async(none, none, counts, root),
      c.scatter_async(none, none, root),
      c.scatterv_async(none, none, counts, root),
      c.reduce_scatter_async(none, none, ReduceOp::Sum),
      c.alltoall_async(none, none),
  };
  for (const Work& w : works) {
    RANK_CHECK(w.valid() && w.test(), "an async collective that moves nothing is not done");
    w.wait();
  }
  const Buffer elsewhere = Buffer::allocate(0, none.dtype());
  c.allreduce(none, elsewhere, ReduceOp::Sum);
  c.allreduce(none, ReduceOp::Prod);
  c.broadcast(none, elsewhere, root);
  c.broadcast(none, root);
  c.reduce(none, elsewhere, ReduceOp::Sum, root);
  c.allgather(none, elsewhere);
  c.allgatherv(none, none, counts);
  c.gather(none, elsewhere, root);
  c.gatherv(none, none, counts, root);
  c.scatter(none, elsewhere, root);
  c.scatterv(none, none, counts, root);
  c.reduce_scatter(none, elsewhere, ReduceOp::Min);
  c.alltoall(none, elsewhere);
  c.alltoall(none, none);
}

/// The sequence numbers of the collectives in this rank's flight record, oldest first.
std::vector<std::uint32_t> recorded_numbers(const Communicator& c) {
  const TempDir dir("cohort-empty-collectives");
  const std::string path = (dir.path() / "record.json").string();
  c.dump_trace(path);
  std::ifstream in(path);
  const nlohmann::json record = nlohmann::json::parse(in);
  std::vector<std::uint32_t> numbers;
  for (const auto& op : record.at("ops")) numbers.push_back(op.at("seq").get<std::uint32_t>());
  return numbers;
}

}  // namespace

TEST_CASE("every collective, in-place and out-of-place, on 1-5 ranks", "[comm][multiproc]") {
  const int size = GENERATE(1, 2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    RANK_CHECK(c->rank() == env.rank && c->size() == env.world_size,
               "rank " << c->rank() << " size " << c->size());
    RANK_CHECK(c->id() == 0, "world id " << c->id());
    check_allreduce(*c);
    check_broadcast(*c);
    check_reduce(*c);
    check_allgather(*c);
    check_gather(*c);
    check_scatter(*c);
    check_reduce_scatter(*c);
    check_alltoall(*c);
    c->barrier();
  }));
}

TEST_CASE("without shared memory (COHORT_SHARED_MEMORY=off) collectives use the transport",
          "[comm][multiproc]") {
  // Selection puts the shared-memory algorithms first; without an arena they decline on every
  // rank alike and the message-based algorithms behind them must take over.
  const int size = GENERATE(2, 3);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    setenv("COHORT_SHARED_MEMORY", "off", 1);
    auto c = world(env);
    check_allreduce(*c);
    check_reduce_scatter(*c);
    c->barrier();
  }));
}

TEST_CASE("Avg on f16, bf16 and fp8 does not overflow when the mean is representable",
          "[comm][multiproc]") {
  // Every rank contributes the same value x, so the mean is x, while the sum of n values is
  // beyond the format's largest finite number (f16 65504, e4m3 448): summing first would give
  // inf (or NaN for e4m3). Bit patterns computed by hand / numpy: f16 40000 = 0x78e2, f16 30000 =
  // 0x7753; e4m3 320 = 0 1111 010 = 0x7a, 384 = 0 1111 100 = 0x7c (x/2 and x/3 are exact, so is
  // their sum). bf16 3.004e38 = 0x7f62 (its half is exact; a third is rounded, so 3 ranks get a
  // tolerance).
  const int size = GENERATE(2, 3);
  const std::string shm = GENERATE("auto", "off");
  CAPTURE(size, shm);
  REQUIRE_NOTHROW(run_ranks(size, [shm](const Environment& env) {
    ScopedEnv mode("COHORT_SHARED_MEMORY", shm.c_str());
    auto c = world(env);
    const int n = c->size();
    const auto un = static_cast<std::size_t>(n);
    struct Case {
      DType dtype;
      std::uint16_t bits;  ///< x and the expected mean
      bool exact;
    };
    const Case cases[] = {
        {DType::Float16, static_cast<std::uint16_t>(n == 2 ? 0x78e2 : 0x7753), true},
        {DType::Float8E4M3, static_cast<std::uint16_t>(n == 2 ? 0x7a : 0x7c), true},
        {DType::BFloat16, 0x7f62, n == 2},
    };
    auto fill = [](const Buffer& b, std::uint16_t bits) {
      for (std::size_t i = 0; i < b.count(); ++i) {
        if (dtype_size(b.dtype()) == 2)
          b.data_as<std::uint16_t>()[i] = bits;
        else
          b.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(bits);
      }
    };
    auto check = [&](const Buffer& b, const Case& k, std::size_t count, const std::string& what) {
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t got = dtype_size(b.dtype()) == 2 ? b.data_as<std::uint16_t>()[i]
                                                             : b.data_as<std::uint8_t>()[i];
        if (k.exact) {
          RANK_CHECK(got == k.bits, what << " " << dtype_name(k.dtype) << " element " << i
                                         << ": bits 0x" << std::hex << got << ", expected 0x"
                                         << k.bits);
        } else {
          // bf16 -> float by shifting into the high half; within 2 ulps of bf16 (2^-6 relative).
          const std::uint32_t f32 = std::uint32_t{got} << 16;
          float value = 0;
          std::memcpy(&value, &f32, sizeof value);
          RANK_CHECK(
              std::isfinite(value) && std::fabs(value - 3.00405527e38f) <= 3.00405527e38f / 64,
              what << " bf16 element " << i << " is " << value);
        }
      }
    };
    const std::size_t count = 1000;  // several SIMD widths and a tail
    for (const Case& k : cases) {
      Buffer in = Buffer::allocate(count, k.dtype);
      Buffer out = Buffer::allocate(count, k.dtype);
      fill(in, k.bits);
      c->allreduce(in, out, ReduceOp::Avg);
      check(out, k, count, "allreduce out of place");
      check(in, {k.dtype, k.bits, true}, count, "allreduce's input untouched");
      c->allreduce(in, ReduceOp::Avg);
      check(in, k, count, "allreduce in place");
      fill(in, k.bits);
      Buffer root_out = Buffer::allocate(count, k.dtype);
      c->reduce(in, root_out, ReduceOp::Avg, n - 1);
      if (env.rank == n - 1) check(root_out, k, count, "reduce to the last rank");
      Buffer rs_in = Buffer::allocate(count * un, k.dtype);
      Buffer rs_out = Buffer::allocate(count, k.dtype);
      fill(rs_in, k.bits);
      c->reduce_scatter(rs_in, rs_out, ReduceOp::Avg);
      check(rs_out, k, count, "reduce_scatter");
    }
  }));
}

TEST_CASE("every allreduce algorithm gives every rank the same bits (signed zeros and NaNs too)",
          "[comm][multiproc]") {
  // Replicas must stay bit for bit equal (parameter checksums in data-parallel training). The
  // kernels are not symmetric in their operands: Min/Max keep the first of two equal ones (+0
  // against -0) and a NaN's payload is the first operand's, so an algorithm in which each rank
  // computes "mine op theirs" hands partners different bits. Rank r contributes +0 / -0 (even /
  // odd r) in element 0, the opposite in element 1, and a quiet NaN with payload r + 1 in
  // element 2; which zero or payload wins depends on the algorithm, but every rank must get
  // the same one.
  const int size = GENERATE(2, 3, 4, 5);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    auto c = world(env);
    const auto un = static_cast<std::size_t>(c->size());
    const auto bits_of = [](std::uint32_t bits) {
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    };
    const bool even = env.rank % 2 == 0;
    for (const Algorithm algorithm : algorithms::algorithms_for(Collective::Allreduce)) {
      for (const ReduceOp op : {ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum}) {
        Buffer in = Buffer::allocate(3, DType::Float32);
        Buffer out = Buffer::allocate(3, DType::Float32);
        in.data_as<float>()[0] = even ? 0.0f : -0.0f;
        in.data_as<float>()[1] = even ? -0.0f : 0.0f;
        in.data_as<float>()[2] = bits_of(0x7fc00000u | static_cast<std::uint32_t>(env.rank + 1));
        CollectiveOptions forced;
        forced.algorithm = algorithm;
        c->allreduce(in, out, op, forced);
        const std::string what =
            std::string(algorithm_name(algorithm)) + " " + std::string(reduce_op_name(op));
        RANK_CHECK(out.data_as<float>()[0] == 0.0f && out.data_as<float>()[1] == 0.0f,
                   what << ": the zeros became " << out.data_as<float>()[0] << ", "
                        << out.data_as<float>()[1]);
        RANK_CHECK(std::isnan(out.data_as<float>()[2]), what << ": NaN lost");
        // Every rank's bits, side by side.
        const Buffer mine = Buffer::view(out.data(), 12, DType::UInt8);
        Buffer all = Buffer::allocate(12 * un, DType::UInt8);
        c->allgather(mine, all);
        for (std::size_t r = 1; r < un; ++r)
          RANK_CHECK(std::memcmp(all.data_as<std::uint8_t>(), all.data_as<std::uint8_t>() + 12 * r,
                                 12) == 0,
                     what << ": rank " << r << "'s result differs from rank 0's in its bits");
      }
    }
  }));
}

TEST_CASE("collectives that move nothing take no number, leave no record and need no peer",
          "[comm][multiproc]") {
  // As MPI's and NCCL's zero-count calls: such an op returns on each rank by itself. Between two
  // allreduces that move data, the second must still be collective #1 on every rank, and the
  // record must hold those two alone.
  const int size = GENERATE(1, 3, 4);
  CAPTURE(size);
  REQUIRE_NOTHROW(run_ranks(size, [](const Environment& env) {
    ::unsetenv("COHORT_DEBUG");
    auto c = world(env);
    Buffer data = Buffer::allocate(8, DType::Float32);
    const Buffer none = data.slice(0, 0);
    const std::vector<std::size_t> zeros(static_cast<std::size_t>(c->size()), 0);
    for (std::size_t i = 0; i < 8; ++i) set(data, i, 1);
    c->allreduce(data, ReduceOp::Sum);
    call_every_empty_collective(*c, none, zeros);
    c->allreduce(data, ReduceOp::Sum);
    expect_values(
        data, 0, 8, [&](std::size_t) { return c->size() * c->size(); }, "allreduce after");
    const std::vector<std::uint32_t> numbers = recorded_numbers(*c);
    RANK_CHECK(numbers == std::vector<std::uint32_t>({0, 1}),
               "recorded " << numbers.size() << " collectives, the last #"
                           << (numbers.empty() ? -1 : static_cast<long>(numbers.back())));
    // Arguments are still checked before the op is skipped: a forced algorithm of another
    // collective, a deadline that is not positive, a counts span of the wrong length.
    CollectiveOptions past;
    past.timeout = std::chrono::milliseconds(-5);
    expect_error([&] { c->gather(none, none, 0, past); }, ErrorCode::InvalidArgument,
                 {"gather", "timeout"}, "a deadline in the past");
    CollectiveOptions tree;
    tree.algorithm = Algorithm::Tree;
    expect_error([&] { c->allreduce(none, ReduceOp::Sum, tree); }, ErrorCode::InvalidArgument,
                 {"allreduce", "tree"}, "forced algorithm of another collective");
    expect_error([&] { c->allgatherv(none, none, std::span(zeros).first(zeros.size() - 1)); },
                 ErrorCode::InvalidArgument, {"allgatherv", "counts"}, "short counts");
    // Only rank 0 calls these: they must return without waiting for anyone (each has a short
    // deadline, so a wait would fail here by timeout rather than hang).
    CollectiveOptions soon;
    soon.timeout = std::chrono::milliseconds(2000);
    if (c->rank() == 0) {
      c->allreduce(none, ReduceOp::Sum, soon);
      c->alltoall(none, data.slice(0, 0), soon);
      c->gather(none, none, c->size() - 1, soon);
    }
    c->barrier();
    // A poisoned communicator refuses them as it refuses every op.
    c->abort("the test aborts");
    expect_error([&] { c->allreduce(none, ReduceOp::Sum); }, ErrorCode::InvalidUsage,
                 {"unusable", "the test aborts"}, "empty allreduce after abort");
    expect_error([&] { c->scatter_async(none, none, 0).wait(); }, ErrorCode::InvalidUsage,
                 {"unusable"}, "empty scatter_async after abort");
  }));
}

TEST_CASE("under COHORT_DEBUG=detail a rank with nothing to move still meets the others",
          "[comm][multiproc]") {
  // The fingerprint exchange is what finds a count of 0 against another rank's 4: debug mode
  // must not skip the empty op, or rank 2 would return and meet the others' allreduce with its
  // barrier, and the error would name that instead.
  REQUIRE_NOTHROW(run_ranks(3, [](const Environment& env) {
    ::setenv("COHORT_DEBUG", "detail", 1);
    auto c = world(env);
    Buffer b = Buffer::allocate(env.rank == 2 ? 0 : 4, DType::Int32);
    CollectiveOptions soon;
    soon.timeout = std::chrono::milliseconds(20000);
    expect_error([&] { c->allreduce(b, ReduceOp::Sum, soon); }, ErrorCode::InvalidArgument,
                 {"allreduce #0", "rank 0 has count=4", "rank 2 has count=0"}, "count mismatch");
    c->barrier();
  }));
}
