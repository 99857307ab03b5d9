"""float16 / bfloat16 elementwise ops with a number as PyTorch's CPU
kernels compute them, checked bit for bit against torch 2.13 in the same
process: fmod / remainder round the number to the tensor's dtype first (the
float32 number gave 87-95% of elements one unit off), xlogy rounds log(y)
to the dtype before the product (26%), bfloat16 pow(number, tensor) rounds
the base (45%), round(decimals=) computes in float32 and rounds once; a
0-d tensor of another dtype beside a half tensor is cast to it (atan2,
hypot, logaddexp, lerp's weight: 4-15% off), celu runs through float32."""
import numpy as np
import pytest
import torch

import tracec


def _x(lib, dtype, flip=False, seed=0):
    a = (np.random.default_rng(seed).standard_normal(4000) * 3).astype(np.float32)
    return lib.tensor(a[::-1].copy() if flip else a).to(getattr(lib, dtype))


CASES = {
    "fmod": lambda L, x, y: L.fmod(x, 0.3),
    "fmod_int": lambda L, x, y: L.fmod(x * 1000, 2049),
    "remainder": lambda L, x, y: L.remainder(x, 0.3),
    "remainder_neg": lambda L, x, y: L.remainder(x, -0.7),
    "rmod": lambda L, x, y: x % 0.45,
    "xlogy": lambda L, x, y: L.xlogy(x, y.abs()),
    "xlogy_number": lambda L, x, y: L.xlogy(x.abs(), 0.3),
    "pow_number_base": lambda L, x, y: L.pow(0.7, x),
    "rpow": lambda L, x, y: 0.7 ** x,
    "round_1": lambda L, x, y: L.round(x, decimals=1),
    "round_2": lambda L, x, y: L.round(x * 10, decimals=-1),
    # a 0-d tensor of another dtype is cast to the half dtype first
    "fmod_0d": lambda L, x, y: L.fmod(x, L.tensor(0.3)),
    "remainder_0d64": lambda L, x, y: L.remainder(x, L.tensor(0.3, dtype=L.float64)),
    "atan2_0d": lambda L, x, y: L.atan2(x, L.tensor(0.3)),
    "atan2_0d_int": lambda L, x, y: L.atan2(x, L.tensor(3001)),
    "logaddexp_0d": lambda L, x, y: L.logaddexp(x, L.tensor(0.3)),
    "lerp_0d_weight": lambda L, x, y: L.lerp(x, y, L.tensor(0.3)),
    "celu": lambda L, x, y: L.nn.functional.celu(x, 0.3),
    "rpow_int": lambda L, x, y: 3001 ** (x / 8),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", CASES)
def test_half_op_with_number_as_torch(dtype, name):
    got = CASES[name](tracec, _x(tracec, dtype), _x(tracec, dtype, True))
    want = CASES[name](torch, _x(torch, dtype), _x(torch, dtype, True))
    assert got.dtype.__repr__().rpartition(".")[2] == repr(want.dtype).rpartition(".")[2]
    np.testing.assert_array_equal(np.array(got.float().tolist()), np.array(want.float().tolist()))


def test_half_fmod_gradient_as_torch():
    for lib in (tracec, torch):
        x = _x(lib, "float16").requires_grad_()
        lib.remainder(x, 0.3).sum().backward()
        assert x.grad.float().sum().item() == 4000.0
