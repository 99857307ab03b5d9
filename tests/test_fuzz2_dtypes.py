"""Integer and bool dtype corners found by ``fuzz_dtypes.py``, against torch.

- ``floor_divide`` / ``remainder`` / ``fmod`` of a uint8 (int8) tensor by a
  Python int outside its range raised NumPy's OverflowError; PyTorch wraps
  the int into the dtype first (``uint8 % -3`` is ``% 253``), as tracec's
  ``+`` / ``*`` already did.
- ``sign`` of a bool tensor raised; PyTorch returns the bools."""
import numpy as np
import pytest
import torch

import tracec
from fuzz_dtypes import run_one

CASES = [
    ("uint8", lambda m, a: a // -3),
    ("uint8", lambda m, a: a % -3),
    ("uint8", lambda m, a: m.remainder(a, -300)),
    ("uint8", lambda m, a: m.fmod(a, -3)),
    ("int8", lambda m, a: a // 300),
    ("int8", lambda m, a: a % 200),
    ("int8", lambda m, a: -7 // (a.abs() + 1)),
    ("bool", lambda m, a: a.sign()),
    ("bool", lambda m, a: m.sign(a)),
]


def _input(lib, dtype):
    v = np.array([[5, 0, 3], [7, 1, 0]])
    if dtype == "int8":
        v = v - 3
    return lib.tensor(v.astype(np.bool_ if dtype == "bool" else dtype))


@pytest.mark.parametrize("k", range(len(CASES)))
def test_eager_and_compiled_equal_torch(k):
    dtype, f = CASES[k]
    want = f(torch, _input(torch, dtype))
    got = f(tracec, _input(tracec, dtype))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    cf = tracec.compile(lambda a: f(tracec, a), backend="cpu")
    for _ in range(2):
        np.testing.assert_array_equal(cf(_input(tracec, dtype)).numpy(), want.numpy())


@pytest.mark.parametrize("seed", [80, 168])
def test_fuzz_seeds(seed):
    bad, case = run_one(seed)
    assert not bad, (bad, case)
