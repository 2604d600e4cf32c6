/* The C ABI across real ranks: run under cohort-run (any world size; the suite uses 1, 2 and 3).
 * Every collective, blocking and async, in and out of place, checked against values written out
 * by hand from the rank and the world size; send/recv around a ring; split by parity and dup;
 * a wait that times out before its peer sends; and the error statuses a caller can cause (bad
 * root, output too small, NULL handle or tensor, unknown op), after which the communicator keeps
 * working. Plain C11 against cohort.h only: the install test builds these same files against the
 * installed header and cohort.pc. Exits non-zero naming the rank and line of the first mismatch. */

#include "capi_test.h"

int g_rank = -1;
int g_size = 0;

/* ---- split and dup ---------------------------------------------------------------------- */

static void check_split(cohort_comm_t comm) {
  /* By parity, keyed by -rank: the members of a parity group in descending world rank. */
  cohort_comm_t half = NULL;
  OK(cohort_comm_split(comm, g_rank % 2, -g_rank, &half));
  CHECK(half != NULL, "split gave no communicator");
  int members = 0, higher = 0, sum = 0;
  for (int r = g_rank % 2; r < g_size; r += 2) {
    ++members;
    sum += r;
    if (r > g_rank) ++higher;
  }
  int rank = -1, size = -1;
  OK(cohort_comm_rank(half, &rank));
  OK(cohort_comm_size(half, &size));
  CHECK(size == members, "split size %d, expected %d", size, members);
  CHECK(rank == higher, "split rank %d, expected %d", rank, higher);
  int64_t total = g_rank;
  Vec v;
  OK(cohort_allreduce(half, NULL, vec(&v, &total, 1, I64), COHORT_SUM, NULL));
  CHECK(total == sum, "allreduce over the parity group = %lld, expected %d", (long long)total, sum);

  /* COHORT_NO_COLOR on rank 0: it takes part and gets NULL; the others form one group. */
  cohort_comm_t rest = (cohort_comm_t)&rest; /* any non-NULL value: split must overwrite it */
  OK(cohort_comm_split(comm, g_rank == 0 ? COHORT_NO_COLOR : 0, g_rank, &rest));
  if (g_rank == 0) {
    CHECK(rest == NULL, "a COHORT_NO_COLOR rank got a communicator");
  } else {
    OK(cohort_comm_size(rest, &size));
    CHECK(size == g_size - 1, "split without rank 0 has size %d", size);
  }
  OK(cohort_comm_destroy(rest));

  cohort_comm_t twin = NULL;
  OK(cohort_comm_dup(comm, &twin));
  OK(cohort_comm_size(twin, &size));
  OK(cohort_comm_rank(twin, &rank));
  CHECK(size == g_size && rank == g_rank, "dup is rank %d of %d", rank, size);
  total = 1;
  OK(cohort_allreduce(twin, NULL, vec(&v, &total, 1, I64), COHORT_SUM, NULL));
  CHECK(total == g_size, "allreduce on the dup = %lld", (long long)total);
  OK(cohort_comm_destroy(twin));
  OK(cohort_comm_destroy(half));

  /* abort: local, immediate, sticky; the communicator it was duplicated from is unaffected. */
  cohort_comm_t doomed = NULL;
  OK(cohort_comm_dup(comm, &doomed));
  OK(cohort_comm_status(doomed));
  OK(cohort_comm_abort(doomed, "c test stop"));
  FAILS(cohort_comm_status(doomed), COHORT_ERROR_INVALID_USAGE, "c test stop");
  FAILS(cohort_allreduce(doomed, NULL, vec(&v, &total, 1, I64), COHORT_SUM, NULL),
        COHORT_ERROR_INVALID_USAGE, "c test stop");
  FAILS(cohort_comm_abort(NULL, NULL), COHORT_ERROR_INVALID_ARGUMENT, "comm");
  OK(cohort_comm_destroy(doomed));
  total = 1;
  OK(cohort_allreduce(comm, NULL, vec(&v, &total, 1, I64), COHORT_SUM, NULL));
  CHECK(total == g_size, "allreduce after aborting a dup = %lld", (long long)total);
}

/* The flight record through the C ABI: written where asked (or where it says), whole JSON. */
static void check_dump_trace(cohort_comm_t comm) {
  char written[4096];
  OK(cohort_comm_dump_trace(comm, NULL, written, sizeof written));
  FILE* file = fopen(written, "r");
  CHECK(file != NULL, "no flight record at %s", written);
  char head[256] = {0};
  CHECK(fread(head, 1, sizeof head - 1, file) > 0, "empty flight record at %s", written);
  fclose(file);
  CHECK(strstr(head, "cohort-flight-record") != NULL, "not a flight record: %s", head);

  char chosen[4200];
  snprintf(chosen, sizeof chosen, "%s.chosen", written);
  OK(cohort_comm_dump_trace(comm, chosen, NULL, 0));
  CHECK(remove(chosen) == 0, "no flight record at the chosen path %s", chosen);
  char tiny[4];
  FAILS(cohort_comm_dump_trace(comm, NULL, tiny, sizeof tiny), COHORT_ERROR_INVALID_ARGUMENT,
        "written_path holds 4 bytes");
  CHECK(remove(written) == 0, "could not remove %s", written);
  FAILS(cohort_comm_dump_trace(NULL, NULL, NULL, 0), COHORT_ERROR_INVALID_ARGUMENT, "NULL");
}

int main(void) {
  CHECK(strcmp(cohort_last_error_message(), "") == 0, "an error before any call: %s",
        cohort_last_error_message());
  CHECK(cohort_version()[0] != '\0', "empty version");
  CHECK(strcmp(cohort_status_name(COHORT_ERROR_TIMEOUT), "timeout") == 0, "status name");

  cohort_init_options_t init = COHORT_INIT_OPTIONS_INIT;
  init.timeout_ms = 120000;
  cohort_comm_t world = NULL;
  OK(cohort_init(&init, &world));
  OK(cohort_comm_rank(world, &g_rank));
  OK(cohort_comm_size(world, &g_size));
  CHECK(g_size <= MAX_RANKS, "this test sizes its arrays for at most %d ranks", MAX_RANKS);

  check_blocking_collectives(world);
  OK(cohort_barrier(world, NULL));
  check_async(world);
  check_ring(world);
  check_wait_timeout(world);
  check_split(world);
  check_dump_trace(world);
  check_errors(world);

  OK(cohort_barrier(world, NULL));
  OK(cohort_comm_destroy(world));
  OK(cohort_comm_destroy(NULL));
  printf("capi_collectives_test: rank %d of %d ok (cohort %s)\n", g_rank, g_size, cohort_version());
  return 0;
}
