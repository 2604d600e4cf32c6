#include "transport/transport_factory.hpp"

#include <cohort/error.hpp>
#include <cohort/version.hpp>

#include "transport/self_transport.hpp"

#if COHORT_HAVE_UCX
#include "transport/ucx/ucx_transport.hpp"
#endif

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
  return std::make_unique<ucx::UcxTransport>(store, key_prefix, rank, size,
                                             options.local_world_size, options.connect_timeout);
#else
  (void)store;
  (void)key_prefix;
  throw Error(ErrorCode::Unsupported, "a world of " + std::to_string(size) +
                                          " ranks needs the UCX transport; this cohort was built "
                                          "without UCX");
#endif
}

}  // namespace cohort::transport
