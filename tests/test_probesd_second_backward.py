"""A second backward without retain_graph, checked against torch 2.13 in
the same process: through nodes that save no tensors in PyTorch (flip,
tril / triu, cumsum, rot90, diag_embed, nearest upsampling) it works and
accumulates (tracec raised: its primitives keep constant indices and
masks); through nodes that save tensors (mul, matmul, exp, sigmoid,
linear, conv2d) it raises PyTorch's error."""
import pytest
import torch

import tracec

WORKS = {
    "flip": lambda L, a: a.flip(0), "fliplr": lambda L, a: a.fliplr(),
    "tril": lambda L, a: a.tril(), "triu": lambda L, a: a.triu(1),
    "cumsum": lambda L, a: a.cumsum(0), "rot90": lambda L, a: a.rot90(),
    "diag_embed": lambda L, a: a.diag_embed(),
    "nearest": lambda L, a: L.nn.functional.interpolate(a[None], scale_factor=2),
    "add": lambda L, a: a + a, "sum": lambda L, a: a.sum(0),
}
RAISES = {
    "mul": lambda L, a: a * a, "matmul": lambda L, a: a @ a.t(), "exp": lambda L, a: a.exp(),
    "sigmoid": lambda L, a: a.sigmoid(),
    "linear": lambda L, a: L.nn.functional.linear(a, a),
    "conv2d": lambda L, a: L.nn.functional.conv2d(a[None, None], a[None, None, :2, :2]),
}


def _twice(lib, fn):
    a = lib.arange(12.0).reshape(3, 4).requires_grad_()
    out = fn(lib, a).sum()
    out.backward()
    try:
        out.backward()
    except RuntimeError as e:
        return "raises", str(e).split(".")[0]
    return "works", a.grad.tolist()


@pytest.mark.parametrize("name", list(WORKS))
def test_second_backward_through_nodes_saving_nothing(name):
    got, want = _twice(tracec, WORKS[name]), _twice(torch, WORKS[name])
    assert got == want and got[0] == "works"


@pytest.mark.parametrize("name", list(RAISES))
def test_second_backward_through_saved_tensors_raises(name):
    got, want = _twice(tracec, RAISES[name]), _twice(torch, RAISES[name])
    assert got == want and got[0] == "raises"
