"""Eager transposed convolution (``tracec/nn/_conv_transpose_eager.py``):
values and every gradient against PyTorch 2.13 over its options, against the
primitive path (what compiled code runs), and double backward."""
import numpy as np
import pytest

import tracec
from tracec.nn import _conv

torch = pytest.importorskip("torch")

CASES = [
    # x shape, w shape [Cin, O/G, *k], kwargs
    ((2, 4, 5, 6), (4, 3, 4, 4), {"stride": 2, "padding": 1}),                     # DCGAN
    ((2, 4, 5, 6), (4, 3, 2, 2), {"stride": 2}),                                   # U-Net up
    ((2, 4, 5, 5), (4, 2, 3, 3), {"stride": (2, 3), "padding": (1, 0),
                                   "output_padding": (1, 2)}),
    ((2, 6, 4, 5), (6, 1, 3, 3), {"groups": 3, "dilation": 2, "padding": 2}),
    ((2, 4, 4, 4), (4, 2, 3, 3), {"groups": 2, "stride": 3, "dilation": (1, 2),
                                   "output_padding": 1}),
    ((3, 2, 7), (2, 3, 5), {"stride": 3, "padding": 4, "output_padding": 2}),
    ((2, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"stride": 2, "padding": (0, 1, 1)}),
    ((3, 5, 5), (3, 2, 3, 3), {"stride": 2}),                                        # unbatched
]


def _fn(lib, nsp):
    return {1: lib.nn.functional.conv_transpose1d, 2: lib.nn.functional.conv_transpose2d,
            3: lib.nn.functional.conv_transpose3d}[nsp]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pytorch(case, dtype, bias):
    xs, ws, kw = CASES[case]
    nsp = len(ws) - 2
    rng = np.random.default_rng(case)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    o = ws[1] * kw.get("groups", 1)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)
    targs = [torch.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    ty = _fn(torch, nsp)(targs[0], targs[1], targs[2] if bias else None, **kw)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    cargs = [tracec.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    cy = _fn(tracec, nsp)(cargs[0], cargs[1], cargs[2] if bias else None, **kw)
    assert cy.grad_fn.name() == "ConvolutionBackward0" or len(xs) == nsp + 1
    cy.backward(tracec.tensor(g))
    assert tuple(cy.shape) == tuple(ty.shape) and cy.dtype.name == dtype
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), **tol)
    for c, t in zip(cargs, targs):
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), **tol)


@pytest.mark.parametrize("case", [0, 3, 5])
def test_equals_the_primitive_path(case):
    """What compiled code computes (the primitives) to float rounding."""
    xs, ws, kw = CASES[case]
    nsp = len(ws) - 2
    rng = np.random.default_rng(10 + case)
    x = rng.standard_normal(xs).astype(np.float64)
    w = rng.standard_normal(ws).astype(np.float64)
    outs = []
    for eager in (True, False):
        cx, cw = tracec.tensor(x, requires_grad=True), tracec.tensor(w, requires_grad=True)
        if eager:
            y = _fn(tracec, nsp)(cx, cw, **kw)
        else:
            g = kw.get("groups", 1)
            norm = {k: _conv._ntuple(kw.get(k, d), nsp, k) for k, d in
                    (("stride", 1), ("padding", 0), ("output_padding", 0), ("dilation", 1))}
            y = _conv._conv_transpose_prims(cx, cw, None, norm["stride"], norm["padding"],
                                            norm["output_padding"], g, norm["dilation"], nsp,
                                            "conv_transpose")
        (y * y).sum().backward()
        outs.append((y.detach().numpy(), cx.grad.numpy(), cw.grad.numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_module_output_size_and_double_backward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 5))
    tm = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    cm = tracec.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    cm.load_state_dict({k: tracec.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tx, cx = torch.tensor(x, requires_grad=True), tracec.tensor(x, requires_grad=True)
    ty, cy = tm(tx, output_size=[10, 10]), cm(cx, output_size=[10, 10])
    assert tuple(cy.shape) == tuple(ty.shape) == (2, 2, 10, 10)
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
    # a gradient penalty: the first gradient with create_graph, then backward through it
    (tg,) = torch.autograd.grad(ty.square().sum(), tx, create_graph=True)
    (cg,) = tracec.autograd.grad(cy.square().sum(), cx, create_graph=True)
    np.testing.assert_allclose(cg.detach().numpy(), tg.detach().numpy(), rtol=1e-10)
    tg.square().sum().backward()
    cg.square().sum().backward()
    np.testing.assert_allclose(cm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=1e-9)


def test_compiled_equals_eager():
    rng = np.random.default_rng(4)
    x = tracec.tensor(rng.standard_normal((2, 4, 5, 6)).astype(np.float32))
    m = tracec.nn.ConvTranspose2d(4, 3, 4, stride=2, padding=1)
    f = tracec.compile(lambda v: m(v).tanh().sum())
    eager = m(x).tanh().sum().item()
    assert abs(f(x).item() - eager) < 1e-4 and abs(f(x).item() - eager) < 1e-4


def test_columns_made_a_few_images_at_a_time(monkeypatch):
    """Large batches are processed in chunks (the columns are kk times the
    output): the same values as one chunk, and as PyTorch."""
    from tracec.nn import _conv_transpose_eager as ct
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    whole = tracec.nn.functional.conv_transpose2d(tracec.tensor(x), tracec.tensor(w), stride=2)
    monkeypatch.setattr(ct, "COLUMNS_BYTES", 1 << 12)       # one image per chunk
    parts = tracec.nn.functional.conv_transpose2d(tracec.tensor(x), tracec.tensor(w), stride=2)
    np.testing.assert_array_equal(parts.numpy(), whole.numpy())
    ref = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2)
    np.testing.assert_allclose(parts.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
