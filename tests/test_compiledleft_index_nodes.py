"""``grad_fn.next_functions`` of a basic index with one index that does
something (``x[0]``, ``h[-1]``, ``x[:, 0]``, ``x[..., 1]``; PyTorch skips the
full slices): PyTorch's one SelectBackward0 / SliceBackward0 node whose
edge is ``x``'s.  tracec computes such an index as a slice and a reshape;
``next_functions`` listed the slice (SelectBackward0 -> SliceBackward0 ->
AccumulateGrad)."""
import numpy as np
import pytest
import torch

import tracec

KEYS = {"[0]": lambda w: w[0], "[-1]": lambda w: w[-1], "[:,0]": lambda w: w[:, 0],
        "[...,1]": lambda w: w[..., 1], "[0,:]": lambda w: w[0, :],
        "[:,:,1]": lambda w: w[:, :, 1], "[:,1:]": lambda w: w[:, 1:], "[:]": lambda w: w[:],
        "[:,None]": lambda w: w[:, None]}


def _tree(fn, depth=0):
    if fn is None:
        return None
    return (type(fn).__name__, tuple(_tree(f, depth + 1) for f, _ in fn.next_functions)
            if depth < 4 else ())


@pytest.mark.parametrize("key", list(KEYS))
def test_one_index_is_one_node(key):
    wt = torch.arange(24.0).reshape(4, 3, 2).requires_grad_()
    wc = tracec.arange(24.0).reshape(4, 3, 2).requires_grad_()
    yt, yc = KEYS[key](wt), KEYS[key](wc)
    assert _tree(yc.grad_fn) == _tree(yt.grad_fn)
    (yt * 2).sum().backward()
    (yc * 2).sum().backward()
    np.testing.assert_array_equal(wc.grad.numpy(), wt.grad.numpy())
