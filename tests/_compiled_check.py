"""``assert_step_matches_eager``: a training-style step compiled with one
backend returns what the eager step returns and leaves the same gradient
in its parameter, on each of several inputs (so nothing data-dependent is
frozen into the trace)."""
from __future__ import annotations

import numpy as np

import tracec


def assert_step_matches_eager(step, param, inputs, backend, rtol=1e-4, atol=1e-5):
    comp = tracec.compile(step, backend=backend)
    for x in inputs:
        param.grad = None
        want = step(x)
        g_want = param.grad.numpy().copy()
        param.grad = None
        got = comp(x)
        np.testing.assert_allclose(got.item(), want.item(), rtol=rtol)
        np.testing.assert_allclose(param.grad.numpy(), g_want, rtol=rtol, atol=atol)
