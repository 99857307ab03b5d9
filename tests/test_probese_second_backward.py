"""A second backward without retain_graph, checked against torch 2.13 in
the same process, for ops whose PyTorch node and tracec's composite
disagreed on whether tensors are saved:

* PyTorch's node saves none (a second backward works and accumulates):
  Tensor.unfold, F.unfold / F.fold, einsum's diagonal ("ii->"), linear /
  bilinear / bicubic / trilinear interpolation, select_scatter, fmod /
  remainder by a number, lerp with a number weight (tracec raised: its
  primitives keep constant indices, masks and weights, now kept past a
  backward, graph.keep_saved);
* PyTorch's node saves a tensor (a second backward raises "Trying to
  backward through the graph a second time"): x * 2.0, x / 3 (a Python
  number is a saved wrapped 0-d tensor ``other``), avg_pool1d/2d/3d,
  adaptive_avg_pool1d/2d (and area interpolation), std_mean (tracec went
  through again: its nodes held no tensor, graph.saves_operands)."""
import pytest
import torch

import tracec

WORKS = {
    "Tensor.unfold": lambda L, F, a: a.unfold(1, 2, 1),
    "F.unfold": lambda L, F, a: F.unfold(a.reshape(1, 1, 3, 4), 2),
    "F.unfold padded": lambda L, F, a: F.unfold(a.reshape(1, 1, 3, 4), 2, padding=1, stride=2),
    "F.fold": lambda L, F, a: F.fold(a.reshape(1, 4, 3), (2, 4), 2),
    "einsum ii->": lambda L, F, a: L.einsum("ii->", a[:, :3]),
    "einsum ii->i": lambda L, F, a: L.einsum("ii->i", a[:, :3]),
    "linear": lambda L, F, a: F.interpolate(a[None], scale_factor=2, mode="linear"),
    "linear align_corners": lambda L, F, a: F.interpolate(a[None], scale_factor=2, mode="linear",
                                                          align_corners=True),
    "bilinear": lambda L, F, a: F.interpolate(a[None, None], scale_factor=2, mode="bilinear"),
    "bicubic": lambda L, F, a: F.interpolate(a[None, None], scale_factor=2, mode="bicubic"),
    "trilinear": lambda L, F, a: F.interpolate(a[None, None, None], scale_factor=2,
                                               mode="trilinear"),
    "select_scatter": lambda L, F, a: L.select_scatter(a, a.detach()[0] * 0, 0, 0),
    "fmod": lambda L, F, a: a.fmod(0.7), "remainder": lambda L, F, a: a.remainder(0.7),
    "fmod by constant": lambda L, F, a: a.fmod(a.detach() + 0.25),
    "lerp": lambda L, F, a: L.lerp(a, a.detach() * 2, 0.3),
    "add number": lambda L, F, a: a + 2.0, "rsub number": lambda L, F, a: 1.0 - a,
}
RAISES = {
    "mul number": lambda L, F, a: a * 2.0, "mul int": lambda L, F, a: a * 2,
    "div number": lambda L, F, a: a / 3.0, "mul then div": lambda L, F, a: a * 2.0 / 3.0,
    "sign times number": lambda L, F, a: a.sign() * 2,
    "cumsum times number": lambda L, F, a: a.cumsum(1) * 2.0,
    "fmod by tensor": lambda L, F, a: a.fmod(a * 0 + 0.7),
    "lerp tensor weight": lambda L, F, a: L.lerp(a, a.detach() * 2, a.detach()),
    "avg_pool1d": lambda L, F, a: F.avg_pool1d(a[None], 2),
    "avg_pool2d": lambda L, F, a: F.avg_pool2d(a[None, None], 2),
    "avg_pool3d": lambda L, F, a: F.avg_pool3d(a[None, None, None], (1, 2, 2)),
    "adaptive_avg_pool1d": lambda L, F, a: F.adaptive_avg_pool1d(a[None], 3),
    "adaptive_avg_pool2d": lambda L, F, a: F.adaptive_avg_pool2d(a[None, None], 2),
    "adaptive_avg_pool2d same size": lambda L, F, a: F.adaptive_avg_pool2d(a[None, None] * 1,
                                                                            (3, 4)),
    "area": lambda L, F, a: F.interpolate(a[None, None], size=(2, 2), mode="area"),
    "std_mean": lambda L, F, a: L.std_mean(a)[1],
    "var_mean": lambda L, F, a: L.var_mean(a)[0],
}


def _twice(L, fn):
    a = L.arange(12.0).reshape(3, 4).div(11).add(0.5).requires_grad_()
    out = fn(L, L.nn.functional, a).sum()
    out.backward()
    try:
        out.backward()
    except RuntimeError as e:
        return "raises", str(e)
    return "works", a.grad.tolist()


def _close(got, want):
    assert got[0] == want[0], (got, want)
    if got[0] == "works":
        assert torch.allclose(torch.tensor(got[1]), torch.tensor(want[1]), atol=1e-5)
    else:
        assert got[1] == want[1]


@pytest.mark.parametrize("name", list(WORKS))
def test_second_backward_works_where_torch_saves_nothing(name):
    want = _twice(torch, WORKS[name])
    assert want[0] == "works"
    _close(_twice(tracec, WORKS[name]), want)


@pytest.mark.parametrize("name", list(RAISES))
def test_second_backward_raises_where_torch_saved_a_tensor(name):
    want = _twice(torch, RAISES[name])
    assert want[0] == "raises"
    _close(_twice(tracec, RAISES[name]), want)


def test_identity_adaptive_pool_is_a_new_tensor():
    for L in (torch, tracec):
        b = L.ones(1, 1, 2, 2, requires_grad=True) * 1
        y = L.nn.functional.adaptive_avg_pool2d(b, 2)
        assert y is not b
        y.add_(1)
        assert b.sum().item() == 4.0
