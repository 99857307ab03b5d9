"""Gaps that Stable-Baselines3 / Gymnasium programs (``tests/programs/rllibs``)
found in tracec, each checked against torch without the libraries."""
import numpy as np
import pytest
import torch

import tracec

_NUMPY_OF_GRAD = "Can't call numpy() on Tensor that requires grad"


def _numpy_conversions():
    return {
        "asarray": lambda t: np.asarray(t),
        "asarray_dtype": lambda t: np.asarray(t, dtype=np.float64),
        "array_of_elements": lambda t: np.array([t[0], t[1]]),
        "ufunc": lambda t: np.isfinite(t),
        "numpy_scalar": lambda t: np.float32(t[0]),
    }


@pytest.mark.parametrize("how", list(_numpy_conversions()))
def test_numpy_conversion_of_a_tensor_that_requires_grad(how):
    """NumPy's ``__array__`` conversions go through ``numpy()`` in PyTorch,
    so they refuse a tensor that requires grad while grad mode is on, and
    allow it under ``no_grad`` (SB3's docs export a policy whose traced
    outputs require grad: ``np.asarray(values)`` raises)."""
    f = _numpy_conversions()[how]
    for lib in (torch, tracec):
        w = lib.nn.Linear(2, 2)(lib.ones(1, 2))[0]
        assert w.requires_grad
        with pytest.raises(RuntimeError, match=_NUMPY_OF_GRAD.replace("(", r"\(").replace(")", r"\)")):
            f(w)
    got = []
    for lib in (torch, tracec):
        w = lib.arange(2.0).requires_grad_()
        with lib.no_grad():
            got.append(np.asarray(f(w)))
        got.append(np.asarray(f(w.detach())))
    np.testing.assert_array_equal(got[0], got[2])
    np.testing.assert_array_equal(got[1], got[3])
