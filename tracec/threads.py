"""How many threads tracec's own parallel work may use: ``TRACEC_NUM_THREADS``,
else the cores this process may run on (its affinity, as ``taskset`` sets
it).  Compiled kernels (``backends/cpu/runtime.py``) and large eager random
draws (``ops/random.py``) read it."""
from __future__ import annotations

import os

__all__ = ["default_threads"]


def default_threads() -> int:
    env = os.environ.get("TRACEC_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
