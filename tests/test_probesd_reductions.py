"""clamp with NaN (bounds and inputs), reductions over no elements and a
few errors, checked against torch 2.13 in the same process."""
import warnings

import numpy as np
import pytest
import torch

import tracec

NAN = float("nan")


def _clamp(lib, kw):
    v = lib.tensor([[-1.0, 0.3, 5.0], [0.7, NAN, 2.5]], requires_grad=True)
    bounds = {k: lib.tensor(b, requires_grad=True) if isinstance(b, list) else b
              for k, b in kw.items()}
    y = lib.clamp(v, **bounds)
    y.sum().backward()
    grads = {k: b.grad.tolist() for k, b in bounds.items() if not isinstance(b, float)}
    return (np.array(y.tolist()).tobytes(), y.grad_fn.name(), v.grad.tolist(), grads)


@pytest.mark.parametrize("kw", [{"min": [NAN, 0.0, 0.0]}, {"max": [1.0, NAN, 3.0]},
                                {"min": [NAN, 0.0, 0.0], "max": [1.0, NAN, 3.0]},
                                {"min": 0.0}, {"max": 1.0}, {"min": 0.0, "max": 1.0},
                                {"min": NAN}])
def test_clamp_nan_bounds_and_inputs_as_torch(kw):
    # a NaN tensor bound makes the result NaN (tracec kept the input), and
    # no gradient reaches a NaN result (tracec passed the input's)
    assert _clamp(tracec, kw) == _clamp(torch, kw)


def _reduce(lib, name, dtype, dim):
    x = lib.zeros(0, 3, dtype=getattr(lib, dtype))
    try:
        r = getattr(lib, name)(x) if dim is None else getattr(lib, name)(x, dim)
        r = r[0] if isinstance(r, tuple) else r
        return r.dtype is getattr(lib, dtype), tuple(r.shape), np.array(r.tolist()).tobytes()
    except Exception as e:     # noqa: BLE001 - the error is the result compared
        return type(e).__name__, str(e)


@pytest.mark.parametrize("name", ["median", "nanmedian", "mode"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "bool"])
def test_reductions_of_no_elements_as_torch(name, dtype):
    for dim in (None, 0, 1):
        if name == "mode" and dim is None:
            continue
        assert _reduce(tracec, name, dtype, dim) == _reduce(torch, name, dtype, dim)


def test_empty_median_is_nan_in_the_graph():
    for lib in (tracec, torch):
        x = lib.zeros(0, requires_grad=True)
        y = lib.median(x)
        assert y.requires_grad and y.item() != y.item()
        y.backward()
        assert x.grad.shape == (0,)


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value).__name__, str(e.value)


@pytest.mark.parametrize("call", [
    lambda L: L.aminmax(L.zeros(0, 3)), lambda L: L.aminmax(L.zeros(0, 3), dim=0),
    lambda L: L.round(L.tensor([15, 25]), decimals=-1),
    lambda L: L.round(L.tensor([1, 2], dtype=L.int32), decimals=1),
    lambda L: L.round(L.tensor([True]), decimals=1),
    lambda L: L.median(L.tensor([True, False])), lambda L: L.nanmedian(L.tensor([True])),
    lambda L: L.nanmedian(L.tensor([True]), 0)])
def test_errors_as_torch(call):
    assert _error(lambda: call(tracec)) == _error(lambda: call(torch))


def test_float_overflow_in_tensor_is_inf_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tracec.tensor([1e300, -1e300]).tolist() == torch.tensor([1e300, -1e300]).tolist()
        assert tracec.tensor([1e300], dtype=tracec.float16).tolist() == \
            torch.tensor([1e300], dtype=torch.float16).tolist()
