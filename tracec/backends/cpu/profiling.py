"""Profiling builds of the cpu backend: per-kernel time, bytes and FLOPs.

A profiling build (``compile_module(module, profile=True)``) is a separate
compile of the same optimized module: its entry function reads the CPU's
cycle counter (``llvm.readcyclecounter``: ``rdtsc`` on x86-64) around every
kernel call and stores each call's ticks, and the whole call's, in a
counters area at the end of the workspace (``signature["profile"]
["offset"]``).  A normal build has none of this: profiling costs nothing
unless asked for.  The object also exports ``<entry>_ticks``, which returns
the counter, so that ``ProfilingExecutable.tick_rate`` can measure ticks
per second against ``time.perf_counter``.

Each kernel call is attributed to the IR op (a fused ``tracec.kernel``, a
matmul, a copy...) it computes: ``signature["profile"]["kernels"]`` lists
those ops with their label, result shape, user lines, the bytes of the
buffers they touch (each counted once: what the kernel must move at least)
and, for matmuls, their FLOPs.

Invariant: ``ProfilingExecutable(arrays)`` returns what ``CpuExecutable``
returns for the same module; ``kernel_stats()`` covers every kernel call
the entry makes, and the ticks of all calls sum to at most the ticks of
the whole entry.
"""
from __future__ import annotations

import ctypes
import math
import os
import time

import numpy as np

from tracec import ir
from tracec.ir.summary import op_label, op_lines
from tracec.backends.cpu import scalar
from tracec.backends.cpu.builder import I8, I64
from tracec.backends.cpu.runtime import CpuExecutable
from tracec.backends.cpu.sized import SizedCpuExecutable
from tracec.symbolic import evaluate, parse

__all__ = ["EntryTimer", "signature_info", "ProfilingExecutable", "SizedProfilingExecutable",
           "op_flops"]


class EntryTimer:
    """Emits the timing code of a profiling entry function (``lower.py``)."""

    def __init__(self, low, fb, ws):
        n = len(low.kernels.calls)
        off = (low.plan.workspace + 63) // 64 * 64
        low.plan.workspace = off + 8 * (n + 1)
        low.profile_offset = off
        self.fb, self.n = fb, n
        self.base = fb.gep(ws, fb.i64(off), I8)
        self.begin = self._now()
        self.t0 = None

    def _now(self):
        return self.fb.intr("llvm.readcyclecounter", [], I64)

    def _store(self, i: int, t0) -> None:
        fb = self.fb
        fb.store(fb.sub(self._now(), t0), fb.gep(self.base, fb.i64(i), I64), 8)

    def start(self) -> None:
        self.t0 = self._now()

    def stop(self, i: int) -> None:
        self._store(i, self.t0)

    def finish(self) -> None:
        self._store(self.n, self.begin)


def op_flops(op) -> int:
    """Floating-point operations of a matmul (2·M·N·K per batch), else 0."""
    if isinstance(op, int) or ir.primitive_name(op) != "matmul":
        return 0
    a, b = (ir.shape_of(v.type) for v in op.operands)
    out = ir.shape_of(op.results[0].type)
    k = a[-1] if len(a) > 0 else 1
    return 2 * math.prod(out) * k


def _nbytes(t) -> int:
    return math.prod(ir.shape_of(t)) * scalar.itemsize(ir.dtype_of(t))


def signature_info(low, calls) -> dict:
    """The signature entries of a profiling build; emits ``<entry>_ticks``."""
    fb = low.mb.function(low.symbol + "_ticks", [], I64, exported=True)
    fb.ret_(fb.intr("llvm.readcyclecounter", [], I64))
    fb.finish()
    outputs = low.fn.function_type.outputs.data
    kernels, index, call_kernel = [], {}, []
    for c in calls:
        key = id(c.op) if not isinstance(c.op, int) else ("copy", c.op)
        k = index.get(key)
        if k is None:
            k = index[key] = len(kernels)
            op = c.op
            shape = (list(ir.shape_of(outputs[op])) if isinstance(op, int) else
                     list(ir.shape_of(op.results[0].type)) if op.results else [])
            kernels.append({"label": op_label(op), "shape": [_text(n) for n in shape],
                            "lines": [] if isinstance(op, int) else op_lines(op),
                            "flops": _text(op_flops(op)), "slots": set()})
        for s in c.slots:
            kernels[k]["slots"].add(_slot_bytes(low, s, outputs))
        call_kernel.append(k)
    for kd in kernels:
        kd["bytes"] = _text(sum(b for _, b in kd.pop("slots")))
    return {"profile": {"offset": _text(low.profile_offset), "calls": call_kernel,
                        "kernels": kernels},
            "exports": [low.symbol + "_ticks"]}


def _text(n):
    """A size for the JSON signature: an int, or a symbolic size's text
    (evaluated at each call's sizes: ``SizedProfilingExecutable``)."""
    return n if isinstance(n, int) else str(n)


def _slot_bytes(low, s, outputs) -> tuple:
    """``(a key of the buffer, its bytes)`` for one kernel argument."""
    if isinstance(s, tuple) and s[0] == "output":
        return (s, _nbytes(outputs[s[1]]))
    if isinstance(s, tuple):            # a global constant
        return (s, 0)
    return (id(low.plan.root(s)), _nbytes(s.type))


def _short(location: str) -> str:
    """``/path/to/train.py:12`` -> ``train.py:12``."""
    path, _, line = location.rpartition(":")
    return f"{os.path.basename(path)}:{line}"


_TICK_RATE: list = []


class ProfilingExecutable(CpuExecutable):
    """A ``CpuExecutable`` of a profiling build; it sums each kernel's
    ticks over the calls made since ``reset()``."""

    def __init__(self, object_code: bytes, signature: dict, stages: dict | None = None):
        super().__init__(object_code, signature, stages)
        info = signature["profile"]
        self._offset = info["offset"]
        self._calls = list(info["calls"])
        self.kernels = info["kernels"]
        self._ticks_fn = ctypes.CFUNCTYPE(ctypes.c_int64)(
            self._tracker[signature["exports"][0]])
        self._last_ws = None
        self.reset()

    def reset(self) -> None:
        self.ticks = np.zeros(len(self._calls) + 1, np.int64)
        self.runs = 0
        self.wall_s = 0.0
        #: Per call: its wall seconds and its kernels' ticks (medians resist
        #: the outliers of a shared machine, where sums do not).
        self.run_wall: list = []
        self.run_kernel_ticks: list = []

    def _workspace(self, size=None):
        ws = self._last_ws = super()._workspace(size)
        return ws

    def _env(self) -> dict:
        """The sizes of the last call (none: static code)."""
        return {}

    def __call__(self, arrays, out=None):
        t0 = time.perf_counter()
        outs = super().__call__(arrays, out)
        wall = time.perf_counter() - t0
        raw, _, off = self._last_ws
        start = off + evaluate(parse(self._offset) if isinstance(self._offset, str)
                               else self._offset, self._env())
        ticks = raw[start:start + 8 * len(self.ticks)].view(np.int64)
        self.ticks += ticks
        self.runs += 1
        self.wall_s += wall
        self.run_wall.append(wall)
        self.run_kernel_ticks.append(int(ticks[:-1].sum()))
        return outs

    def tick_rate(self) -> float:
        """Cycle-counter ticks per second (measured once per process)."""
        if not _TICK_RATE:
            rates = []
            for _ in range(3):
                t0, c0 = time.perf_counter(), self._ticks_fn()
                while time.perf_counter() - t0 < 0.01:
                    pass
                t1, c1 = time.perf_counter(), self._ticks_fn()
                rates.append((c1 - c0) / (t1 - t0))
            rate = sorted(rates)[1]
            if rate <= 0:
                raise RuntimeError("the CPU's cycle counter does not advance here: "
                                   "per-kernel profiling is not available")
            _TICK_RATE.append(rate)
        return _TICK_RATE[0]

    def kernel_stats(self) -> tuple[list[dict], float]:
        """``(rows, entry seconds)``: one row per kernel, in call order, with
        ``seconds`` summed over its calls since ``reset()``, and the entry
        function's own total seconds."""
        rate = self.tick_rate()
        # Each kernel runs once per step (its LLVM calls together).
        env = self._env()

        def size(x):
            return evaluate(parse(x), env) if isinstance(x, str) else x
        rows = [dict(k, seconds=0.0, calls=self.runs, locations=list(k["lines"]),
                     lines=[_short(x) for x in k["lines"]], shape=[size(n) for n in k["shape"]],
                     flops=size(k["flops"]), bytes=size(k["bytes"])) for k in self.kernels]
        for i, k in enumerate(self._calls):
            rows[k]["seconds"] += self.ticks[i] / rate
        return rows, float(self.ticks[-1] / rate)


class SizedProfilingExecutable(ProfilingExecutable, SizedCpuExecutable):
    """The profiling build of a symbolic module: sizes (shapes, bytes,
    FLOPs, the counters' offset) are evaluated at the last call's sizes."""

    def __call__(self, arrays, out=None):
        self._last_sizes = self.sizes(arrays)
        return super().__call__(arrays, out)

    def _env(self) -> dict:
        return getattr(self, "_last_sizes", {})
