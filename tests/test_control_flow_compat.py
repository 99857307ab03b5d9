"""torch.cond (eager and compiled: one trace, both outcomes, gradients),
the torch.sym_* helpers, torch.range, torch.frombuffer, dlpack,
Tensor.dim_order / cfloat / cdouble, against torch 2.13."""
import warnings

import numpy as np
import pytest
import torch

import tracec


@pytest.mark.parametrize("T", [torch, tracec], ids=["torch", "tracec"])
def test_small_compat_functions(T):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a, b = T.range(1, 4), T.range(0, 1, 0.25, dtype=T.float64)
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0] and str(a.dtype).endswith("float32")
    assert b.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert any("torch.range is deprecated" in str(x.message) for x in w)
    buf = bytearray(np.arange(4, dtype=np.float32).tobytes())
    assert T.frombuffer(buf, dtype=T.float32).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert T.frombuffer(buf, dtype=T.float32, count=2, offset=4).tolist() == [1.0, 2.0]
    assert (T.sym_int(3.7), T.sym_float(3), T.sym_max(2, 5), T.sym_min(2, 5), T.sym_not(True),
            T.sym_ite(True, 1, 2), T.sym_sqrt(4), T.sym_sum([1, 2, 3])) == \
        (3, 3.0, 5, 2, False, 1, 2.0, 6)
    assert T.ones(2, 3, 4).dim_order() == (0, 1, 2)
    assert T.ones(2, 3, 4, 5).to(memory_format=T.channels_last).dim_order() == (0, 2, 3, 1)
    assert str(T.ones(2).cfloat().dtype).endswith("complex64")
    assert str(T.ones(2).cdouble().dtype).endswith("complex128")
    assert T.from_dlpack(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
    assert T.cond(T.tensor(True), lambda x: x + 1, lambda x: x - 1, (T.ones(2),)).tolist() == \
        [2.0, 2.0]
    assert T.cond(False, lambda x: x + 1, lambda x: x - 1, [T.ones(2)]).tolist() == [0.0, 0.0]


def test_cond_compiles_once_for_both_outcomes():
    f = tracec.compile(lambda p, x: tracec.cond(
        p.sum() > 0, lambda y: (y * 2, y.sum()), lambda y: (y - 1, y.mean()), (x,)))
    for v in ([1.0, 2.0], [-3.0, 1.0], [5.0, 5.0], [-1.0, -1.0]):
        got = f(tracec.tensor(v), tracec.arange(3.0))
        want = torch.cond(torch.tensor(v).sum() > 0, lambda y: (y * 2, y.sum()),
                          lambda y: (y - 1, y.mean()), (torch.arange(3.0),))
        for g, w_ in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w_.numpy())
    assert f.cache_info().traces == 1
    g = tracec.compile(lambda p, x: tracec.cond(p > 0, lambda y: (y * y).sum(),
                                                lambda y: (3 * y).sum(), (x,)))
    x = tracec.arange(3.0).requires_grad_()
    for pv, want in ((1.0, [0.0, 2.0, 4.0]), (-1.0, [3.0, 3.0, 3.0]), (2.0, [0.0, 2.0, 4.0])):
        x.grad = None
        g(tracec.tensor(pv), x).backward()
        assert x.grad.tolist() == want


def test_cond_checks_what_torch_checks():
    with pytest.raises(RuntimeError, match="single-element"):
        tracec.cond(tracec.ones(2) > 0, lambda: 1, lambda: 2)
    f = tracec.compile(lambda p, x: tracec.cond(p > 0, lambda y: y, lambda y: y.sum(), (x,)))
    with pytest.raises(Exception, match="must match"):
        f(tracec.tensor(1.0), tracec.ones(3))


def test_namespaces_model_code_touches_at_import():
    """torch.fx.wrap, torch.overrides, torch.backends.mkldnn/opt_einsum,
    torch.__config__ and Tensor._make_subclass, as model code uses them."""
    # (fx.wrap belongs at a module's top level, as PyTorch requires)
    ns: dict = {}
    exec(compile("import tracec\nname = tracec.fx.wrap('len')\n"
                 "@tracec.fx.wrap\ndef leaf(x):\n    return x + 1\n", "<model code>", "exec"), ns)
    assert ns["name"] == "len" and ns["leaf"](1) == 2
    with pytest.raises(NotImplementedError, match="top level of a module"):
        tracec.fx.wrap("len")
    assert tracec.backends.mkldnn.is_available() is False and tracec.backends.mkldnn.enabled
    with tracec.backends.mkldnn.flags(enabled=False):
        assert tracec.backends.mkldnn.enabled is False
    assert tracec.backends.mkldnn.enabled is True
    assert isinstance(tracec.backends.opt_einsum.is_available(), bool)
    assert "tracec" in tracec.__config__.show()
    assert "get_num_threads" in tracec.__config__.parallel_info()

    class P(tracec.Tensor):
        def __new__(cls, data):
            return tracec.Tensor._make_subclass(cls, data, True)
    p = P(tracec.ones(3))
    assert type(p) is P and p.requires_grad
    (p * 2).sum().backward()
    assert p.grad.tolist() == [2.0, 2.0, 2.0]

    class Logged(tracec.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return "handled " + func.__name__

    def myfunc(x):
        if tracec.overrides.has_torch_function_unary(x):
            return tracec.overrides.handle_torch_function(myfunc, (x,), x)
        return x + 1
    assert myfunc(tracec.ones(1)).tolist() == [2.0]
    assert myfunc(tracec.Tensor._make_subclass(Logged, tracec.ones(1))) == "handled myfunc"
    assert not tracec.overrides.has_torch_function((tracec.ones(1), 3))


def test_onnx_export_is_refused_clearly():
    assert tracec.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match="tracec build"):
        tracec.onnx.export(tracec.nn.Linear(2, 2), (tracec.ones(1, 2),), "m.onnx")
