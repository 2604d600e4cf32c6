"""Python objects between ranks, pickled: torch.distributed's broadcast_object_list,
all_gather_object and gather_object, on cohort's byte collectives (cohort.train.broadcast_bytes,
allgather_bytes, gather_bytes).

These are methods of cohort.Communicator. Every rank calls them in the same order with the same
root. An object that fails to pickle never leaves the other ranks waiting: each payload travels
behind a status byte, the rank whose pickling failed re-raises its own exception, and the ranks
that needed its object raise cohort.RemoteError naming it. Unpickling runs arbitrary code, as
with torch: use these within one job you trust.
"""

import pickle

from ._cohort import train as _train
from .errors import RemoteError

_OK = b"\x00"
_FAILED = b"\x01"


def _pack(obj):
    """(payload, exception): the status byte and pickle, or the failure and its description."""
    try:
        return _OK + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), None
    except Exception as error:  # pylint: disable=broad-except
        return _FAILED + f"{type(error).__name__}: {error}".encode(), error


def _failures(op, payloads, ranks):
    """'rank r could not pickle its object: ...' for each failed payload, or None."""
    failed = [f"rank {rank} could not pickle its object ({payload[1:].decode(errors='replace')})"
              for rank, payload in zip(ranks, payloads) if payload[:1] == _FAILED]
    return f"{op}: " + "; ".join(failed) if failed else None


def broadcast_object(comm, obj=None, root=0, *, timeout=None):
    """Returns the root's ``obj`` on every rank (the root gets ``obj`` itself, the others an
    unpickled copy); ``obj`` is ignored elsewhere. ``timeout`` in seconds bounds each underlying
    collective (default: the communicator's)."""
    is_root = comm.rank == root
    payload, error = _pack(obj) if is_root else (b"", None)
    payload = _train.broadcast_bytes(comm, payload, root, timeout)
    if error is not None:
        raise error
    if is_root:
        return obj
    message = _failures("broadcast_object", [payload], [root])
    if message:
        raise RemoteError(f"remote_error: {message}")
    return pickle.loads(payload[1:])


def all_gather_object(comm, obj, *, timeout=None):
    """Every rank's ``obj``, in rank order, on every rank (a list of ``comm.size`` objects)."""
    payload, error = _pack(obj)
    payloads = _train.allgather_bytes(comm, payload, timeout)
    if error is not None:
        raise error
    message = _failures("all_gather_object", payloads, range(len(payloads)))
    if message:
        raise RemoteError(f"remote_error: {message}")
    return [pickle.loads(p[1:]) for p in payloads]


def gather_object(comm, obj, root=0, *, timeout=None):
    """On the root, every rank's ``obj`` in rank order; None on the other ranks."""
    payload, error = _pack(obj)
    payloads = _train.gather_bytes(comm, payload, root, timeout)
    if error is not None:
        raise error
    if comm.rank != root:
        return None
    message = _failures("gather_object", payloads, range(len(payloads)))
    if message:
        raise RemoteError(f"remote_error: {message}")
    return [pickle.loads(p[1:]) for p in payloads]
