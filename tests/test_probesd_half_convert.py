"""float16 conversions and arange as PyTorch 2.13's CPU kernels, checked
against torch in the same process.  c10::Half is built from a float, so a
float64 value (a NumPy array, a Python number) reaches float16 through
float32, rounded twice (NumPy, and tracec before, rounded once: one unit
apart where the float32 value is a float16 tie); half arange computes in
float32 a vector of 16 at a time (tracec's float64 values were one unit off
on 10-25% of elements)."""
import numpy as np
import pytest
import torch

import tracec

# float32 lands on a float16 tie (1 + 2**-11) though the float64 value is
# above it; then random values, many near ties
TIE = 1 + 2 ** -11 + 2 ** -40


def _values():
    rng = np.random.default_rng(0)
    ties = (rng.integers(-2000, 2000, 4000) * 2.0 + 1) * 2.0 ** -11   # float16 ties at |x| < 2
    return np.concatenate([[TIE, -TIE, 0.1, 65519.99], ties + rng.choice([-1, 1], 4000) * 2.0 ** -40,
                           rng.standard_normal(4000)])


def _bits(t):
    return np.array(t.float().tolist(), np.float32)


CONVERSIONS = {
    "tensor": lambda L, a: L.tensor(a, dtype=L.float16),
    "tensor_list": lambda L, a: L.tensor(a[:50].tolist(), dtype=L.float16),
    "half": lambda L, a: L.tensor(a).half(),
    "to": lambda L, a: L.from_numpy(a).to(L.float16),
    "copy_": lambda L, a: L.zeros(len(a), dtype=L.float16).copy_(L.tensor(a)),
    "full": lambda L, a: L.full((3,), TIE, dtype=L.float16),
    "fill_": lambda L, a: L.zeros(3, dtype=L.float16).fill_(TIE),
    "new_full": lambda L, a: L.zeros(1, dtype=L.float16).new_full((2,), TIE),
    "masked_fill": lambda L, a: L.zeros(2, dtype=L.float16).masked_fill(L.tensor([True, False]),
                                                                         TIE),
    "clamp": lambda L, a: L.zeros(2, dtype=L.float16).clamp(min=TIE),
    "add_number": lambda L, a: L.zeros(2, dtype=L.float16) + TIE,
}


@pytest.mark.parametrize("name", CONVERSIONS)
def test_float64_to_float16_rounds_through_float32(name):
    a = _values()
    got, want = _bits(CONVERSIONS[name](tracec, a)), _bits(CONVERSIONS[name](torch, a))
    np.testing.assert_array_equal(got, want)


def test_compiled_float64_to_float16_cast_is_eagers():
    a = _values()
    step = tracec.compile(lambda x: x.to(tracec.float16) * 1)
    x = tracec.tensor(a)
    for _ in range(2):       # (the first call records, the second runs the kernel)
        got = _bits(step(x))
    np.testing.assert_array_equal(got, _bits(torch.tensor(a).half()))


ARANGES = [(0, 1.3, 0.0123), (0.1, 50.0, 0.37), (-3.3, 3.3, 0.011), (1.0, 1000.0, 0.7),
           (5, -5, -0.3), (0, 70000, 7), (0, 2 * TIE, TIE)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_arange_as_torch(dtype):
    for start, end, step in ARANGES:
        got = _bits(tracec.arange(start, end, step, dtype=getattr(tracec, dtype)))
        want = _bits(torch.arange(start, end, step, dtype=getattr(torch, dtype)))
        np.testing.assert_array_equal(got, want, err_msg=str((start, end, step)))
