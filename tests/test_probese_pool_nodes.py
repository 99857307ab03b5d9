"""``grad_fn`` names and ``next_functions`` of F.unfold / F.fold,
avg_pool3d and adaptive_avg_pool2d / 3d, checked against torch 2.13 in the
same process (Im2ColBackward0, Col2ImBackward0, AvgPool3DBackward0,
AdaptiveAvgPool2DBackward0 / 3D listing the input; tracec showed its
composites' last primitive: ViewBackward0, DivBackward0, MeanBackward1);
an all-ones adaptive output stays PyTorch's MeanBackward1."""
import pytest
import torch

import tracec

CASES = {
    "unfold": lambda F, a: F.unfold(a, 2),
    "unfold unbatched": lambda F, a: F.unfold(a[0], 2),
    "fold": lambda F, a: F.fold(a.reshape(1, 8, 4), (3, 3), 2),
    "fold unbatched": lambda F, a: F.fold(a.reshape(8, 4), (3, 3), 2),
    "avg_pool3d": lambda F, a: F.avg_pool3d(a[None], 2),
    "adaptive_avg_pool2d": lambda F, a: F.adaptive_avg_pool2d(a, 2),
    "adaptive_avg_pool2d unbatched": lambda F, a: F.adaptive_avg_pool2d(a[0], (3, 2)),
    "adaptive_avg_pool2d same size": lambda F, a: F.adaptive_avg_pool2d(a, 4),
    "adaptive_avg_pool2d ones": lambda F, a: F.adaptive_avg_pool2d(a, 1),
    "adaptive_avg_pool3d": lambda F, a: F.adaptive_avg_pool3d(a[None], 2),
}


def _graph(L, fn):
    a = (L.arange(32.0).reshape(1, 2, 4, 4) / 9).requires_grad_()
    out = fn(L.nn.functional, a)
    g = out.grad_fn
    names = (type(g).__name__,
             tuple(None if n is None else type(n).__name__ for n, _ in g.next_functions))
    (out * out).sum().backward()
    return names, a.grad.tolist()


@pytest.mark.parametrize("name", list(CASES))
def test_pool_node_as_torch(name):
    got, want = _graph(tracec, CASES[name]), _graph(torch, CASES[name])
    assert got[0] == want[0]
    assert torch.allclose(torch.tensor(got[1]), torch.tensor(want[1]), atol=1e-6)
