// C ABI: broadcast, scatter and scatterv (the root's data to every rank), blocking and async.
// `in` is read on the root only, so other ranks may pass NULL (or anything: it is not read).
// In-place forms: a NULL `in` in broadcast means the root's data is already in `out`; a NULL `out`
// on the root of a scatter leaves the root's block where it is, in `in`.

#include "capi/issue.hpp"
#include "capi/tensors.hpp"

#include <optional>
#include <span>
#include <string>

namespace cohort::capi {
namespace {

using Counts = std::optional<std::span<const std::size_t>>;

cohort_status_t broadcast(const char* fn, cohort_comm_t comm, const DLTensor* in,
                          const DLTensor* out, int root, const cohort_collective_options_t* options,
                          Form form) {
  return issue(fn, comm, options, form,
               [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
                 const Buffer output = borrow(out, fn, "out");
                 // `in` is not read off the root: a stand-in there (an empty descriptor, a
                 // stale pointer) must not fail this rank while the root goes on.
                 const Buffer input = in == nullptr      ? output
                                      : c.rank() == root ? borrow(in, fn, "in")
                                                         : Buffer();
                 if (work != nullptr) {
                   work->work = c.broadcast_async(input, output, root, o);
                 } else {
                   c.broadcast(input, output, root, o);
                 }
               });
}

cohort_status_t scatter(const char* fn, cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                        const std::size_t* counts, std::size_t counts_length, bool variable,
                        int root, const cohort_collective_options_t* options, Form form) {
  return issue(
      fn, comm, options, form, [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
        const Counts spans =
            variable ? Counts(counts_of(counts, counts_length, fn, "counts")) : std::nullopt;
        // `in` is read on the root only (see broadcast).
        const Buffer input = c.rank() == root ? borrow_or_empty(in, fn, "in") : Buffer();
        Buffer output;
        const bool root_in_range = root >= 0 && root < c.size();
        if (out != nullptr) {
          output = borrow(out, fn, "out");
        } else if (root_in_range && c.rank() != root) {
          invalid_argument(fn, "out is NULL on rank " + std::to_string(c.rank()) +
                                   "; only the root (rank " + std::to_string(root) +
                                   ") may scatter in place");
        } else if (root_in_range) {
          const Buffer whole = borrow(in, fn, "in");
          output = spans ? counts_block(whole, *spans, c.rank(), fn, "in")
                         : uniform_block(whole, c.rank(), c.size(), fn, "in");
        }
        // A root out of range is left to the core, whose message names it.
        if (work != nullptr) {
          work->work = spans ? c.scatterv_async(input, output, *spans, root, o)
                             : c.scatter_async(input, output, root, o);
        } else if (spans) {
          c.scatterv(input, output, *spans, root, o);
        } else {
          c.scatter(input, output, root, o);
        }
      });
}

}  // namespace
}  // namespace cohort::capi

using cohort::capi::Form;

extern "C" {

cohort_status_t cohort_broadcast(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                 int root, const cohort_collective_options_t* options) {
  return cohort::capi::broadcast("cohort_broadcast", comm, in, out, root, options,
                                 Form::blocking());
}

cohort_status_t cohort_broadcast_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                       int root, const cohort_collective_options_t* options,
                                       cohort_work_t* work) {
  return cohort::capi::broadcast("cohort_broadcast_async", comm, in, out, root, options,
                                 Form::async_into(work));
}

cohort_status_t cohort_scatter(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                               int root, const cohort_collective_options_t* options) {
  return cohort::capi::scatter("cohort_scatter", comm, in, out, nullptr, 0, false, root, options,
                               Form::blocking());
}

cohort_status_t cohort_scatter_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                     int root, const cohort_collective_options_t* options,
                                     cohort_work_t* work) {
  return cohort::capi::scatter("cohort_scatter_async", comm, in, out, nullptr, 0, false, root,
                               options, Form::async_into(work));
}

cohort_status_t cohort_scatterv(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                const size_t* counts, size_t counts_length, int root,
                                const cohort_collective_options_t* options) {
  return cohort::capi::scatter("cohort_scatterv", comm, in, out, counts, counts_length, true, root,
                               options, Form::blocking());
}

cohort_status_t cohort_scatterv_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                      const size_t* counts, size_t counts_length, int root,
                                      const cohort_collective_options_t* options,
                                      cohort_work_t* work) {
  return cohort::capi::scatter("cohort_scatterv_async", comm, in, out, counts, counts_length, true,
                               root, options, Form::async_into(work));
}

}  // extern "C"
