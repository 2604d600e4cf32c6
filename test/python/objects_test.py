"""Pickled objects between ranks (broadcast_object, all_gather_object, gather_object) at any world
size, every root; an object that cannot be pickled fails its own rank with its own exception and
the ranks that needed it with cohort.RemoteError naming it, never a hang. Needs neither numpy nor
torch.
"""

import pickle
import threading

from harness import check, raises, run, world

import cohort


def payload(rank):
    """What rank `rank` contributes: nested, of a size that differs per rank."""
    return {"rank": rank, "name": f"worker-{rank}", "items": list(range(rank * 3)),
            "nested": (rank, [None, 1.5 * rank])}


def main():
    comm = world()
    n, r = comm.size, comm.rank

    for root in range(n):
        mine = payload(r) if r == root else None
        got = comm.broadcast_object(mine, root=root)
        check(got == payload(root), f"broadcast_object from {root}: got {got}")
        if r == root:
            check(got is mine, "the root gets its own object back")

    everyone = comm.all_gather_object(payload(r))
    check(everyone == [payload(rank) for rank in range(n)], f"all_gather_object: {everyone}")

    root = n - 1
    gathered = comm.gather_object(payload(r), root=root)
    if r == root:
        check(gathered == [payload(rank) for rank in range(n)], f"gather_object: {gathered}")
    else:
        check(gathered is None, "gather_object returns None off the root")

    # Empty and large objects.
    check(comm.all_gather_object(b"") == [b""] * n, "empty bytes")
    big = bytes(range(256)) * 4096 * (r + 1)
    check(comm.all_gather_object(big)[r] == big, "a 1 MiB object per rank")

    # Byte collectives underneath.
    check(cohort.train.broadcast_bytes(comm, b"abc" if r == 0 else b"", 0) == b"abc",
          "broadcast_bytes")
    # The root's data is no bytes (a str): the root raises its own error, every other rank
    # RemoteError naming it, at once (they waited for a length that never came); then on.
    if r == 0:
        raises(cohort.InvalidArgumentError,
               lambda: cohort.train.broadcast_bytes(comm, "text", 0, timeout=60),
               "expected contiguous bytes-like data, not str")
    else:
        raises(cohort.RemoteError,
               lambda: cohort.train.broadcast_bytes(comm, None, 0, timeout=60),
               "threw on root 0", "not str")
    check(cohort.train.broadcast_bytes(comm, b"after" if r == 0 else b"", 0) == b"after",
          "broadcast_bytes after a root's failure")
    # One rank's data is no bytes: it raises its own error, every other rank one naming it, at
    # once (they waited for its size before).
    bad = n - 1
    for gather in (lambda d: cohort.train.allgather_bytes(comm, d, timeout=60),
                   lambda d: cohort.train.gather_bytes(comm, d, 0, timeout=60)):
        if r == bad:
            raises(cohort.InvalidArgumentError, lambda: gather(None),
                   "expected contiguous bytes-like data, not NoneType")
        else:
            raises(cohort.InvalidArgumentError, lambda: gather(b"fine"),
                   f"ranks {bad} could not make their bytes")
    check(cohort.train.allgather_bytes(comm, bytes([r])) == [bytes([k]) for k in range(n)],
          "allgather_bytes after a rank's failure")
    check(cohort.train.allgather_bytes(comm, bytes([r]) * r) ==
          [bytes([rank]) * rank for rank in range(n)], "allgather_bytes")

    # An unpicklable object on one rank: that rank raises pickle's own error, the others
    # RemoteError naming it. Every rank then carries on.
    bad = n - 1
    obj = threading.Lock() if r == bad else "fine"
    if r == bad:
        raises(TypeError, lambda: comm.all_gather_object(obj), "pickle")
        raises(TypeError, lambda: comm.broadcast_object(obj, root=bad), "pickle")
    else:
        raises(cohort.RemoteError, lambda: comm.all_gather_object(obj),
               f"rank {bad} could not pickle", "TypeError")
        raises(cohort.RemoteError, lambda: comm.broadcast_object(None, root=bad),
               f"rank {bad} could not pickle")
    if r == 0:
        error = raises(cohort.RemoteError, lambda: comm.gather_object(obj, root=0),
                       f"rank {bad} could not pickle") if bad != 0 else None
        if bad == 0:  # a world of one: the root itself failed
            raises(TypeError, lambda: comm.gather_object(obj, root=0), "pickle")
        check(error is None or error.code == cohort.ErrorCode.REMOTE_ERROR, "RemoteError code")
    elif r == bad:
        raises(TypeError, lambda: comm.gather_object(obj, root=0), "pickle")
    else:
        check(comm.gather_object(obj, root=0) is None, "gather_object off the root")

    raises(cohort.InvalidArgumentError, lambda: comm.broadcast_object(1, root=n), f"root {n}")
    check(pickle.loads(pickle.dumps(cohort.TimeoutError("timeout: x"))).code ==
          cohort.ErrorCode.TIMEOUT, "cohort errors pickle")
    comm.barrier()


if __name__ == "__main__":
    run(main)
