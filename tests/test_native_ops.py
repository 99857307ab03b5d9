"""torch.native_layer_norm / native_batch_norm / native_group_norm /
native_dropout / convolution / norm_except_dim / empty_permuted /
histogramdd against PyTorch 2.13: every returned tensor, gradients of the
differentiable one, running statistics, dropout draws under the same seed,
shapes, strides, dtypes and errors."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


def _pair(a, dtype="float64", grad=True):
    t = torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=grad)
    c = tracec.tensor(a, dtype=getattr(tracec, dtype), requires_grad=grad)
    return t, c


def _same(t, c, tol=1e-10):
    assert tuple(t.shape) == tuple(c.shape)
    assert str(t.dtype).split(".")[-1] == str(c.dtype).split(".")[-1]
    np.testing.assert_allclose(c.detach().float().numpy() if c.dtype is tracec.bfloat16 else
                               c.detach().numpy(),
                               t.detach().float().numpy() if t.dtype is torch.bfloat16 else
                               t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-5),
                                       ("bfloat16", 2e-2)])
def test_native_layer_norm(dtype, tol):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4))
    w, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    (tx, cx), (tw, cw), (tb, cb) = _pair(x, dtype), _pair(w, dtype), _pair(b, dtype)
    tout = torch.native_layer_norm(tx, [3, 4], tw, tb, 1e-5)
    cout = tracec.native_layer_norm(cx, [3, 4], cw, cb, 1e-5)
    for t, c in zip(tout, cout):
        _same(t, c, tol)
    assert [o.requires_grad for o in cout] == [o.requires_grad for o in tout]
    g = rng.standard_normal((2, 3, 4))
    tout[0].backward(torch.tensor(g, dtype=tx.dtype))
    cout[0].backward(tracec.tensor(g, dtype=cx.dtype))
    for t, c in ((tx, cx), (tw, cw), (tb, cb)):
        _same(t.grad, c.grad, tol * 10)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm(training):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 5))
    (tx, cx) = _pair(x)
    (tw, cw), (tb, cb) = _pair(rng.standard_normal(3)), _pair(rng.standard_normal(3))
    trm, crm = _pair(rng.standard_normal(3), grad=False)
    trv, crv = _pair(rng.random(3) + 0.5, grad=False)
    tout = torch.native_batch_norm(tx, tw, tb, trm, trv, training, 0.1, 1e-5)
    cout = tracec.native_batch_norm(cx, cw, cb, crm, crv, training, 0.1, 1e-5)
    for t, c in zip(tout, cout):
        _same(t, c)
    _same(trm, crm)
    _same(trv, crv)
    tout[0].sum().backward()
    cout[0].sum().backward()
    for t, c in ((tx, cx), (tw, cw), (tb, cb)):
        _same(t.grad, c.grad, 1e-8)


def test_native_group_norm():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 5))
    (tx, cx), (tw, cw) = _pair(x), _pair(rng.standard_normal(6))
    tout = torch.native_group_norm(tx, tw, None, 2, 6, 5, 3, 1e-5)
    cout = tracec.native_group_norm(cx, cw, None, 2, 6, 5, 3, 1e-5)
    for t, c in zip(tout, cout):
        _same(t, c)
    tout[0].pow(2).sum().backward()
    cout[0].pow(2).sum().backward()
    _same(tx.grad, cx.grad, 1e-8)
    _same(tw.grad, cw.grad, 1e-8)


@pytest.mark.parametrize("p,train", [(0.3, True), (0.0, True), (1.0, True), (0.5, False),
                                     (0.5, None)])
def test_native_dropout_draws_as_torch(p, train):
    x = np.arange(1.0, 13.0).reshape(3, 4)
    tx, cx = _pair(x, "float32")
    torch.manual_seed(3)
    tracec.manual_seed(3)
    to, tm = torch.native_dropout(tx, p, train)
    co, cm = tracec.native_dropout(cx, p, train)
    _same(to, co, 1e-6)
    assert cm.dtype is tracec.bool_ and (cm.numpy() == tm.numpy()).all()
    # the generator moved the same way
    _same(torch.rand(3), tracec.rand(3), 0)
    to.sum().backward()
    co.sum().backward()
    _same(tx.grad, cx.grad, 1e-6)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution(transposed):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 6, 6))
    w = rng.standard_normal((4, 2, 3, 3))
    (tx, cx), (tw, cw), (tb, cb) = _pair(x), _pair(w), _pair(rng.standard_normal(4))
    args = ([2, 1], [1, 0], [1, 2], transposed, [1, 0] if transposed else [0, 0], 2)
    t = torch.convolution(tx, tw, tb, *args)
    c = tracec.convolution(cx, cw, cb, *args)
    _same(t, c)
    t.sum().backward()
    c.sum().backward()
    for a, b in ((tx, cx), (tw, cw), (tb, cb)):
        _same(a.grad, b.grad, 1e-9)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_norm_except_dim(dim):
    v = np.random.default_rng(5).standard_normal((3, 4, 2))
    tv, cv = _pair(v)
    t, c = torch.norm_except_dim(tv, 2, dim), tracec.norm_except_dim(cv, 2, dim)
    _same(t, c)
    t.sum().backward()
    c.sum().backward()
    _same(tv.grad, cv.grad)


def test_empty_permuted_strides_and_errors():
    for size, layout in (((2, 3, 4, 5), (0, 2, 3, 1)), ((2, 3), (1, 0)), ((4,), (0,))):
        t = torch.empty_permuted(size, layout)
        c = tracec.empty_permuted(size, layout, dtype=tracec.float64)
        assert tuple(c.shape) == tuple(t.shape) and c.stride() == t.stride()
    for bad in ((0,), (0, 0)):
        with pytest.raises(RuntimeError) as want:
            torch.empty_permuted((2, 3), bad)
        with pytest.raises(RuntimeError) as got:
            tracec.empty_permuted((2, 3), bad)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("case", ["int", "list", "edges", "range_density", "weight", "3d",
                                  "degenerate"])
def test_histogramdd(case):
    rng = np.random.default_rng(6)
    x = rng.random((2, 5, 2))
    kw = {}
    if case == "int":
        bins = 3
    elif case == "list":
        bins = [3, 4]
    elif case == "edges":
        bins = [np.array([0.0, 0.25, 1.0]), np.array([0.0, 0.5, 0.75, 1.0])]
    elif case == "range_density":
        bins, kw = 3, {"range": [0.0, 1.0, 0.0, 2.0], "density": True}
    elif case == "weight":
        bins, kw = 2, {"weight": rng.random((2, 5))}
    elif case == "3d":
        x, bins = rng.random((4, 3)), [2, 3, 2]
    else:
        x, bins = np.zeros((3, 1)), 2

    def conv(lib, v):
        if isinstance(v, np.ndarray):
            return lib.tensor(v)
        if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
            return [lib.tensor(e) for e in v]
        return v
    t = torch.histogramdd(torch.tensor(x), bins=conv(torch, bins),
                          **{k: conv(torch, v) for k, v in kw.items()})
    c = tracec.histogramdd(tracec.tensor(x), bins=conv(tracec, bins),
                           **{k: conv(tracec, v) for k, v in kw.items()})
    _same(t.hist, c.hist)
    assert isinstance(c.bin_edges, tuple) and len(c.bin_edges) == len(t.bin_edges)
    for a, b in zip(t.bin_edges, c.bin_edges):
        _same(a, b)


def test_histogramdd_errors():
    for x, bins, exc in ((np.array([1, 2]).reshape(1, 2), 2, NotImplementedError),
                         (np.zeros(3), 2, RuntimeError),
                         (np.zeros((4, 2)), [2, 2, 2], RuntimeError)):
        with pytest.raises(exc) as want:
            torch.histogramdd(torch.tensor(x), bins=bins)
        with pytest.raises(exc) as got:
            tracec.histogramdd(tracec.tensor(x), bins=bins)
        assert str(got.value) == str(want.value)


def test_torch_storage_module_and_const_data_ptr():
    from tracec.storage import TypedStorage, UntypedStorage
    assert UntypedStorage is tracec.UntypedStorage and TypedStorage is tracec.TypedStorage
    x = tracec.arange(4.0)
    assert x.const_data_ptr() == x.data_ptr()
    assert x[1:].const_data_ptr() == x.data_ptr() + 4


def test_optim_variant_modules_and_backends_mkl():
    import importlib
    for mod, cls in (("adamax", "Adamax"), ("nadam", "NAdam"), ("radam", "RAdam")):
        assert getattr(importlib.import_module(f"tracec.optim.{mod}"), cls) is \
            getattr(tracec.optim, cls)
    assert tracec.backends.mkl.is_available() is False
    with tracec.backends.mkl.verbose(tracec.backends.mkl.VERBOSE_ON):
        assert tracec.ones(2).sum().item() == 2.0
