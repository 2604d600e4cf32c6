"""cohort: collective communication for ML engines, from Python.

    import cohort, torch
    comm = cohort.init()                          # under cohort-run, torchrun, mpirun or srun
    grads = torch.ones(1024)
    comm.allreduce(grads, op="avg")               # in place, GIL released, no copies
    work = comm.allreduce_async(grads)            # -> cohort.Work; work.wait() returns grads

Tensors are any object with __dlpack__ (numpy, torch, JAX, CuPy) or the buffer protocol;
cohort.Buffer is cohort's own, which numpy.from_dlpack and torch.from_dlpack view without
copies. Errors are cohort.Error subclasses carrying a cohort.ErrorCode. The training layer is
cohort.train.
"""

from ._cohort import (  # noqa: F401  (re-exported)
    Algorithm,
    Buffer,
    Communicator,
    DType,
    ErrorCode,
    ReduceOp,
    Work,
    __version__,
    init,
)
from .errors import (  # noqa: F401
    Error,
    InternalError,
    InvalidArgumentError,
    InvalidUsageError,
    RemoteError,
    SystemError,
    TimeoutError,
    UnsupportedError,
)
from . import objects as _objects
from . import train  # noqa: F401

# The object collectives are written in Python (pickle) but read as methods, like the others.
Communicator.broadcast_object = _objects.broadcast_object
Communicator.all_gather_object = _objects.all_gather_object
Communicator.gather_object = _objects.gather_object

__all__ = [
    "Algorithm", "Buffer", "Communicator", "DType", "Error", "ErrorCode", "InternalError",
    "InvalidArgumentError", "InvalidUsageError", "ReduceOp", "RemoteError", "SystemError",
    "TimeoutError", "UnsupportedError", "Work", "init", "train",
]
