#pragma once

// Every operation a communicator runs, by the name users call it with.

#include <cstdint>
#include <string_view>

namespace cohort::comm {

enum class OpKind : std::uint8_t {
  Allreduce,
  Broadcast,
  Reduce,
  Allgather,
  Allgatherv,
  Gather,
  Gatherv,
  Scatter,
  Scatterv,
  ReduceScatter,
  Alltoall,
  Alltoallv,
  Barrier,
  Send,
  Recv,
};

/// The public method's name: "allreduce", "reduce_scatter", "alltoallv", "send", ...
constexpr std::string_view op_kind_name(OpKind kind) noexcept {
  constexpr std::string_view kNames[] = {"allreduce",  "broadcast",      "reduce",   "allgather",
                                         "allgatherv", "gather",         "gatherv",  "scatter",
                                         "scatterv",   "reduce_scatter", "alltoall", "alltoallv",
                                         "barrier",    "send",           "recv"};
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(kNames) ? kNames[index] : std::string_view("unknown op");
}

}  // namespace cohort::comm
