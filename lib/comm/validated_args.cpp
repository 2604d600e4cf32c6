#include "comm/validated_args.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <cstring>

namespace cohort::comm {

using namespace std::string_view_literals;

using algorithms::AllgatherArgs;
using algorithms::AllreduceArgs;
using algorithms::AlltoallArgs;
using algorithms::BroadcastArgs;
using algorithms::GatherArgs;
using algorithms::ReduceArgs;
using algorithms::ReduceScatterArgs;
using algorithms::ScatterArgs;

namespace {

const std::byte* at(const void* base, std::size_t elements, DType dtype) {
  return static_cast<const std::byte*>(base) + elements * dtype_size(dtype);
}

[[noreturn]] void partial_overlap(std::string_view op, std::string_view rule) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{}: input and output overlap, but not as the in-place form allows "
                          "({})",
                          op, rule));
}

/// A uniform op's layout (`count` from every rank) written straight into its Args' `counts` and
/// `displs`, returning the total. Checked inline and filled in place: building a Layout and
/// moving it in, with two out-of-line overflow checks, was a fifth of a tiny gather's
/// bookkeeping. Inlined: out of line, behind the v-form's branch, it took 61 instructions for
/// one rank.
[[gnu::always_inline]] inline std::size_t uniform_layout_into(std::string_view op,
                                                              std::size_t count, const Group& g,
                                                              DType dtype, RankSizes& counts_out,
                                                              RankSizes& displs_out) {
  const auto ranks = static_cast<std::size_t>(g.size);
  std::size_t total = 0, bytes = 0;
  if (__builtin_mul_overflow(count, ranks, &total) ||
      __builtin_mul_overflow(total, dtype_size(dtype), &bytes)) [[unlikely]]
    uniform_layout(op, count, g.size, dtype);  // throws, naming the product that overflowed
  counts_out.resize_for_overwrite(ranks);
  displs_out.resize_for_overwrite(ranks);
  std::size_t* const c = counts_out.data();
  std::size_t* const d = displs_out.data();
  std::size_t displacement = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    c[r] = count;
    d[r] = displacement;
    displacement += count;
  }
  return total;
}

/// A gather-like op's layout: the counts span of a v-collective (when not null), else the
/// uniform one.
inline std::size_t layout_into(std::string_view op, const std::span<const std::size_t>* counts,
                               std::size_t count, const Group& g, DType dtype,
                               RankSizes& counts_out, RankSizes& displs_out,
                               std::string_view counts_name = "counts") {
  if (counts == nullptr) return uniform_layout_into(op, count, g, dtype, counts_out, displs_out);
  Layout layout = counts_layout(op, counts_name, *counts, g.size, dtype);
  counts_out = std::move(layout.counts);
  displs_out = std::move(layout.displs);
  return layout.total;
}

/// A v-collective's own block: `buffer` holds `expected` (counts[rank]) elements. The entry's
/// name is formatted only for the refusal: formatting it at every call allocated a string.
void check_own_count(std::string_view op, std::string_view role, const Buffer& buffer,
                     std::size_t expected, std::size_t rank) {
  if (buffer.count() != expected) [[unlikely]]
    refuse_count(op, role, buffer, expected, fmt::format("counts[{}]", rank));
}

}  // namespace

AllreduceArgs allreduce_args(const Group&, const Buffer& in, const Buffer& out, ReduceOp op) {
  constexpr std::string_view kOp = "allreduce";
  check_input(kOp, "input", in);
  check_output(kOp, "output", out);
  check_same_dtype(kOp, in, out);
  check_reduce_op(kOp, op, in.dtype());
  check_count(kOp, "output", out, in.count(), "the input's count");
  if (in.data() != out.data() && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes()))
    partial_overlap(kOp, "for in-place pass the same buffer as input and output");
  return {in.data(), out.data(), in.count(), in.dtype(), op};
}

BroadcastArgs broadcast_args(const Group& g, const Buffer& in, const Buffer& out, int root) {
  constexpr std::string_view kOp = "broadcast";
  check_root(kOp, root, g.size);
  check_output(kOp, "output", out);
  const void* source = nullptr;
  if (g.rank == root) {
    check_input(kOp, "input", in);
    check_same_dtype(kOp, in, out);
    check_count(kOp, "output", out, in.count(), "the root's input count");
    if (in.data() != out.data() && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes()))
      partial_overlap(kOp, "for in-place pass the same buffer as input and output");
    source = in.data();
  }
  return {source, out.data(), out.count(), out.dtype(), root};
}

ReduceArgs reduce_args(const Group& g, const Buffer& in, const Buffer& out, ReduceOp op, int root) {
  constexpr std::string_view kOp = "reduce";
  check_root(kOp, root, g.size);
  check_input(kOp, "input", in);
  check_reduce_op(kOp, op, in.dtype());
  ReduceArgs args{in.data(), nullptr, in.count(), in.dtype(), op, root};
  if (g.rank == root) {
    check_output(kOp, "output", out);
    check_same_dtype(kOp, in, out);
    check_count(kOp, "output", out, in.count(), "the input's count");
    args.out = out.data();
  }
  return args;
}

AllgatherArgs allgather_args(const Group& g, const Buffer& in, const Buffer& out,
                             const std::span<const std::size_t>* counts) {
  const std::string_view op = counts ? "allgatherv"sv : "allgather"sv;  // as gather_args says why
  check_input(op, "input", in);
  check_output(op, "output", out);
  check_same_dtype(op, in, out);
  AllgatherArgs args;  // member by member, as gather_args says why
  args.total = layout_into(op, counts, in.count(), g, in.dtype(), args.counts, args.displs);
  const auto me = static_cast<std::size_t>(g.rank);
  if (counts) check_own_count(op, "input", in, args.counts[me], me);
  check_count(op, "output", out, args.total,
              counts ? "the sum of counts" : "communicator size x input count");
  const std::byte* own = at(out.data(), args.displs[me], out.dtype());
  const bool copy_own = in.data() != static_cast<const void*>(own);
  if (copy_own && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
    partial_overlap(op, fmt::format("for in-place the input must be this rank's block of the "
                                    "output, at element {}",
                                    args.displs[me]));
  }
  args.in = in.data();
  args.out = out.data();
  args.dtype = in.dtype();
  args.variable = counts != nullptr;
  return args;
}

GatherArgs gather_args(const Group& g, const Buffer& in, const Buffer& out,
                       const std::span<const std::size_t>* counts, int root) {
  // Literals, not collective_name(): the lookup showed in tiny gathers' profiles. Views of
  // them, or the ternary yields a char pointer whose length strlen() finds at every call.
  const std::string_view op = counts ? "gatherv"sv : "gather"sv;
  check_root(op, root, g.size);
  check_input(op, "input", in);
  // Member by member (every one is set by the end): brace-initialised, the aggregate was zeroed
  // whole first (a `rep stos` of its 216 bytes, in-place RankSizes included) at every call.
  GatherArgs args;
  args.total = layout_into(op, counts, in.count(), g, in.dtype(), args.counts, args.displs);
  const auto me = static_cast<std::size_t>(g.rank);
  if (counts) check_own_count(op, "input", in, args.counts[me], me);
  args.in = in.data();
  args.out = nullptr;
  args.dtype = in.dtype();
  args.root = root;
  args.variable = counts != nullptr;
  if (g.rank == root) {
    check_output(op, "output", out);
    check_same_dtype(op, in, out);
    check_count(op, "output", out, args.total,
                counts ? "the sum of counts" : "communicator size x input count");
    const std::byte* own = at(out.data(), args.displs[me], out.dtype());
    args.out = out.data();
    const bool copy_own = in.data() != static_cast<const void*>(own);
    if (copy_own && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
      partial_overlap(op, fmt::format("for in-place the root's input must be its block of the "
                                      "output, at element {}",
                                      args.displs[me]));
    }
  }
  return args;
}

ScatterArgs scatter_args(const Group& g, const Buffer& in, const Buffer& out,
                         const std::span<const std::size_t>* counts, int root) {
  const std::string_view op = counts ? "scatterv"sv : "scatter"sv;  // as gather_args says why
  check_root(op, root, g.size);
  check_output(op, "output", out);
  ScatterArgs args;  // member by member, as gather_args says why
  args.total = layout_into(op, counts, out.count(), g, out.dtype(), args.counts, args.displs);
  const auto me = static_cast<std::size_t>(g.rank);
  if (counts) check_own_count(op, "output", out, args.counts[me], me);
  args.in = nullptr;
  args.out = out.data();
  args.dtype = out.dtype();
  args.root = root;
  args.variable = counts != nullptr;
  if (g.rank == root) {
    check_input(op, "input", in);
    check_same_dtype(op, in, out);
    check_count(op, "input", in, args.total,
                counts ? "the sum of counts" : "communicator size x output count");
    const std::byte* own = at(in.data(), args.displs[me], in.dtype());
    args.in = in.data();
    const bool copy_own = out.data() != static_cast<const void*>(own);
    if (copy_own && overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
      partial_overlap(op, fmt::format("for in-place the root's output must be its block of the "
                                      "input, at element {}",
                                      args.displs[me]));
    }
  }
  return args;
}

ReduceScatterArgs reduce_scatter_args(const Group& g, const Buffer& in, const Buffer& out,
                                      ReduceOp op) {
  constexpr std::string_view kOp = "reduce_scatter";
  check_input(kOp, "input", in);
  check_output(kOp, "output", out);
  check_same_dtype(kOp, in, out);
  check_reduce_op(kOp, op, in.dtype());
  const std::size_t total = checked_multiply(kOp, "output count x communicator size", out.count(),
                                             static_cast<std::size_t>(g.size));
  check_count(kOp, "input", in, total, "communicator size x output count");
  const std::byte* own = at(in.data(), out.count() * static_cast<std::size_t>(g.rank), in.dtype());
  if (out.data() != static_cast<const void*>(own) &&
      overlaps(in.data(), in.nbytes(), out.data(), out.nbytes())) {
    partial_overlap(kOp, fmt::format("for in-place the output must be this rank's block of the "
                                     "input, at element {}",
                                     out.count() * static_cast<std::size_t>(g.rank)));
  }
  return {in.data(), out.data(), out.count(), in.dtype(), op};
}

AlltoallArgs alltoall_args(const Group& g, const Buffer& in, const Buffer& out,
                           const std::span<const std::size_t>* send_counts,
                           const std::span<const std::size_t>* recv_counts) {
  const bool variable = send_counts != nullptr;
  const std::string_view op = variable ? "alltoallv"sv : "alltoall"sv;  // as gather_args says why
  check_input(op, "input", in);
  check_output(op, "output", out);
  check_same_dtype(op, in, out);
  AlltoallArgs args;  // member by member, as gather_args says why
  if (variable) {
    args.send_total = layout_into(op, send_counts, 0, g, in.dtype(), args.send_counts,
                                  args.send_displs, "send_counts");
    args.recv_total = layout_into(op, recv_counts, 0, g, in.dtype(), args.recv_counts,
                                  args.recv_displs, "recv_counts");
    check_count(op, "input", in, args.send_total, "the sum of send_counts");
    check_count(op, "output", out, args.recv_total, "the sum of recv_counts");
    // This rank's block to itself is sent and received at once: one size, or some algorithms
    // would copy part of it and others stop on it.
    const auto me = static_cast<std::size_t>(g.rank);
    if ((*send_counts)[me] != (*recv_counts)[me]) [[unlikely]] {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("alltoallv: send_counts[{0}] is {1} but recv_counts[{0}] is {2}; "
                              "rank {0}'s block to itself must have one size",
                              g.rank, (*send_counts)[me], (*recv_counts)[me]));
    }
  } else {
    check_count(op, "output", out, in.count(), "the input's count");
    const auto ranks = static_cast<std::size_t>(g.size);
    if (in.count() % ranks != 0) [[unlikely]] {
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("alltoall: input count {} is not divisible by the communicator "
                              "size {}",
                              in.count(), g.size));
    }
    // Filled straight into the Args (two Layouts built, copied and moved in were most of a
    // tiny alltoall's bookkeeping), the receive side filled as the send side rather than
    // copied from it (a copy is a memset and a memmove through the PLT per array).
    args.send_total = uniform_layout_into(op, in.count() / ranks, g, in.dtype(), args.send_counts,
                                          args.send_displs);
    args.recv_total = uniform_layout_into(op, in.count() / ranks, g, in.dtype(), args.recv_counts,
                                          args.recv_displs);
  }
  args.in = in.data();
  args.out = out.data();
  args.dtype = in.dtype();
  args.uniform = !variable;
  return args;
}

}  // namespace cohort::comm
