#pragma once

// The Gloo peer (--peer gloo): the same sweep through Gloo's collectives (the options API of
// gloo/allreduce.h and friends) in the same processes as cohort. Ranks rendezvous through
// cohort's store (GlooStoreAdapter) and talk over Gloo's TCP transport on loopback (its libuv
// transport when the installed Gloo lacks TCP). Built only with the 'gloo' feature
// (COHORT_BENCH_HAVE_GLOO).

#include "implementation.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <memory>

namespace cohort::bench {

/// Connects a full mesh of `size` Gloo ranks through `store` (every rank must call this).
/// `timeout` bounds the rendezvous and every Gloo op.
std::unique_ptr<Implementation> make_gloo_peer(std::shared_ptr<cohort::Store> store, int rank,
                                               int size, std::chrono::milliseconds timeout);

/// Which Gloo transport this build uses: "tcp" or "uv".
const char* gloo_transport_name() noexcept;

}  // namespace cohort::bench
