"""What every Python test here shares: skipping when numpy or torch is missing, the world
communicator, and checks that name the rank and what differed.

A test is a script run as every rank of a job (cohort-run -n N -- python3 script.py) or alone
(a world of one). It exits 0 when every check passed, 77 (meson: skipped) when a module it needs
is missing, and 1 with a message naming the rank otherwise.
"""

import importlib
import os
import sys

SKIP = 77


def require(*modules):
    """Imports the modules, or exits 77 naming the first one missing."""
    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ImportError as error:
            print(f"skipped: {sys.executable} cannot import {name} ({error})")
            sys.exit(SKIP)
    return loaded[0] if len(loaded) == 1 else loaded


def world():
    """cohort.init(), with one torch thread per rank when torch is loaded: the ranks share the
    machine's cores."""
    import cohort  # pylint: disable=import-outside-toplevel
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    return cohort.init()


class Failure(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise Failure(f"rank {os.environ.get('COHORT_RANK', '0')}: {message}")


def equal(actual, expected, what):
    """Elementwise equality of two sequences (tensors and arrays converted with tolist())."""
    as_list = lambda x: x.tolist() if hasattr(x, "tolist") else list(x)  # noqa: E731
    actual, expected = as_list(actual), as_list(expected)
    check(actual == expected, f"{what}: got {actual}, expected {expected}")


def raises(kind, fn, *fragments):
    """Calls fn(), which must raise `kind` with every fragment in its message; returns it."""
    try:
        fn()
    except kind as error:
        for fragment in fragments:
            check(fragment in str(error),
                  f"{kind.__name__} '{error}' does not mention '{fragment}'")
        return error
    raise Failure(f"rank {os.environ.get('COHORT_RANK', '0')}: expected {kind.__name__} "
                  f"mentioning {fragments}, nothing was raised")


def run(main):
    """Runs main() and turns the outcome into the exit code."""
    try:
        main()
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
    print("ok")
