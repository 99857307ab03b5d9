"""Where a compiled step's time goes: a per-kernel profile.

``fn.profile(*args, repeat=N)`` brings ``fn`` to its steady state (calls it
until a call reuses its trace), then makes ``N`` ordinary compiled calls,
timed, alternating with ``N`` calls of a profiling build of the same trace
(the cpu backend's ``profiling.py``: a separate compile, so ordinary calls
pay nothing), and prints a table of kernels sorted by time: calls, total and
mean time, bytes moved and GB/s, FLOPs and GFLOP/s (matmuls), share of the
step and the user lines of the kernel's ops.  It returns the rows as a
``Profile`` (a list of dicts, plus the step's timings).  The calls are real
calls: a training step trains ``2·N + 1`` more steps.

``TRACEC_PROFILE=1``: every compiled function's code is the profiling
build from the start, and at exit the table of each is printed.

Invariant: every kernel call of the step is in exactly one row, and the
rows' ``share`` values sum to at most 1 (the rest is the entry's own work
and Python's: mapping the arguments to arrays).
"""
from __future__ import annotations

import atexit
import os
import statistics
import time

from tracec.backends import cpu

__all__ = ["Profile", "profile", "enabled", "profiling_compile", "steady_entry"]


def enabled() -> bool:
    return os.environ.get("TRACEC_PROFILE", "") not in ("", "0")


class Profile(list):
    """Rows (dicts) of a profile, slowest kernel first (``total_s`` over
    ``calls``, ``mean_s`` per call, ``share`` of the profiled calls' mean
    time), with the step's timings, medians over the calls:
    ``step_s`` (an ordinary compiled call), ``profiled_s`` (a call of the
    profiling build) and ``kernels_s`` (its kernels' sum per call)."""

    def __init__(self, rows, *, name: str, step_s: float | None, profiled_s: float,
                 kernels_s: float, calls: int, per_call=()):
        super().__init__(rows)
        self.name, self.step_s, self.profiled_s = name, step_s, profiled_s
        self.kernels_s, self.calls = kernels_s, calls
        #: ``(wall seconds, kernel seconds)`` of each profiled call
        self.per_call = list(per_call)

    def table(self):
        """The profile as a ``rich.table.Table``."""
        from rich.table import Table
        step = f"{self.step_s * 1e3:.3f} ms per step, " if self.step_s else ""
        t = Table(title=f"{self.name}: {len(self)} kernels, {step}kernels "
                        f"{self.kernels_s * 1e3:.3f} ms of {self.profiled_s * 1e3:.3f} ms "
                        f"profiled ({self.calls} calls)")
        for col in ("#", "kernel", "shape", "calls", "total ms", "mean µs", "MB", "GB/s",
                    "GFLOP", "GFLOP/s", "share", "lines"):
            t.add_column(col, justify="left" if col in ("kernel", "shape", "lines") else "right")
        for r in self:
            t.add_row(str(r["index"]), r["kernel"], "x".join(map(str, r["shape"])) or "()",
                      str(r["calls"]), f"{r['total_s'] * 1e3:.3f}",
                      f"{r['mean_s'] * 1e6:.1f}", f"{r['bytes'] / 1e6:.3f}",
                      f"{r['gbps']:.1f}", f"{r['flops'] / 1e9:.4f}" if r["flops"] else "",
                      f"{r['gflops']:.1f}" if r["flops"] else "", f"{r['share']:.1%}",
                      ", ".join(r["lines"][:3]) + (" …" if len(r["lines"]) > 3 else ""))
        return t

    def print(self, file=None) -> None:
        from rich.console import Console
        Console(file=file, width=200).print(self.table())


def rows_of(exe, name: str, step_s: float | None = None) -> Profile:
    """The ``Profile`` of a ``ProfilingExecutable``'s calls since its reset."""
    stats, _ = exe.kernel_stats()
    runs = max(exe.runs, 1)
    wall = exe.wall_s / runs
    rows = []
    for i, s in enumerate(stats):
        total = s["seconds"]
        mean = total / runs
        rows.append({
            "index": i, "kernel": s["label"], "shape": s["shape"], "calls": s["calls"],
            "total_s": total, "mean_s": mean, "bytes": s["bytes"],
            "gbps": s["bytes"] / mean / 1e9 if mean > 0 else 0.0,
            "flops": s["flops"], "gflops": s["flops"] / mean / 1e9 if mean > 0 else 0.0,
            "share": mean / wall if wall > 0 else 0.0, "lines": s["lines"],
            "locations": s["locations"]})
    rows.sort(key=lambda r: -r["total_s"])
    rate = exe.tick_rate()
    return Profile(rows, name=name, step_s=step_s,
                   profiled_s=statistics.median(exe.run_wall or [0.0]),
                   kernels_s=statistics.median(exe.run_kernel_ticks or [0]) / rate,
                   calls=exe.runs,
                   per_call=[(w, k / rate) for w, k in zip(exe.run_wall,
                                                           exe.run_kernel_ticks)])


def steady_entry(cf, args, kwargs, max_calls: int = 4):
    """Call ``cf`` until a call reuses its trace; that call's entry."""
    for _ in range(max_calls):
        hits = cf.hits
        cf(*args, **kwargs)
        if cf.hits > hits:
            e = cf._last
            return e.last_sub if e.trace.symbolic is not None else e
    raise RuntimeError(f"{cf.__name__} retraced on every one of {max_calls} calls; "
                       f"reasons: {'; '.join(cf.reasons)}")


def _profiling_executable(entry):
    exe = getattr(entry, "profile_executable", None)
    if exe is None:
        exe = entry.profile_executable = entry.compile_again(cpu.compile_module, profile=True)
    return exe


def profile(cf, args, kwargs, repeat: int = 10, echo: bool = True) -> Profile:
    """See the module docstring (``CompiledFunction.profile``)."""
    if cf.backend != "cpu":
        raise ValueError(f"profile() needs the cpu backend; {cf.__name__} uses "
                         f"{cf.backend!r}")
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    entry = steady_entry(cf, args, kwargs)
    normal = entry.ensure_compiled()
    exe = _profiling_executable(entry)
    times = []
    # The specialized call (fast_run) has the ordinary executable bound in:
    # the calls below take the general path, which runs entry.executable.
    fast_run, entry._fast_run = entry._fast_run, False
    try:
        # Ordinary and profiled calls alternate (after one profiled call that
        # warms its code and workspace), so that both see the same machine:
        # a shared one's load changes from second to second.
        entry.executable = exe
        cf(*args, **kwargs)
        exe.reset()
        for _ in range(repeat):
            entry.executable = normal
            t0 = time.perf_counter()
            cf(*args, **kwargs)
            times.append(time.perf_counter() - t0)
            entry.executable = exe
            cf(*args, **kwargs)
    finally:
        entry.executable = normal
        entry._fast_run = fast_run
    if exe.runs != repeat:
        raise RuntimeError(f"{cf.__name__}: {repeat - exe.runs} of the profiled calls did "
                           f"not run the profiled trace (a guard failed: "
                           f"{cf.reasons[-1] if cf.reasons else 'unknown'})")
    prof = rows_of(exe, cf.__name__, statistics.median(times))
    if echo:
        prof.print()
    return prof


_ACTIVE: list = []


def profiling_compile(entry, name: str):
    """``entry.compile_fn`` under ``TRACEC_PROFILE=1``: the profiling build,
    reported at exit."""
    def compile_fn():
        exe = _profiling_executable(entry)
        if not _ACTIVE:
            atexit.register(_report)
        _ACTIVE.append((name, exe))
        return exe, {"cache": "profile"}
    return compile_fn


def _report() -> None:
    for name, exe in _ACTIVE:
        if exe.runs:
            rows_of(exe, name).print()
