// Every collective of cohort::Communicator, and send/recv, as methods of cohort.Communicator.
//
// Each op is written once, as a template over Async: the arguments are converted (tensors to
// Buffers through DLPack, names to enums; every check before anything moves), then run() either
// calls the blocking C++ op or starts the *_async one and wraps its Work. Both run with the GIL
// released.
//
// In-place conventions (MPI_IN_PLACE, spelled the Python way):
// - ops whose input and output have the same size (allreduce, broadcast, reduce, alltoall(v))
//   work in place on `tensor` unless out= is given;
// - the gathers take tensor=None to mean "my block of out already holds my contribution";
// - scatter(v) on the root and reduce_scatter take out=None to mean "my block of tensor".
//
// Every op also takes timeout= and stream=. The options are parsed before the tensors because
// the stream is passed on to CUDA producers' __dlpack__ (see import_tensor).

#include "arguments.hpp"
#include "bindings.hpp"
#include "gil.hpp"
#include "tensor_import.hpp"

#include <cohort/error.hpp>

#include <string>
#include <vector>

namespace cohort::python {
namespace {

using namespace pybind11::literals;

// The ops whose arguments depend on being the root check it first, as the C++ op would, so a
// bad root is reported as such rather than as a missing argument.
void check_root(const Communicator& comm, int root, std::string_view op) {
  if (root < 0 || root >= comm.size()) {
    invalid(op, "root " + std::to_string(root) + " is out of range for a communicator of size " +
                    std::to_string(comm.size()));
  }
}

// `stream` is the op's: a CUDA producer orders its pending writes before it (see import_tensor).
Buffer tensor_arg(py::handle object, std::string_view op, std::string_view role,
                  std::optional<Stream> stream) {
  return import_tensor(object, std::string(op) + ": " + std::string(role), stream);
}

// An argument only some ranks need (the root's input of broadcast/scatter, the root's output of
// reduce/gather): None is an empty Buffer, which the op ignores where it is not needed.
Buffer optional_tensor_arg(py::handle object, std::string_view op, std::string_view role,
                           std::optional<Stream> stream) {
  return object.is_none() ? Buffer{} : tensor_arg(object, op, role, stream);
}

// Elements [offset, offset + count) of `whole`: this rank's block for an in-place call.
Buffer block_of(const Buffer& whole, std::size_t offset, std::size_t count, std::string_view op,
                std::string_view role) {
  whole.require_contiguous((std::string(op) + " " + std::string(role)).c_str());
  if (count > whole.count() || offset > whole.count() - count) {
    invalid(op, std::string(role) + " has " + std::to_string(whole.count()) +
                    " elements, too few for this rank's block [" + std::to_string(offset) + ", " +
                    std::to_string(offset + count) + ")");
  }
  return whole.flat().slice(static_cast<std::int64_t>(offset),
                            static_cast<std::int64_t>(offset + count));
}

// The block of rank `rank` when `whole` splits evenly over `size` ranks.
Buffer uniform_block(const Buffer& whole, int rank, int size, std::string_view op,
                     std::string_view role) {
  const auto ranks = static_cast<std::size_t>(size);
  if (whole.count() % ranks != 0) {
    invalid(op, std::string(role) + " has " + std::to_string(whole.count()) +
                    " elements, not a multiple of the communicator size " + std::to_string(size));
  }
  const std::size_t block = whole.count() / ranks;
  return block_of(whole, block * static_cast<std::size_t>(rank), block, op, role);
}

// The block of rank `rank` when rank r holds counts[r] elements.
Buffer counts_block(const Buffer& whole, const std::vector<std::size_t>& counts, int rank, int size,
                    std::string_view op, std::string_view role) {
  if (counts.size() != static_cast<std::size_t>(size)) {
    invalid(op, "counts has " + std::to_string(counts.size()) + " entries, expected " +
                    std::to_string(size) + " (one per rank)");
  }
  const auto me = static_cast<std::size_t>(rank);
  std::size_t offset = 0;
  for (std::size_t r = 0; r < me; ++r) {
    if (counts[r] > whole.count() - offset) {  // also keeps the sum from overflowing
      invalid(op, std::string(role) + " has " + std::to_string(whole.count()) +
                      " elements, fewer than counts[0.." + std::to_string(r) + "] add up to");
    }
    offset += counts[r];
  }
  return block_of(whole, offset, counts[me], op, role);
}

template <bool Async, class Blocking, class Start>
py::object run(py::object result, std::vector<py::object> keep, Blocking&& blocking,
               Start&& start) {
  if constexpr (Async) {
    Work work;
    {
      py::gil_scoped_release release;
      work = start();
    }
    return py::cast(WorkHandle{std::move(work), std::move(keep), std::move(result)});
  } else {
    {
      py::gil_scoped_release release;
      blocking();
    }
    drain_deferred_releases();
    return result;
  }
}

constexpr const char* name(bool async, const char* blocking, const char* asynchronous) {
  return async ? asynchronous : blocking;
}

template <bool Async>
py::object allreduce(CommunicatorHandle& self, py::object tensor, py::handle op, py::object out,
                     py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "allreduce", "allreduce_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  const Buffer output = out.is_none() ? in : tensor_arg(out, what, "out", options.stream);
  const ReduceOp reduce_op = parse_reduce_op(op, what);
  Communicator& comm = *self.comm;
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out},
      [&] { comm.allreduce(in, output, reduce_op, options); },
      [&] { return comm.allreduce_async(in, output, reduce_op, options); });
}

template <bool Async>
py::object broadcast(CommunicatorHandle& self, py::object tensor, int root, py::object out,
                     py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "broadcast", "broadcast_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  if (tensor.is_none() && out.is_none()) invalid(what, "needs a tensor (in place) or out");
  Communicator& comm = *self.comm;
  // Other roots are refused by the communicator, naming the communicator's size.
  if (tensor.is_none() && root == comm.rank())
    invalid(what, "tensor is required on the root (rank " + std::to_string(root) + ")");
  // With out given, tensor is read on the root only: elsewhere it is not imported (its memory,
  // dtype or writability are no concern of a rank that never reads it).
  const bool reads_tensor = out.is_none() || root == comm.rank();
  const Buffer in =
      reads_tensor ? optional_tensor_arg(tensor, what, "tensor", options.stream) : Buffer{};
  const Buffer output = out.is_none() ? in : tensor_arg(out, what, "out", options.stream);
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out},
      [&] { comm.broadcast(in, output, root, options); },
      [&] { return comm.broadcast_async(in, output, root, options); });
}

template <bool Async>
py::object reduce(CommunicatorHandle& self, py::object tensor, int root, py::handle op,
                  py::object out, py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "reduce", "reduce_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  // out is the root's result: another rank's out is returned untouched and never imported.
  const Buffer output = out.is_none()         ? in
                        : root == comm.rank() ? tensor_arg(out, what, "out", options.stream)
                                              : Buffer{};
  const ReduceOp reduce_op = parse_reduce_op(op, what);
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out},
      [&] { comm.reduce(in, output, reduce_op, root, options); },
      [&] { return comm.reduce_async(in, output, reduce_op, root, options); });
}

template <bool Async>
py::object allgather(CommunicatorHandle& self, py::object tensor, py::object out,
                     py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "allgather", "allgather_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  const Buffer output = tensor_arg(out, what, "out", options.stream);
  const Buffer in = tensor.is_none() ? uniform_block(output, comm.rank(), comm.size(), what, "out")
                                     : tensor_arg(tensor, what, "tensor", options.stream);
  return run<Async>(
      out, {tensor, out}, [&] { comm.allgather(in, output, options); },
      [&] { return comm.allgather_async(in, output, options); });
}

template <bool Async>
py::object allgatherv(CommunicatorHandle& self, py::object tensor, py::object out,
                      py::handle counts, py::handle timeout, py::handle algorithm,
                      py::handle stream) {
  const char* const what = name(Async, "allgatherv", "allgatherv_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  const std::vector<std::size_t> sizes = parse_counts(counts, std::string(what) + ": counts");
  const Buffer output = tensor_arg(out, what, "out", options.stream);
  const Buffer in = tensor.is_none()
                        ? counts_block(output, sizes, comm.rank(), comm.size(), what, "out")
                        : tensor_arg(tensor, what, "tensor", options.stream);
  return run<Async>(
      out, {tensor, out}, [&] { comm.allgatherv(in, output, sizes, options); },
      [&] { return comm.allgatherv_async(in, output, sizes, options); });
}

// gather and gatherv: out is needed on the root only; tensor=None on the root means in place.
template <bool Async>
py::object gather(CommunicatorHandle& self, py::object tensor, py::object out, int root,
                  py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "gather", "gather_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  check_root(comm, root, what);
  const bool is_root = comm.rank() == root;
  if (is_root && out.is_none())
    invalid(what, "out is required on the root (rank " + std::to_string(root) + ")");
  const Buffer output = is_root ? tensor_arg(out, what, "out", options.stream) : Buffer{};
  const Buffer in = tensor.is_none() && is_root
                        ? uniform_block(output, comm.rank(), comm.size(), what, "out")
                        : tensor_arg(tensor, what, "tensor", options.stream);
  return run<Async>(
      out, {tensor, out}, [&] { comm.gather(in, output, root, options); },
      [&] { return comm.gather_async(in, output, root, options); });
}

template <bool Async>
py::object gatherv(CommunicatorHandle& self, py::object tensor, py::handle counts, py::object out,
                   int root, py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "gatherv", "gatherv_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  check_root(comm, root, what);
  const std::vector<std::size_t> sizes = parse_counts(counts, std::string(what) + ": counts");
  const bool is_root = comm.rank() == root;
  if (is_root && out.is_none())
    invalid(what, "out is required on the root (rank " + std::to_string(root) + ")");
  const Buffer output = is_root ? tensor_arg(out, what, "out", options.stream) : Buffer{};
  const Buffer in = tensor.is_none() && is_root
                        ? counts_block(output, sizes, comm.rank(), comm.size(), what, "out")
                        : tensor_arg(tensor, what, "tensor", options.stream);
  return run<Async>(
      out, {tensor, out}, [&] { comm.gatherv(in, output, sizes, root, options); },
      [&] { return comm.gatherv_async(in, output, sizes, root, options); });
}

// scatter and scatterv: tensor is read on the root only (None elsewhere is fine); out=None on
// the root means in place (the root keeps its block of tensor).
template <bool Async>
py::object scatter(CommunicatorHandle& self, py::object tensor, py::object out, int root,
                   py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "scatter", "scatter_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  check_root(comm, root, what);
  const bool is_root = comm.rank() == root;
  if (is_root && tensor.is_none())
    invalid(what, "tensor is required on the root (rank " + std::to_string(root) + ")");
  if (!is_root && out.is_none()) invalid(what, "out is required on every rank but the root");
  const Buffer in = is_root ? tensor_arg(tensor, what, "tensor", options.stream) : Buffer{};
  const Buffer output = out.is_none() ? uniform_block(in, comm.rank(), comm.size(), what, "tensor")
                                      : tensor_arg(out, what, "out", options.stream);
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out}, [&] { comm.scatter(in, output, root, options); },
      [&] { return comm.scatter_async(in, output, root, options); });
}

template <bool Async>
py::object scatterv(CommunicatorHandle& self, py::object tensor, py::handle counts, py::object out,
                    int root, py::handle timeout, py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "scatterv", "scatterv_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  check_root(comm, root, what);
  const std::vector<std::size_t> sizes = parse_counts(counts, std::string(what) + ": counts");
  const bool is_root = comm.rank() == root;
  if (is_root && tensor.is_none())
    invalid(what, "tensor is required on the root (rank " + std::to_string(root) + ")");
  if (!is_root && out.is_none()) invalid(what, "out is required on every rank but the root");
  const Buffer in = is_root ? tensor_arg(tensor, what, "tensor", options.stream) : Buffer{};
  const Buffer output = out.is_none()
                            ? counts_block(in, sizes, comm.rank(), comm.size(), what, "tensor")
                            : tensor_arg(out, what, "out", options.stream);
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out},
      [&] { comm.scatterv(in, output, sizes, root, options); },
      [&] { return comm.scatterv_async(in, output, sizes, root, options); });
}

template <bool Async>
py::object reduce_scatter(CommunicatorHandle& self, py::object tensor, py::handle op,
                          py::object out, py::handle timeout, py::handle algorithm,
                          py::handle stream) {
  const char* const what = name(Async, "reduce_scatter", "reduce_scatter_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  const Buffer output = out.is_none() ? uniform_block(in, comm.rank(), comm.size(), what, "tensor")
                                      : tensor_arg(out, what, "out", options.stream);
  const ReduceOp reduce_op = parse_reduce_op(op, what);
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out},
      [&] { comm.reduce_scatter(in, output, reduce_op, options); },
      [&] { return comm.reduce_scatter_async(in, output, reduce_op, options); });
}

template <bool Async>
py::object alltoall(CommunicatorHandle& self, py::object tensor, py::object out, py::handle timeout,
                    py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "alltoall", "alltoall_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  const Buffer output = out.is_none() ? in : tensor_arg(out, what, "out", options.stream);
  Communicator& comm = *self.comm;
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out}, [&] { comm.alltoall(in, output, options); },
      [&] { return comm.alltoall_async(in, output, options); });
}

template <bool Async>
py::object alltoallv(CommunicatorHandle& self, py::object tensor, py::handle send_counts,
                     py::handle recv_counts, py::object out, py::handle timeout,
                     py::handle algorithm, py::handle stream) {
  const char* const what = name(Async, "alltoallv", "alltoallv_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  const std::vector<std::size_t> sends =
      parse_counts(send_counts, std::string(what) + ": send_counts");
  const std::vector<std::size_t> receives =
      parse_counts(recv_counts, std::string(what) + ": recv_counts");
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  const Buffer output = out.is_none() ? in : tensor_arg(out, what, "out", options.stream);
  Communicator& comm = *self.comm;
  return run<Async>(
      out.is_none() ? tensor : out, {tensor, out},
      [&] { comm.alltoallv(in, sends, output, receives, options); },
      [&] { return comm.alltoallv_async(in, sends, output, receives, options); });
}

template <bool Async>
py::object barrier(CommunicatorHandle& self, py::handle timeout, py::handle algorithm,
                   py::handle stream) {
  const char* const what = name(Async, "barrier", "barrier_async");
  const CollectiveOptions options = parse_collective_options(timeout, algorithm, stream, what);
  Communicator& comm = *self.comm;
  return run<Async>(
      py::none(), {}, [&] { comm.barrier(options); }, [&] { return comm.barrier_async(options); });
}

template <bool Async>
py::object send(CommunicatorHandle& self, py::object tensor, int peer, int tag, py::handle timeout,
                py::handle stream) {
  const char* const what = name(Async, "send", "send_async");
  const CollectiveOptions options = parse_collective_options(timeout, py::none(), stream, what);
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  Communicator& comm = *self.comm;
  return run<Async>(
      py::none(), {tensor}, [&] { comm.send(in, peer, tag, options); },
      [&] { return comm.send_async(in, peer, tag, options); });
}

template <bool Async>
py::object recv(CommunicatorHandle& self, py::object tensor, int peer, int tag, py::handle timeout,
                py::handle stream) {
  const char* const what = name(Async, "recv", "recv_async");
  const CollectiveOptions options = parse_collective_options(timeout, py::none(), stream, what);
  const Buffer out = tensor_arg(tensor, what, "tensor", options.stream);
  Communicator& comm = *self.comm;
  return run<Async>(
      tensor, {tensor}, [&] { comm.recv(out, peer, tag, options); },
      [&] { return comm.recv_async(out, peer, tag, options); });
}

py::object sendrecv(CommunicatorHandle& self, py::object tensor, int dest, py::object out,
                    int source, int tag, py::handle timeout, py::handle stream) {
  const char* const what = "sendrecv";
  const CollectiveOptions options = parse_collective_options(timeout, py::none(), stream, what);
  const Buffer in = tensor_arg(tensor, what, "tensor", options.stream);
  const Buffer received = tensor_arg(out, what, "out", options.stream);
  Communicator& comm = *self.comm;
  return run<false>(
      out, {tensor, out}, [&] { comm.sendrecv(in, dest, received, source, tag, options); },
      [] { return Work(); });
}

// Registers op and op_async with the same arguments and docstring (pybind11 copies docstrings,
// so the async one may be a temporary).
template <class Blocking, class Async, class... Extra>
void def_both(py::class_<CommunicatorHandle>& c, const char* op, const char* async_op,
              Blocking blocking, Async async, const char* doc, const Extra&... extra) {
  c.def(op, blocking, extra..., doc);
  c.def(async_op, async, extra...,
        (std::string(doc) + "\nThe _async form returns a cohort.Work whose wait() returns the "
                            "output.")
            .c_str());
}

}  // namespace

void bind_collectives(py::class_<CommunicatorHandle>& c) {
  const auto none = py::none();
  def_both(c, "allreduce", "allreduce_async", &allreduce<false>, &allreduce<true>, R"doc(
allreduce(tensor, op="sum", *, out=None): out (default: tensor) = op over every rank's tensor.)doc",
           "tensor"_a, "op"_a = "sum", py::kw_only(), "out"_a = none, "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "broadcast", "broadcast_async", &broadcast<false>, &broadcast<true>, R"doc(
broadcast(tensor, root=0, *, out=None): out (default: tensor) on every rank = root's tensor.
With out given, tensor is read on the root only and may be None elsewhere.)doc",
           "tensor"_a, "root"_a = 0, py::kw_only(), "out"_a = none, "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "reduce", "reduce_async", &reduce<false>, &reduce<true>, R"doc(
reduce(tensor, root=0, op="sum", *, out=None): on the root, out (default: tensor) = op over every
rank's tensor. Other ranks' out is not written.)doc",
           "tensor"_a, "root"_a = 0, "op"_a = "sum", py::kw_only(), "out"_a = none,
           "timeout"_a = none, "algorithm"_a = none, "stream"_a = none);
  def_both(c, "allgather", "allgather_async", &allgather<false>, &allgather<true>, R"doc(
allgather(tensor, out): out = every rank's tensor concatenated in rank order (size x its count).
tensor=None: in place, this rank's block of out already holds its contribution.)doc",
           "tensor"_a, "out"_a, py::kw_only(), "timeout"_a = none, "algorithm"_a = none,
           "stream"_a = none);
  def_both(c, "allgatherv", "allgatherv_async", &allgatherv<false>, &allgatherv<true>, R"doc(
allgatherv(tensor, out, counts): rank r contributes counts[r] elements; out is their
concatenation. tensor=None: in place (this rank's block of out).)doc",
           "tensor"_a, "out"_a, "counts"_a, py::kw_only(), "timeout"_a = none, "algorithm"_a = none,
           "stream"_a = none);
  def_both(c, "gather", "gather_async", &gather<false>, &gather<true>, R"doc(
gather(tensor, out=None, root=0): on the root, out = every rank's tensor concatenated in rank
order; out is needed on the root only. tensor=None on the root: in place (its block of out).)doc",
           "tensor"_a, "out"_a = none, "root"_a = 0, py::kw_only(), "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "gatherv", "gatherv_async", &gatherv<false>, &gatherv<true>, R"doc(
gatherv(tensor, counts, out=None, root=0): gather where rank r contributes counts[r] elements.)doc",
           "tensor"_a, "counts"_a, "out"_a = none, "root"_a = 0, py::kw_only(), "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "scatter", "scatter_async", &scatter<false>, &scatter<true>, R"doc(
scatter(tensor, out=None, root=0): out on rank r = block r of the root's tensor (size x out's
count). tensor is read on the root only (None elsewhere); out=None on the root: in place.)doc",
           "tensor"_a, "out"_a = none, "root"_a = 0, py::kw_only(), "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "scatterv", "scatterv_async", &scatterv<false>, &scatterv<true>, R"doc(
scatterv(tensor, counts, out=None, root=0): scatter where rank r receives counts[r] elements.)doc",
           "tensor"_a, "counts"_a, "out"_a = none, "root"_a = 0, py::kw_only(), "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "reduce_scatter", "reduce_scatter_async", &reduce_scatter<false>,
           &reduce_scatter<true>, R"doc(
reduce_scatter(tensor, op="sum", *, out=None): out = block `rank` of (op over every rank's
tensor), tensor having size x out's count. out=None: in place, into this rank's block of
tensor.)doc",
           "tensor"_a, "op"_a = "sum", py::kw_only(), "out"_a = none, "timeout"_a = none,
           "algorithm"_a = none, "stream"_a = none);
  def_both(c, "alltoall", "alltoall_async", &alltoall<false>, &alltoall<true>, R"doc(
alltoall(tensor, *, out=None): block j of tensor goes to rank j and arrives as block `rank` of its
out (default: tensor, in place). The count must be divisible by the size.)doc",
           "tensor"_a, py::kw_only(), "out"_a = none, "timeout"_a = none, "algorithm"_a = none,
           "stream"_a = none);
  def_both(c, "alltoallv", "alltoallv_async", &alltoallv<false>, &alltoallv<true>, R"doc(
alltoallv(tensor, send_counts, recv_counts, *, out=None): send_counts[j] elements go to rank j,
recv_counts[j] arrive from rank j (packed in rank order) into out (default: tensor).)doc",
           "tensor"_a, "send_counts"_a, "recv_counts"_a, py::kw_only(), "out"_a = none,
           "timeout"_a = none, "algorithm"_a = none, "stream"_a = none);
  def_both(c, "barrier", "barrier_async", &barrier<false>, &barrier<true>, R"doc(
barrier(): returns once every rank has entered it.)doc",
           py::kw_only(), "timeout"_a = none, "algorithm"_a = none, "stream"_a = none);
  def_both(c, "send", "send_async", &send<false>, &send<true>, R"doc(
send(tensor, peer, tag=0): sends tensor to rank peer. Messages between a pair with the same tag
arrive in send order; tag >= 0.)doc",
           "tensor"_a, "peer"_a, "tag"_a = 0, py::kw_only(), "timeout"_a = none, "stream"_a = none);
  def_both(c, "recv", "recv_async", &recv<false>, &recv<true>, R"doc(
recv(tensor, peer, tag=0): receives from rank peer into tensor and returns it.)doc",
           "tensor"_a, "peer"_a, "tag"_a = 0, py::kw_only(), "timeout"_a = none, "stream"_a = none);
  c.def("sendrecv", &sendrecv, R"doc(
sendrecv(tensor, dest, out, source, tag=0): sends tensor to rank dest and receives from rank source
into out, both posted at once (MPI_Sendrecv), and returns out once both ended. tensor and out must
not overlap. For an asynchronous exchange use recv_async and send_async.)doc",
        "tensor"_a, "dest"_a, "out"_a, "source"_a, "tag"_a = 0, py::kw_only(), "timeout"_a = none,
        "stream"_a = none);
}

}  // namespace cohort::python
