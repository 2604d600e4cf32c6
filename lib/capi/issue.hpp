#pragma once

// The shape every collective entry point shares: check the handle and options, then run the op
// blocking, or queue it and hand back a work handle. Each op is written once, as a lambda that
// receives the communicator, the options and (for the async form) the work handle to fill.

#include "capi/handles.hpp"
#include "capi/options.hpp"
#include "capi/status.hpp"

#include <memory>

namespace cohort::capi {

/// Which form of an op the C caller invoked; Async carries the caller's out-parameter.
struct Form {
  cohort_work_t* work = nullptr;
  bool async = false;

  static Form blocking() { return {}; }
  static Form async_into(cohort_work_t* work) { return {work, true}; }
};

/// Runs `op(communicator, options, handle)` under guarded(). `handle` is null for the blocking
/// form; for the async form it is allocated before the op is queued (so no allocation can fail
/// once the op runs) and published in *form.work only on success (*form.work is NULL
/// otherwise).
template <class Op>
cohort_status_t issue(const char* function, cohort_comm_t comm,
                      const cohort_collective_options_t* options, Form form, Op&& op) noexcept {
  if (form.async && form.work != nullptr) *form.work = nullptr;
  return guarded(function, [&] {
    Communicator& communicator = communicator_of(comm, function);
    if (form.async) require_out(form.work, function, "work");
    const CollectiveOptions collective = collective_options(options, function);
    std::unique_ptr<cohort_work> handle;
    if (form.async) handle = std::make_unique<cohort_work>();
    op(communicator, collective, handle.get());
    if (form.async) *form.work = handle.release();
  });
}

}  // namespace cohort::capi
