#pragma once

// What the C ABI's opaque handles point to, and the checked ways to reach through them. A handle
// holds the same C++ object a C++ caller would hold, so both APIs share one core.

#include <cohort/cohort.h>
#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>
#include <cohort/work.hpp>

#include <memory>

/// cohort_comm_t: shares ownership of the communicator (split and dup results are independent).
struct cohort_comm {
  std::shared_ptr<cohort::Communicator> comm;
};

/// cohort_work_t: the op's Work.
struct cohort_work {
  cohort::Work work;
};

/// cohort_buffer_t: an owning Buffer plus the DLTensor that cohort_buffer_tensor lends out.
struct cohort_buffer {
  explicit cohort_buffer(cohort::Buffer owned);
  ~cohort_buffer();
  cohort_buffer(const cohort_buffer&) = delete;
  cohort_buffer& operator=(const cohort_buffer&) = delete;

  cohort::Buffer buffer;
  /// An export of `buffer` (made by the core's to_dlpack, so dtype codes are mapped in one
  /// place); its dl_tensor is the descriptor handed to callers. Released in the destructor.
  DLManagedTensor* descriptor;
};

namespace cohort::capi {

/// The communicator behind `comm`; throws InvalidArgument naming `function` when it is NULL.
Communicator& communicator_of(cohort_comm_t comm, const char* function);
/// The Work behind `work`; throws InvalidArgument when it is NULL.
const Work& work_of(cohort_work_t work, const char* function);
/// The buffer handle; throws InvalidArgument when it is NULL.
cohort_buffer& buffer_of(cohort_buffer_t buffer, const char* function);

}  // namespace cohort::capi
