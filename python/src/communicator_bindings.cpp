// cohort.init(), cohort.Communicator (everything but the collectives), ReduceOp and Algorithm.

#include "arguments.hpp"
#include "bindings.hpp"
#include "gil.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/communicator.hpp>
#include <cohort/environment.hpp>

#include <cctype>
#include <optional>
#include <string>

namespace cohort::python {
namespace {

using namespace pybind11::literals;

std::string upper(std::string_view name) {
  std::string result(name);
  for (char& c : result) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return result;
}

// enum_::value keeps the name pointer, so the upper-cased names live as long as the module.
const char* keep_name(std::string name) {
  return (new std::string(std::move(name)))->c_str();
}

std::unique_ptr<CommunicatorHandle> handle_of(std::shared_ptr<Communicator> comm) {
  return std::make_unique<CommunicatorHandle>(std::move(comm));
}

std::unique_ptr<CommunicatorHandle> init(
    std::optional<int> rank, std::optional<int> world_size, std::optional<int> local_rank,
    std::optional<int> local_world_size, std::optional<int> node_rank, std::optional<int> num_nodes,
    std::optional<std::string> store_addr, std::optional<std::uint16_t> store_port,
    std::optional<std::string> token, std::optional<std::string> job_id,
    std::optional<bool> host_store, py::handle timeout) {
  InitOptions options;
  EnvironmentConfig& env = options.environment;
  env.rank = rank;
  env.world_size = world_size;
  env.local_rank = local_rank;
  env.local_world_size = local_world_size;
  env.node_rank = node_rank;
  env.num_nodes = num_nodes;
  env.store_addr = std::move(store_addr);
  env.store_port = store_port;
  env.token = std::move(token);
  env.job_id = std::move(job_id);
  env.host_store = host_store;
  options.communicator.timeout = parse_timeout(timeout, "init");
  std::shared_ptr<Communicator> comm;
  {
    py::gil_scoped_release release;  // waits for the store and every other rank
    comm = cohort::init(options);
  }
  return handle_of(std::move(comm));
}

}  // namespace

CommunicatorHandle::~CommunicatorHandle() {
  without_gil([this] { comm.reset(); });
}

void bind_communicator(py::module_& m) {
  py::enum_<ReduceOp> ops(m, "ReduceOp", "Reduction operator; every op also takes its name.");
  for (ReduceOp op : kAllReduceOps) ops.value(keep_name(upper(reduce_op_name(op))), op);

  py::enum_<Algorithm> algorithms(m, "Algorithm",
                                  "Forces a collective's algorithm (it may decline, and selection "
                                  "falls through); every op also takes its name.");
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const auto algorithm = static_cast<Algorithm>(a);
    algorithms.value(keep_name(upper(algorithm_name(algorithm))), algorithm);
  }

  m.def("init", &init, py::kw_only(), "rank"_a = py::none(), "world_size"_a = py::none(),
        "local_rank"_a = py::none(), "local_world_size"_a = py::none(), "node_rank"_a = py::none(),
        "num_nodes"_a = py::none(), "store_addr"_a = py::none(), "store_port"_a = py::none(),
        "token"_a = py::none(), "job_id"_a = py::none(), "host_store"_a = py::none(),
        "timeout"_a = py::none(), R"doc(
The world communicator: rank and size from cohort-run, torchrun, mpirun, srun (or a world of
one without any launcher), the store connected, the transport wired. Collective over the job.
Keyword arguments override what the environment says; timeout is the default op deadline in
seconds, and the deadline for all of connecting (unset: COHORT_TIMEOUT, else 600). Raises cohort.InvalidArgumentError naming a missing or
inconsistent variable. The GIL is released while it waits for the other ranks.)doc");

  py::class_<CommunicatorHandle> communicator(m, "Communicator", R"doc(
A group of ranks running collectives together, in the same order on every rank.

Tensors are any object with __dlpack__ (numpy, torch, JAX, CuPy, cohort.Buffer) or the buffer
protocol, used in place without copies; they must be contiguous. Host tensors run on the CPU
backend, CUDA tensors on NCCL (never both in one op). Ops are in place unless out= is given, and
return their output tensor. Each has an *_async form returning a cohort.Work. Every op takes
timeout= (seconds) and stream= (for CUDA tensors: a CUDA stream, as an int or a torch/CuPy
stream, to queue the op on; the tensors' producer is asked to order its writes before it through
__dlpack__(stream=...)). Without stream=, the op is ordered after the device's legacy default
stream. Host ops ignore stream=. Every op validates its arguments before any byte moves
(cohort.InvalidArgumentError) and releases the GIL while it runs. A timeout or a dead peer fails
the op and poisons the communicator: later ops fail fast with the cause.
Thread safety: ops may be called from several threads. Collectives run in call order; sends and
receives on host tensors keep their order among themselves and do not wait for the collectives
called before them (they are posted from inside those collectives' waits, as MPI progresses).)doc");
  communicator
      .def_property_readonly("rank", [](const CommunicatorHandle& h) { return h.comm->rank(); })
      .def_property_readonly("size", [](const CommunicatorHandle& h) { return h.comm->size(); })
      .def_property_readonly(
          "id", [](const CommunicatorHandle& h) { return h.comm->id(); },
          "Unique id of this communicator within the job (0 for the world).")
      .def_property_readonly(
          "default_timeout",
          [](const CommunicatorHandle& h) {
            return static_cast<double>(h.comm->default_timeout().count()) / 1000.0;
          },
          "Default op deadline in seconds.")
      .def(
          "split",
          [](CommunicatorHandle& h, std::optional<int> color,
             std::optional<int> key) -> std::unique_ptr<CommunicatorHandle> {
            std::shared_ptr<Communicator> child;
            {
              py::gil_scoped_release release;
              child = h.comm->split(color.value_or(Communicator::kNoColor),
                                    key.value_or(h.comm->rank()));
            }
            if (!child) return nullptr;
            return handle_of(std::move(child));
          },
          "color"_a, "key"_a = py::none(), R"doc(
Collective: ranks passing the same color form a new communicator, ordered by (key, old rank);
key defaults to this rank. Ranks passing color=None join no group and get None.)doc")
      .def(
          "dup",
          [](CommunicatorHandle& h) {
            std::shared_ptr<Communicator> copy;
            {
              py::gil_scoped_release release;
              copy = h.comm->dup();
            }
            return handle_of(std::move(copy));
          },
          "Collective: a new communicator over the same ranks, with its own tag space.")
      .def(
          "abort",
          [](CommunicatorHandle& h, const std::string& reason) {
            py::gil_scoped_release release;
            h.comm->abort(reason);
          },
          "reason"_a = "abort() was called", R"doc(
Fails this communicator at once on this rank: an op running on another thread fails within about
a millisecond, and every queued and later op raises cohort.InvalidUsageError naming `reason`.)doc")
      .def_property_readonly(
          "is_poisoned", [](const CommunicatorHandle& h) { return h.comm->is_poisoned(); },
          "True once a failure (timeout, dead peer, abort) made the communicator unusable.")
      .def_property_readonly(
          "error",
          [](const CommunicatorHandle& h) -> py::object {
            const std::optional<Error> cause = h.comm->error();
            if (!cause) return py::none();
            return py::str(cause->message());
          },
          "The message of the failure that made the communicator unusable, or None.")
      .def("__repr__", [](const CommunicatorHandle& h) {
        return "<cohort.Communicator id " + std::to_string(h.comm->id()) + ", rank " +
               std::to_string(h.comm->rank()) + " of " + std::to_string(h.comm->size()) + ">";
      });
  bind_collectives(communicator);
}

}  // namespace cohort::python
