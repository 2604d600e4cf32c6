/* The statuses and messages of bad calls to the C ABI, each rejected before any byte moves, so
 * the communicator keeps working afterwards (see capi_collectives_main.c). */

#include "capi_test.h"

void check_errors(cohort_comm_t comm) {
  int32_t a[2 * MAX_RANKS], b[2 * MAX_RANKS];
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  Vec va, vb;
  char needle[64];

  /* A root out of range, blocking and async: the message names the root. */
  snprintf(needle, sizeof needle, "root %d", g_size);
  FAILS(cohort_broadcast(comm, NULL, vec(&vb, b, 2, I32), g_size, NULL),
        COHORT_ERROR_INVALID_ARGUMENT, needle);
  cohort_work_t work = (cohort_work_t)&work;
  FAILS(cohort_reduce_async(comm, vec(&va, a, 2, I32), vec(&vb, b, 2, I32), COHORT_SUM, g_size,
                            NULL, &work),
        COHORT_ERROR_INVALID_ARGUMENT, needle);
  CHECK(work == NULL, "a failed async call left a work handle");
  FAILS(cohort_gather(comm, vec(&va, a, 1, I32), vec(&vb, b, g_size, I32), -1, NULL),
        COHORT_ERROR_INVALID_ARGUMENT, "root -1");

  /* An output one element too small. */
  snprintf(needle, sizeof needle, "output has %d elements, expected %d", 2 * g_size - 1,
           2 * g_size);
  FAILS(cohort_allgather(comm, vec(&va, a, 2, I32), vec(&vb, b, 2 * g_size - 1, I32), NULL),
        COHORT_ERROR_INVALID_ARGUMENT, needle);
  FAILS(cohort_allreduce(comm, vec(&va, a, 2, I32), vec(&vb, b, 1, I32), COHORT_SUM, NULL),
        COHORT_ERROR_INVALID_ARGUMENT, "output has 1 elements, expected 2");

  /* NULL handles, tensors and out-parameters. */
  int value = 0;
  FAILS(cohort_allreduce(NULL, NULL, vec(&vb, b, 2, I32), COHORT_SUM, NULL),
        COHORT_ERROR_INVALID_ARGUMENT, "communicator handle is NULL");
  FAILS(cohort_comm_rank(NULL, &value), COHORT_ERROR_INVALID_ARGUMENT, "handle is NULL");
  FAILS(cohort_barrier(NULL, NULL), COHORT_ERROR_INVALID_ARGUMENT, "handle is NULL");
  FAILS(cohort_work_wait(NULL, -1), COHORT_ERROR_INVALID_ARGUMENT, "work handle is NULL");
  FAILS(cohort_work_test(NULL, &value), COHORT_ERROR_INVALID_ARGUMENT, "work handle is NULL");
  FAILS(cohort_allreduce(comm, NULL, NULL, COHORT_SUM, NULL), COHORT_ERROR_INVALID_ARGUMENT,
        "out tensor is NULL");
  FAILS(cohort_send(comm, NULL, 0, 0, NULL), COHORT_ERROR_INVALID_ARGUMENT, "in tensor is NULL");
  FAILS(cohort_comm_size(comm, NULL), COHORT_ERROR_INVALID_ARGUMENT, "size (out-parameter)");
  FAILS(cohort_barrier_async(comm, NULL, NULL), COHORT_ERROR_INVALID_ARGUMENT, "work");

  /* Values outside the enums, bad options, a tensor cohort cannot describe, a bad peer. */
  FAILS(cohort_allreduce(comm, NULL, vec(&vb, b, 2, I32), (cohort_reduce_op_t)42, NULL),
        COHORT_ERROR_INVALID_ARGUMENT, "reduce op 42");
  cohort_collective_options_t options = COHORT_COLLECTIVE_OPTIONS_INIT;
  options.timeout_ms = -5;
  FAILS(cohort_barrier(comm, &options), COHORT_ERROR_INVALID_ARGUMENT, "timeout_ms is -5");
  options.timeout_ms = INT64_MAX; /* a deadline that would overflow the clock */
  FAILS(cohort_barrier(comm, &options), COHORT_ERROR_INVALID_ARGUMENT, "more than one year");
  options.timeout_ms = 0;
  options.struct_size = 0;
  FAILS(cohort_barrier(comm, &options), COHORT_ERROR_INVALID_ARGUMENT, "struct_size is 0");
  const DLTensor* two_lanes = vec(&vb, b, 2, I32);
  vb.dl.dtype.lanes = 2;
  FAILS(cohort_allreduce(comm, NULL, two_lanes, COHORT_SUM, NULL), COHORT_ERROR_INVALID_ARGUMENT,
        "lanes");
  FAILS(cohort_send(comm, vec(&va, a, 1, I32), g_rank, 0, NULL), COHORT_ERROR_INVALID_ARGUMENT,
        "peer");
  uint8_t flags[2] = {1, 0};
  const DLDataType kBool = {COHORT_DL_BOOL, 8, 1};
  FAILS(cohort_allreduce(comm, NULL, vec(&vb, flags, 2, kBool), COHORT_AVG, NULL),
        COHORT_ERROR_INVALID_ARGUMENT, "not defined for dtype bool");
  OK(cohort_barrier_async(comm, NULL, &work));
  FAILS(cohort_work_wait(work, -7), COHORT_ERROR_INVALID_ARGUMENT, "timeout_ms is -7");
  FAILS(cohort_work_wait(work, INT64_MAX), COHORT_ERROR_INVALID_ARGUMENT, "one year");
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));

  /* None of that moved a byte or poisoned anything: the communicator still works. */
  int64_t one = 1;
  OK(cohort_allreduce(comm, NULL, vec(&va, &one, 1, I64), COHORT_SUM, NULL));
  CHECK(one == g_size, "allreduce after the errors = %lld", (long long)one);
}
