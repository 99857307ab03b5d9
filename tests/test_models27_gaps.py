"""Gaps the models27 programs (tests/programs/models27) found in tracec,
each checked against torch 2.13."""
import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")

LINSPACE_CASES = [(-2.0, 2.0, 11), (-10, 10, 51), (0.1, 0.9, 7), (-1, 1, 4), (3, -3, 10),
                  (0, 1, 5), (-3.3, 7.1, 100), (0.0, 1.0, 1000), (0.123, 5.7, 77), (1e-3, 1e3, 9),
                  (5.0, 5.0, 3), (-7.5, 2.25, 2), (4.0, 9.0, 1), (0, 1, 0)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
def test_linspace_is_torchs_kernel_bit_for_bit(dtype):
    # Kaixhin/Rainbow's support = torch.linspace(V_min, V_max, atoms): torch's
    # CPU kernel computes the upper half from `end` backwards with fused
    # multiply-adds, so linspace(-2, 2, 11)[5] is -2**-25 (printed -0.0000),
    # and many points differ from NumPy's start + i * step in the last place.
    for a, b, n in LINSPACE_CASES:
        want = pt.linspace(a, b, n, dtype=getattr(pt, dtype))
        got = tracec.linspace(a, b, n, dtype=getattr(tracec, dtype))
        assert got.dtype is getattr(tracec, dtype)
        w = want.float().numpy() if dtype == "bfloat16" else want.numpy()
        g = got.float().numpy() if dtype == "bfloat16" else got.numpy()
        assert np.array_equal(np.signbit(w), np.signbit(g)) and np.array_equal(w, g), (a, b, n)


def test_linspace_default_dtype_and_midpoint_sign():
    assert tracec.linspace(-2, 2, 11)[5].item() == pt.linspace(-2, 2, 11)[5].item() == -2.0 ** -25
    assert tracec.linspace(-2, 2, 11).dtype is tracec.float32
