"""cohort's exceptions: one class per cohort::ErrorCode, all deriving from cohort.Error.

Every failure cohort reports (bad arguments, a timeout, a dead peer, ...) is raised as the class
of its code, so callers branch on the class or on ``.code``, never on message text. Where a
built-in exception means the same thing the class derives from it too, so generic handlers work:
``except ValueError`` catches InvalidArgumentError, ``except TimeoutError`` (the built-in) catches
cohort.TimeoutError.
"""

import builtins

from . import _cohort
from ._cohort import ErrorCode


class Error(RuntimeError):
    """Base of every error cohort raises. ``code`` is its cohort.ErrorCode; ``str(error)`` is
    ``"<code name>: <message>"``, the message naming what was wrong (the argument, the op and its
    sequence number, the peers not heard from)."""

    code = None


class InvalidArgumentError(Error, ValueError):
    """A value passed in is wrong (dtype, count, device, rank, root, shape, ...)."""

    code = ErrorCode.INVALID_ARGUMENT


class InvalidUsageError(Error):
    """The call is not allowed in this state (a poisoned communicator, a repeated step, ...)."""

    code = ErrorCode.INVALID_USAGE


class UnsupportedError(Error, NotImplementedError):
    """Valid, but not built or not implemented for this combination (e.g. device memory)."""

    code = ErrorCode.UNSUPPORTED


class TimeoutError(Error, builtins.TimeoutError):  # pylint: disable=redefined-builtin
    """A deadline passed; the message names what was still missing."""

    code = ErrorCode.TIMEOUT


class RemoteError(Error):
    """A peer died, aborted, closed its connection, or failed where this rank depends on it."""

    code = ErrorCode.REMOTE_ERROR


class SystemError(Error, OSError):  # pylint: disable=redefined-builtin
    """The OS or a library below cohort failed (errno, UCX, NCCL, CUDA status)."""

    code = ErrorCode.SYSTEM_ERROR


class InternalError(Error):
    """A bug in cohort that could be reported rather than aborted on."""

    code = ErrorCode.INTERNAL


_CLASSES = (InvalidArgumentError, InvalidUsageError, UnsupportedError, TimeoutError, RemoteError,
            SystemError, InternalError)

if {cls.code for cls in _CLASSES} != set(ErrorCode.__members__.values()):
    raise ImportError("cohort.errors does not cover every cohort.ErrorCode")
for _cls in (Error,) + _CLASSES:
    _cls.__module__ = "cohort"  # shown as cohort.TimeoutError, where users import it from
for _cls in _CLASSES:
    _cohort._register_error_class(_cls.code, _cls)  # pylint: disable=protected-access
