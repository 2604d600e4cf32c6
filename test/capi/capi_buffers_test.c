/* The C ABI in one process: DLPack import and export (legacy and versioned) with the producer's
 * deleter counted, so "exactly once" is checked on success and on every error path; buffers
 * used by a collective in a world of one; and option structs of other sizes (struct_size). */

#define _GNU_SOURCE /* RTLD_DEFAULT */

#include <cohort/cohort.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "capi_buffers_test, line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
      exit(1);                                                   \
    }                                                            \
  } while (0)

#define EXPECT_STATUS(call, expected)                                                              \
  do {                                                                                             \
    cohort_status_t status_ = (call);                                                              \
    CHECK(status_ == (expected), "%s returned %s, expected %s: %s", #call,                         \
          cohort_status_name(status_), cohort_status_name(expected), cohort_last_error_message()); \
  } while (0)

#define OK(call) EXPECT_STATUS(call, COHORT_OK)

/* ---- A producer whose tensors count their deleter calls --------------------------------- */

typedef struct {
  DLManagedTensor managed;
  DLManagedTensorVersioned versioned;
  int64_t shape[2];
  float data[6];
  int deletions;
} Producer;

static void delete_legacy(DLManagedTensor* self) {
  ((Producer*)self->manager_ctx)->deletions++;
}

static void delete_versioned(DLManagedTensorVersioned* self) {
  ((Producer*)self->manager_ctx)->deletions++;
}

/* A 2 x 3 float32 CPU tensor holding 1 .. 6, in both managed forms. */
static void produce(Producer* p) {
  memset(p, 0, sizeof *p);
  p->shape[0] = 2;
  p->shape[1] = 3;
  for (int i = 0; i < 6; ++i) p->data[i] = (float)(i + 1);
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = p->data;
  t.device.device_type = kDLCPU;
  t.ndim = 2;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = p->shape;
  p->managed.dl_tensor = t;
  p->managed.manager_ctx = p;
  p->managed.deleter = delete_legacy;
  p->versioned.version.major = COHORT_DLPACK_MAJOR_VERSION;
  p->versioned.version.minor = 0;
  p->versioned.manager_ctx = p;
  p->versioned.deleter = delete_versioned;
  p->versioned.dl_tensor = t;
}

/* The exported/borrowed descriptor describes the producer's memory, without a copy. */
static void check_describes_producer(const DLTensor* t, const Producer* p) {
  CHECK(t->data == p->data, "the tensor's data is a copy (%p, producer %p)", t->data,
        (const void*)p->data);
  CHECK(t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3, "shape");
  CHECK(t->strides != NULL && t->strides[0] == 3 && t->strides[1] == 1, "strides");
  CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1, "dtype");
  CHECK(t->device.device_type == kDLCPU && t->byte_offset == 0, "device or byte offset");
}

static void check_legacy_round_trip(void) {
  Producer p;
  produce(&p);
  cohort_buffer_t buffer = NULL;
  OK(cohort_buffer_from_dlpack(&p.managed, &buffer));
  CHECK(p.deletions == 0, "deleted on import");
  const DLTensor* t = NULL;
  OK(cohort_buffer_tensor(buffer, &t));
  check_describes_producer(t, &p);
  int read_only = -1;
  OK(cohort_buffer_is_read_only(buffer, &read_only));
  CHECK(read_only == 0, "a legacy tensor imported read-only");

  /* Two exports outlive the handle; the producer is released after the last of them. */
  DLManagedTensor* legacy = NULL;
  DLManagedTensorVersioned* versioned = NULL;
  OK(cohort_buffer_to_dlpack(buffer, &legacy));
  OK(cohort_buffer_to_dlpack_versioned(buffer, &versioned));
  check_describes_producer(&legacy->dl_tensor, &p);
  check_describes_producer(&versioned->dl_tensor, &p);
  CHECK(versioned->version.major == COHORT_DLPACK_MAJOR_VERSION, "export major version");
  CHECK(versioned->flags == 0, "export flags %llu", (unsigned long long)versioned->flags);
  OK(cohort_buffer_destroy(buffer));
  CHECK(p.deletions == 0, "deleted while exports are alive");
  legacy->deleter(legacy);
  CHECK(p.deletions == 0, "deleted while a versioned export is alive");
  versioned->deleter(versioned);
  CHECK(p.deletions == 1, "%d deletions after the last export went", p.deletions);
}

static void check_versioned_read_only(void) {
  Producer p;
  produce(&p);
  p.versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  cohort_buffer_t buffer = NULL;
  OK(cohort_buffer_from_dlpack_versioned(&p.versioned, &buffer));
  int read_only = 0;
  OK(cohort_buffer_is_read_only(buffer, &read_only));
  CHECK(read_only == 1, "the read-only flag was lost on import");
  DLManagedTensorVersioned* exported = NULL;
  OK(cohort_buffer_to_dlpack_versioned(buffer, &exported));
  CHECK((exported->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, "the read-only flag was lost");
  exported->deleter(exported);
  /* A legacy tensor would let its consumer write the producer's read-only memory. */
  DLManagedTensor* legacy = (DLManagedTensor*)&p; /* overwritten with NULL on failure */
  EXPECT_STATUS(cohort_buffer_to_dlpack(buffer, &legacy), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(legacy == NULL, "a refused export left *tensor set");
  CHECK(strstr(cohort_last_error_message(), "read-only") != NULL, "error: %s",
        cohort_last_error_message());
  CHECK(p.deletions == 0, "deleted while the buffer is alive");
  OK(cohort_buffer_destroy(buffer));
  CHECK(p.deletions == 1, "%d deletions", p.deletions);
}

/* Every rejected import has called the deleter exactly once by the time it returns. */
static void check_import_errors(void) {
  Producer p;
  cohort_buffer_t buffer = NULL;

  produce(&p);
  p.managed.dl_tensor.dtype.lanes = 4;
  buffer = (cohort_buffer_t)&buffer;
  EXPECT_STATUS(cohort_buffer_from_dlpack(&p.managed, &buffer), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cohort_last_error_message(), "lanes") != NULL, "message: %s",
        cohort_last_error_message());
  CHECK(p.deletions == 1 && buffer == NULL, "lanes: %d deletions, buffer %p", p.deletions,
        (void*)buffer);

  produce(&p);
  p.managed.dl_tensor.device.device_type = (DLDeviceType)7; /* Vulkan: not for cohort */
  EXPECT_STATUS(cohort_buffer_from_dlpack(&p.managed, &buffer), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(p.deletions == 1, "device: %d deletions", p.deletions);

  produce(&p);
  p.shape[1] = -3;
  EXPECT_STATUS(cohort_buffer_from_dlpack(&p.managed, &buffer), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(p.deletions == 1, "negative shape: %d deletions", p.deletions);

  produce(&p);
  p.versioned.version.major = COHORT_DLPACK_MAJOR_VERSION + 1;
  EXPECT_STATUS(cohort_buffer_from_dlpack_versioned(&p.versioned, &buffer),
                COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cohort_last_error_message(), "major version") != NULL, "message: %s",
        cohort_last_error_message());
  CHECK(p.deletions == 1, "major version: %d deletions", p.deletions);

  /* A NULL out-parameter still takes (and so releases) the tensor, as cohort.h promises. */
  produce(&p);
  EXPECT_STATUS(cohort_buffer_from_dlpack(&p.managed, NULL), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(p.deletions == 1, "NULL out-parameter: %d deletions", p.deletions);

  /* Nothing to release: NULL tensors and handles. */
  EXPECT_STATUS(cohort_buffer_from_dlpack(NULL, &buffer), COHORT_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(cohort_buffer_from_dlpack_versioned(NULL, &buffer), COHORT_ERROR_INVALID_ARGUMENT);
  const DLTensor* t = NULL;
  EXPECT_STATUS(cohort_buffer_tensor(NULL, &t), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cohort_last_error_message(), "buffer handle is NULL") != NULL, "message: %s",
        cohort_last_error_message());
  DLManagedTensor* exported = (DLManagedTensor*)&exported;
  EXPECT_STATUS(cohort_buffer_to_dlpack(NULL, &exported), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(exported == NULL, "a failed export left a tensor");
  OK(cohort_buffer_destroy(NULL));
}

/* A read-only buffer's descriptor is read-only to the collectives too: refused as an output,
 * accepted as an input. */
static void check_read_only_in_collective(cohort_comm_t world) {
  Producer p;
  produce(&p);
  p.versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  cohort_buffer_t buffer = NULL;
  OK(cohort_buffer_from_dlpack_versioned(&p.versioned, &buffer));
  const DLTensor* t = NULL;
  OK(cohort_buffer_tensor(buffer, &t));
  EXPECT_STATUS(cohort_allreduce(world, NULL, t, COHORT_SUM, NULL), COHORT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cohort_last_error_message(), "read-only") != NULL, "message: %s",
        cohort_last_error_message());
  float out[6] = {0};
  int64_t shape[1] = {6};
  DLTensor writable = *t;
  writable.data = out;
  writable.ndim = 1;
  writable.shape = shape;
  writable.strides = NULL;
  OK(cohort_allreduce(world, t, &writable, COHORT_SUM, NULL)); /* read from it: fine */
  for (int i = 0; i < 6; ++i) CHECK(out[i] == p.data[i], "out[%d] = %g", i, (double)out[i]);
  OK(cohort_buffer_destroy(buffer));
}

/* An imported buffer goes through a collective in place (a world of one: no launcher here). */
static void check_buffer_in_collective(cohort_comm_t world) {
  Producer p;
  produce(&p);
  cohort_buffer_t buffer = NULL;
  OK(cohort_buffer_from_dlpack(&p.managed, &buffer));
  const DLTensor* t = NULL;
  OK(cohort_buffer_tensor(buffer, &t));
  OK(cohort_allreduce(world, NULL, t, COHORT_SUM, NULL));
  for (int i = 0; i < 6; ++i) CHECK(p.data[i] == (float)(i + 1), "sum over one rank [%d]", i);
  cohort_work_t work = NULL;
  OK(cohort_broadcast_async(world, NULL, t, 0, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  /* make_stream_wait on a host op has no device to order: it waits like cohort_work_wait. */
  OK(cohort_allreduce_async(world, NULL, t, COHORT_SUM, NULL, &work));
  OK(cohort_work_make_stream_wait(work, (uintptr_t)0));
  int done = 0;
  OK(cohort_work_test(work, &done));
  CHECK(done == 1, "cohort_work_make_stream_wait returned before a host op finished");
  OK(cohort_work_destroy(work));
  EXPECT_STATUS(cohort_work_make_stream_wait(NULL, 0), COHORT_ERROR_INVALID_ARGUMENT);
  OK(cohort_buffer_destroy(buffer));
  CHECK(p.deletions == 1, "%d deletions", p.deletions);
}

/* struct_size versions option structs: a caller built against an older, shorter struct has
 * its missing fields defaulted (never read), a newer, longer one is accepted. */
/* The exported cohort_collective_options_init, as a program built when it was not inline calls
 * it: it writes the first published layout (up to `algorithm`) and not a byte further. */
static void check_exported_options_init(void) {
  typedef cohort_status_t (*init_function)(cohort_collective_options_t*);
  void* symbol = dlsym(RTLD_DEFAULT, "cohort_collective_options_init");
  CHECK(symbol != NULL, "cohort_collective_options_init is not exported: %s", dlerror());
  init_function init;
  memcpy(&init, &symbol, sizeof init);
  const size_t first_layout =
      (offsetof(cohort_collective_options_t, algorithm) + sizeof(int32_t) + sizeof(size_t) - 1) /
      sizeof(size_t) * sizeof(size_t);
  unsigned char memory[64];
  memset(memory, 0xA5, sizeof memory);
  cohort_collective_options_t* options = (cohort_collective_options_t*)(void*)memory;
  CHECK(init(options) == COHORT_OK, "exported init: %s", cohort_last_error_message());
  CHECK(options->struct_size == first_layout, "exported init wrote struct_size %zu",
        options->struct_size);
  for (size_t i = first_layout; i < sizeof memory; ++i)
    CHECK(memory[i] == 0xA5, "exported init wrote byte %zu, past the first layout", i);
}

static void check_option_sizes(cohort_comm_t world) {
  cohort_collective_options_t options;
  memset(&options, 0xff, sizeof options);
  OK(cohort_collective_options_init(&options));
  CHECK(options.struct_size == sizeof options && options.timeout_ms == 0 &&
            options.algorithm == COHORT_ALGORITHM_AUTO && options.has_stream == 0 &&
            options.stream == 0,
        "cohort_collective_options_init");
  cohort_collective_options_t from_macro = COHORT_COLLECTIVE_OPTIONS_INIT;
  CHECK(from_macro.struct_size == sizeof from_macro && from_macro.timeout_ms == 0 &&
            from_macro.algorithm == COHORT_ALGORITHM_AUTO && from_macro.has_stream == 0 &&
            from_macro.stream == 0,
        "COHORT_COLLECTIVE_OPTIONS_INIT");
  cohort_init_options_t init;
  memset(&init, 0xff, sizeof init);
  OK(cohort_init_options_init(&init));
  CHECK(init.struct_size == sizeof init && init.timeout_ms == 0, "cohort_init_options_init");

  options.algorithm = (cohort_algorithm_t)99;
  EXPECT_STATUS(cohort_barrier(world, &options), COHORT_ERROR_INVALID_ARGUMENT);
  /* The same struct from a caller whose header ended before `algorithm`: never read. */
  options.struct_size = offsetof(cohort_collective_options_t, algorithm);
  OK(cohort_barrier(world, &options));
  options.struct_size = sizeof(size_t);
  options.timeout_ms = -1;
  OK(cohort_barrier(world, &options));

  struct {
    cohort_collective_options_t known;
    uint64_t appended_later;
  } newer;
  memset(&newer, 0, sizeof newer);
  newer.known.struct_size = sizeof newer;
  newer.known.timeout_ms = 5000;
  newer.known.algorithm = COHORT_ALGORITHM_AUTO;
  OK(cohort_barrier(world, &newer.known));

  /* A stream is for device ops: an op on host tensors accepts and ignores it. */
  OK(cohort_collective_options_init(&options));
  options.has_stream = 1;
  options.stream = (uintptr_t)0x1234;
  float value = 3.0f;
  int64_t one = 1;
  DLTensor scalar;
  memset(&scalar, 0, sizeof scalar);
  scalar.data = &value;
  scalar.device.device_type = kDLCPU;
  scalar.ndim = 1;
  scalar.shape = &one;
  scalar.dtype.code = kDLFloat;
  scalar.dtype.bits = 32;
  scalar.dtype.lanes = 1;
  OK(cohort_allreduce(world, NULL, &scalar, COHORT_SUM, &options));
  CHECK(value == 3.0f, "allreduce over one rank with a stream gave %f", (double)value);
  /* A caller whose header ended before has_stream: the bytes there (the older struct's tail
   * padding) are never read, whatever they hold. A barrier shows it: given a stream it would
   * run on NCCL (see cohort/communicator.hpp), here it stays on the host. */
  options.struct_size = offsetof(cohort_collective_options_t, has_stream);
  OK(cohort_barrier(world, &options));
  options.struct_size = offsetof(cohort_collective_options_t, stream);
  OK(cohort_barrier(world, &options));

  options.struct_size = 1;
  EXPECT_STATUS(cohort_barrier(world, &options), COHORT_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(cohort_collective_options_init(NULL), COHORT_ERROR_INVALID_ARGUMENT);
}

static void check_mappable_allocation(void) {
  const DLDataType f32 = {kDLFloat, 32, 1};
  cohort_buffer_t buffer = NULL;
  OK(cohort_buffer_allocate_mappable(1000, f32, &buffer));
  const DLTensor* t = NULL;
  OK(cohort_buffer_tensor(buffer, &t));
  CHECK(t->data != NULL && t->ndim == 1 && t->shape[0] == 1000, "mappable buffer's shape");
  CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32, "mappable buffer's dtype");
  CHECK(t->device.device_type == kDLCPU, "mappable buffer's device");
  const float* values = (const float*)t->data;
  for (int i = 0; i < 1000; ++i) CHECK(values[i] == 0.0f, "element %d is not zero", i);
  OK(cohort_buffer_destroy(buffer));

  buffer = (cohort_buffer_t)1;
  CHECK(cohort_buffer_allocate_mappable(-1, f32, &buffer) == COHORT_ERROR_INVALID_ARGUMENT,
        "a negative count");
  CHECK(buffer == NULL, "*buffer not cleared on failure");
  CHECK(strstr(cohort_last_error_message(), "negative") != NULL, "message: %s",
        cohort_last_error_message());
  const DLDataType unknown = {kDLFloat, 24, 1};
  CHECK(cohort_buffer_allocate_mappable(10, unknown, &buffer) == COHORT_ERROR_INVALID_ARGUMENT,
        "an unknown dtype");
  CHECK(strstr(cohort_last_error_message(), "24 bits") != NULL, "message: %s",
        cohort_last_error_message());
  CHECK(cohort_buffer_allocate_mappable(10, f32, NULL) == COHORT_ERROR_INVALID_ARGUMENT,
        "a NULL out-parameter");
}

static void check_kept_mappable(void) {
  const DLDataType f32 = {kDLFloat, 32, 1};
  size_t kept = 1;
  OK(cohort_buffer_release_kept_mappable(NULL)); /* what earlier checks left */
  OK(cohort_buffer_kept_mappable_bytes(&kept));
  CHECK(kept == 0, "%zu bytes kept after a release", kept);
  cohort_buffer_t buffer = NULL;
  OK(cohort_buffer_allocate_mappable(1000, f32, &buffer));
  OK(cohort_buffer_destroy(buffer));
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  OK(cohort_buffer_kept_mappable_bytes(&kept));
  CHECK(kept == page, "a freed 4000-byte buffer: %zu bytes kept, not one page", kept);
  size_t released = 0;
  OK(cohort_buffer_release_kept_mappable(&released));
  CHECK(released == page, "released %zu bytes, not one page", released);
  OK(cohort_buffer_kept_mappable_bytes(&kept));
  CHECK(kept == 0, "%zu bytes still kept", kept);
  CHECK(cohort_buffer_kept_mappable_bytes(NULL) == COHORT_ERROR_INVALID_ARGUMENT,
        "a NULL out-parameter");
}

int main(void) {
  check_legacy_round_trip();
  check_versioned_read_only();
  check_import_errors();
  check_mappable_allocation();
  check_kept_mappable();

  cohort_comm_t world = NULL;
  OK(cohort_init(NULL, &world));
  int size = 0;
  OK(cohort_comm_size(world, &size));
  CHECK(size == 1, "expected a world of one without a launcher, got %d ranks", size);
  check_buffer_in_collective(world);
  check_read_only_in_collective(world);
  check_option_sizes(world);
  check_exported_options_init();
  OK(cohort_comm_destroy(world));
  puts("capi_buffers_test: ok");
  return 0;
}
