// C ABI: barrier, blocking and async.

#include "capi/issue.hpp"

namespace cohort::capi {
namespace {

cohort_status_t barrier(const char* fn, cohort_comm_t comm,
                        const cohort_collective_options_t* options, Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 if (work != nullptr) {
                   work->work = c.barrier_async(o);
                 } else {
                   c.barrier(o);
                 }
               });
}

}  // namespace
}  // namespace cohort::capi

using cohort::capi::Form;

extern "C" {

cohort_status_t cohort_barrier(cohort_comm_t comm, const cohort_collective_options_t* options) {
  return cohort::capi::barrier("cohort_barrier", comm, options, Form::blocking());
}

cohort_status_t cohort_barrier_async(cohort_comm_t comm, const cohort_collective_options_t* options,
                                     cohort_work_t* work) {
  return cohort::capi::barrier("cohort_barrier_async", comm, options, Form::async_into(work));
}

}  // extern "C"
