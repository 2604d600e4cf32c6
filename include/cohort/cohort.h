#ifndef COHORT_COHORT_H_
#define COHORT_COHORT_H_

/// cohort's C ABI: the communicator, its collectives and DLPack buffer exchange for callers that
/// are not C++20 (C engines, Rust, Go, Python through ctypes/cffi, ...). C11, no C++ in here;
/// every name starts with cohort_ / COHORT_. The library is the same libcohort as the C++ API's.
///
/// Conventions that hold for every function below:
/// - Every function returns a cohort_status_t. COHORT_OK (0) is success; any other value comes
///   with a message in cohort_last_error_message(). Results are written through out-parameters.
///   A function that creates a handle sets its out-parameter to NULL when it fails; other
///   out-parameters are left untouched on failure.
/// - No C++ exception ever crosses this boundary, and bad input (a NULL handle or tensor, a root
///   out of range, an output of the wrong size, an unknown enum value) is a status, never a crash,
///   and is reported before any byte moves. The communicator stays usable after such an error
///   (when only some ranks made it, the others wait in the op until its timeout).
///   A timeout or a dead peer during an op poisons the communicator: later ops fail fast with
///   that cause (see cohort/communicator.hpp).
/// - Tensors are borrowed `const DLTensor*` (DLPack, <dlpack/dlpack.h>): cohort never takes
///   ownership of them. Their descriptors (shape, strides) are copied during the call; their
///   memory must stay valid until the op completes (blocking: until the call returns; async:
///   until cohort_work_wait reported completion, or cohort_work_test said done). An op that
///   failed with a timeout or a dead peer may leave a transfer in flight that still reads or
///   writes its tensors: a cohort_buffer's memory (passed through cohort_buffer_tensor's
///   pointer) is then kept alive by cohort, whatever the caller destroys; any other tensor's
///   memory must stay valid until the last communicator sharing comm's connections (the world
///   and everything split or duplicated from it) is destroyed. Tensors must be
///   contiguous and use one of cohort's dtypes (f32, f64, f16, bf16, fp8 e4m3/e5m2,
///   i8/u8/i16/i32/i64/u32/u64, bool) with lanes 1. Host tensors (CPU, CUDA host) run on the host
///   path; CUDA device and managed tensors run on NCCL, ordered by options.stream (the device
///   rules, and what NCCL lacks, are in cohort/communicator.hpp). One op never mixes the two.
///   `in` is never written. An output must not overlap an input except in the in-place forms
///   each collective names.
/// - Collectives must be called in the same order on every rank of a communicator. A handle is
///   not synchronised: do not destroy it while another thread uses it, and issue the ops of one
///   communicator from one thread at a time (their order must agree across ranks anyway).
/// - Handles are opaque pointers owned by the caller; each *_destroy accepts NULL and does
///   nothing, like free().
///
/// Option structs start with `size_t struct_size`, the size of the struct the caller compiled
/// against, so fields can be appended without breaking callers built against an older header:
/// the library reads only the fields that fit in struct_size and gives the others their default.
/// (A library older than the caller's header ignores the fields it does not know.)
/// Initialise them with the COHORT_*_OPTIONS_INIT macro or the cohort_*_options_init()
/// function (inline: it passes the caller's sizeof to the library, which writes no more), then
/// set what you need. Passing NULL instead of an options pointer means defaults.

#include <cohort/dlpack_versioned.h> /* DLTensor, DLManagedTensor, DLManagedTensorVersioned */

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define COHORT_API __attribute__((visibility("default")))
#else
#define COHORT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status and errors ------------------------------------------------------------------- */

/// What a call returned. The error values mirror cohort::ErrorCode (cohort/error.hpp) one to
/// one; their numbers are part of the ABI and never change.
typedef enum cohort_status {
  COHORT_OK = 0,
  /// A value passed in is wrong: NULL handle or tensor, dtype, count, device, rank, root, shape.
  COHORT_ERROR_INVALID_ARGUMENT = 1,
  /// The call is not allowed in this state (e.g. a communicator poisoned by an earlier failure).
  COHORT_ERROR_INVALID_USAGE = 2,
  /// Valid, but not built or not implemented for this combination.
  COHORT_ERROR_UNSUPPORTED = 3,
  /// A deadline passed; the message names what was still missing.
  COHORT_ERROR_TIMEOUT = 4,
  /// A peer died, aborted or closed its connection.
  COHORT_ERROR_REMOTE = 5,
  /// The OS or a library below cohort failed. Out of memory is reported with this status and a
  /// message starting "out of memory".
  COHORT_ERROR_SYSTEM = 6,
  /// A bug in cohort (including any unexpected exception inside the library).
  COHORT_ERROR_INTERNAL = 7
} cohort_status_t;

/// The message of the last call on this thread that did not return COHORT_OK (successful calls
/// leave it alone). Never NULL: "" when no call on this thread has failed. The pointer stays
/// valid until the next failing cohort_ call on the same thread.
COHORT_API const char* cohort_last_error_message(void);

/// Stable lower-case name of a status: "ok", "invalid_argument", "timeout", ... ("unknown" for a
/// value outside the enum). Never NULL; the string is static.
COHORT_API const char* cohort_status_name(cohort_status_t status);

/// The library's version, "major.minor.patch". Static string, never NULL.
COHORT_API const char* cohort_version(void);

/* ---- Enumerations ------------------------------------------------------------------------- */

/// Reduction operator; semantics as cohort::ReduceOp (cohort/dtype.hpp): AVG divides the sum by
/// the number of ranks; BAND/BOR/BXOR are for integers and bool only.
typedef enum cohort_reduce_op {
  COHORT_SUM = 0,
  COHORT_PROD = 1,
  COHORT_MIN = 2,
  COHORT_MAX = 3,
  COHORT_AVG = 4,
  COHORT_BAND = 5,
  COHORT_BOR = 6,
  COHORT_BXOR = 7
} cohort_reduce_op_t;

/// Force an algorithm for one op (cohort::Algorithm, cohort/algorithm.hpp). If the forced
/// algorithm does not apply to the op or its arguments, selection falls through to the table.
typedef enum cohort_algorithm {
  COHORT_ALGORITHM_AUTO = 0,
  COHORT_ALGORITHM_RING = 1,
  COHORT_ALGORITHM_RECURSIVE_DOUBLING = 2,
  COHORT_ALGORITHM_RABENSEIFNER = 3,
  COHORT_ALGORITHM_TREE = 4,
  COHORT_ALGORITHM_SCATTER_ALLGATHER = 5,
  COHORT_ALGORITHM_REDUCE_SCATTER_GATHER = 6,
  COHORT_ALGORITHM_BRUCK = 7,
  COHORT_ALGORITHM_RECURSIVE_HALVING = 8,
  COHORT_ALGORITHM_PAIRWISE = 9,
  COHORT_ALGORITHM_DISSEMINATION = 10,
  COHORT_ALGORITHM_SHARED_MEMORY = 11,
  COHORT_ALGORITHM_HIERARCHICAL = 12,
  COHORT_ALGORITHM_SINGLE_COPY = 13
} cohort_algorithm_t;

/* ---- Handles ------------------------------------------------------------------------------ */

/// A communicator: a group of ranks running collectives together.
typedef struct cohort_comm* cohort_comm_t;
/// An asynchronous op in flight (returned by every *_async function).
typedef struct cohort_work* cohort_work_t;
/// A tensor cohort owns (imported from or exportable to DLPack).
typedef struct cohort_buffer* cohort_buffer_t;

/* ---- Options ------------------------------------------------------------------------------ */

/// Options of cohort_init.
typedef struct cohort_init_options {
  /// sizeof(cohort_init_options_t) as the caller compiled it.
  size_t struct_size;
  /// Default deadline of every op on the world communicator, in milliseconds. 0: COHORT_TIMEOUT
  /// (seconds) from the environment, else 600 s. Negative values and values above one year
  /// (31536000000) are invalid.
  int64_t timeout_ms;
} cohort_init_options_t;

/// Defaults, as an initialiser: `cohort_init_options_t options = COHORT_INIT_OPTIONS_INIT;`
#define COHORT_INIT_OPTIONS_INIT \
  { sizeof(cohort_init_options_t), 0 }
/// Sets the first `struct_size` bytes of *options to the defaults, struct_size included (as
/// much of the struct as this library knows; a longer caller's tail is zeroed and its
/// struct_size says only the known part, so a newer library reading it later defaults the rest).
/// INVALID_ARGUMENT when options is NULL or struct_size is below sizeof(size_t). Call it through
/// cohort_init_options_init(), which passes the size the caller compiled against.
COHORT_API cohort_status_t cohort_init_options_init_sized(cohort_init_options_t* options,
                                                          size_t struct_size);
/// Sets *options to the defaults (same as COHORT_INIT_OPTIONS_INIT). Inline, so the size is the
/// caller's: a library with a longer struct never writes past the caller's. (The library also
/// exports this name, for programs built against a header where it was not inline and for FFI
/// callers: that symbol writes the struct as first published.)
#ifndef COHORT_BUILDING_LIBRARY
static inline cohort_status_t cohort_init_options_init(cohort_init_options_t* options) {
  return cohort_init_options_init_sized(options, sizeof *options);
}
#endif

/// Per-op knobs of every collective and send/recv.
typedef struct cohort_collective_options {
  /// sizeof(cohort_collective_options_t) as the caller compiled it.
  size_t struct_size;
  /// Deadline of the whole op in milliseconds. 0: the communicator's default. Negative values
  /// and values above one year (31536000000) are invalid.
  int64_t timeout_ms;
  /// A cohort_algorithm_t value (an int32_t, not the enum: C leaves an enum's size to the
  /// compiler, and -fshort-enums or an FFI would move the fields after it).
  /// COHORT_ALGORITHM_AUTO lets the selection table choose. Ignored by send/recv.
  int32_t algorithm;
  /// Nonzero: queue the op on `stream` (see "Stream order" in cohort/communicator.hpp). 0: no
  /// stream. Ops on host tensors ignore both fields; cohort_barrier given a stream runs on NCCL
  /// (a one-element allreduce on that stream's device).
  int32_t has_stream;
  /// The CUDA stream as the bits of its cudaStream_t (0 is the legacy default stream, a valid
  /// choice when has_stream is set). cohort never creates or destroys it: keep it alive until
  /// the op ran. Read only when has_stream is nonzero.
  uintptr_t stream;
} cohort_collective_options_t;

/// Defaults, as an initialiser:
/// `cohort_collective_options_t options = COHORT_COLLECTIVE_OPTIONS_INIT;`
#define COHORT_COLLECTIVE_OPTIONS_INIT \
  { sizeof(cohort_collective_options_t), 0, COHORT_ALGORITHM_AUTO, 0, 0 }
/// As cohort_init_options_init_sized, for cohort_collective_options_t.
COHORT_API cohort_status_t
cohort_collective_options_init_sized(cohort_collective_options_t* options, size_t struct_size);
/// Sets *options to the defaults (same as COHORT_COLLECTIVE_OPTIONS_INIT); inline, as
/// cohort_init_options_init. Its exported symbol writes the first published layout, which ends
/// after `algorithm` (a stream needs the macro or this inline form).
#ifndef COHORT_BUILDING_LIBRARY
static inline cohort_status_t cohort_collective_options_init(cohort_collective_options_t* options) {
  return cohort_collective_options_init_sized(options, sizeof *options);
}
#endif

/* ---- Communicators ------------------------------------------------------------------------ */

/// Pass as color to cohort_comm_split to stay out of every new group.
#define COHORT_NO_COLOR (-1)

/// Collective over the whole job: resolves rank and world size from the launcher's environment
/// (cohort-run, torchrun, Open MPI, MPICH/PMI, Slurm; a world of one without any), connects the
/// store and creates the world communicator in *comm. options may be NULL. Rank 0 hosts the
/// job's store when no launcher does, so it must destroy its world communicator last.
COHORT_API cohort_status_t cohort_init(const cohort_init_options_t* options, cohort_comm_t* comm);

/// This process's rank in comm, in [0, size).
COHORT_API cohort_status_t cohort_comm_rank(cohort_comm_t comm, int* rank);
/// Number of ranks in comm.
COHORT_API cohort_status_t cohort_comm_size(cohort_comm_t comm, int* size);

/// Collective: ranks passing the same color (>= 0) form a new communicator, ranked by (key, old
/// rank). A rank passing COHORT_NO_COLOR takes part but gets *new_comm = NULL.
COHORT_API cohort_status_t cohort_comm_split(cohort_comm_t comm, int color, int key,
                                             cohort_comm_t* new_comm);
/// Collective: a new communicator over the same ranks with its own tag space.
COHORT_API cohort_status_t cohort_comm_dup(cohort_comm_t comm, cohort_comm_t* new_comm);
/// Fails comm at once on this rank (cohort::Communicator::abort): the op running on another
/// thread fails within about a millisecond, every queued and later op fails with
/// COHORT_ERROR_INVALID_USAGE naming `reason` (NULL: "abort() was called"). Thread-safe; not
/// async-signal-safe. Local: peers see a silent rank.
COHORT_API cohort_status_t cohort_comm_abort(cohort_comm_t comm, const char* reason);
/// COHORT_OK while comm is usable. After a failure (timeout, dead peer, abort) returns that
/// failure's status and makes its message this thread's last error, without running an op.
COHORT_API cohort_status_t cohort_comm_status(cohort_comm_t comm);
/// Releases the handle. Local (not collective). Blocks until the ops already queued on comm have
/// finished; work handles of those ops stay valid. Communicators split or duplicated from comm
/// are independent and stay usable. NULL is a no-op.
COHORT_API cohort_status_t cohort_comm_destroy(cohort_comm_t comm);

/// Writes this rank's flight record of comm as JSON (cohort::Communicator::dump_trace: its last
/// ops with their state, and the failure that poisoned it): to `path`, or when path is NULL to
/// "<COHORT_TRACE_DIR, else the temp dir>/cohort-trace.<job id, else
/// pid>.comm<id>.rank<rank>.json". When written_path is not NULL, the path written is copied there,
/// NUL-terminated; a capacity too small for it is INVALID_ARGUMENT naming the bytes needed (the
/// file is written all the same). Local, not collective; callable from any thread at any time,
/// while an op hangs on another thread or after a failure. SYSTEM when the file cannot be written.
COHORT_API cohort_status_t cohort_comm_dump_trace(cohort_comm_t comm, const char* path,
                                                  char* written_path, size_t capacity);

/* ---- Collectives -------------------------------------------------------------------------- */
/// Each collective has a blocking form and an _async form. The blocking form returns when the op
/// finished on this rank. The _async form queues the op (after validating its arguments) and
/// returns a work handle in *work, NULL on failure; the op's own outcome comes from
/// cohort_work_wait. options may be NULL (defaults). Counts are elements; count arrays have one
/// entry per rank of the communicator (counts_length must equal its size).

/// out = op over all ranks of in. Equal counts. In place: in == out, or in NULL.
COHORT_API cohort_status_t cohort_allreduce(cohort_comm_t comm, const DLTensor* in,
                                            const DLTensor* out, cohort_reduce_op_t op,
                                            const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_allreduce_async(cohort_comm_t comm, const DLTensor* in,
                                                  const DLTensor* out, cohort_reduce_op_t op,
                                                  const cohort_collective_options_t* options,
                                                  cohort_work_t* work);

/// out (every rank) = in (root). in is read on the root only: other ranks may pass NULL, or
/// anything (it is not looked at). In place: in == out, or in NULL (the root's data is in out).
COHORT_API cohort_status_t cohort_broadcast(cohort_comm_t comm, const DLTensor* in,
                                            const DLTensor* out, int root,
                                            const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_broadcast_async(cohort_comm_t comm, const DLTensor* in,
                                                  const DLTensor* out, int root,
                                                  const cohort_collective_options_t* options,
                                                  cohort_work_t* work);

/// out (root only) = op over all ranks of in. out is not looked at on other ranks (may be NULL,
/// or anything) unless in is NULL there: then this rank's data is in out. In place on the root:
/// in == out, or in NULL.
COHORT_API cohort_status_t cohort_reduce(cohort_comm_t comm, const DLTensor* in,
                                         const DLTensor* out, cohort_reduce_op_t op, int root,
                                         const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_reduce_async(cohort_comm_t comm, const DLTensor* in,
                                               const DLTensor* out, cohort_reduce_op_t op, int root,
                                               const cohort_collective_options_t* options,
                                               cohort_work_t* work);

/// out = concatenation of every rank's in; out has size x in's count elements. In place: in
/// NULL, this rank's block of out (elements [rank x n, (rank + 1) x n)) holds its contribution.
COHORT_API cohort_status_t cohort_allgather(cohort_comm_t comm, const DLTensor* in,
                                            const DLTensor* out,
                                            const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_allgather_async(cohort_comm_t comm, const DLTensor* in,
                                                  const DLTensor* out,
                                                  const cohort_collective_options_t* options,
                                                  cohort_work_t* work);

/// Rank r contributes counts[r] elements; out (sum of counts) is their concatenation in rank
/// order. In place: in NULL, this rank's block of out holds its contribution.
COHORT_API cohort_status_t cohort_allgatherv(cohort_comm_t comm, const DLTensor* in,
                                             const DLTensor* out, const size_t* counts,
                                             size_t counts_length,
                                             const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_allgatherv_async(cohort_comm_t comm, const DLTensor* in,
                                                   const DLTensor* out, const size_t* counts,
                                                   size_t counts_length,
                                                   const cohort_collective_options_t* options,
                                                   cohort_work_t* work);

/// out (root only; size x in's count elements) = concatenation of every rank's in. out is not
/// looked at on other ranks (may be NULL, or anything). In place on the root: in NULL, the root's
/// block of out holds its contribution.
COHORT_API cohort_status_t cohort_gather(cohort_comm_t comm, const DLTensor* in,
                                         const DLTensor* out, int root,
                                         const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_gather_async(cohort_comm_t comm, const DLTensor* in,
                                               const DLTensor* out, int root,
                                               const cohort_collective_options_t* options,
                                               cohort_work_t* work);
/// As cohort_gather with counts[r] elements from rank r.
COHORT_API cohort_status_t cohort_gatherv(cohort_comm_t comm, const DLTensor* in,
                                          const DLTensor* out, const size_t* counts,
                                          size_t counts_length, int root,
                                          const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_gatherv_async(cohort_comm_t comm, const DLTensor* in,
                                                const DLTensor* out, const size_t* counts,
                                                size_t counts_length, int root,
                                                const cohort_collective_options_t* options,
                                                cohort_work_t* work);

/// out (every rank) = block `rank` of the root's in (size x out's count elements). in is read on
/// the root only: other ranks may pass NULL, or anything (it is not looked at). In place on the
/// root: out NULL, its block stays in in.
COHORT_API cohort_status_t cohort_scatter(cohort_comm_t comm, const DLTensor* in,
                                          const DLTensor* out, int root,
                                          const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_scatter_async(cohort_comm_t comm, const DLTensor* in,
                                                const DLTensor* out, int root,
                                                const cohort_collective_options_t* options,
                                                cohort_work_t* work);
/// As cohort_scatter with counts[r] elements to rank r.
COHORT_API cohort_status_t cohort_scatterv(cohort_comm_t comm, const DLTensor* in,
                                           const DLTensor* out, const size_t* counts,
                                           size_t counts_length, int root,
                                           const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_scatterv_async(cohort_comm_t comm, const DLTensor* in,
                                                 const DLTensor* out, const size_t* counts,
                                                 size_t counts_length, int root,
                                                 const cohort_collective_options_t* options,
                                                 cohort_work_t* work);

/// out = block `rank` of (op over all ranks of in); in has size x out's count elements. In
/// place: out NULL, the result lands in this rank's block of in.
COHORT_API cohort_status_t cohort_reduce_scatter(cohort_comm_t comm, const DLTensor* in,
                                                 const DLTensor* out, cohort_reduce_op_t op,
                                                 const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_reduce_scatter_async(cohort_comm_t comm, const DLTensor* in,
                                                       const DLTensor* out, cohort_reduce_op_t op,
                                                       const cohort_collective_options_t* options,
                                                       cohort_work_t* work);

/// Block j of in goes to rank j, arriving as block `rank` of its out. Equal counts, divisible
/// by the size. In place: in == out, or in NULL.
COHORT_API cohort_status_t cohort_alltoall(cohort_comm_t comm, const DLTensor* in,
                                           const DLTensor* out,
                                           const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_alltoall_async(cohort_comm_t comm, const DLTensor* in,
                                                 const DLTensor* out,
                                                 const cohort_collective_options_t* options,
                                                 cohort_work_t* work);
/// send_counts[j] elements of in go to rank j; recv_counts[j] arrive from rank j, packed in rank
/// order in out. In place: in == out, or in NULL.
COHORT_API cohort_status_t cohort_alltoallv(cohort_comm_t comm, const DLTensor* in,
                                            const size_t* send_counts, size_t send_counts_length,
                                            const DLTensor* out, const size_t* recv_counts,
                                            size_t recv_counts_length,
                                            const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_alltoallv_async(
    cohort_comm_t comm, const DLTensor* in, const size_t* send_counts, size_t send_counts_length,
    const DLTensor* out, const size_t* recv_counts, size_t recv_counts_length,
    const cohort_collective_options_t* options, cohort_work_t* work);

/// Returns (blocking form) once every rank has entered the barrier.
COHORT_API cohort_status_t cohort_barrier(cohort_comm_t comm,
                                          const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_barrier_async(cohort_comm_t comm,
                                                const cohort_collective_options_t* options,
                                                cohort_work_t* work);

/* ---- Point-to-point ----------------------------------------------------------------------- */
/// Messages between a pair of ranks with the same tag (>= 0) arrive in send order. A blocking
/// send may wait for the matching receive (large messages use a rendezvous): two ranks that both
/// block in cohort_send to each other deadlock until the timeout, as in MPI; use the _async form
/// on one side, or order the calls. On host memory, sends and receives do not wait for the
/// collectives called before them (posted from inside an unfinished _async collective's waits,
/// as MPI progresses), unless they share memory with one (a send of what it writes, a receive
/// into what it reads or writes), which they then wait for; see Communicator in
/// cohort/communicator.hpp.

COHORT_API cohort_status_t cohort_send(cohort_comm_t comm, const DLTensor* in, int peer, int tag,
                                       const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_send_async(cohort_comm_t comm, const DLTensor* in, int peer,
                                             int tag, const cohort_collective_options_t* options,
                                             cohort_work_t* work);
/// out receives exactly its count of elements from peer.
COHORT_API cohort_status_t cohort_recv(cohort_comm_t comm, const DLTensor* out, int peer, int tag,
                                       const cohort_collective_options_t* options);
COHORT_API cohort_status_t cohort_recv_async(cohort_comm_t comm, const DLTensor* out, int peer,
                                             int tag, const cohort_collective_options_t* options,
                                             cohort_work_t* work);
/// MPI_Sendrecv: sends in to dest and receives out from source (both on tag), posted together
/// and returning once both ended; in and out must not overlap and must both be host memory or
/// both on the communicator's device (INVALID_ARGUMENT otherwise, before anything is posted).
/// Blocking only (for an async exchange, post cohort_recv_async and cohort_send_async).
COHORT_API cohort_status_t cohort_sendrecv(cohort_comm_t comm, const DLTensor* in, int dest,
                                           const DLTensor* out, int source, int tag,
                                           const cohort_collective_options_t* options);

/* ---- Work --------------------------------------------------------------------------------- */

/// Waits until the op finished and returns its outcome (COHORT_OK, or the op's error with its
/// message). timeout_ms: -1 waits without limit; 0 to one year (31536000000) returns
/// COHORT_ERROR_TIMEOUT if the op has not finished by then (the op is not cancelled and keeps its
/// own deadline; wait again later). Waiting again after completion returns the same outcome at
/// once. Several threads may wait on one work. COHORT_ERROR_TIMEOUT is thus either this wait's
/// limit or the op's own timeout (which poisoned the communicator): cohort_work_test tells them
/// apart (done = 1 only for the op's).
COHORT_API cohort_status_t cohort_work_wait(cohort_work_t work, int64_t timeout_ms);
/// *done = 1 once the op finished (successfully or not), else 0. Never blocks; the outcome comes
/// from cohort_work_wait.
COHORT_API cohort_status_t cohort_work_test(cohort_work_t work, int* done);
/// Orders the work queued on `stream` (the bits of a cudaStream_t) after the op, without
/// blocking the host (cohort::Work::make_stream_wait): for an op on CUDA device tensors the
/// stream waits on the device for its completion; for an op on host tensors there is nothing to
/// order on a device, so this waits like cohort_work_wait(work, -1). Returns the op's error if it
/// already failed.
COHORT_API cohort_status_t cohort_work_make_stream_wait(cohort_work_t work, uintptr_t stream);
/// Releases the handle. Does not cancel or wait for the op: after destroying an unfinished work,
/// the op's memory must stay valid until the communicator is destroyed (which drains its queue).
/// NULL is a no-op.
COHORT_API cohort_status_t cohort_work_destroy(cohort_work_t work);

/* ---- Buffers (DLPack import and export) --------------------------------------------------- */
/// A cohort_buffer_t owns a tensor's memory through its producer: the producer's deleter runs
/// exactly once, when the buffer handle and every tensor exported from it have been released.

/// Takes ownership of tensor, on success and on failure alike. On failure (lanes != 1, unknown
/// dtype, negative shape, unsupported device) the deleter has been called when this returns and
/// *buffer is NULL. A NULL tensor is COHORT_ERROR_INVALID_ARGUMENT.
COHORT_API cohort_status_t cohort_buffer_from_dlpack(DLManagedTensor* tensor,
                                                     cohort_buffer_t* buffer);
/// As above for DLPack >= 1.0. A major version other than COHORT_DLPACK_MAJOR_VERSION is
/// rejected after reading only the version and calling the deleter. The read-only flag makes
/// the buffer read-only (cohort_buffer_is_read_only).
COHORT_API cohort_status_t cohort_buffer_from_dlpack_versioned(DLManagedTensorVersioned* tensor,
                                                               cohort_buffer_t* buffer);

/// A new zero-filled host buffer of `count` elements of `dtype` (lanes 1) that the other ranks
/// of this host can map: where every rank's buffers of a collective are such memory, single-copy
/// algorithms read and write them in place instead of copying. One file descriptor each while
/// it lives. Freed when the handle and every tensor exported from it are released: kept for
/// reuse by a later allocation of about its size (COHORT_MAPPABLE_CACHE_MIB in all, default
/// 1024), its pages returned to the system beyond that.
/// COHORT_ERROR_INVALID_ARGUMENT for a negative count or an unknown dtype,
/// COHORT_ERROR_SYSTEM when the kernel refuses (no memfd, out of descriptors or memory); on
/// failure *buffer is NULL.
COHORT_API cohort_status_t cohort_buffer_allocate_mappable(int64_t count, DLDataType dtype,
                                                           cohort_buffer_t* buffer);
/// *bytes = the bytes of freed mappable buffers this process keeps for reuse now. Thread-safe.
COHORT_API cohort_status_t cohort_buffer_kept_mappable_bytes(size_t* bytes);
/// Lets go of every kept mappable buffer, returning its pages and file descriptor to the system
/// now (live buffers are not touched; later frees keep again); *released_bytes (may be NULL) =
/// the bytes let go. Thread-safe.
COHORT_API cohort_status_t cohort_buffer_release_kept_mappable(size_t* released_bytes);

/// A borrowed descriptor of the buffer's memory, valid until cohort_buffer_destroy(buffer), to
/// pass to the collectives. byte_offset is 0 (folded into data); strides are set unless ndim is
/// 0 (NULL then, as DLPack allows). A
/// read-only buffer's tensor, passed as this pointer, is refused as an output
/// (COHORT_ERROR_INVALID_ARGUMENT, before anything moves); a caller's copy of the struct is
/// not recognised as read-only and must not be passed as one.
COHORT_API cohort_status_t cohort_buffer_tensor(cohort_buffer_t buffer, const DLTensor** tensor);
/// *read_only = 1 when the buffer came from a versioned tensor flagged read-only, else 0.
COHORT_API cohort_status_t cohort_buffer_is_read_only(cohort_buffer_t buffer, int* read_only);

/// A new managed tensor viewing the buffer's memory (no copy). The caller owns it and must call
/// its deleter once; the memory stays alive until then, even after cohort_buffer_destroy. A
/// read-only buffer is COHORT_ERROR_INVALID_ARGUMENT (a legacy tensor cannot carry the flag):
/// export it versioned.
COHORT_API cohort_status_t cohort_buffer_to_dlpack(cohort_buffer_t buffer,
                                                   DLManagedTensor** tensor);
/// As above, a DLPack 1.1 versioned tensor (read-only flag set from the buffer).
COHORT_API cohort_status_t cohort_buffer_to_dlpack_versioned(cohort_buffer_t buffer,
                                                             DLManagedTensorVersioned** tensor);

/// Releases the handle (the memory lives on while exported tensors exist). NULL is a no-op.
COHORT_API cohort_status_t cohort_buffer_destroy(cohort_buffer_t buffer);

#ifdef __cplusplus
}
#endif

#endif /* COHORT_COHORT_H_ */
