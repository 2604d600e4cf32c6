#include "gloo_peer.hpp"

#include "gloo_store_adapter.hpp"

#include <cohort/error.hpp>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#if COHORT_BENCH_GLOO_TCP
#include <gloo/transport/tcp/device.h>
#elif COHORT_BENCH_GLOO_UV
#include <gloo/transport/uv/device.h>
#else
#error "cohort-bench's Gloo peer needs Gloo's tcp or uv transport"
#endif

#include <cstdint>
#include <string>
#include <vector>

namespace cohort::bench {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);

template <class T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &gloo::sum<T>;
    case ReduceOp::Prod: return &gloo::product<T>;
    case ReduceOp::Min: return &gloo::min<T>;
    case ReduceOp::Max: return &gloo::max<T>;
    default: return nullptr;
  }
}

// Calls fn(T{}) with the C++ type Gloo uses for `dtype`; bfloat16, which Gloo cannot reduce,
// travels as uint16_t (data movement only).
template <class Fn>
void with_gloo_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Float16: return fn(gloo::float16{});
    case DType::BFloat16: return fn(std::uint16_t{});
    case DType::Int8: return fn(std::int8_t{});
    case DType::UInt8: return fn(std::uint8_t{});
    case DType::Int16: return fn(std::int16_t{});
    case DType::Int32: return fn(std::int32_t{});
    case DType::UInt32: return fn(std::uint32_t{});
    case DType::Int64: return fn(std::int64_t{});
    case DType::UInt64: return fn(std::uint64_t{});
    default:
      throw Error(ErrorCode::Unsupported, "no Gloo type for " + std::string(dtype_name(dtype)));
  }
}

std::shared_ptr<gloo::transport::Device> loopback_device() {
#if COHORT_BENCH_GLOO_TCP
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
#else
  gloo::transport::uv::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::uv::CreateDevice(attr);
#endif
}

class GlooImplementation final : public Implementation {
 public:
  GlooImplementation(std::shared_ptr<cohort::Store> store, int rank, int size,
                     std::chrono::milliseconds timeout) {
    GlooStoreAdapter adapter(std::move(store), timeout);
    auto device = loopback_device();
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    context->connectFullMesh(adapter, device);
    context_ = std::move(context);
  }

  std::string_view name() const noexcept override { return "gloo"; }

  std::optional<std::string> unsupported(const OpCall& call) const override {
    if (call.op == BenchOp::ReduceScatter) return "Gloo has no reduce_scatter in its options API";
    // Gloo divides by the element count of some buffers (allgather crashes with SIGFPE).
    if (op_moves_data(call.op) && (call.in_count == 0 || call.out_count == 0)) {
      return "Gloo cannot run an empty " + std::string(bench_op_name(call.op));
    }
    if (op_reduces(call.op)) {
      if (call.dtype == DType::BFloat16) return "Gloo cannot reduce bfloat16";
      if (call.redop != ReduceOp::Sum && call.redop != ReduceOp::Prod &&
          call.redop != ReduceOp::Min && call.redop != ReduceOp::Max) {
        return "Gloo has no " + std::string(reduce_op_name(call.redop));
      }
    }
    if (call.in_place && (call.op == BenchOp::Alltoall || call.op == BenchOp::Gather ||
                          call.op == BenchOp::Scatter)) {
      return "Gloo has no in-place " + std::string(bench_op_name(call.op));
    }
    if (call.op == BenchOp::Send && context_->size < 2) return "Gloo cannot send to itself";
    return std::nullopt;
  }

  void run(const OpCall& call) override {
    with_gloo_type(call.dtype, [&](auto zero) { run_typed<decltype(zero)>(call); });
  }

 private:
  template <class T>
  void run_typed(const OpCall& call) {
    auto* in = static_cast<T*>(call.in);
    auto* out = static_cast<T*>(call.out);
    const bool root = context_->rank == call.root;
    switch (call.op) {
      case BenchOp::Allreduce: {
        gloo::AllreduceOptions opts(context_);
        if (!call.in_place) opts.setInput(in, call.in_count);
        opts.setOutput(out, call.out_count);
        opts.setReduceFunction(reduce_fn<T>(call.redop));
        gloo::allreduce(opts);
        return;
      }
      case BenchOp::Broadcast: {
        gloo::BroadcastOptions opts(context_);
        if (root && !call.in_place) opts.setInput(in, call.in_count);
        opts.setOutput(out, call.out_count);
        opts.setRoot(call.root);
        gloo::broadcast(opts);
        return;
      }
      case BenchOp::Reduce: {
        // Gloo wants the output on every rank (non-roots use it as scratch).
        gloo::ReduceOptions opts(context_);
        if (!call.in_place) opts.setInput(in, call.in_count);
        opts.setOutput(out, call.out_count);
        opts.setRoot(call.root);
        opts.setReduceFunction(reduce_fn<T>(call.redop));
        gloo::reduce(opts);
        return;
      }
      case BenchOp::Allgather: {
        // In place, Gloo takes this rank's contribution from its slice of the output.
        gloo::AllgatherOptions opts(context_);
        if (!call.in_place) opts.setInput(in, call.in_count);
        opts.setOutput(out, call.out_count);
        gloo::allgather(opts);
        return;
      }
      case BenchOp::Alltoall: {
        gloo::AlltoallOptions opts(context_);
        opts.setInput(in, call.in_count);
        opts.setOutput(out, call.out_count);
        gloo::alltoall(opts);
        return;
      }
      case BenchOp::Gather: {
        gloo::GatherOptions opts(context_);
        opts.setInput(in, call.in_count);
        if (root) opts.setOutput(out, call.out_count);
        opts.setRoot(call.root);
        gloo::gather(opts);
        return;
      }
      case BenchOp::Scatter: {
        gloo::ScatterOptions opts(context_);
        if (root) {
          std::vector<T*> slices;
          for (int r = 0; r < context_->size; ++r) {
            slices.push_back(in + static_cast<std::size_t>(r) * call.out_count);
          }
          opts.setInputs(slices, call.out_count);
        }
        opts.setOutput(out, call.out_count);
        opts.setRoot(call.root);
        gloo::scatter(opts);
        return;
      }
      case BenchOp::Send: {
        const int size = context_->size;
        const int next = (context_->rank + 1) % size;
        const int prev = (context_->rank - 1 + size) % size;
        // Every rank draws the same slot because every rank makes the same calls.
        const auto slot = static_cast<std::uint64_t>(context_->nextSlot());
        auto send = context_->createUnboundBuffer(in, call.in_count * sizeof(T));
        auto recv = context_->createUnboundBuffer(out, call.out_count * sizeof(T));
        recv->recv(prev, slot);
        send->send(next, slot);
        const auto timeout = context_->getTimeout();
        if (!send->waitSend(nullptr, timeout) || !recv->waitRecv(nullptr, timeout)) {
          throw Error(ErrorCode::RemoteError, "Gloo sendrecv was aborted");
        }
        return;
      }
      case BenchOp::Barrier: {
        gloo::BarrierOptions opts(context_);
        gloo::barrier(opts);
        return;
      }
      case BenchOp::ReduceScatter:
      default:  // not bench ops
        break;
    }
    throw Error(ErrorCode::Unsupported,
                "Gloo peer cannot run " + std::string(bench_op_name(call.op)));
  }

  std::shared_ptr<gloo::Context> context_;
};

}  // namespace

std::unique_ptr<Implementation> make_gloo_peer(std::shared_ptr<cohort::Store> store, int rank,
                                               int size, std::chrono::milliseconds timeout) {
  return std::make_unique<GlooImplementation>(std::move(store), rank, size, timeout);
}

const char* gloo_transport_name() noexcept {
#if COHORT_BENCH_GLOO_TCP
  return "tcp";
#else
  return "uv";
#endif
}

}  // namespace cohort::bench
