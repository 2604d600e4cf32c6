// C ABI: waiting for, testing, stream-ordering and releasing the work handles of async ops.

#include "capi/handles.hpp"
#include "capi/status.hpp"

#include <chrono>
#include <optional>
#include <string>

using cohort::capi::guarded;
using cohort::capi::work_of;

extern "C" {

cohort_status_t cohort_work_wait(cohort_work_t work, int64_t timeout_ms) {
  constexpr const char* fn = "cohort_work_wait";
  return guarded(fn, [&] {
    const cohort::Work& w = work_of(work, fn);
    if (timeout_ms < -1 || timeout_ms > cohort::kMaxTimeout.count()) {
      cohort::capi::invalid_argument(fn, "timeout_ms is " + std::to_string(timeout_ms) +
                                             "; pass -1 to wait without limit or 0 to " +
                                             std::to_string(cohort::kMaxTimeout.count()) +
                                             " ms (one year)");
    }
    std::optional<std::chrono::milliseconds> timeout;
    if (timeout_ms >= 0) timeout = std::chrono::milliseconds(timeout_ms);
    // Rethrows the op's own error, which guarded() turns into its status and message.
    w.wait(timeout);
  });
}

cohort_status_t cohort_work_test(cohort_work_t work, int* done) {
  constexpr const char* fn = "cohort_work_test";
  return guarded(fn, [&] {
    const cohort::Work& w = work_of(work, fn);
    cohort::capi::require_out(done, fn, "done");
    *done = w.test() ? 1 : 0;
  });
}

cohort_status_t cohort_work_make_stream_wait(cohort_work_t work, uintptr_t stream) {
  constexpr const char* fn = "cohort_work_make_stream_wait";
  return guarded(fn, [&] {
    const cohort::Work& w = work_of(work, fn);
    // Rethrows the op's error if it already failed, which guarded() reports.
    w.make_stream_wait(cohort::Stream{stream});
  });
}

cohort_status_t cohort_work_destroy(cohort_work_t work) {
  delete work;  // destructors never throw
  return COHORT_OK;
}

}  // extern "C"
