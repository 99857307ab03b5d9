"""``all`` / ``any`` against torch: every dtype, dims (int, negative,
tuple), keepdim, functions and methods, and no gradient."""
import numpy as np
import pytest
import torch

import tracec

X = np.array([[[1, 0, 2], [3, 4, 5]], [[0, 0, 0], [1, 1, -1]]])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dim", [None, 0, -1, 1, (0, 2), (1, -1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_all_any_match_torch(dtype, name, dim, keepdim):
    a = X.astype(dtype)
    kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    want = getattr(torch, name)(torch.tensor(a), **kw)
    for got in (getattr(tracec, name)(tracec.tensor(a), **kw),
                getattr(tracec.tensor(a), name)(**kw)):
        assert got.dtype == tracec.bool and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_all_any_edge_cases():
    e = tracec.zeros(0, 3)
    assert e.all().item() is True and e.any().item() is False
    assert e.all(dim=0).tolist() == [True] * 3
    x = tracec.tensor([1.0, float("nan")], requires_grad=True)
    assert x.all().item() is True and not x.all().requires_grad
    with pytest.raises(TypeError, match="must be Tensor"):
        tracec.all([1, 2])
