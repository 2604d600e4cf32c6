// C ABI: send and recv, blocking and async; sendrecv.

#include "capi/issue.hpp"
#include "capi/tensors.hpp"

namespace cohort::capi {
namespace {

cohort_status_t send(const char* fn, cohort_comm_t comm, const DLTensor* in, int peer, int tag,
                     const cohort_collective_options_t* options, Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 const Buffer input = borrow(in, fn, "in");
                 if (work != nullptr) {
                   work->work = c.send_async(input, peer, tag, o);
                 } else {
                   c.send(input, peer, tag, o);
                 }
               });
}

cohort_status_t recv(const char* fn, cohort_comm_t comm, const DLTensor* out, int peer, int tag,
                     const cohort_collective_options_t* options, Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 const Buffer output = borrow(out, fn, "out");
                 if (work != nullptr) {
                   work->work = c.recv_async(output, peer, tag, o);
                 } else {
                   c.recv(output, peer, tag, o);
                 }
               });
}

}  // namespace
}  // namespace cohort::capi

using cohort::capi::Form;

extern "C" {

cohort_status_t cohort_send(cohort_comm_t comm, const DLTensor* in, int peer, int tag,
                            const cohort_collective_options_t* options) {
  return cohort::capi::send("cohort_send", comm, in, peer, tag, options, Form::blocking());
}

cohort_status_t cohort_send_async(cohort_comm_t comm, const DLTensor* in, int peer, int tag,
                                  const cohort_collective_options_t* options, cohort_work_t* work) {
  return cohort::capi::send("cohort_send_async", comm, in, peer, tag, options,
                            Form::async_into(work));
}

cohort_status_t cohort_recv(cohort_comm_t comm, const DLTensor* out, int peer, int tag,
                            const cohort_collective_options_t* options) {
  return cohort::capi::recv("cohort_recv", comm, out, peer, tag, options, Form::blocking());
}

cohort_status_t cohort_recv_async(cohort_comm_t comm, const DLTensor* out, int peer, int tag,
                                  const cohort_collective_options_t* options, cohort_work_t* work) {
  return cohort::capi::recv("cohort_recv_async", comm, out, peer, tag, options,
                            Form::async_into(work));
}

cohort_status_t cohort_sendrecv(cohort_comm_t comm, const DLTensor* in, int dest,
                                const DLTensor* out, int source, int tag,
                                const cohort_collective_options_t* options) {
  static constexpr const char* kFn = "cohort_sendrecv";
  return cohort::capi::issue(
      kFn, comm, options, Form::blocking(),
      [&](cohort::Communicator& c, const cohort::CollectiveOptions& o, cohort_work*) {
        c.sendrecv(cohort::capi::borrow(in, kFn, "in"), dest, cohort::capi::borrow(out, kFn, "out"),
                   source, tag, o);
      });
}

}  // extern "C"
