/* The C ABI's async forms, send/recv around a ring, and a wait that times out (see
 * capi_collectives_main.c). */

#include "capi_test.h"

/* ---- async forms ------------------------------------------------------------------------ */

void check_async(cohort_comm_t comm) {
  /* Three ops in flight at once, waited for in reverse order. */
  float sum[COUNT];
  int64_t gathered[MAX_RANKS], mine = 7 * g_rank;
  int32_t bcast[COUNT];
  for (int i = 0; i < COUNT; ++i) sum[i] = (float)(g_rank * i), bcast[i] = g_rank == 0 ? i : -1;
  Vec v1, v2, v3, v4;
  cohort_work_t works[3] = {NULL, NULL, NULL};
  OK(cohort_allreduce_async(comm, NULL, vec(&v1, sum, COUNT, F32), COHORT_SUM, NULL, &works[0]));
  OK(cohort_allgather_async(comm, vec(&v2, &mine, 1, I64), vec(&v3, gathered, g_size, I64), NULL,
                            &works[1]));
  OK(cohort_broadcast_async(comm, NULL, vec(&v4, bcast, COUNT, I32), 0, NULL, &works[2]));
  /* Descriptors are copied at call time: scribbling over them (shape included) while the ops
   * run changes nothing. Only the data must stay valid. */
  memset(&v1, 0xff, sizeof v1);
  memset(&v2, 0xff, sizeof v2);
  memset(&v3, 0xff, sizeof v3);
  memset(&v4, 0xff, sizeof v4);
  for (int w = 2; w >= 0; --w) {
    CHECK(works[w] != NULL, "async op %d returned no work", w);
    OK(cohort_work_wait(works[w], -1));
    int done = 0;
    OK(cohort_work_test(works[w], &done));
    CHECK(done == 1, "work %d not done after wait", w);
    OK(cohort_work_wait(works[w], 0)); /* waiting again returns the outcome at once */
    OK(cohort_work_destroy(works[w]));
  }
  for (int i = 0; i < COUNT; ++i) {
    CHECK(sum[i] == (float)(sum_of_ranks() * i), "async allreduce [%d] = %g", i, sum[i]);
    CHECK(bcast[i] == i, "async broadcast [%d] = %d", i, bcast[i]);
  }
  for (int r = 0; r < g_size; ++r)
    CHECK(gathered[r] == 7 * r, "async allgather [%d] = %lld", r, (long long)gathered[r]);

  /* Every remaining async form once, each waited for before its result is read. */
  cohort_work_t work = NULL;
  int32_t prod[COUNT], prod_out[COUNT];
  for (int i = 0; i < COUNT; ++i) prod[i] = 1 + (g_rank == 0 ? i : 0);
  OK(cohort_reduce_async(comm, vec(&v1, prod, COUNT, I32), vec(&v2, prod_out, COUNT, I32),
                         COHORT_PROD, 0, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  if (g_rank == 0)
    for (int i = 0; i < COUNT; ++i) CHECK(prod_out[i] == 1 + i, "async reduce [%d]", i);

  size_t counts[MAX_RANKS];
  rank_counts(counts);
  const int total = block_offset(g_size);
  int32_t vbuf[MAX_RANKS * (MAX_RANKS + 1) / 2], part[MAX_RANKS];
  for (int j = 0; j <= g_rank; ++j) part[j] = 3 * g_rank + j;
  OK(cohort_allgatherv_async(comm, vec(&v1, part, g_rank + 1, I32), vec(&v2, vbuf, total, I32),
                             counts, (size_t)g_size, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  for (int r = 0; r < g_size; ++r)
    for (int j = 0; j <= r; ++j)
      CHECK(vbuf[block_offset(r) + j] == 3 * r + j, "async allgatherv %d [%d]", r, j);

  int32_t one = g_rank + 1, all[MAX_RANKS];
  OK(cohort_gather_async(comm, vec(&v1, &one, 1, I32),
                         g_rank == 0 ? vec(&v2, all, g_size, I32) : NULL, 0, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  if (g_rank == 0)
    for (int r = 0; r < g_size; ++r) CHECK(all[r] == r + 1, "async gather [%d]", r);

  OK(cohort_gatherv_async(comm, vec(&v1, part, g_rank + 1, I32),
                          g_rank == 0 ? vec(&v2, vbuf, total, I32) : NULL, counts, (size_t)g_size,
                          0, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  if (g_rank == 0)
    for (int r = 0; r < g_size; ++r)
      for (int j = 0; j <= r; ++j)
        CHECK(vbuf[block_offset(r) + j] == 3 * r + j, "async gatherv %d [%d]", r, j);

  for (int r = 0; r < g_size; ++r) all[r] = 11 * r;
  OK(cohort_scatter_async(comm, vec(&v1, all, g_size, I32), vec(&v2, &one, 1, I32), 0, NULL,
                          &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  CHECK(one == 11 * g_rank, "async scatter = %d", one);

  for (int k = 0; k < total; ++k) vbuf[k] = 5 * k;
  OK(cohort_scatterv_async(comm, vec(&v1, vbuf, total, I32), vec(&v2, part, g_rank + 1, I32),
                           counts, (size_t)g_size, 0, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  for (int j = 0; j <= g_rank; ++j)
    CHECK(part[j] == 5 * (block_offset(g_rank) + j), "async scatterv [%d] = %d", j, part[j]);

  int64_t blocks[MAX_RANKS], reduced = -1;
  for (int r = 0; r < g_size; ++r) blocks[r] = g_rank * r;
  OK(cohort_reduce_scatter_async(comm, vec(&v1, blocks, g_size, I64), vec(&v2, &reduced, 1, I64),
                                 COHORT_SUM, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  CHECK(reduced == (int64_t)(sum_of_ranks() * g_rank), "async reduce_scatter = %lld",
        (long long)reduced);

  int64_t exchanged[MAX_RANKS];
  for (int j = 0; j < g_size; ++j) blocks[j] = 10 * g_rank + j;
  OK(cohort_alltoall_async(comm, vec(&v1, blocks, g_size, I64), vec(&v2, exchanged, g_size, I64),
                           NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  for (int s = 0; s < g_size; ++s) CHECK(exchanged[s] == 10 * s + g_rank, "async alltoall [%d]", s);

  /* alltoallv with one element each way, which is alltoall again, in place. */
  size_t ones[MAX_RANKS];
  for (int j = 0; j < g_size; ++j) ones[j] = 1, blocks[j] = 10 * g_rank + j;
  OK(cohort_alltoallv_async(comm, NULL, ones, (size_t)g_size, vec(&v1, blocks, g_size, I64), ones,
                            (size_t)g_size, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
  for (int s = 0; s < g_size; ++s) CHECK(blocks[s] == 10 * s + g_rank, "async alltoallv [%d]", s);

  OK(cohort_barrier_async(comm, NULL, &work));
  OK(cohort_work_wait(work, -1));
  OK(cohort_work_destroy(work));
}

/* ---- point-to-point --------------------------------------------------------------------- */

void check_ring(cohort_comm_t comm) {
  if (g_size < 2) return;
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  /* Blocking: even ranks send first, odd ranks receive first, so no two ranks both block in a
   * send to each other (with 3 ranks, rank 2 sends to rank 0 once rank 0's first send is done). */
  int32_t out[COUNT], in[COUNT];
  for (int i = 0; i < COUNT; ++i) out[i] = 10 * g_rank + i, in[i] = -1;
  Vec vo, vi;
  const DLTensor* send_t = vec(&vo, out, COUNT, I32);
  const DLTensor* recv_t = vec(&vi, in, COUNT, I32);
  if (g_rank % 2 == 0) {
    OK(cohort_send(comm, send_t, next, 3, NULL));
    OK(cohort_recv(comm, recv_t, prev, 3, NULL));
  } else {
    OK(cohort_recv(comm, recv_t, prev, 3, NULL));
    OK(cohort_send(comm, send_t, next, 3, NULL));
  }
  for (int i = 0; i < COUNT; ++i) CHECK(in[i] == 10 * prev + i, "ring recv [%d] = %d", i, in[i]);

  /* Async both ways around the ring at once, tag 4. */
  cohort_work_t sending = NULL, receiving = NULL;
  for (int i = 0; i < COUNT; ++i) in[i] = -1;
  OK(cohort_recv_async(comm, recv_t, next, 4, NULL, &receiving));
  OK(cohort_send_async(comm, send_t, prev, 4, NULL, &sending));
  OK(cohort_work_wait(sending, -1));
  OK(cohort_work_wait(receiving, -1));
  OK(cohort_work_destroy(sending));
  OK(cohort_work_destroy(receiving));
  for (int i = 0; i < COUNT; ++i) CHECK(in[i] == 10 * next + i, "async ring [%d] = %d", i, in[i]);

  /* sendrecv: the whole ring in one call per rank, tag 5; the same buffer both ways is refused. */
  for (int i = 0; i < COUNT; ++i) in[i] = -1;
  OK(cohort_sendrecv(comm, send_t, next, recv_t, prev, 5, NULL));
  for (int i = 0; i < COUNT; ++i) CHECK(in[i] == 10 * prev + i, "sendrecv [%d] = %d", i, in[i]);
  FAILS(cohort_sendrecv(comm, send_t, next, send_t, prev, 5, NULL), COHORT_ERROR_INVALID_ARGUMENT,
        "overlap");
}

/* A wait with a deadline returns TIMEOUT while the peer has provably not sent yet: rank 1 sends
 * only after rank 0 has entered a barrier on a duplicate communicator, which it does after its
 * wait(0) and test. No sleep orders anything. */
void check_wait_timeout(cohort_comm_t comm) {
  if (g_size < 2) return;
  cohort_comm_t side = NULL;
  OK(cohort_comm_dup(comm, &side));
  int64_t value = -1, sent = 4242;
  Vec v;
  if (g_rank == 0) {
    cohort_work_t work = NULL;
    OK(cohort_recv_async(comm, vec(&v, &value, 1, I64), 1, 9, NULL, &work));
    FAILS(cohort_work_wait(work, 0), COHORT_ERROR_TIMEOUT, "did not finish");
    int done = 1;
    OK(cohort_work_test(work, &done));
    CHECK(done == 0, "recv finished before its peer sent");
    OK(cohort_barrier(side, NULL));
    OK(cohort_work_wait(work, -1));
    OK(cohort_work_destroy(work));
    CHECK(value == 4242, "late recv got %lld", (long long)value);
  } else {
    OK(cohort_barrier(side, NULL));
    if (g_rank == 1) OK(cohort_send(comm, vec(&v, &sent, 1, I64), 0, 9, NULL));
  }
  OK(cohort_comm_destroy(side));
}
