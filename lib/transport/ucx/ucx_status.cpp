#include "transport/ucx/ucx_status.hpp"

namespace cohort::transport::ucx {

Error ucx_error(ucs_status_t status, const std::string& what) {
  ErrorCode code = ErrorCode::SystemError;
  switch (status) {
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CANCELED:
    // A same-host peer's shared-memory segment vanishes when that peer exits: this is how a
    // dead neighbour usually shows up on the shared-memory transports.
    case UCS_ERR_SHMEM_SEGMENT: code = ErrorCode::RemoteError; break;
    case UCS_ERR_MESSAGE_TRUNCATED: code = ErrorCode::Internal; break;
    case UCS_ERR_UNSUPPORTED: code = ErrorCode::Unsupported; break;
    case UCS_ERR_INVALID_PARAM: code = ErrorCode::InvalidArgument; break;
    default: code = ErrorCode::SystemError; break;
  }
  return Error(code, what + ": " + ucs_status_string(status) + " (UCX status " +
                         std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace cohort::transport::ucx
