/* Shared by the C ABI's multi-rank test (capi_collectives_main.c and the files it calls into):
 * checking macros that name the rank and line of a failure, and 1-D tensors over local arrays.
 * Plain C11 against cohort.h only. */

#ifndef COHORT_TEST_CAPI_TEST_H_
#define COHORT_TEST_CAPI_TEST_H_

#include <cohort/cohort.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This process's rank and the world size, set once by main. */
extern int g_rank;
extern int g_size;

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "capi_collectives_test rank %d, %s:%d: ", g_rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                                          \
      fputc('\n', stderr);                                                                   \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define OK(call)                                                                          \
  do {                                                                                    \
    cohort_status_t status_ = (call);                                                     \
    CHECK(status_ == COHORT_OK, "%s returned %s: %s", #call, cohort_status_name(status_), \
          cohort_last_error_message());                                                   \
  } while (0)

/* Expects `call` to fail with `expected` and a message containing `needle`. */
#define FAILS(call, expected, needle)                                                              \
  do {                                                                                             \
    cohort_status_t status_ = (call);                                                              \
    CHECK(status_ == (expected), "%s returned %s, expected %s (%s)", #call,                        \
          cohort_status_name(status_), cohort_status_name(expected), cohort_last_error_message()); \
    CHECK(strstr(cohort_last_error_message(), (needle)) != NULL,                                   \
          "%s: message \"%s\" does not mention \"%s\"", #call, cohort_last_error_message(),        \
          (needle));                                                                               \
  } while (0)

#define F32 ((DLDataType){kDLFloat, 32, 1})
#define F64 ((DLDataType){kDLFloat, 64, 1})
#define I32 ((DLDataType){kDLInt, 32, 1})
#define I64 ((DLDataType){kDLInt, 64, 1})

#define COUNT 7 /* elements per rank in most ops: prime, so no op divides it evenly by accident */
#define MAX_RANKS 16

/* A 1-D tensor owning its shape entry, so its DLTensor stays valid while the struct lives. */
typedef struct {
  DLTensor dl;
  int64_t count;
} Vec;

/* Points v at `count` elements of `data` and returns its DLTensor. */
static inline const DLTensor* vec(Vec* v, void* data, int64_t count, DLDataType dtype) {
  memset(v, 0, sizeof *v);
  v->count = count;
  v->dl.data = data;
  v->dl.device.device_type = kDLCPU;
  v->dl.device.device_id = 0;
  v->dl.ndim = 1;
  v->dl.dtype = dtype;
  v->dl.shape = &v->count;
  v->dl.strides = NULL;
  v->dl.byte_offset = 0;
  return &v->dl;
}

/* 0 + 1 + ... + (n - 1). */
static inline double sum_of_ranks(void) {
  return g_size * (g_size - 1) / 2.0;
}
/* The v-collectives' layout: rank r has r + 1 elements, at offset r(r + 1) / 2. */
static inline void rank_counts(size_t* counts) {
  for (int r = 0; r < g_size; ++r) counts[r] = (size_t)r + 1;
}
static inline int block_offset(int r) {
  return r * (r + 1) / 2;
}

/* capi_collectives.c: every blocking collective, in and out of place. */
void check_blocking_collectives(cohort_comm_t comm);
/* capi_async.c: every async form, send/recv around a ring, a wait that times out. */
void check_async(cohort_comm_t comm);
void check_ring(cohort_comm_t comm);
void check_wait_timeout(cohort_comm_t comm);
/* capi_errors.c: the statuses and messages of bad calls; the communicator survives them. */
void check_errors(cohort_comm_t comm);

#endif /* COHORT_TEST_CAPI_TEST_H_ */
