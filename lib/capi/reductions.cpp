// C ABI: allreduce, reduce and reduce_scatter, blocking and async. In-place forms: a NULL `in`
// (allreduce, reduce) reduces `out` in place; a NULL `out` (reduce_scatter) leaves the result in
// this rank's block of `in`. The reduce op is read as its integer at the boundary (enum_bits).

#include "capi/issue.hpp"
#include "capi/tensors.hpp"

namespace cohort::capi {
namespace {

cohort_status_t allreduce(const char* fn, cohort_comm_t comm, const DLTensor* in,
                          const DLTensor* out, int op, const cohort_collective_options_t* options,
                          Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 const Buffer output = borrow(out, fn, "out");
                 const Buffer input = in == nullptr ? output : borrow(in, fn, "in");
                 const ReduceOp reduce = reduce_op(op, fn);
                 if (work != nullptr) {
                   work->work = c.allreduce_async(input, output, reduce, o);
                 } else {
                   c.allreduce(input, output, reduce, o);
                 }
               });
}

cohort_status_t reduce(const char* fn, cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                       int op, int root, const cohort_collective_options_t* options, Form form) {
  return issue(
      fn, comm, options, form, [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
        // out matters on the root only (elsewhere it is not read, unless a NULL in makes it the
        // input): a stand-in there must not fail that rank while the root goes on.
        if (in == nullptr && out == nullptr)
          invalid_argument(fn, "in and out are both NULL (a NULL in means in place, in out)");
        const Buffer output =
            c.rank() == root || in == nullptr ? borrow_or_empty(out, fn, "out") : Buffer();
        const Buffer input = in == nullptr ? output : borrow(in, fn, "in");
        const ReduceOp reduce = reduce_op(op, fn);
        if (work != nullptr) {
          work->work = c.reduce_async(input, output, reduce, root, o);
        } else {
          c.reduce(input, output, reduce, root, o);
        }
      });
}

cohort_status_t reduce_scatter(const char* fn, cohort_comm_t comm, const DLTensor* in,
                               const DLTensor* out, int op,
                               const cohort_collective_options_t* options, Form form) {
  return issue(
      fn, comm, options, form, [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
        const Buffer input = borrow(in, fn, "in");
        const Buffer output = out == nullptr ? uniform_block(input, c.rank(), c.size(), fn, "in")
                                             : borrow(out, fn, "out");
        const ReduceOp reduce = reduce_op(op, fn);
        if (work != nullptr) {
          work->work = c.reduce_scatter_async(input, output, reduce, o);
        } else {
          c.reduce_scatter(input, output, reduce, o);
        }
      });
}

}  // namespace
}  // namespace cohort::capi

using cohort::capi::Form;

extern "C" {

cohort_status_t cohort_allreduce(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                 cohort_reduce_op_t op,
                                 const cohort_collective_options_t* options) {
  return cohort::capi::allreduce("cohort_allreduce", comm, in, out, cohort::capi::enum_bits(op),
                                 options, Form::blocking());
}

cohort_status_t cohort_allreduce_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                       cohort_reduce_op_t op,
                                       const cohort_collective_options_t* options,
                                       cohort_work_t* work) {
  return cohort::capi::allreduce("cohort_allreduce_async", comm, in, out,
                                 cohort::capi::enum_bits(op), options, Form::async_into(work));
}

cohort_status_t cohort_reduce(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                              cohort_reduce_op_t op, int root,
                              const cohort_collective_options_t* options) {
  return cohort::capi::reduce("cohort_reduce", comm, in, out, cohort::capi::enum_bits(op), root,
                              options, Form::blocking());
}

cohort_status_t cohort_reduce_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                    cohort_reduce_op_t op, int root,
                                    const cohort_collective_options_t* options,
                                    cohort_work_t* work) {
  return cohort::capi::reduce("cohort_reduce_async", comm, in, out, cohort::capi::enum_bits(op),
                              root, options, Form::async_into(work));
}

cohort_status_t cohort_reduce_scatter(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                      cohort_reduce_op_t op,
                                      const cohort_collective_options_t* options) {
  return cohort::capi::reduce_scatter("cohort_reduce_scatter", comm, in, out,
                                      cohort::capi::enum_bits(op), options, Form::blocking());
}

cohort_status_t cohort_reduce_scatter_async(cohort_comm_t comm, const DLTensor* in,
                                            const DLTensor* out, cohort_reduce_op_t op,
                                            const cohort_collective_options_t* options,
                                            cohort_work_t* work) {
  return cohort::capi::reduce_scatter("cohort_reduce_scatter_async", comm, in, out,
                                      cohort::capi::enum_bits(op), options, Form::async_into(work));
}

}  // extern "C"
