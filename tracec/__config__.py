"""``tracec.__config__``: ``show()`` and ``parallel_info()``, the build and
threading summaries PyTorch scripts print at start-up, for tracec: its
version, the pinned libraries it runs on, and the threads its kernels use.
Imports only what it reports on, when called."""
from __future__ import annotations

import os

__all__ = ["show", "parallel_info"]


def show() -> str:
    import numpy

    from tracec.version import __version__
    lines = [f"tracec {__version__}", f"  - NumPy {numpy.__version__} (eager ops, interpreter)"]
    for name in ("xdsl", "llvmlite"):
        try:
            from importlib.metadata import version
            lines.append(f"  - {name} {version(name)} (compiler)")
        except Exception:       # noqa: BLE001 - a missing distribution is reported as such
            lines.append(f"  - {name}: not installed")
    lines.append("  - CPU backend: LLVM (llvmlite), native code for the host CPU")
    return "\n".join(lines) + "\n"


def parallel_info() -> str:
    from tracec.config import get_num_threads
    return (f"ATen/Parallel:\n\tat::get_num_threads() : {get_num_threads()}\n"
            f"\tOMP_NUM_THREADS : {os.environ.get('OMP_NUM_THREADS', '[not set]')}\n"
            f"\tTRACEC_NUM_THREADS : {os.environ.get('TRACEC_NUM_THREADS', '[not set]')}\n"
            f"\tparallel backend: tracec's own threads (pthreads)\n")
