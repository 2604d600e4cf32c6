#pragma once

// The one place UCX statuses become cohort errors.

#include <cohort/error.hpp>

#include <ucs/type/status.h>

#include <string>

namespace cohort::transport::ucx {

/// Error whose message is "<what>: <UCX status text>". Peer loss (connection reset, endpoint or
/// transport timeouts, unreachable, cancellation by a failed endpoint) becomes RemoteError; a
/// truncated message Internal (a protocol bug: a sender sent more than was posted); resource
/// exhaustion and I/O failures SystemError; UNSUPPORTED Unsupported.
Error ucx_error(ucs_status_t status, const std::string& what);

}  // namespace cohort::transport::ucx
