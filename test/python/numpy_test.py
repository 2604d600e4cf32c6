"""numpy arrays through cohort, at any world size: an in-place allreduce works on the array's own
memory (its data pointer never changes), out of place leaves the input alone, read-only and bool
arrays come in through the buffer protocol (numpy 1.24 refuses them through DLPack), freed
mappable buffers are kept until released, async ops
keep arrays alive, no reference is leaked, a receive called behind an unfinished allreduce_async
does not wait for it, and sendrecv exchanges around a ring in one call. Expected values are computed by hand from the
ranks' inputs: rank r holds (r + 1) * x, so a sum over n ranks is x * n(n + 1) / 2.
"""

import ctypes
import functools
import operator
import os
import sys
import weakref

from harness import check, equal, require, run, world

np = require("numpy")
import cohort  # noqa: E402


def in_place_keeps_memory(comm, n, r):
    x = np.arange(1, 8, dtype=np.float32)
    a = x * (r + 1)
    address = a.ctypes.data
    result = comm.allreduce(a)
    check(result is a, "in-place allreduce returns the array itself")
    check(a.ctypes.data == address, f"data pointer moved from {address:#x} to {a.ctypes.data:#x}")
    equal(a, [i * n * (n + 1) // 2 for i in range(1, 8)], "in-place float32 sum")

    # A view into a larger array: only its elements change.
    whole = np.zeros(10, dtype=np.int32)
    whole[2:6] = r + 1
    comm.allreduce(whole[2:6], op="max")
    equal(whole, [0, 0, n, n, n, n, 0, 0, 0, 0], "in-place max on a slice")


def every_op_on_int64(comm, n, r):
    # Element i of rank r: (r + 1) * (i + 1) + i. The references fold the same values in Python.
    def mine(rank):
        return [(rank + 1) * (i + 1) + i for i in range(6)]

    columns = list(zip(*[mine(rank) for rank in range(n)]))
    expected = {
        "sum": [sum(c) for c in columns],
        "prod": [functools.reduce(operator.mul, c) for c in columns],
        "min": [min(c) for c in columns],
        "max": [max(c) for c in columns],
        "avg": [sum(c) // n for c in columns],  # truncating, as cohort documents for integers
        "band": [functools.reduce(operator.and_, c) for c in columns],
        "bor": [functools.reduce(operator.or_, c) for c in columns],
        "bxor": [functools.reduce(operator.xor, c) for c in columns],
    }
    for op, values in expected.items():
        a = np.array(mine(r), dtype=np.int64)
        comm.allreduce(a, op=op)
        equal(a, values, f"int64 allreduce {op}")
        # The enum spelling of the same op, out of place.
        b = np.array(mine(r), dtype=np.int64)
        out = np.full(6, -1, dtype=np.int64)
        returned = comm.allreduce(b, op=getattr(cohort.ReduceOp, op.upper()), out=out)
        check(returned is out, "out-of-place allreduce returns out")
        equal(out, values, f"int64 allreduce {op} out of place")
        equal(b, mine(r), f"input of out-of-place {op} unchanged")


def read_only_and_bool(comm, n, r):
    source = np.full(5, float(r + 1))
    source.flags.writeable = False
    out = np.zeros(5)
    comm.allreduce(source, out=out)
    equal(out, [n * (n + 1) / 2] * 5, "read-only float64 input")

    # A packed record's field: one element whose stride (5 bytes) is no multiple of its size.
    # numpy 1.24 exports no read-only array through DLPack; the buffer protocol path must not
    # refuse a stride it never steps along.
    field = np.zeros(1, [("a", "u1"), ("b", "<f4")])["b"]
    field[0] = r + 1
    field.flags.writeable = False
    out = np.zeros(1, np.float32)
    comm.allreduce(field, out=out)
    equal(out, [n * (n + 1) / 2], "read-only one-element field of a packed record")

    flags = np.array([r == 0, True, False, r % 2 == 1])
    comm.allreduce(flags, op="bor")
    equal(flags, [True, True, False, n > 1], "bool or")
    flags = np.array([r == 0, True, False, r % 2 == 1])
    comm.allreduce(flags, op="band")
    equal(flags, [n == 1, True, False, False], "bool and")


def gathers_and_buffers(comm, n, r):
    # In-place allgather: this rank's block of out already holds its contribution.
    out = np.zeros(3 * n, dtype=np.float64)
    out[3 * r:3 * r + 3] = r + 0.5
    comm.allgather(None, out)
    equal(out, [rank + 0.5 for rank in range(n) for _ in range(3)], "in-place allgather")

    # A cohort.Buffer written by a collective, read through numpy without a copy.
    buffer = cohort.Buffer.allocate(4, "int64")
    view = np.from_dlpack(buffer)
    check(view.ctypes.data == buffer.data_ptr, "numpy.from_dlpack(Buffer) copied the memory")
    source = np.arange(4) + 10 * r
    imported = cohort.Buffer.from_dlpack(source)
    check(imported.data_ptr == source.ctypes.data, "Buffer.from_dlpack(array) copied the memory")
    comm.broadcast(imported, root=n - 1)
    equal(source, [10 * (n - 1) + i for i in range(4)], "broadcast through Buffer.from_dlpack")
    comm.allreduce(cohort.Buffer.from_dlpack(np.full(4, r + 1)), out=buffer)
    equal(view, [n * (n + 1) // 2] * 4, "Buffer seen through numpy after allreduce")


def mappable_buffers(comm, n, r):
    # Mappable memory seen through numpy and torch-style DLPack, and an allreduce over it in
    # place and out of place with single copy forced, where ranks write each other's outputs.
    a = cohort.Buffer.allocate_mappable((3, 100_000), "float32")
    view = np.from_dlpack(a)
    check(view.shape == (3, 100_000) and view.dtype == np.float32, "allocate_mappable's shape")
    check(view.ctypes.data == a.data_ptr, "numpy.from_dlpack(mappable Buffer) copied the memory")
    equal(view[:, :5].ravel(), [0.0] * 15, "allocate_mappable zero-fills")
    # numpy's DLPack import is read-only; write through the address instead.
    writable = np.ctypeslib.as_array((ctypes.c_float * 300_000).from_address(a.data_ptr))
    writable[:] = np.arange(300_000, dtype=np.float32) % 7 + r
    out = cohort.Buffer.allocate_mappable(300_000, "float32")
    algorithm = "single_copy" if n > 1 else None
    comm.allreduce(a.flat(), out=out, algorithm=algorithm)
    expected = (np.arange(300_000) % 7) * n + n * (n - 1) // 2
    equal(np.from_dlpack(out), expected, "allreduce of mappable buffers out of place")
    comm.allreduce(a, op="max", algorithm=algorithm)
    equal(view.ravel(), np.arange(300_000) % 7 + n - 1, "allreduce of mappable buffers in place")


def kept_mappable_buffers(comm, n, r):
    # A freed mappable buffer is kept for reuse; release_kept_mappable lets it go and says how much.
    cohort.Buffer.release_kept_mappable()  # what earlier checks left
    check(cohort.Buffer.kept_mappable_bytes() == 0, "nothing kept after a release")
    page = os.sysconf("SC_PAGE_SIZE")
    b = cohort.Buffer.allocate_mappable(3 * page, "uint8")
    del b
    kept = cohort.Buffer.kept_mappable_bytes()
    check(kept == 3 * page, f"a freed 3-page buffer: {kept} bytes kept")
    released = cohort.Buffer.release_kept_mappable()
    check(released == 3 * page, f"released {released} bytes, not 3 pages")
    check(cohort.Buffer.kept_mappable_bytes() == 0, "still kept after a release")


class TrackedArray(np.ndarray):
    """An ndarray that can be watched with a weakref (plain ndarrays cannot)."""


def references_are_released(comm, n, r):
    a = np.ones(16)
    before = sys.getrefcount(a)
    comm.allreduce(a)
    check(sys.getrefcount(a) == before, "a blocking allreduce leaked a reference to its array")

    # Async: the Work holds the only reference to the array until wait() returns it.
    work = comm.allreduce_async(np.full(1000, float(r + 1)))
    result = work.wait()
    equal(result[:3], [n * (n + 1) / 2] * 3, "async allreduce of an array only the Work held")
    check(work.test(), "Work.test() after wait()")

    # The progress thread drops an op's buffers right after completing it, without the GIL, so
    # their release is deferred to a Python thread. Ops run in call order on that thread, so once
    # a later async barrier has finished, every earlier drop has happened, and its wait() runs
    # the deferred releases.
    b = np.ones(8)
    before = sys.getrefcount(b)
    works = [comm.allreduce_async(b, op="max") for _ in range(5)]
    for work in works:
        work.wait()
    del works, work
    comm.barrier_async().wait()
    check(sys.getrefcount(b) == before, "async allreduces leaked references to their array")

    # Works dropped unwaited: the arrays live exactly until their ops are done.
    arrays = [np.full(64, float(r + k)).view(TrackedArray) for k in range(4)]
    watchers = [weakref.ref(array) for array in arrays]
    for array in arrays:
        comm.allreduce_async(array)  # the Work is dropped at once
    del arrays, array
    comm.barrier_async().wait()
    check(all(watcher() is None for watcher in watchers),
          "arrays of finished ops with dropped Works are still alive")


def receive_behind_allreduce_async(comm, n, r):
    # Rank 0 receives 2 MiB from every other rank after starting an allreduce_async that those
    # ranks join only once their send ended (a send this large waits for its receive). The
    # receives are posted from inside the allreduce's waits, as MPI progresses; posted after it,
    # every rank waited out the 30 s timeout.
    g = np.full(1000, float(r + 1))
    count = 256 * 1024
    if r == 0:
        work = comm.allreduce_async(g, timeout=30)
        for peer in range(1, n):
            got = comm.recv(np.zeros(count), peer, tag=7, timeout=30)
            check(np.array_equal(got, np.arange(count, dtype=np.float64) + peer),
                  f"the 2 MiB from rank {peer}")
        work.wait()
    else:
        comm.send(np.arange(count, dtype=np.float64) + r, 0, tag=7, timeout=30)
        comm.allreduce(g, timeout=30)
    equal(g[:3], [n * (n + 1) / 2] * 3, "the allreduce the receives went past")


def ring_sendrecv(comm, n, r):
    if n < 2:
        return
    # To the next rank, from the previous one, in one call: 300000 float64 go by rendezvous, so
    # a blocking send and recv in this order would wait for each other.
    nxt, prev = (r + 1) % n, (r - 1) % n
    sent = np.arange(300000, dtype=np.float64) + 10 * r
    out = np.zeros(300000)
    returned = comm.sendrecv(sent, nxt, out, prev, tag=5)
    check(returned is out, "sendrecv returns out")
    check(np.array_equal(out, np.arange(300000, dtype=np.float64) + 10 * prev),
          f"sendrecv from rank {prev}")
    try:
        comm.sendrecv(sent, nxt, sent, prev)
    except cohort.InvalidArgumentError as e:
        check("overlap" in str(e), f"the refusal names the overlap: {e}")
    else:
        check(False, "sendrecv with the same array both ways was accepted")


def main():
    comm = world()
    n, r = comm.size, comm.rank
    in_place_keeps_memory(comm, n, r)
    every_op_on_int64(comm, n, r)
    read_only_and_bool(comm, n, r)
    gathers_and_buffers(comm, n, r)
    mappable_buffers(comm, n, r)
    kept_mappable_buffers(comm, n, r)
    references_are_released(comm, n, r)
    receive_behind_allreduce_async(comm, n, r)
    ring_sendrecv(comm, n, r)
    comm.barrier()


if __name__ == "__main__":
    run(main)
