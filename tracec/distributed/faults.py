"""One rank's failure ends the job.

MPI ranks block in collectives: if one rank dies of an exception while the
others wait in an all-reduce, they wait forever.  ``install(comm)``
replaces ``sys.excepthook`` by one that prints the exception (each line
prefixed with ``[rank R]``, so the failing rank's message is found in
interleaved output), flushes, and calls ``MPI_Abort`` on ``comm``, which
makes the launcher kill every rank with that exit code.

Invariant: with one rank (no launcher) nothing is aborted: the exception
is printed as Python prints it and the process exits as usual.
"""
from __future__ import annotations

import sys
import time
import traceback

__all__ = ["install", "uninstall", "ABORT_CODE"]

#: the exit code mpiexec reports when a rank aborted on an exception
ABORT_CODE = 17

_state: dict = {}


def _hook(exc_type, exc, tb):
    comm = _state.get("comm")
    if comm is None or comm.Get_size() == 1 or issubclass(exc_type, KeyboardInterrupt):
        _state.get("previous", sys.__excepthook__)(exc_type, exc, tb)
        return
    rank = comm.Get_rank()
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.splitlines()))
    sys.stderr.write(f"[rank {rank}] tracec.distributed: aborting all {comm.Get_size()} "
                     f"ranks because rank {rank} raised {exc_type.__name__}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # The launcher forwards each rank's output asynchronously; aborting at
    # once can kill the job before the message above reaches the user (seen
    # on a loaded machine), so give the forwarder a moment.
    time.sleep(0.5)
    comm.Abort(ABORT_CODE)


def install(comm) -> None:
    """Abort the job through ``comm`` on an uncaught exception."""
    if "comm" not in _state:
        _state["previous"] = sys.excepthook
        sys.excepthook = _hook
    _state["comm"] = comm


def uninstall() -> None:
    """Restore the excepthook ``install`` replaced."""
    if "comm" in _state:
        if sys.excepthook is _hook:
            sys.excepthook = _state["previous"]
        _state.clear()
