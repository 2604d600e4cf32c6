"""Errors reach Python as cohort.Error subclasses carrying their code, with messages naming what
was wrong, raised before anything moves (so no rank is left waiting and nothing crashes). Needs
neither numpy nor torch: tensors are cohort.Buffer and bytearray. Run with 2 or more ranks.
"""

import array
import builtins

from harness import check, raises, run, world

import cohort


def argument_errors(comm):
    n = comm.size
    x = cohort.Buffer.allocate(4, "float32")

    # A bad root is refused on every rank alike, naming the root and the size.
    raises(cohort.InvalidArgumentError, lambda: comm.broadcast(x, root=n + 2),
           f"root {n + 2}", f"size {n}")
    raises(cohort.InvalidArgumentError, lambda: comm.reduce(x, root=-1), "root -1")
    raises(cohort.InvalidArgumentError, lambda: comm.scatter(x, root=n + 1), f"root {n + 1}")
    error = raises(cohort.InvalidArgumentError, lambda: comm.gather(x, x, root=n), f"root {n}")
    check(error.code == cohort.ErrorCode.INVALID_ARGUMENT, f"code of {error!r}")
    check(isinstance(error, ValueError), "InvalidArgumentError is a ValueError")
    check(str(error).startswith("invalid_argument: "), f"message of {error!r}")

    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, op="sums"), "'sums'")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, op="band"), "band", "float")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, op=3), "op must be")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, timeout=-1), "timeout -1")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, algorithm="rign"), "'rign'")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce("text"), "allreduce: tensor",
           "str is not a tensor")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(None), "got None")
    raises(cohort.InvalidArgumentError,
           lambda: comm.allreduce(x, out=cohort.Buffer.allocate(5, "float32")), "5 elements")
    raises(cohort.InvalidArgumentError,
           lambda: comm.allreduce(x, out=cohort.Buffer.allocate(4, "int32")), "dtype")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x.as_read_only()), "read-only")
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(bytes(16)), "read-only")
    strided = cohort.Buffer.from_dlpack(memoryview(bytearray(32)).cast("i")[::2])
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(strided), "not contiguous")
    raises(cohort.InvalidArgumentError,
           lambda: comm.allgatherv(x, cohort.Buffer.allocate(8, "float32"), [4]), "counts")
    raises(cohort.InvalidArgumentError,
           lambda: comm.allgatherv(x, x, [4, -1] + [0] * (n - 2)), "entry 1 is -1")
    raises(cohort.InvalidArgumentError,
           lambda: comm.allgather(None, cohort.Buffer.allocate(n * 3 + 1, "float32")),
           "not a multiple of the communicator size")
    raises(cohort.InvalidArgumentError, lambda: comm.send(x, comm.rank), "is this rank")
    raises(cohort.InvalidArgumentError, lambda: comm.recv(x, n), f"peer {n}")
    raises(cohort.InvalidArgumentError, lambda: comm.send(x, (comm.rank + 1) % n, tag=-2),
           "tag -2")
    raises(cohort.InvalidArgumentError, lambda: comm.barrier_async(timeout=float("nan")),
           "timeout")
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.allocate(3, "float31"), "float31")
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.from_dlpack(object()),
           "no __dlpack__")
    # One tensor is fine (torch takes one too); a number is neither a tensor nor a sequence.
    raises(cohort.InvalidArgumentError, lambda: cohort.train.clip_grad_norm(7, 1.0),
           "expected a sequence of tensors")
    # The root of a broadcast must pass its tensor (elsewhere None is fine: out receives).
    raises(cohort.InvalidArgumentError, lambda: comm.broadcast(None, out=x, root=comm.rank),
           "tensor is required on the root", f"rank {comm.rank}")
    # A timeout beyond a year would overflow the deadline: refused, in seconds.
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, timeout=10**10),
           "more than one year")
    # alltoallv: this rank's block to itself has one size (the sums alone agree here).
    me, other = comm.rank, (comm.rank + 1) % n
    sends = [0] * n
    sends[me] = 4
    receives = [0] * n
    receives[me], receives[other] = 3, 1
    raises(cohort.InvalidArgumentError,
           lambda: comm.alltoallv(x, sends, receives, out=cohort.Buffer.allocate(4, "float32")),
           f"send_counts[{me}] is 4 but recv_counts[{me}] is 3")
    # Arguments of the wrong kind are refused as such, naming them (not pybind11's RuntimeError).
    raises(cohort.InvalidArgumentError, lambda: comm.allreduce(x, timeout=True), "timeout must be")

    class Seconds:  # a number of seconds of any type with __float__ (numpy and torch scalars)
        def __float__(self):
            return 30.0

    comm.allreduce(x, timeout=Seconds())
    raises(cohort.InvalidArgumentError, lambda: cohort.Buffer.allocate("abc"),
           "Buffer.allocate: shape must be an int or a sequence of ints, not 'abc'")
    raises(cohort.InvalidArgumentError, lambda: x.reshape([2.5]), "Buffer.reshape: shape")
    raises(ValueError, lambda: x.__dlpack__(dl_device="cpu"), "dl_device must be")
    raises(ValueError, lambda: x.__dlpack__(max_version=[1]), "max_version must be")
    scaler = cohort.train.GradScaler(comm)
    raises(cohort.InvalidArgumentError,
           lambda: scaler.load_state({"scale": "big", "growth_tracker": 0,
                                      "hysteresis_tracker": 0}), "'scale' is 'big'")
    raises(cohort.InvalidArgumentError, lambda: scaler.load_state({"scale": 2.0}),
           "no 'growth_tracker'")
    # A legacy capsule cannot say "read-only", so a read-only Buffer refuses to make one.
    raises(BufferError, lambda: x.as_read_only().__dlpack__(), "read-only")


def timeouts(comm):
    """A Work.wait timeout, then the same receive completed: the op keeps running."""
    r, n = comm.rank, comm.size
    data = bytearray(8)
    if r == 0:
        pending = comm.recv_async(data, peer=1, tag=3)
        error = raises(cohort.TimeoutError, lambda: pending.wait(timeout=0.05),
                       "did not finish within the 50 ms")
        check(isinstance(error, builtins.TimeoutError), "cohort.TimeoutError is a TimeoutError")
        check(error.code == cohort.ErrorCode.TIMEOUT, f"code of {error!r}")
        check(not pending.test(), "the receive cannot have finished: rank 1 has not sent")
    comm.barrier()  # rank 1 sends only after rank 0 has timed out
    if r == 1:
        comm.send(bytearray(b"timeouts"), peer=0, tag=3)
    if r == 0:
        check(pending.wait(timeout=60) is data, "wait returns the received tensor")
        check(bytes(data) == b"timeouts", f"received {bytes(data)!r}")

    # An op's own deadline: a receive nobody answers fails with TimeoutError, on a duplicate
    # communicator, which it poisons (later ops fail fast, naming the cause).
    side = comm.dup()
    if r == n - 1:
        raises(cohort.TimeoutError, lambda: side.recv(bytearray(4), peer=0, tag=9, timeout=0.2),
               "recv")
        raises(cohort.Error, lambda: side.allreduce(bytearray(4), op="bor"), "recv")
    comm.barrier()


def abort(comm):
    # Aborting a duplicate is local and sticky; the communicator it came from keeps working.
    doomed = comm.dup()
    check(not doomed.is_poisoned and doomed.error is None, "a fresh communicator is usable")
    doomed.abort("python test stop")
    check(doomed.is_poisoned, "abort() poisons")
    check("python test stop" in doomed.error, f"error names the reason: {doomed.error!r}")
    x = cohort.Buffer.allocate(4, "float32")
    raises(cohort.InvalidUsageError, lambda: doomed.allreduce(x), "python test stop")
    comm.barrier()


def root_only_arguments(comm):
    # What only the root reads is not even looked at elsewhere: broadcast's tensor beside out=,
    # reduce's out (here not a tensor at all, or read-only, off the root).
    n, r = comm.size, comm.rank
    out = array.array("f", [0.0] * 3)
    comm.broadcast(array.array("f", [1.0, 2.0, 3.0]) if r == 0 else "not a tensor", 0, out=out)
    check(list(out) == [1.0, 2.0, 3.0], f"broadcast beside a root-only tensor: {list(out)}")
    for elsewhere in ("not a tensor either", bytes(12)):
        total = array.array("f", [0.0] * 3)
        comm.reduce(array.array("f", [r + 1.0] * 3), 0, out=total if r == 0 else elsewhere)
        expected = [n * (n + 1) / 2] * 3 if r == 0 else [0.0] * 3
        check(list(total) == expected, f"reduce beside a root-only out: {list(total)}")
    comm.barrier()


def main():
    comm = world()
    check(comm.size >= 2, "run this test with 2 or more ranks")
    argument_errors(comm)
    root_only_arguments(comm)
    timeouts(comm)
    abort(comm)


if __name__ == "__main__":
    run(main)
