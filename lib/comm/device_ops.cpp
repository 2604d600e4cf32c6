#include "comm/device_ops.hpp"

#include <cohort/error.hpp>

#include "comm/validation.hpp"
#include "comm/work_state.hpp"

#include <fmt/format.h>

#include <chrono>

namespace cohort::comm {

Work run_device_op(Executor& executor, gpu::DeviceBackend& gpu, OpInfo op,
                   const gpu::DeviceBackend::Prepared& prepared, std::optional<Stream> stream,
                   bool async, const std::function<void(const gpu::Launch&)>& body,
                   std::vector<std::shared_ptr<void>> keepalive,
                   const std::optional<DevicePeers>& peers) {
  // A forced host algorithm does not apply here (NCCL runs), so errors do not name it.
  op.forced = Algorithm::Auto;
  op.fingerprint.reset();  // compared already, if at all (Impl::run_on_device)
  const std::uint32_t seq = executor.begin_external(op);
  ErrorContext context = executor.context_of(op, seq);
  if (peers) {
    if (!peers->op.empty()) context.op = peers->op;
    context.to_rank = peers->to_rank;
    context.from_rank = peers->from_rank;
    context.tag = peers->tag;
  }
  std::shared_ptr<gpu::DeviceCompletion> completion;
  try {
    completion = gpu.launch(
        prepared, stream ? std::optional(stream->handle) : std::nullopt, op.timeout, context, body,
        [&executor, op, seq](const Error* failure) { executor.end_external(op, seq, failure); },
        std::move(keepalive));
  } catch (const Error& e) {
    const Error failure = e.with_context(context);
    executor.end_external(op, seq, &failure);
    throw failure;
  }
  auto state =
      std::make_shared<detail::WorkState>(std::make_shared<const ErrorContext>(std::move(context)));
  state->device = std::move(completion);
  Work work(std::move(state));
  if (async) return work;
  work.wait();
  return {};
}

void check_distinct_on_device(std::string_view op, const algorithms::AlltoallArgs& args) {
  const std::size_t element = dtype_size(args.dtype);
  if (!overlaps(args.in, args.send_total * element, args.out, args.recv_total * element)) return;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{}: in-place on CUDA buffers is not supported (NCCL has no in-place "
                          "alltoall); pass distinct input and output buffers",
                          op));
}

}  // namespace cohort::comm
