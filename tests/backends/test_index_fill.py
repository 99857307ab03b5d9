"""Accumulating index ops (scatter_add, index_add) whose base is a
broadcast scalar (a gather's or an embedding's gradient: zeros) fill their
output with it instead of copying a materialized broadcast
(tracec/backends/cpu/indexing.py ``accumulate_fill``); equal to eager."""
import numpy as np
import pytest

import tracec
import tracec.nn.functional as F


def _defined(comp, kernel: str) -> bool:
    return any(line.startswith("define") and f"_{kernel}" in line
               for line in comp.ir("llvm").splitlines())


def _grads(loss_fn, shape, *args):
    tracec.manual_seed(0)
    p = tracec.randn(*shape, requires_grad=True)

    def step(*a):
        p.grad = None
        loss_fn(p, *a).backward()
        return p.grad
    comp = tracec.compile(step, backend="cpu")
    want = step(*args).numpy()
    np.testing.assert_allclose(comp(*args).numpy(), want, rtol=1e-6, atol=1e-6)
    return comp


@pytest.mark.parametrize("rows,cols", [(7, 11), (33, 130)])
def test_gather_gradient(rows, cols):
    # (two indices per row: with one, the gradient is a one-hot ``where``,
    # tracec/passes/gather_sink.py, and no scatter is left)
    idx = tracec.randint(0, cols, (rows, 2))
    comp = _grads(lambda p, i: (p.gather(1, i) ** 2).sum(), (rows, cols), idx)
    assert _defined(comp, "scatter_add") and not _defined(comp, "broadcast_to")


def test_embedding_gradient_repeated_indices():
    idx = tracec.tensor(np.array([[1, 4, 1], [0, 4, 4]], dtype=np.int64))
    comp = _grads(lambda p, i: (F.embedding(i, p) ** 2).sum(), (6, 5), idx)
    assert _defined(comp, "index_add") and not _defined(comp, "broadcast_to")


def test_nonzero_base_and_base_read_elsewhere():
    def f(src, idx):
        base = tracec.full((4, 9), 2.5)
        return base.scatter_add(1, idx, src), base * 2
    src = tracec.randn(4, 3)
    idx = tracec.randint(0, 9, (4, 3))
    comp = tracec.compile(f, backend="cpu")
    for got, want in zip(comp(src, idx), f(src, idx)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)

    def g(src, idx):
        return tracec.full((4, 9), -1.5).scatter_add(1, idx, src)
    comp = tracec.compile(g, backend="cpu")
    np.testing.assert_allclose(comp(src, idx).numpy(), g(src, idx).numpy(), rtol=1e-6)
