// cohort.train's data-parallel gradient helpers (include/cohort/train/gradients.hpp):
// GradientSynchronizer (DDP's reducer), broadcast_parameters, contiguous_gradients and the
// clipping functions.

#include "arguments.hpp"
#include "bindings.hpp"
#include "gil.hpp"
#include "refusing_join.hpp"
#include "tensor_import.hpp"

#include <cohort/error.hpp>
#include <cohort/train/gradients.hpp>

#include <optional>
#include <vector>

namespace cohort::python {
namespace {

/// torch's clip_grad_norm_ / clip_grad_value_ take one tensor or an iterable of them.
std::vector<Buffer> import_gradients(py::handle grads, std::string_view what) {
  if (py::isinstance<Buffer>(grads) || py::hasattr(grads, "__dlpack__"))
    return {import_tensor(grads, std::string(what))};
  return import_tensors(grads, what, NoneItems::AsEmpty);
}

using namespace pybind11::literals;
using train::GradientSynchronizer;
// Its destructor waits for allreduces still in flight: never with the GIL held.
using SynchronizerHolder = std::unique_ptr<GradientSynchronizer, DeleteWithoutGil>;

SynchronizerHolder make_synchronizer(CommunicatorHandle& comm, py::handle grads,
                                     py::handle bucket_cap_bytes, py::handle first_bucket_cap_bytes,
                                     py::handle communication_dtype, py::handle accumulation_steps,
                                     py::handle sync_each_batch, py::handle allow_unready,
                                     py::handle exact_final_window, py::handle timeout) {
  static constexpr std::string_view what = "GradientSynchronizer";
  train::GradientSyncOptions options;
  // Registration is compared across ranks: a rank whose arguments do not convert (a None
  // gradient, a misspelt dtype) joins that comparison as a refusing rank (accumulation_steps 0,
  // which the constructor refuses after the exchange), so the others fail at once instead of
  // waiting out their timeout.
  std::vector<Buffer> buffers = converted_or_joined(
      [&] {
        options.timeout = parse_timeout(timeout, what);
        options.bucket_cap_bytes =
            parse_integer<std::size_t>(bucket_cap_bytes, what, "bucket_cap_bytes");
        options.first_bucket_cap_bytes =
            parse_integer<std::size_t>(first_bucket_cap_bytes, what, "first_bucket_cap_bytes");
        options.accumulation_steps =
            parse_integer<int>(accumulation_steps, what, "accumulation_steps");
        options.sync_each_batch = parse_flag(sync_each_batch, what, "sync_each_batch");
        options.allow_unready = parse_flag(allow_unready, what, "allow_unready");
        options.exact_final_window = parse_flag(exact_final_window, what, "exact_final_window");
        if (!communication_dtype.is_none())
          options.communication_dtype =
              parse_dtype(communication_dtype, "GradientSynchronizer: communication_dtype");
        return import_tensors(grads, "GradientSynchronizer: grads");
      },
      [&] {
        train::GradientSyncOptions refusing;
        refusing.accumulation_steps = 0;
        refusing.timeout = options.timeout;  // unset when parsing it was what failed
        GradientSynchronizer(comm.comm, {}, refusing);
      });
  py::gil_scoped_release release;  // collective: the registrations are compared across ranks
  return SynchronizerHolder(new GradientSynchronizer(comm.comm, std::move(buffers), options));
}

// `with sync.no_sync():` — GradientSynchronizer::NoSyncWindow as a Python context manager.
struct NoSyncContext {
  py::object owner;  // the Python GradientSynchronizer, kept alive while the window is open
  GradientSynchronizer* synchronizer;
  std::optional<GradientSynchronizer::NoSyncWindow> window;
};

}  // namespace

void bind_train_gradients(py::module_& train) {
  py::class_<NoSyncContext>(train, "NoSyncWindow",
                            "Context manager of GradientSynchronizer.no_sync().")
      .def("__enter__",
           [](py::object self) {
             auto& context = self.cast<NoSyncContext&>();
             if (context.window)
               throw Error(ErrorCode::InvalidUsage, "no_sync(): this window is already open");
             context.window.emplace(*context.synchronizer);
             return self;
           })
      .def("__exit__", [](NoSyncContext& context, py::args) {
        context.window.reset();
        return false;
      });

  py::class_<GradientSynchronizer, SynchronizerHolder>(train, "GradientSynchronizer", R"doc(
Averages the gradient tensors of a data-parallel model across the ranks (torch DDP's reducer
plus Accelerate's gradient accumulation), bucketed and overlapped with backward:

    sync = cohort.train.GradientSynchronizer(comm, [p.grad for p in params])
    for batch in data:
        sync.begin_micro_step()
        loss.backward()                   # call sync.mark_ready(i) as grads[i] becomes final
        sync.finish()                     # every gradient now holds the average
        optimizer.step()

The gradients are registered once, by memory: keep the same tensors (zero them in place, do not
set them to None). Floating dtypes, contiguous, writable, host memory. Registration is
collective and compared across ranks. mark_ready may start allreduces and finish waits for
them, with the GIL released. mark_ready may be called from any thread, the rest from one.)doc")
      .def(py::init(&make_synchronizer), "comm"_a, "grads"_a, py::kw_only(),
           "bucket_cap_bytes"_a = std::size_t{25} << 20,
           "first_bucket_cap_bytes"_a = std::size_t{1} << 20, "communication_dtype"_a = py::none(),
           "accumulation_steps"_a = 1, "sync_each_batch"_a = false, "allow_unready"_a = false,
           "exact_final_window"_a = false, "timeout"_a = py::none())
      .def_property_readonly("buckets", &GradientSynchronizer::buckets,
                             "Gradient indices per bucket, in launch order.")
      .def("begin_micro_step", &GradientSynchronizer::begin_micro_step, "end_of_data"_a = false,
           "Starts a micro-step; returns whether the optimizer steps after it.")
      .def_property_readonly("communicates", &GradientSynchronizer::communicates)
      .def_property_readonly("loss_multiplier", &GradientSynchronizer::loss_multiplier,
                             "1 / accumulation_steps: what to multiply the loss by.")
      .def("mark_ready", &GradientSynchronizer::mark_ready, "index"_a,
           py::call_guard<py::gil_scoped_release>(),
           "Gradient `index` holds its final value for this micro-step.")
      .def("finish", &GradientSynchronizer::finish, py::call_guard<py::gil_scoped_release>(),
           "Starts the buckets not yet started, waits for all, writes the averages back.")
      .def(
          "no_sync",
          [](py::object self) {
            // Not movable (the window refers to its synchroniser): built in place.
            return std::unique_ptr<NoSyncContext>(
                new NoSyncContext{self, self.cast<GradientSynchronizer*>(), std::nullopt});
          },
          "A context manager in which micro-steps neither sync nor communicate (DDP's no_sync).");

  train.def(
      "broadcast_parameters",
      [](CommunicatorHandle& comm, py::handle params, py::handle root, py::handle chunk_bytes) {
        // Unreadable parameters join the layout agreement as a refusal (chunk_bytes 0; root 0
        // when the root itself was unreadable).
        static constexpr std::string_view what = "broadcast_parameters";
        int root_rank = 0;
        std::size_t chunk = 0;
        const auto buffers = converted_or_joined(
            [&] {
              root_rank = parse_integer<int>(root, what, "root");
              chunk = parse_integer<std::size_t>(chunk_bytes, what, "chunk_bytes");
              return import_tensors(params, "broadcast_parameters: params");
            },
            [&] { train::broadcast_parameters(*comm.comm, {}, root_rank, 0); });
        py::gil_scoped_release release;
        train::broadcast_parameters(*comm.comm, buffers, root_rank, chunk);
      },
      "comm"_a, "params"_a, "root"_a = 0, "chunk_bytes"_a = std::size_t{250} << 20,
      "Collective: every rank's params become the root's (DDP's initial weight sync). Pass "
      "detached tensors (p.detach()): torch refuses to export tensors that require grad.");

  train.def(
      "contiguous_gradients",
      [](const std::vector<std::size_t>& counts, py::handle dtype) {
        return train::contiguous_gradients(counts, parse_dtype(dtype, "contiguous_gradients"));
      },
      "counts"_a, "dtype"_a = "float32",
      "Buffers of counts[i] elements, consecutive in one zero-filled allocation, so every "
      "bucket of a GradientSynchronizer over them is reduced in place without staging copies. "
      "View them with torch.from_dlpack(b).view(shape) and assign them as p.grad.");

  train.def(
      "clip_grad_norm",
      [](py::handle grads, py::handle max_norm, py::handle norm_type, py::handle error_if_nonfinite,
         CommunicatorHandle* shard_group, py::handle timeout) {
        static constexpr std::string_view what = "clip_grad_norm";
        train::ClipOptions options;
        double max = 0.0;
        if (shard_group != nullptr) options.shard_group = shard_group->comm;
        // Unreadable arguments join the shard group's norm exchange as a refusal: a norm_type
        // of 0 is refused there.
        const auto buffers = converted_or_joined(
            [&] {
              options.timeout = parse_timeout(timeout, what);
              max = parse_real(max_norm, what, "max_norm");
              options.norm_type = parse_real(norm_type, what, "norm_type");
              options.error_if_nonfinite =
                  parse_flag(error_if_nonfinite, what, "error_if_nonfinite");
              return import_gradients(grads, "clip_grad_norm: grads");
            },
            [&] {
              if (!options.shard_group || options.shard_group->size() == 1) return;
              train::ClipOptions refusing;
              refusing.norm_type = 0.0;
              refusing.shard_group = options.shard_group;
              refusing.timeout = options.timeout;  // unset when parsing it was what failed
              train::clip_grad_norm({}, 0.0, refusing);
            });
        py::gil_scoped_release release;
        return train::clip_grad_norm(buffers, max, options);
      },
      "grads"_a, "max_norm"_a, "norm_type"_a = 2.0, py::kw_only(), "error_if_nonfinite"_a = false,
      "shard_group"_a = py::none(), "timeout"_a = py::none(),
      "torch.nn.utils.clip_grad_norm_: scales the gradients in place so their total norm is at "
      "most max_norm; returns the total norm before clipping. grads: a tensor or a sequence of "
      "them. norm_type may be float('inf'). "
      "Collective over shard_group when the gradients are shards of one model. None entries "
      "(parameters without a gradient this step) are skipped, as torch does.");

  train.def(
      "clip_grad_value",
      [](py::handle grads, double value) {
        const auto buffers = import_gradients(grads, "clip_grad_value: grads");
        py::gil_scoped_release release;
        train::clip_grad_value(buffers, value);
      },
      "grads"_a, "value"_a,
      "torch.nn.utils.clip_grad_value_: clamps to [-value, value] (a tensor or a sequence of "
      "them). None entries are skipped.");
}

}  // namespace cohort::python
