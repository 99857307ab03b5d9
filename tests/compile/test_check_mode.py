"""compile(check=True) pins a backend/interpreter disagreement to one op
and names the user's line."""
import types

import numpy as np
import pytest

import tracec
from tracec import compiler, ir
from tracec.backends import interp
from tracec.backends.check import CheckError


def _bad_backend():
    """The interpreter, except that any op containing tanh is off by 0.5."""
    def compile_module(module, **_):
        run = interp.compile_module(module)
        has_tanh = any(getattr(o, "name", "") == "tracec.tanh" for o in module.walk())

        def execute(arrays):
            outs = run(arrays)
            return [o + 0.5 for o in outs] if has_tanh else outs
        return execute
    return types.SimpleNamespace(compile_module=compile_module)


def test_check_reports_first_differing_op(monkeypatch):
    monkeypatch.setitem(compiler.BACKENDS, "bad", _bad_backend())
    W = tracec.randn(3, 3)

    def f(x):
        h = x @ W
        return (h.tanh() * 2).sum()  # TANH-LINE

    good = tracec.compile(f, backend="interp", check=True)
    x = tracec.randn(2, 3)
    good(x)
    good(x)  # compiled call, checked op by op: no disagreement
    bad = tracec.compile(f, backend="bad", check=True)
    bad(x)
    with pytest.raises(CheckError) as e:
        bad(x)
    line = next(i for i, l in enumerate(open(__file__), 1) if "TANH-LINE" in l)
    assert f"{__file__}:{line}" in str(e.value)
    assert "differs from the interpreter" in str(e.value)
