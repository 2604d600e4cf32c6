// C ABI: alltoall and alltoallv, blocking and async. In place: in == out, or a NULL `in`; the
// core stages the input itself when the two overlap.

#include "capi/issue.hpp"
#include "capi/tensors.hpp"

namespace cohort::capi {
namespace {

cohort_status_t alltoall(const char* fn, cohort_comm_t comm, const DLTensor* in,
                         const DLTensor* out, const cohort_collective_options_t* options,
                         Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 const Buffer output = borrow(out, fn, "out");
                 const Buffer input = in == nullptr ? output : borrow(in, fn, "in");
                 if (work != nullptr) {
                   work->work = c.alltoall_async(input, output, o);
                 } else {
                   c.alltoall(input, output, o);
                 }
               });
}

cohort_status_t alltoallv(const char* fn, cohort_comm_t comm, const DLTensor* in,
                          const std::size_t* send_counts, std::size_t send_length,
                          const DLTensor* out, const std::size_t* recv_counts,
                          std::size_t recv_length, const cohort_collective_options_t* options,
                          Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 const auto sends = counts_of(send_counts, send_length, fn, "send_counts");
                 const auto receives = counts_of(recv_counts, recv_length, fn, "recv_counts");
                 const Buffer output = borrow(out, fn, "out");
                 const Buffer input = in == nullptr ? output : borrow(in, fn, "in");
                 if (work != nullptr) {
                   work->work = c.alltoallv_async(input, sends, output, receives, o);
                 } else {
                   c.alltoallv(input, sends, output, receives, o);
                 }
               });
}

}  // namespace
}  // namespace cohort::capi

using cohort::capi::Form;

extern "C" {

cohort_status_t cohort_alltoall(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                const cohort_collective_options_t* options) {
  return cohort::capi::alltoall("cohort_alltoall", comm, in, out, options, Form::blocking());
}

cohort_status_t cohort_alltoall_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                      const cohort_collective_options_t* options,
                                      cohort_work_t* work) {
  return cohort::capi::alltoall("cohort_alltoall_async", comm, in, out, options,
                                Form::async_into(work));
}

cohort_status_t cohort_alltoallv(cohort_comm_t comm, const DLTensor* in, const size_t* send_counts,
                                 size_t send_counts_length, const DLTensor* out,
                                 const size_t* recv_counts, size_t recv_counts_length,
                                 const cohort_collective_options_t* options) {
  return cohort::capi::alltoallv("cohort_alltoallv", comm, in, send_counts, send_counts_length, out,
                                 recv_counts, recv_counts_length, options, Form::blocking());
}

cohort_status_t cohort_alltoallv_async(cohort_comm_t comm, const DLTensor* in,
                                       const size_t* send_counts, size_t send_counts_length,
                                       const DLTensor* out, const size_t* recv_counts,
                                       size_t recv_counts_length,
                                       const cohort_collective_options_t* options,
                                       cohort_work_t* work) {
  return cohort::capi::alltoallv("cohort_alltoallv_async", comm, in, send_counts,
                                 send_counts_length, out, recv_counts, recv_counts_length, options,
                                 Form::async_into(work));
}

}  // extern "C"
