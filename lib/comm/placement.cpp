#include "comm/placement.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <optional>

namespace cohort::comm {
namespace {

bool on_device(const Device& device) {
  return device.type == DeviceType::CUDA || device.type == DeviceType::CUDAManaged;
}

/// A default-constructed Buffer (host, no data, nothing to move) passed where a rank's buffer is
/// not read says nothing about where the op runs. An empty CUDA tensor does: frameworks give it
/// no data pointer (torch.empty(0, device="cuda")), and a rank with nothing to send or receive
/// in a v-collective must still run it on NCCL with its peers.
bool votes(const Buffer& buffer) {
  return buffer.data() != nullptr || buffer.count() > 0 || on_device(buffer.device());
}

}  // namespace

Placement placement_of(const Buffer& buffer) {
  if (!on_device(buffer.device())) return {};
  return {buffer.device().id};
}

Placement placement_of(Collective kind, int rank, int root, const Buffer& in, const Buffer& out) {
  bool in_matters = true;
  bool out_matters = true;
  switch (algorithm_family(kind)) {
    case Collective::Broadcast:
    case Collective::Scatter: in_matters = rank == root; break;
    case Collective::Reduce:
    case Collective::Gather: out_matters = rank == root; break;
    default: break;
  }
  in_matters = in_matters && votes(in);
  out_matters = out_matters && votes(out);
  if (in_matters && out_matters) {
    const Device a = in.device();
    const Device b = out.device();
    const bool a_device = on_device(a);
    const bool b_device = on_device(b);
    if (a_device != b_device || (a_device && a.id != b.id))
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: the input is on {} but the output is on {}; an op's buffers "
                              "must all be host memory (cpu, cuda_host) or all on one CUDA device",
                              collective_name(kind), a.to_string(), b.to_string()));
  }
  if (in_matters) return placement_of(in);
  if (out_matters) return placement_of(out);
  return {};
}

Placement barrier_placement(const CollectiveOptions& options) {
  return options.stream ? Placement{Placement::kAnyDevice} : Placement{};
}

}  // namespace cohort::comm
