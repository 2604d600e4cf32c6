/* The C ABI's blocking collectives across ranks, in and out of place, against values written
 * out by hand from the rank and the world size (see capi_collectives_main.c). */

#include "capi_test.h"

/* ---- allreduce, broadcast, reduce ------------------------------------------------------- */

static void check_allreduce(cohort_comm_t comm) {
  float in[COUNT], out[COUNT];
  Vec vi, vo;
  /* Out of place, f32 sum: sum over r of (r + i) = n(n-1)/2 + n*i. */
  for (int i = 0; i < COUNT; ++i) in[i] = (float)(g_rank + i), out[i] = -1.0f;
  OK(cohort_allreduce(comm, vec(&vi, in, COUNT, F32), vec(&vo, out, COUNT, F32), COHORT_SUM, NULL));
  for (int i = 0; i < COUNT; ++i) {
    CHECK(out[i] == (float)(sum_of_ranks() + g_size * i), "allreduce sum [%d] = %g", i, out[i]);
    CHECK(in[i] == (float)(g_rank + i), "allreduce wrote its input");
  }

  /* In place through a NULL input, i64 max: max over r of (10r + i) = 10(n-1) + i. */
  int64_t values[COUNT];
  for (int i = 0; i < COUNT; ++i) values[i] = 10 * g_rank + i;
  OK(cohort_allreduce(comm, NULL, vec(&vo, values, COUNT, I64), COHORT_MAX, NULL));
  for (int i = 0; i < COUNT; ++i)
    CHECK(values[i] == 10 * (g_size - 1) + i, "allreduce max [%d] = %lld", i, (long long)values[i]);

  /* In place through the same tensor, f64 average with a forced algorithm and a timeout:
   * the mean of (r + i) over ranks is (n-1)/2 + i. */
  double mean[COUNT];
  for (int i = 0; i < COUNT; ++i) mean[i] = g_rank + i;
  cohort_collective_options_t options = COHORT_COLLECTIVE_OPTIONS_INIT;
  options.timeout_ms = 60000;
  options.algorithm = COHORT_ALGORITHM_RING;
  const DLTensor* t = vec(&vo, mean, COUNT, F64);
  OK(cohort_allreduce(comm, t, t, COHORT_AVG, &options));
  for (int i = 0; i < COUNT; ++i)
    CHECK(mean[i] == (g_size - 1) / 2.0 + i, "allreduce avg [%d] = %g", i, mean[i]);

  /* A 2 x 3 tensor with explicit row-major strides: the count is the product of the shape.
   * Bitwise or of (1 << r) over ranks sets the low n bits. */
  int32_t grid[6];
  int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
  for (int k = 0; k < 6; ++k) grid[k] = 1 << g_rank;
  DLTensor t2;
  memset(&t2, 0, sizeof t2);
  t2.data = grid;
  t2.device.device_type = kDLCPU;
  t2.ndim = 2;
  t2.dtype = I32;
  t2.shape = shape;
  t2.strides = strides;
  OK(cohort_allreduce(comm, NULL, &t2, COHORT_BOR, NULL));
  for (int k = 0; k < 6; ++k)
    CHECK(grid[k] == (1 << g_size) - 1, "allreduce bor [%d] = %d", k, grid[k]);

  /* An empty tensor (no data, count 0) is a valid op that moves nothing. */
  OK(cohort_allreduce(comm, NULL, vec(&vo, NULL, 0, F32), COHORT_SUM, NULL));
}

static void check_broadcast(cohort_comm_t comm) {
  const int root = g_size - 1;
  int32_t data[COUNT], source[COUNT];
  Vec vi, vo;
  for (int i = 0; i < COUNT; ++i) source[i] = 100 + i, data[i] = -1;
  OK(cohort_broadcast(comm, g_rank == root ? vec(&vi, source, COUNT, I32) : NULL,
                      vec(&vo, data, COUNT, I32), root, NULL));
  for (int i = 0; i < COUNT; ++i) CHECK(data[i] == 100 + i, "broadcast [%d] = %d", i, data[i]);

  /* In place from root 0: the root's data is already in out. */
  for (int i = 0; i < COUNT; ++i) data[i] = g_rank == 0 ? 200 + i : -1;
  OK(cohort_broadcast(comm, NULL, vec(&vo, data, COUNT, I32), 0, NULL));
  for (int i = 0; i < COUNT; ++i) CHECK(data[i] == 200 + i, "in-place broadcast [%d]", i);

  /* Single copy forced (the last cohort_algorithm_t value): where it cannot run (a world of
   * one, a kernel refusing cross-process reads) the table's choice runs instead. */
  cohort_collective_options_t single = COHORT_COLLECTIVE_OPTIONS_INIT;
  single.algorithm = COHORT_ALGORITHM_SINGLE_COPY;
  for (int i = 0; i < COUNT; ++i) data[i] = g_rank == root ? 300 + i : -1;
  OK(cohort_broadcast(comm, NULL, vec(&vo, data, COUNT, I32), root, &single));
  for (int i = 0; i < COUNT; ++i) CHECK(data[i] == 300 + i, "single-copy broadcast [%d]", i);
}

static void check_reduce(cohort_comm_t comm) {
  const int root = 1 % g_size;
  /* i32 product of (r + 2) over ranks = (n + 1)!; out is ignored (NULL) off the root. */
  int32_t in[COUNT], out[COUNT];
  int32_t factorial = 1;
  for (int r = 0; r < g_size; ++r) factorial *= r + 2;
  Vec vi, vo;
  for (int i = 0; i < COUNT; ++i) in[i] = g_rank + 2, out[i] = -1;
  OK(cohort_reduce(comm, vec(&vi, in, COUNT, I32),
                   g_rank == root ? vec(&vo, out, COUNT, I32) : NULL, COHORT_PROD, root, NULL));
  for (int i = 0; i < COUNT; ++i) {
    if (g_rank == root) CHECK(out[i] == factorial, "reduce prod [%d] = %d", i, out[i]);
    CHECK(in[i] == g_rank + 2, "reduce wrote its input");
  }

  /* In place on the root (NULL in), f32 min of (r - i) = -i. */
  float data[COUNT];
  for (int i = 0; i < COUNT; ++i) data[i] = (float)(g_rank - i);
  const DLTensor* t = vec(&vo, data, COUNT, F32);
  OK(cohort_reduce(comm, g_rank == 0 ? NULL : t, g_rank == 0 ? t : NULL, COHORT_MIN, 0, NULL));
  if (g_rank == 0)
    for (int i = 0; i < COUNT; ++i) CHECK(data[i] == (float)-i, "reduce min [%d] = %g", i, data[i]);
}

/* ---- allgather(v), gather(v) ------------------------------------------------------------ */

static void check_allgather(cohort_comm_t comm) {
  /* Rank r contributes (10r, 10r + 1); out[2r + j] = 10r + j. */
  int64_t in[2] = {10 * g_rank, 10 * g_rank + 1};
  int64_t out[2 * MAX_RANKS];
  Vec vi, vo;
  OK(cohort_allgather(comm, vec(&vi, in, 2, I64), vec(&vo, out, 2 * g_size, I64), NULL));
  for (int r = 0; r < g_size; ++r)
    for (int j = 0; j < 2; ++j)
      CHECK(out[2 * r + j] == 10 * r + j, "allgather [%d] = %lld", 2 * r + j,
            (long long)out[2 * r + j]);

  /* In place: only this rank's block of out is set beforehand. */
  for (int k = 0; k < 2 * g_size; ++k) out[k] = -1;
  out[2 * g_rank] = 10 * g_rank;
  out[2 * g_rank + 1] = 10 * g_rank + 1;
  OK(cohort_allgather(comm, NULL, vec(&vo, out, 2 * g_size, I64), NULL));
  for (int k = 0; k < 2 * g_size; ++k)
    CHECK(out[k] == 10 * (k / 2) + k % 2, "in-place allgather [%d] = %lld", k, (long long)out[k]);
}

static void check_allgatherv(cohort_comm_t comm) {
  size_t counts[MAX_RANKS];
  rank_counts(counts);
  const int total = block_offset(g_size);
  float in[MAX_RANKS], out[MAX_RANKS * (MAX_RANKS + 1) / 2];
  for (int j = 0; j <= g_rank; ++j) in[j] = (float)(100 * g_rank + j);
  Vec vi, vo;
  OK(cohort_allgatherv(comm, vec(&vi, in, g_rank + 1, F32), vec(&vo, out, total, F32), counts,
                       (size_t)g_size, NULL));
  for (int r = 0; r < g_size; ++r)
    for (int j = 0; j <= r; ++j)
      CHECK(out[block_offset(r) + j] == (float)(100 * r + j), "allgatherv rank %d [%d]", r, j);

  /* In place: this rank's block at offset r(r+1)/2. */
  for (int k = 0; k < total; ++k) out[k] = -1.0f;
  for (int j = 0; j <= g_rank; ++j) out[block_offset(g_rank) + j] = (float)(100 * g_rank + j);
  OK(cohort_allgatherv(comm, NULL, vec(&vo, out, total, F32), counts, (size_t)g_size, NULL));
  for (int r = 0; r < g_size; ++r)
    for (int j = 0; j <= r; ++j)
      CHECK(out[block_offset(r) + j] == (float)(100 * r + j), "in-place allgatherv %d [%d]", r, j);
}

static void check_gather(cohort_comm_t comm) {
  const int root = g_size / 2;
  /* Rank r sends 3 elements 1000(r + 1) + j; the root's out[3r + j] holds them. */
  int32_t in[3], out[3 * MAX_RANKS];
  for (int j = 0; j < 3; ++j) in[j] = 1000 * (g_rank + 1) + j;
  Vec vi, vo;
  OK(cohort_gather(comm, vec(&vi, in, 3, I32),
                   g_rank == root ? vec(&vo, out, 3 * g_size, I32) : NULL, root, NULL));
  if (g_rank == root)
    for (int k = 0; k < 3 * g_size; ++k)
      CHECK(out[k] == 1000 * (k / 3 + 1) + k % 3, "gather [%d] = %d", k, out[k]);

  /* gatherv to root 0, in place on the root: its block already sits in out. */
  size_t counts[MAX_RANKS];
  rank_counts(counts);
  const int total = block_offset(g_size);
  int32_t vin[MAX_RANKS], vout[MAX_RANKS * (MAX_RANKS + 1) / 2];
  for (int j = 0; j <= g_rank; ++j) vin[j] = 50 * g_rank + j;
  for (int k = 0; k < total; ++k) vout[k] = -1;
  if (g_rank == 0) vout[0] = 0;
  OK(cohort_gatherv(comm, g_rank == 0 ? NULL : vec(&vi, vin, g_rank + 1, I32),
                    g_rank == 0 ? vec(&vo, vout, total, I32) : NULL, counts, (size_t)g_size, 0,
                    NULL));
  if (g_rank == 0)
    for (int r = 0; r < g_size; ++r)
      for (int j = 0; j <= r; ++j)
        CHECK(vout[block_offset(r) + j] == 50 * r + j, "gatherv rank %d [%d] = %d", r, j,
              vout[block_offset(r) + j]);
}

/* ---- scatter(v), reduce_scatter, alltoall(v) -------------------------------------------- */

static void check_scatter(cohort_comm_t comm) {
  /* Root 0 holds k = 0 .. 4n-1; rank r receives 4r .. 4r+3. */
  double in[4 * MAX_RANKS], out[4];
  for (int k = 0; k < 4 * g_size; ++k) in[k] = k;
  for (int j = 0; j < 4; ++j) out[j] = -1;
  Vec vi, vo;
  OK(cohort_scatter(comm, g_rank == 0 ? vec(&vi, in, 4 * g_size, F64) : NULL, vec(&vo, out, 4, F64),
                    0, NULL));
  for (int j = 0; j < 4; ++j) CHECK(out[j] == 4 * g_rank + j, "scatter [%d] = %g", j, out[j]);

  /* scatterv from the last rank, in place there (NULL out): rank r gets r + 1 elements
   * 7 + offset(r) + j; the root's own block stays in in. */
  const int root = g_size - 1;
  size_t counts[MAX_RANKS];
  rank_counts(counts);
  const int total = block_offset(g_size);
  double vin[MAX_RANKS * (MAX_RANKS + 1) / 2], vout[MAX_RANKS];
  for (int k = 0; k < total; ++k) vin[k] = 7 + k;
  for (int j = 0; j <= g_rank; ++j) vout[j] = -1;
  OK(cohort_scatterv(comm, g_rank == root ? vec(&vi, vin, total, F64) : NULL,
                     g_rank == root ? NULL : vec(&vo, vout, g_rank + 1, F64), counts,
                     (size_t)g_size, root, NULL));
  const double* mine = g_rank == root ? vin + block_offset(root) : vout;
  for (int j = 0; j <= g_rank; ++j)
    CHECK(mine[j] == 7 + block_offset(g_rank) + j, "scatterv [%d] = %g", j, mine[j]);
}

/* The arguments read on the root only are not looked at elsewhere: a zeroed placeholder (no
 * data, lanes 0, an invalid dtype) on the other ranks must neither fail them nor, with the root
 * gone on into the op, leave it waiting. */
static void check_root_only_placeholders(cohort_comm_t comm) {
  const int root = g_size - 1;
  const DLTensor placeholder = {0};
  int32_t data[COUNT], source[COUNT], gathered[COUNT * MAX_RANKS];
  Vec vi, vo;
  for (int i = 0; i < COUNT; ++i) source[i] = 40 + i, data[i] = -1;
  OK(cohort_broadcast(comm, g_rank == root ? vec(&vi, source, COUNT, I32) : &placeholder,
                      vec(&vo, data, COUNT, I32), root, NULL));
  for (int i = 0; i < COUNT; ++i) CHECK(data[i] == 40 + i, "broadcast past placeholders [%d]", i);

  for (int i = 0; i < COUNT; ++i) source[i] = g_rank + i;
  OK(cohort_reduce(comm, vec(&vi, source, COUNT, I32),
                   g_rank == root ? vec(&vo, data, COUNT, I32) : &placeholder, COHORT_SUM, root,
                   NULL));
  if (g_rank == root)
    for (int i = 0; i < COUNT; ++i)
      CHECK(data[i] == g_size * (g_size - 1) / 2 + g_size * i, "reduce past placeholders [%d]", i);

  OK(cohort_gather(comm, vec(&vi, source, COUNT, I32),
                   g_rank == root ? vec(&vo, gathered, COUNT * g_size, I32) : &placeholder, root,
                   NULL));
  if (g_rank == root)
    for (int k = 0; k < COUNT * g_size; ++k)
      CHECK(gathered[k] == k / COUNT + k % COUNT, "gather past placeholders [%d]", k);

  size_t counts[MAX_RANKS];
  for (int r = 0; r < g_size; ++r) counts[r] = COUNT;
  OK(cohort_gatherv(comm, vec(&vi, source, COUNT, I32),
                    g_rank == root ? vec(&vo, gathered, COUNT * g_size, I32) : &placeholder, counts,
                    (size_t)g_size, root, NULL));
  if (g_rank == root)
    for (int k = 0; k < COUNT * g_size; ++k)
      CHECK(gathered[k] == k / COUNT + k % COUNT, "gatherv past placeholders [%d]", k);

  for (int k = 0; k < COUNT * g_size; ++k) gathered[k] = 7 * k;
  OK(cohort_scatter(comm, g_rank == root ? vec(&vi, gathered, COUNT * g_size, I32) : &placeholder,
                    vec(&vo, data, COUNT, I32), root, NULL));
  for (int i = 0; i < COUNT; ++i)
    CHECK(data[i] == 7 * (COUNT * g_rank + i), "scatter past placeholders [%d]", i);
  OK(cohort_scatterv(comm, g_rank == root ? vec(&vi, gathered, COUNT * g_size, I32) : &placeholder,
                     vec(&vo, data, COUNT, I32), counts, (size_t)g_size, root, NULL));
  for (int i = 0; i < COUNT; ++i)
    CHECK(data[i] == 7 * (COUNT * g_rank + i), "scatterv past placeholders [%d]", i);
}

static void check_reduce_scatter(cohort_comm_t comm) {
  /* in[k] = r + k over 3n elements; rank r gets sum over s of (s + 3r + j) = n(n-1)/2 + n(3r+j). */
  float in[3 * MAX_RANKS], out[3];
  for (int k = 0; k < 3 * g_size; ++k) in[k] = (float)(g_rank + k);
  Vec vi, vo;
  OK(cohort_reduce_scatter(comm, vec(&vi, in, 3 * g_size, F32), vec(&vo, out, 3, F32), COHORT_SUM,
                           NULL));
  for (int j = 0; j < 3; ++j)
    CHECK(out[j] == (float)(sum_of_ranks() + g_size * (3 * g_rank + j)), "reduce_scatter [%d] = %g",
          j, out[j]);

  /* In place (NULL out): the result lands in this rank's block of in. */
  OK(cohort_reduce_scatter(comm, vec(&vi, in, 3 * g_size, F32), NULL, COHORT_SUM, NULL));
  for (int j = 0; j < 3; ++j)
    CHECK(in[3 * g_rank + j] == (float)(sum_of_ranks() + g_size * (3 * g_rank + j)),
          "in-place reduce_scatter [%d] = %g", j, in[3 * g_rank + j]);
}

static void check_alltoall(cohort_comm_t comm) {
  /* Block j of rank r's in is (100r + 10j, 100r + 10j + 1); it arrives as block r of rank j's
   * out, so rank r's out block s is (100s + 10r, 100s + 10r + 1). */
  int64_t in[2 * MAX_RANKS], out[2 * MAX_RANKS];
  for (int j = 0; j < g_size; ++j)
    for (int m = 0; m < 2; ++m) in[2 * j + m] = 100 * g_rank + 10 * j + m;
  Vec vi, vo;
  OK(cohort_alltoall(comm, vec(&vi, in, 2 * g_size, I64), vec(&vo, out, 2 * g_size, I64), NULL));
  for (int s = 0; s < g_size; ++s)
    for (int m = 0; m < 2; ++m)
      CHECK(out[2 * s + m] == 100 * s + 10 * g_rank + m, "alltoall block %d [%d]", s, m);

  /* In place (NULL in): the input is out itself. */
  OK(cohort_alltoall(comm, NULL, vec(&vo, in, 2 * g_size, I64), NULL));
  for (int s = 0; s < g_size; ++s)
    for (int m = 0; m < 2; ++m)
      CHECK(in[2 * s + m] == 100 * s + 10 * g_rank + m, "in-place alltoall block %d [%d]", s, m);
}

static void check_alltoallv(cohort_comm_t comm) {
  /* Rank r sends r + j + 1 elements to rank j, valued 1000r + 100j + m; it receives s + r + 1
   * from rank s, packed in rank order. */
  size_t send_counts[MAX_RANKS], recv_counts[MAX_RANKS];
  int32_t in[4 * MAX_RANKS * MAX_RANKS], out[4 * MAX_RANKS * MAX_RANKS];
  int sent = 0, received = 0;
  for (int j = 0; j < g_size; ++j) {
    send_counts[j] = (size_t)(g_rank + j + 1);
    recv_counts[j] = (size_t)(j + g_rank + 1);
    for (int m = 0; m < g_rank + j + 1; ++m) in[sent++] = 1000 * g_rank + 100 * j + m;
    received += j + g_rank + 1;
  }
  Vec vi, vo;
  OK(cohort_alltoallv(comm, vec(&vi, in, sent, I32), send_counts, (size_t)g_size,
                      vec(&vo, out, received, I32), recv_counts, (size_t)g_size, NULL));
  int k = 0;
  for (int s = 0; s < g_size; ++s)
    for (int m = 0; m < s + g_rank + 1; ++m, ++k)
      CHECK(out[k] == 1000 * s + 100 * g_rank + m, "alltoallv from %d [%d] = %d", s, m, out[k]);
}

void check_blocking_collectives(cohort_comm_t comm) {
  check_allreduce(comm);
  check_broadcast(comm);
  check_reduce(comm);
  check_allgather(comm);
  check_allgatherv(comm);
  check_gather(comm);
  check_scatter(comm);
  check_root_only_placeholders(comm);
  check_reduce_scatter(comm);
  check_alltoall(comm);
  check_alltoallv(comm);
}
