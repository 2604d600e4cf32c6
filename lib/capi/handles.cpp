// Checked access to the C ABI's handles, and the buffer handle's lifetime.

#include "capi/handles.hpp"

#include "capi/buffer_descriptors.hpp"
#include "capi/status.hpp"

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>

#include <utility>

cohort_buffer::cohort_buffer(cohort::Buffer owned)
    : buffer(std::move(owned)), descriptor(cohort::to_dlpack(buffer)) {
  try {
    cohort::capi::note_buffer_descriptor(&descriptor->dl_tensor, buffer);
  } catch (...) {
    if (descriptor->deleter != nullptr) descriptor->deleter(descriptor);
    throw;
  }
}

cohort_buffer::~cohort_buffer() {
  cohort::capi::forget_buffer_descriptor(&descriptor->dl_tensor);
  // The export keeps its own reference to the memory; dropping it here (and `buffer` after this
  // body) releases the producer once nothing else shares it.
  if (descriptor->deleter != nullptr) descriptor->deleter(descriptor);
}

namespace cohort::capi {

Communicator& communicator_of(cohort_comm_t comm, const char* function) {
  if (comm == nullptr) invalid_argument(function, "communicator handle is NULL");
  return *comm->comm;
}

const Work& work_of(cohort_work_t work, const char* function) {
  if (work == nullptr) invalid_argument(function, "work handle is NULL");
  return work->work;
}

cohort_buffer& buffer_of(cohort_buffer_t buffer, const char* function) {
  if (buffer == nullptr) invalid_argument(function, "buffer handle is NULL");
  return *buffer;
}

}  // namespace cohort::capi
