// C ABI: creating, querying, splitting and releasing communicators.

#include "capi/handles.hpp"
#include "capi/options.hpp"
#include "capi/status.hpp"

#include <cstring>
#include <memory>
#include <string>

namespace {

using cohort::capi::communicator_of;
using cohort::capi::guarded;
using cohort::capi::require_out;

static_assert(COHORT_NO_COLOR == cohort::Communicator::kNoColor);

// Sets *out to NULL up front so that every failure leaves it NULL (cohort.h's rule for
// functions that create handles).
void clear(cohort_comm_t* out) {
  if (out != nullptr) *out = nullptr;
}

}  // namespace

extern "C" {

cohort_status_t cohort_init(const cohort_init_options_t* options, cohort_comm_t* comm) {
  constexpr const char* fn = "cohort_init";
  clear(comm);
  return guarded(fn, [&] {
    require_out(comm, fn, "comm");
    const cohort::InitOptions init = cohort::capi::init_options(options, fn);
    // Allocated first: once init() has returned, other ranks count on this one.
    auto handle = std::make_unique<cohort_comm>();
    handle->comm = cohort::init(init);
    *comm = handle.release();
  });
}

cohort_status_t cohort_comm_rank(cohort_comm_t comm, int* rank) {
  constexpr const char* fn = "cohort_comm_rank";
  return guarded(fn, [&] {
    const cohort::Communicator& c = communicator_of(comm, fn);
    require_out(rank, fn, "rank");
    *rank = c.rank();
  });
}

cohort_status_t cohort_comm_size(cohort_comm_t comm, int* size) {
  constexpr const char* fn = "cohort_comm_size";
  return guarded(fn, [&] {
    const cohort::Communicator& c = communicator_of(comm, fn);
    require_out(size, fn, "size");
    *size = c.size();
  });
}

cohort_status_t cohort_comm_split(cohort_comm_t comm, int color, int key, cohort_comm_t* new_comm) {
  constexpr const char* fn = "cohort_comm_split";
  clear(new_comm);
  return guarded(fn, [&] {
    cohort::Communicator& c = communicator_of(comm, fn);
    require_out(new_comm, fn, "new_comm");
    auto handle = std::make_unique<cohort_comm>();
    handle->comm = c.split(color, key);
    // COHORT_NO_COLOR: this rank is in no new group, and gets NULL.
    if (handle->comm) *new_comm = handle.release();
  });
}

cohort_status_t cohort_comm_dup(cohort_comm_t comm, cohort_comm_t* new_comm) {
  constexpr const char* fn = "cohort_comm_dup";
  clear(new_comm);
  return guarded(fn, [&] {
    cohort::Communicator& c = communicator_of(comm, fn);
    require_out(new_comm, fn, "new_comm");
    auto handle = std::make_unique<cohort_comm>();
    handle->comm = c.dup();
    *new_comm = handle.release();
  });
}

cohort_status_t cohort_comm_abort(cohort_comm_t comm, const char* reason) {
  constexpr const char* fn = "cohort_comm_abort";
  return guarded(fn, [&] {
    communicator_of(comm, fn).abort(reason != nullptr ? reason : "abort() was called");
  });
}

cohort_status_t cohort_comm_status(cohort_comm_t comm) {
  constexpr const char* fn = "cohort_comm_status";
  return guarded(fn, [&] {
    if (const std::optional<cohort::Error> cause = communicator_of(comm, fn).error()) throw *cause;
  });
}

cohort_status_t cohort_comm_dump_trace(cohort_comm_t comm, const char* path, char* written_path,
                                       size_t capacity) {
  constexpr const char* fn = "cohort_comm_dump_trace";
  return guarded(fn, [&] {
    const cohort::Communicator& c = communicator_of(comm, fn);
    const std::string written = c.dump_trace(path != nullptr ? path : "");
    if (written_path == nullptr) return;
    if (written.size() >= capacity) {
      cohort::capi::invalid_argument(fn, "written_path holds " + std::to_string(capacity) +
                                             " bytes; the path written (" + written + ") needs " +
                                             std::to_string(written.size() + 1));
    }
    std::memcpy(written_path, written.c_str(), written.size() + 1);
  });
}

cohort_status_t cohort_comm_destroy(cohort_comm_t comm) {
  delete comm;  // destructors never throw
  return COHORT_OK;
}

}  // extern "C"
