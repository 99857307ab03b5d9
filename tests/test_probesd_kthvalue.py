"""kthvalue's index among equal values as PyTorch's CPU quickselect picks
it (tracec gave the stable order's: kthvalue([5, 4, 4, 5], 1) was index 1,
PyTorch's is 2), and its gradient to that element, checked against torch
2.13 in the same process."""
import numpy as np
import pytest
import torch

import tracec


def _kth(lib, a, k, dim, keepdim=False):
    x = lib.tensor(a, requires_grad=a.dtype.kind == "f")
    r = lib.kthvalue(x, k, dim, keepdim)
    out = [np.array(r.values.tolist()).tobytes(), r.indices.tolist()]
    if x.requires_grad:
        r.values.sum().backward()
        out.append(x.grad.tolist())
    return out


@pytest.mark.parametrize("seed", range(4))
def test_kthvalue_index_among_ties_as_torch(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, (7, 9)).astype(np.float32)
    if seed % 2:
        a[0, 3] = np.nan
        a[2, :3] = np.nan
    for k in (1, 3, 5, 9):
        assert _kth(tracec, a, k, 1) == _kth(torch, a, k, 1)
        assert _kth(tracec, a[:, :7], min(k, 7), 0, True) == _kth(torch, a[:, :7], min(k, 7), 0,
                                                                   True)
    ints = rng.integers(0, 3, (4, 6))
    assert _kth(tracec, ints, 2, 1) == _kth(torch, ints, 2, 1)


def test_kthvalue_small_rows():
    for row in ([5., 4., 4., 5.], [3., 3., 3.], [1.] * 5, [2., 1., 2., 1.], [0., 0., 1., 0.]):
        a = np.array(row)
        for k in range(1, len(row) + 1):
            assert _kth(tracec, a, k, 0) == _kth(torch, a, k, 0), (row, k)
