"""The executable of a symbolic module: one object serving every size.

A module whose argument types have symbolic dimensions (``tensor<?x784xf32,
["B", "784"]>``) lowers to code that reads each size symbol at run time
(``builder.FuncBuilder.size``): loop bounds, strides, offsets, GEMM work
decompositions, thread splits and workspace offsets are computed from the
symbols' values.  The signature then carries

* ``symbols``: ``[name, input, dim]``: the symbol is ``inputs[input].shape[dim]``
  at a call; the values are written to the workspace (after the error
  slot, in this order) before the entry runs;
* ``inputs`` / ``outputs`` shapes and ``workspace`` as size expressions
  (``"B"``, ``"64*B+128"``);
* ``size_guards``: ``[lhs, op, rhs, result]``: decisions the passes and the
  lowering made from the sizes they compiled for (``symbolic.hinted``)
  that the code depends on.  A call whose sizes break one raises
  ``SizeGuardError`` (the caller compiles another version).

Invariant: ``executable(arrays)`` equals the static executable of the
module specialized to the arrays' sizes, for every binding of the symbols
(each >= 2) under which the guards hold.
"""
from __future__ import annotations

import numpy as np

from tracec.backends.cpu.runtime import _SIZES_BYTE, CpuExecutable
from tracec.symbolic import evaluate, failed_size_guard, parse

__all__ = ["SizedCpuExecutable", "SizeGuardError"]

#: Size bindings whose shapes are remembered (a training loop sees few).
_MEMO = 64


class SizeGuardError(ValueError):
    """The call's sizes are outside what a symbolic executable was compiled for."""


def _size(x):
    return parse(x) if isinstance(x, str) else int(x)


class SizedCpuExecutable(CpuExecutable):
    """A ``CpuExecutable`` whose sizes are read from its inputs (see the
    module docstring)."""

    def __init__(self, object_code: bytes, signature: dict, stages: dict | None = None):
        super().__init__(object_code, signature, stages)
        self.symbols = [(name, int(i), int(d)) for name, i, d in signature["symbols"]]
        self._in_shapes = [tuple(_size(x) for x in s) for s, _ in signature["inputs"]]
        self._out_shapes = [tuple(_size(x) for x in s) for s, _ in signature["outputs"]]
        self._ws_expr = _size(signature["workspace"])
        self.size_guards = [[parse(lhs), op, parse(rhs), res]
                            for lhs, op, rhs, res in signature.get("size_guards", ())]
        self._specs: dict = {}

    def sizes(self, arrays) -> dict:
        """``{symbol: value}`` read from ``arrays`` (the inputs of a call)."""
        return {name: np.shape(arrays[i])[d] for name, i, d in self.symbols}

    def failed_guard(self, env: dict) -> str | None:
        """None if this executable serves the sizes ``env``, else why not."""
        return failed_size_guard([name for name, _, _ in self.symbols], self.size_guards, env)

    def spec_for(self, values: tuple):
        """``(inputs, outputs, (symbol values, workspace bytes))`` for the
        symbol values ``values`` (in ``symbols``' order): the concrete
        shapes ``CpuExecutable._run`` takes; ``SizeGuardError`` if the
        values break a size guard."""
        spec = self._specs.get(values)
        if spec is None:
            env = {name: v for (name, _, _), v in zip(self.symbols, values)}
            bad = self.failed_guard(env)
            if bad is not None:
                raise SizeGuardError(bad)
            ins = [(tuple(evaluate(x, env) for x in shape), npd)
                   for shape, (_, npd) in zip(self._in_shapes, self._ins)]
            outs = [(tuple(evaluate(x, env) for x in shape), npd)
                    for shape, (_, npd) in zip(self._out_shapes, self._outs)]
            spec = (ins, outs, (np.array(values, np.int64), evaluate(self._ws_expr, env)))
            if len(self._specs) < _MEMO:
                self._specs[values] = spec
        return spec

    def sized_workspace(self, values: np.ndarray, nbytes: int):
        """A workspace of ``nbytes`` with the symbol values ``values``
        written where the code reads them (as ``_run`` writes them)."""
        ws = self._workspace(nbytes)
        ws[0][ws[2] + _SIZES_BYTE:ws[2] + _SIZES_BYTE + 8 * len(values)].view(np.int64)[:] \
            = values
        return ws

    def __call__(self, arrays, out=None):
        if len(arrays) != len(self._ins):
            raise TypeError(f"expected {len(self._ins)} input arrays, got {len(arrays)}")
        spec = self.spec_for(tuple(np.shape(arrays[i])[d] for _, i, d in self.symbols))
        return self._run(arrays, out, *spec)
