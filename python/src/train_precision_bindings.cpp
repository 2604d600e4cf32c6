// cohort.train.GradScaler: torch.amp.GradScaler's dynamic loss scaling, with the skip decision
// agreed by every rank (include/cohort/train/precision.hpp).

#include "arguments.hpp"
#include "bindings.hpp"
#include "gil.hpp"
#include "refusing_join.hpp"
#include "tensor_import.hpp"

#include <cohort/buffer.hpp>
#include <cohort/error.hpp>
#include <cohort/train/precision.hpp>

#include <string_view>
#include <vector>

namespace cohort::python {
namespace {

/// This rank's gradients; when they cannot be imported, `join` gets an int32 gradient, which every
/// GradScaler method refuses inside its found-inf exchange (see refusing_join.hpp).
template <class Join>
std::vector<Buffer> gradients_or_join(py::handle grads, std::string_view what, Join&& join) {
  return converted_or_joined([&] { return import_tensors(grads, what, NoneItems::AsEmpty); },
                             [&] { join(std::vector<Buffer>{Buffer::allocate(1, DType::Int32)}); });
}

using namespace pybind11::literals;
using train::GradScaler;
using GradScalerHolder = std::unique_ptr<GradScaler, DeleteWithoutGil>;

GradScalerHolder make_scaler(CommunicatorHandle& comm, float init_scale, float growth_factor,
                             float backoff_factor, std::int64_t growth_interval,
                             std::int64_t hysteresis, bool enabled, py::handle gradient_dtype,
                             py::handle timeout) {
  train::GradScalerOptions options;
  options.init_scale = init_scale;
  options.growth_factor = growth_factor;
  options.backoff_factor = backoff_factor;
  options.growth_interval = growth_interval;
  options.hysteresis = hysteresis;
  options.enabled = enabled;
  if (!gradient_dtype.is_none())
    options.gradient_dtype = parse_dtype(gradient_dtype, "GradScaler: gradient_dtype");
  options.timeout = parse_timeout(timeout, "GradScaler");
  return GradScalerHolder(new GradScaler(comm.comm, options));
}

py::dict state_of(const GradScaler& scaler) {
  const train::GradScalerState state = scaler.state();
  return py::dict("scale"_a = state.scale, "growth_tracker"_a = state.growth_tracker,
                  "hysteresis_tracker"_a = state.hysteresis_tracker);
}

// One entry of a state dict, refused naming the key when missing or of another type.
template <class T>
T state_entry(const py::dict& state, const char* key) {
  if (!state.contains(key))
    invalid("GradScaler.load_state", std::string("the state has no '") + key + "'");
  try {
    return state[key].cast<T>();
  } catch (const py::cast_error&) {
    invalid("GradScaler.load_state", std::string("'") + key + "' is " +
                                         py::repr(state[key]).cast<std::string>() +
                                         ", not a number of the expected kind");
  }
}

void load_state(GradScaler& scaler, const py::dict& state) {
  train::GradScalerState loaded;
  loaded.scale = state_entry<float>(state, "scale");
  loaded.growth_tracker = state_entry<std::int64_t>(state, "growth_tracker");
  loaded.hysteresis_tracker = state_entry<std::int64_t>(state, "hysteresis_tracker");
  scaler.load_state(loaded);
}

}  // namespace

void bind_train_precision(py::module_& train) {
  py::class_<GradScaler, GradScalerHolder>(train, "GradScaler", R"doc(
Dynamic loss scaling (torch.amp.GradScaler) whose found-inf decision every rank of the
communicator agrees on (one 4-byte allreduce per unscale), so all ranks skip or step together.

    scaler = cohort.train.GradScaler(comm)
    (loss * scaler.scale).backward()
    scaler.unscale(grads)                  # grads: the gradient tensors, e.g. [p.grad for p ...]
    if scaler.step(grads): optimizer.step()
    scaler.update()

Defaults are torch's; hysteresis > 1 tolerates that many overflows before backing off
(Megatron). gradient_dtype bfloat16 or an fp8 type disables scaling, as for torch's bf16.
unscale/step are collective (the GIL is released); one thread at a time.)doc")
      .def(py::init(&make_scaler), "comm"_a, py::kw_only(), "init_scale"_a = 65536.0f,
           "growth_factor"_a = 2.0f, "backoff_factor"_a = 0.5f, "growth_interval"_a = 2000,
           "hysteresis"_a = 1, "enabled"_a = true, "gradient_dtype"_a = py::none(),
           "timeout"_a = py::none())
      .def_property_readonly("enabled", &GradScaler::enabled)
      .def_property_readonly("scale", &GradScaler::scale,
                             "What to multiply the loss by before backward (1 when disabled).")
      .def(
          "unscale",
          [](GradScaler& scaler, py::handle grads, int group) {
            const auto buffers =
                gradients_or_join(grads, "GradScaler.unscale: grads",
                                  [&](const auto& refused) { scaler.unscale(refused, group); });
            py::gil_scoped_release release;
            scaler.unscale(buffers, group);
          },
          "grads"_a, "group"_a = 0,
          "Divides every gradient by the scale in place and agrees found-inf with every rank. "
          "None entries (parameters without a gradient this step) are skipped, as torch does.")
      .def(
          "step",
          [](GradScaler& scaler, py::handle grads, int group) {
            const auto buffers =
                gradients_or_join(grads, "GradScaler.step: grads",
                                  [&](const auto& refused) { scaler.step(refused, group); });
            py::gil_scoped_release release;
            return scaler.step(buffers, group);
          },
          "grads"_a, "group"_a = 0,
          "Whether the optimizer of `group` should step (unscales first if not done yet).")
      .def("found_inf", &GradScaler::found_inf, "group"_a = 0)
      .def_property_readonly("step_was_skipped", &GradScaler::step_was_skipped)
      .def(
          "update",
          [](GradScaler& scaler, std::optional<float> new_scale) {
            if (new_scale) {
              scaler.update(*new_scale);
            } else {
              scaler.update();
            }
          },
          "new_scale"_a = py::none(),
          "Ends the step: backs off after an inf, grows after clean steps.")
      .def("state", &state_of,
           "{'scale', 'growth_tracker', 'hysteresis_tracker'}: what a checkpoint needs.")
      .def("load_state", &load_state, "state"_a);
}

}  // namespace cohort::python
