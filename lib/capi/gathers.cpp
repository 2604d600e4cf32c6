// C ABI: allgather, allgatherv, gather and gatherv, blocking and async. In-place forms: a NULL
// `in` means this rank's contribution already sits in its block of `out` (on the root, for
// gather), the block the core's own in-place rule names.

#include "capi/issue.hpp"
#include "capi/tensors.hpp"

#include <optional>
#include <span>
#include <string>

namespace cohort::capi {
namespace {

using Counts = std::optional<std::span<const std::size_t>>;

// This rank's block of `output`: equal blocks without counts, else laid out by counts.
Buffer own_block(const Buffer& output, const Counts& counts, const Communicator& c,
                 const char* fn) {
  if (counts) return counts_block(output, *counts, c.rank(), fn, "out");
  return uniform_block(output, c.rank(), c.size(), fn, "out");
}

cohort_status_t allgather(const char* fn, cohort_comm_t comm, const DLTensor* in,
                          const DLTensor* out, const std::size_t* counts, std::size_t counts_length,
                          bool variable, const cohort_collective_options_t* options, Form form) {
  return issue(
      fn, comm, options, form, [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
        const Counts spans =
            variable ? Counts(counts_of(counts, counts_length, fn, "counts")) : std::nullopt;
        const Buffer output = borrow(out, fn, "out");
        const Buffer input = in == nullptr ? own_block(output, spans, c, fn) : borrow(in, fn, "in");
        if (work != nullptr) {
          work->work = spans ? c.allgatherv_async(input, output, *spans, o)
                             : c.allgather_async(input, output, o);
        } else if (spans) {
          c.allgatherv(input, output, *spans, o);
        } else {
          c.allgather(input, output, o);
        }
      });
}

cohort_status_t gather(const char* fn, cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                       const std::size_t* counts, std::size_t counts_length, bool variable,
                       int root, const cohort_collective_options_t* options, Form form) {
  return issue(
      fn, comm, options, form, [&](Communicator& c, const CollectiveOptions& o, cohort_work* work) {
        const Counts spans =
            variable ? Counts(counts_of(counts, counts_length, fn, "counts")) : std::nullopt;
        // out matters on the root only, and is not read elsewhere: a stand-in there (an empty
        // descriptor, a stale pointer) must not fail that rank while the root goes on.
        const Buffer output = c.rank() == root ? borrow_or_empty(out, fn, "out") : Buffer();
        Buffer input;
        const bool root_in_range = root >= 0 && root < c.size();
        if (in != nullptr) {
          input = borrow(in, fn, "in");
        } else if (root_in_range && c.rank() != root) {
          invalid_argument(fn, "in is NULL on rank " + std::to_string(c.rank()) +
                                   "; only the root (rank " + std::to_string(root) +
                                   ") may gather in place");
        } else if (root_in_range) {
          input = own_block(borrow(out, fn, "out"), spans, c, fn);
        }
        // A root out of range is left to the core, whose message names it.
        if (work != nullptr) {
          work->work = spans ? c.gatherv_async(input, output, *spans, root, o)
                             : c.gather_async(input, output, root, o);
        } else if (spans) {
          c.gatherv(input, output, *spans, root, o);
        } else {
          c.gather(input, output, root, o);
        }
      });
}

}  // namespace
}  // namespace cohort::capi

using cohort::capi::Form;

extern "C" {

cohort_status_t cohort_allgather(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                 const cohort_collective_options_t* options) {
  return cohort::capi::allgather("cohort_allgather", comm, in, out, nullptr, 0, false, options,
                                 Form::blocking());
}

cohort_status_t cohort_allgather_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                       const cohort_collective_options_t* options,
                                       cohort_work_t* work) {
  return cohort::capi::allgather("cohort_allgather_async", comm, in, out, nullptr, 0, false,
                                 options, Form::async_into(work));
}

cohort_status_t cohort_allgatherv(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                  const size_t* counts, size_t counts_length,
                                  const cohort_collective_options_t* options) {
  return cohort::capi::allgather("cohort_allgatherv", comm, in, out, counts, counts_length, true,
                                 options, Form::blocking());
}

cohort_status_t cohort_allgatherv_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                        const size_t* counts, size_t counts_length,
                                        const cohort_collective_options_t* options,
                                        cohort_work_t* work) {
  return cohort::capi::allgather("cohort_allgatherv_async", comm, in, out, counts, counts_length,
                                 true, options, Form::async_into(work));
}

cohort_status_t cohort_gather(cohort_comm_t comm, const DLTensor* in, const DLTensor* out, int root,
                              const cohort_collective_options_t* options) {
  return cohort::capi::gather("cohort_gather", comm, in, out, nullptr, 0, false, root, options,
                              Form::blocking());
}

cohort_status_t cohort_gather_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                    int root, const cohort_collective_options_t* options,
                                    cohort_work_t* work) {
  return cohort::capi::gather("cohort_gather_async", comm, in, out, nullptr, 0, false, root,
                              options, Form::async_into(work));
}

cohort_status_t cohort_gatherv(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                               const size_t* counts, size_t counts_length, int root,
                               const cohort_collective_options_t* options) {
  return cohort::capi::gather("cohort_gatherv", comm, in, out, counts, counts_length, true, root,
                              options, Form::blocking());
}

cohort_status_t cohort_gatherv_async(cohort_comm_t comm, const DLTensor* in, const DLTensor* out,
                                     const size_t* counts, size_t counts_length, int root,
                                     const cohort_collective_options_t* options,
                                     cohort_work_t* work) {
  return cohort::capi::gather("cohort_gatherv_async", comm, in, out, counts, counts_length, true,
                              root, options, Form::async_into(work));
}

}  // extern "C"
