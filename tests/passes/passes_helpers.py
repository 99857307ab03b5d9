"""Shared helpers of the pass tests: running passes with verification,
FileCheck, the interpreter, and the known programs whose kernels we count."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
from xdsl.dialects import func

import tracec
from tracec import ir
from tracec.backends import interp
from tracec.passes.fusion import check_kernel, count_kernels  # noqa: F401
from tracec.passes.pipeline import AUTODIFF, OPTIMIZE, run_passes


def optimize(module):
    """Run the optimizing pipeline in place, verifying after every pass and
    checking every kernel's invariant."""
    run_passes(OPTIMIZE, module, verify=True)
    for op in module.walk():
        if isinstance(op, ir.KernelOp):
            check_kernel(op)
    return module


def traced(fn, *args):
    """The autodiffed (not yet optimized) module of one call of ``fn``."""
    module = tracec.trace(fn, *args).module
    run_passes(AUTODIFF, module, verify=True)
    return module


def function(module) -> func.FuncOp:
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def run(module, arrays):
    return interp.compile_module(module)(list(arrays))


def assert_same(got, want, text=""):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape, g.dtype, w.dtype)
        assert np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True), \
            f"result {i} differs by {np.nanmax(np.abs(g.astype(float) - w))}\n{text}"


def _filecheck_cmd():
    exe = shutil.which("filecheck")
    return [exe] if exe else [sys.executable, "-m", "filecheck"]


def filecheck(text: str, checks: str, tmp_path) -> None:
    """Assert that ``text`` matches the FileCheck directives ``checks``."""
    check_file = tmp_path / "checks.mlir"
    check_file.write_text(checks)
    res = subprocess.run([*_filecheck_cmd(), str(check_file)], input=text,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr + "\n--- input ---\n" + text


# --- known programs ----------------------------------------------------------------

def bias_relu_scale(x, b):
    return (x + b).relu() * 2.0


def softmax_by_hand(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def mlp_params(n_in=8, n_hidden=16, n_out=4, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(n_in, n_hidden), (n_hidden,), (n_hidden, n_out), (n_out,)]
    return [tracec.tensor(rng.standard_normal(s).astype(np.float32) * 0.5, requires_grad=True)
            for s in shapes]


def make_mlp_step(params, lr=0.1):
    """An SGD training step of a 2-layer MLP with a mean-squared loss, on
    raw tensors (no tracec.nn / tracec.optim needed)."""
    def step(x, y):
        w1, b1, w2, b2 = params
        h = (x @ w1 + b1).relu()
        out = h @ w2 + b2
        loss = ((out - y) ** 2).mean()
        loss.backward()
        with tracec.no_grad():
            for p in params:
                p.sub_(lr * p.grad)
                p.grad = None
        return loss
    return step
