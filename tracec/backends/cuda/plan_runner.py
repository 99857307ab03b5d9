"""Executing a launch plan (``lower.py``): buffers, grids, symbols, errors.

``PlanRunner`` holds what the two runtimes share: it reads the sizes of a
call from its inputs (symbolic modules), checks the executable's size
guards, makes the outputs (a donated output is its input array), the
workspace and the constants, resolves each launch's buffer refs to
pointers and computes its grid, and reports a failed check.  A subclass
supplies the array module and the launch itself: ``emulated.py`` (NumPy
and host code) or ``runtime.py`` (CuPy and the GPU).

Invariant: ``runner(arrays)`` returns what the interpreter returns for the
module and inputs (float sums up to reassociation); a donated output is the
input array it was given, updated in place.
"""
from __future__ import annotations

import base64

import numpy as np

from tracec import dtypes as dt
from tracec.backends.cpu.runtime import ERROR_KINDS as _ERRORS, CpuRuntimeError
from tracec.backends.cuda.kernels import ERROR_CODE, MAX_GRID
from tracec.symbolic import evaluate, guard_holds, parse

__all__ = ["PlanRunner", "SizeGuardError"]


class SizeGuardError(ValueError):
    """The call's sizes are outside what a symbolic executable was compiled for."""


def _size(x):
    return parse(x) if isinstance(x, str) else int(x)


class PlanRunner:
    """See the module docstring; ``xp`` is the array module (numpy/cupy)."""

    xp = np

    def __init__(self, signature: dict):
        self.signature = signature
        self.symbols = [(n, int(i), int(d)) for n, i, d in signature.get("symbols", ())]
        self._ins = [([_size(x) for x in s], dt.to_dtype(d).np) for s, d in signature["inputs"]]
        self._outs = [([_size(x) for x in s], dt.to_dtype(d).np)
                      for s, d in signature["outputs"]]
        self._ws = _size(signature["workspace"])
        self._donated = {int(k): int(j) for k, j in signature.get("donated", ())}
        self._errors = list(signature["errors"])
        self.size_guards = [[parse(a), op, parse(b), res]
                            for a, op, b, res in signature.get("size_guards", ())]
        self._launches = []
        for item in signature["launches"]:
            item = dict(item)
            for key in ("units", "nbytes"):
                if key in item:
                    item[key] = _size(item[key])
            item["refs"] = [_ref(r) for r in item.get("refs", ())]
            for key in ("src", "dst"):
                if key in item:
                    item[key] = _ref(item[key])
            self._launches.append(item)
        self._consts = {}
        for name, (dname, shape, raw) in signature.get("consts", {}).items():
            npd = np.uint8 if dname == "bool" else dt.to_dtype(dname).np
            self._consts[name] = np.frombuffer(base64.b64decode(raw), npd).reshape(shape)

    # --- sizes ------------------------------------------------------------------------

    def sizes(self, arrays) -> dict:
        return {n: int(arrays[i].shape[d]) for n, i, d in self.symbols}

    def failed_guard(self, env: dict) -> str | None:
        """None if this executable serves the sizes ``env``, else why not."""
        for name, _, _ in self.symbols:
            if env.get(name, 0) < 2:
                return f"the size {name} is {env.get(name)} (a symbol stands for 2 or more)"
        for g in self.size_guards:
            if not guard_holds(g, env):
                lhs, op, rhs, res = g
                return f"compiled for sizes with {'' if res else 'not '}{lhs} {op} {rhs}"
        return None

    # --- a call ---------------------------------------------------------------------

    def __call__(self, arrays, out=None):
        xp = self.xp
        if len(arrays) != len(self._ins):
            raise TypeError(f"expected {len(self._ins)} input arrays, got {len(arrays)}")
        env = self.sizes(arrays)
        if self.symbols:
            bad = self.failed_guard(env)
            if bad is not None:
                raise SizeGuardError(bad)
        ins = []
        for a, (shape, npd) in zip(arrays, self._ins):
            shape = tuple(evaluate(x, env) for x in shape)
            a = self.to_array(a, npd)
            if tuple(a.shape) != shape:
                raise ValueError(f"input of shape {tuple(a.shape)} where {shape} was compiled")
            ins.append(a)
        outs = []
        for k, (shape, npd) in enumerate(self._outs):
            j = self._donated.get(k)
            outs.append(ins[j] if j is not None else
                        xp.empty(tuple(evaluate(x, env) for x in shape), npd))
        ws = xp.zeros(max(evaluate(self._ws, env), 64), np.uint8)
        sym_values = [env[n] for n, _, _ in self.symbols]
        for item in self._launches:
            if item["kind"] == "copy":
                n = evaluate(item["nbytes"], env)
                if n:
                    self.copy(self._bytes(item["dst"], ins, outs, ws, env, n),
                              self._bytes(item["src"], ins, outs, ws, env, n))
                continue
            units = evaluate(item["units"], env)
            if units <= 0:
                continue
            grid = min(-(-units // item["per_block"]), MAX_GRID)
            ptrs = [self._pointer(r, ins, outs, ws, env) for r in item["refs"]]
            self.launch(item["fn"], grid, item["block"], ptrs, self.pointer(ws), sym_values)
        if self._errors:
            code = int(self.error_word(ws))
            if code:
                if not 1 <= code <= len(self._errors):
                    raise CpuRuntimeError(f"compiled function failed with code {code}")
                kind, message = self._errors[code - 1]
                bad = int(self.error_index(ws))
                raise _ERRORS.get(kind, CpuRuntimeError)(message.replace("{index}", str(bad)))
        return outs

    def _pointer(self, ref, ins, outs, ws, env):
        kind, arg = ref
        if kind == "input":
            return self.pointer(ins[arg])
        if kind == "output":
            return self.pointer(outs[arg])
        if kind == "ws":
            return self.pointer(ws) + evaluate(arg, env)
        return self.pointer(self.constant(arg))

    def _bytes(self, ref, ins, outs, ws, env, n):
        kind, arg = ref
        if kind == "ws":
            off = evaluate(arg, env)
            return ws[off:off + n]
        a = ins[arg] if kind == "input" else outs[arg] if kind == "output" \
            else self.constant(arg)
        return a.reshape(-1).view(np.uint8)[:n]

    # --- what a runtime supplies ---------------------------------------------------------

    def constant(self, name: str):
        return self._consts[name]

    def to_array(self, a, npd):
        a = np.asarray(a)        # (ascontiguousarray would make a 0-d array 1-d)
        a = a if a.flags.c_contiguous else np.array(a, order="C")
        return a if a.dtype == npd else a.astype(npd)

    def copy(self, dst, src) -> None:
        dst[...] = src

    def error_word(self, ws) -> int:
        return ws[ERROR_CODE:ERROR_CODE + 4].view(np.int32)[0]

    def error_index(self, ws) -> int:
        return ws[:8].view(np.int64)[0]

    def pointer(self, a) -> int:
        raise NotImplementedError

    def launch(self, fn: str, grid: int, block: int, ptrs: list, err: int, syms: list) -> None:
        raise NotImplementedError


def _ref(r):
    kind, arg = r
    if kind in ("input", "output"):
        return kind, int(arg)
    if kind == "ws":
        return kind, _size(arg)
    return kind, arg
