#pragma once

// The NCCL peer (--peer nccl, with --device cuda): the same sweep through raw NCCL calls in the
// same processes as cohort, the way nccl-tests drives NCCL: one communicator per rank on this
// rank's device (ncclCommInitRank, the unique id published by rank 0 through cohort's store),
// every op queued on one stream of the peer's own, then that stream polled until it drained
// (cudaStreamQuery with ncclCommGetAsyncError, as nccl-tests' testStreamSynchronize). cohort's
// device path runs the same NCCL underneath, so the two rows differ by cohort's own overhead.
// Built only where cohort was built with CUDA (COHORT_BENCH_HAVE_CUDA).

#include "implementation.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <memory>

namespace cohort::bench {

/// Creates this rank's NCCL communicator over `size` ranks on the current CUDA device (every
/// rank must call this; rank 0 publishes the unique id through `store`). `timeout` bounds the
/// wait for the id and every op (an op past it aborts the communicator and throws Timeout).
std::unique_ptr<Implementation> make_nccl_peer(std::shared_ptr<cohort::Store> store, int rank,
                                               int size, std::chrono::milliseconds timeout);

}  // namespace cohort::bench
