#include "transport/transport_factory.hpp"

#include <cohort/error.hpp>
#include <cohort/version.hpp>

#include "transport/self_transport.hpp"

#if COHORT_HAVE_UCX
#include "transport/ucx/ucx_transport.hpp"
#endif

#include <numeric>
#include <vector>

namespace cohort::transport {

std::unique_ptr<Transport> create_transport(Store& store, const std::string& key_prefix, int rank,
                                            int size, const TransportOptions& options) {
  if (size < 1 || static_cast<std::uint64_t>(size) > kMaxRanks)
    throw Error(ErrorCode::InvalidArgument, "transport world size " + std::to_string(size) +
                                                " is out of range [1, " +
                                                std::to_string(kMaxRanks) + "]");
  if (rank < 0 || rank >= size)
    throw Error(ErrorCode::InvalidArgument, "transport rank " + std::to_string(rank) +
                                                " is out of range [0, " + std::to_string(size) +
                                                ")");
  if (options.local_world_size < 1)
    throw Error(ErrorCode::InvalidArgument,
                "local world size " + std::to_string(options.local_world_size) + " is below 1");
  if (size == 1) return std::make_unique<SelfTransport>();
#if COHORT_HAVE_UCX
  auto hub =
      std::make_shared<ucx::UcxHub>(store, key_prefix, rank, size, options.local_world_size,
                                    std::chrono::steady_clock::now() + options.connect_timeout);
  std::vector<int> world_ranks(static_cast<std::size_t>(size));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  // Tag id 0 is the world's, reserved by the pool from the start (no claim to release).
  return std::make_unique<ucx::UcxTransport>(std::move(hub), std::move(world_ranks), rank,
                                             TagIdClaim());
#else
  (void)store;
  (void)key_prefix;
  throw Error(ErrorCode::Unsupported, "a world of " + std::to_string(size) +
                                          " ranks needs the UCX transport; this cohort was built "
                                          "without UCX");
#endif
}

}  // namespace cohort::transport
