"""Weight and spectral normalization (hook API and parametrizations),
``parametrize``, gradient-norm helpers, conv/linear + batch-norm fusion,
``skip_init``, parameter/vector conversion and ``nn.init``'s remaining
names, against PyTorch: state-dict keys and metadata, forward values,
gradients of every parameter, power-iteration buffers, removal."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import tracec
import tracec.nn.utils.parametrize as TP
import torch.nn.utils.parametrize as OP
from nn_helpers import close, compare_params_grads, copy_weights, npy, rnd


def _both(cls, *args):
    return (getattr(tracec.nn, cls)(*args).double(), getattr(torch.nn, cls)(*args).double())


def _x(cls, rng):
    return rnd(rng, 2, 3) if cls == "Linear" else rnd(rng, 1, 3, 4, 4)


def _step_compare(tc, th, x, atol=1e-12):
    ya, yb = tc(tracec.tensor(x)), th(torch.tensor(x))
    close(ya, yb, rtol=1e-9, atol=atol)
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    compare_params_grads(tc, th, rtol=1e-8, atol=1e-10)


def _no_future_warnings(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return fn(*args, **kw)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hook_api(dim):
    tc, th = _both("Conv2d", 3, 4, 2)
    tc = _no_future_warnings(tracec.nn.utils.weight_norm, tc, dim=dim)
    th = _no_future_warnings(torch.nn.utils.weight_norm, th, dim=dim)
    assert list(tc.state_dict()) == list(th.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert tuple(tc.weight_g.shape) == tuple(th.weight_g.shape)
    copy_weights(tc, th)
    _step_compare(tc, th, _x("Conv2d", np.random.default_rng(0)))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        _no_future_warnings(tracec.nn.utils.weight_norm, tc, dim=dim)
    tracec.nn.utils.remove_weight_norm(tc)
    torch.nn.utils.remove_weight_norm(th)
    assert list(tc.state_dict()) == ["bias", "weight"]
    close(tc.weight, th.weight, rtol=1e-12)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        tracec.nn.utils.remove_weight_norm(tc)


def test_weight_norm_warns_future():
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        tracec.nn.utils.weight_norm(tracec.nn.Linear(2, 2))


@pytest.mark.parametrize("cls,args", [("Linear", (3, 4)), ("ConvTranspose2d", (3, 4, 2))])
def test_spectral_norm_hook_api(cls, args):
    tc, th = _both(cls, *args)
    tc = tracec.nn.utils.spectral_norm(tc, n_power_iterations=2)
    th = torch.nn.utils.spectral_norm(th, n_power_iterations=2)
    sa, sb = tc.state_dict(), th.state_dict()
    assert list(sa) == list(sb) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert sa._metadata[""] == sb._metadata[""]
    copy_weights(tc, th)
    rng = np.random.default_rng(1)
    for mode in (True, True, False):
        tc.train(mode)
        th.train(mode)
        _step_compare(tc, th, _x(cls, rng))
        close(tc.weight_u, th.weight_u, rtol=1e-9, atol=1e-12)
        close(tc.weight_v, th.weight_v, rtol=1e-9, atol=1e-12)
    tracec.nn.utils.remove_spectral_norm(tc)
    torch.nn.utils.remove_spectral_norm(th)
    assert list(tc.state_dict()) == list(th.state_dict())
    close(tc.weight, th.weight, rtol=1e-9)
    assert not tc.__dict__.get("_state_dict_hooks")


def test_spectral_norm_loads_version0_checkpoint():
    th = torch.nn.utils.spectral_norm(torch.nn.Linear(3, 4).double())
    th(torch.zeros(1, 3, dtype=torch.float64))
    sd = th.state_dict()
    old = {k: v for k, v in sd.items() if k != "weight_v"}
    old["weight"] = th.weight.detach()
    tc = tracec.nn.utils.spectral_norm(tracec.nn.Linear(3, 4).double())
    tc.load_state_dict({k: tracec.tensor(npy(v)) for k, v in old.items()})
    tc.eval()
    close(tc(tracec.ones(1, 3, dtype=tracec.float64)),
          th.eval()(torch.ones(1, 3, dtype=torch.float64)), rtol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_parametrizations_weight_norm(dim):
    tc, th = _both("Conv1d", 3, 4, 2)
    tc = tracec.nn.utils.parametrizations.weight_norm(tc, dim=dim)
    th = torch.nn.utils.parametrizations.weight_norm(th, dim=dim)
    assert type(tc).__name__ == type(th).__name__ == "ParametrizedConv1d"
    assert list(tc.state_dict()) == list(th.state_dict()) == [
        "bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    copy_weights(tc, th)
    _step_compare(tc, th, rnd(np.random.default_rng(2), 2, 3, 5))
    TP.remove_parametrizations(tc, "weight")
    OP.remove_parametrizations(th, "weight")
    assert type(tc) is tracec.nn.Conv1d and list(tc.state_dict()) == ["bias", "weight"]
    close(tc.weight, th.weight, rtol=1e-12)


def test_parametrizations_weight_norm_loads_old_keys():
    old = _no_future_warnings(torch.nn.utils.weight_norm, torch.nn.Linear(3, 4)).state_dict()
    tc = tracec.nn.utils.parametrizations.weight_norm(tracec.nn.Linear(3, 4))
    tc.load_state_dict({k: tracec.tensor(npy(v)) for k, v in old.items()})
    close(tc.parametrizations.weight.original1, old["weight_v"])


@pytest.mark.parametrize("cls,args", [("Linear", (3, 4)), ("ConvTranspose2d", (3, 4, 2))])
def test_parametrizations_spectral_norm(cls, args):
    tc, th = _both(cls, *args)
    tc = tracec.nn.utils.parametrizations.spectral_norm(tc, n_power_iterations=2)
    th = torch.nn.utils.parametrizations.spectral_norm(th, n_power_iterations=2)
    assert list(tc.state_dict()) == list(th.state_dict()) == [
        "bias", "parametrizations.weight.original", "parametrizations.weight.0._u",
        "parametrizations.weight.0._v"]
    assert repr(tc).replace("tracec", "torch") == repr(th)
    copy_weights(tc, th)
    rng = np.random.default_rng(3)
    for mode in (True, True, False):
        tc.train(mode)
        th.train(mode)
        _step_compare(tc, th, _x(cls, rng))
        close(tc.parametrizations.weight[0]._u, th.parametrizations.weight[0]._u, rtol=1e-9,
              atol=1e-12)


class _Symmetric(tracec.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class _FirstRow(tracec.nn.Module):
    def forward(self, x):
        return x[:1]


class _Scale(tracec.nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, x):
        return x / 2


def test_parametrize_register_cache_assign_remove():
    m = tracec.nn.Linear(3, 3)
    w = m.weight
    TP.register_parametrization(m, "weight", _Symmetric())
    TP.register_parametrization(m, "weight", _Scale())
    assert TP.is_parametrized(m) and TP.is_parametrized(m, "weight")
    assert not TP.is_parametrized(m, "bias")
    assert TP.type_before_parametrizations(m) is tracec.nn.Linear
    assert m.parametrizations.weight.original is w
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    a = npy(w)
    close(m.weight, (np.triu(a) + np.triu(a, 1).T) * 2)
    with TP.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    with pytest.raises(RuntimeError, match="_Symmetric does not implement right_inverse"):
        m.weight = tracec.ones(3, 3)
    with pytest.raises(ValueError, match="may not change the shape"):
        TP.register_parametrization(tracec.nn.Linear(3, 2), "weight", _FirstRow())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
        TP.register_parametrization(m, "nothing", _Scale())
    TP.remove_parametrizations(m, "weight")
    assert type(m) is tracec.nn.Linear and m.weight is w
    close(w, (np.triu(a) + np.triu(a, 1).T) * 2)
    m2 = TP.register_parametrization(tracec.nn.Linear(2, 2), "weight", _Scale())
    m2.weight = tracec.ones(2, 2)
    close(m2.parametrizations.weight.original, np.full((2, 2), 0.5, np.float32))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, -math.inf, 0.0])
def test_total_norm_and_clipping(norm_type):
    rng = np.random.default_rng(4)
    arrays = [rnd(rng, 3, 2), rnd(rng, 4)]
    pa = [tracec.nn.Parameter(tracec.tensor(a)) for a in arrays]
    pb = [torch.nn.Parameter(torch.tensor(a)) for a in arrays]
    for p, a in zip(pa + pb, arrays + arrays):
        p.grad = (tracec if isinstance(p, tracec.Tensor) else torch).tensor(a * 3)
    close(tracec.nn.utils.get_total_norm([p.grad for p in pa], norm_type),
          torch.nn.utils.get_total_norm([p.grad for p in pb], norm_type))
    total_a = tracec.nn.utils.get_total_norm([p.grad for p in pa], norm_type)
    tracec.nn.utils.clip_grads_with_norm_(pa, 0.5, total_a)
    torch.nn.utils.clip_grads_with_norm_(pb, 0.5, torch.tensor(npy(total_a)))
    for p, q in zip(pa, pb):
        close(p.grad, q.grad, rtol=1e-12)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        tracec.nn.utils.clip_grad_norm(pa, 0.1, norm_type)


def test_fusion_matches_torch():
    rng = np.random.default_rng(5)
    conv_a, conv_b = _both("Conv2d", 3, 4, 2)
    bn_a, bn_b = _both("BatchNorm2d", 4)
    for m in (bn_a, bn_b):
        m.train()
    x = rnd(rng, 2, 3, 5, 5)
    copy_weights(conv_a, conv_b)
    bn_b(conv_b(torch.tensor(x)))  # non-trivial running stats
    torch.nn.init.uniform_(bn_b.weight)
    copy_weights(bn_a, bn_b)
    for m in (conv_a, conv_b, bn_a, bn_b):
        m.eval()
    fa = tracec.nn.utils.fuse_conv_bn_eval(conv_a, bn_a)
    fb = torch.nn.utils.fuse_conv_bn_eval(conv_b, bn_b)
    close(fa.weight, fb.weight, rtol=1e-12)
    close(fa(tracec.tensor(x)), bn_a(conv_a(tracec.tensor(x))), rtol=1e-9, atol=1e-12)
    lin_a, lin_b = _both("Linear", 3, 4)
    bn1_a, bn1_b = _both("BatchNorm1d", 4)
    copy_weights(lin_a, lin_b)
    bn1_b.running_var.fill_(2.0)
    copy_weights(bn1_a, bn1_b)
    for m in (lin_a, lin_b, bn1_a, bn1_b):
        m.eval()
    la, lb = tracec.nn.utils.fuse_linear_bn_eval(lin_a, bn1_a), torch.nn.utils.fuse_linear_bn_eval(
        lin_b, bn1_b)
    close(la.weight, lb.weight, rtol=1e-12)
    close(la.bias, lb.bias, rtol=1e-12)
    bn1_a.train()
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        tracec.nn.utils.fuse_linear_bn_eval(lin_a, bn1_a)


def test_skip_init_and_vector_conversion():
    tracec.manual_seed(0)
    before = tracec.rand(1)
    tracec.manual_seed(0)
    m = tracec.nn.utils.skip_init(tracec.nn.Linear, 3, 2)
    close(tracec.rand(1), before)  # the draw stream is untouched
    assert tuple(m.weight.shape) == (2, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        tracec.nn.utils.skip_init(int)
    vec = tracec.nn.utils.parameters_to_vector(m.parameters())
    new = tracec.arange(8, dtype=tracec.float32)
    tracec.nn.utils.vector_to_parameters(new, m.parameters())
    close(m.bias, np.array([6.0, 7.0], np.float32))
    assert vec.shape == (8,)
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        tracec.nn.utils.vector_to_parameters([1.0], m.parameters())


def test_init_names_and_sparse():
    missing = [n for n in dir(torch.nn.init) if not n.startswith("_") and n[0].islower()
               and callable(getattr(torch.nn.init, n)) and n not in ("torch",)
               and not hasattr(tracec.nn.init, n)]
    assert missing == []
    w = tracec.empty(10, 4)
    tracec.nn.init.sparse_(w, 0.3, std=0.5)
    assert ((npy(w) == 0).sum(0) == 3).all()
    with pytest.warns(FutureWarning, match="nn.init.orthogonal` is now deprecated"):
        tracec.nn.init.orthogonal(tracec.empty(3, 3))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        tracec.nn.init.sparse_(tracec.empty(3), 0.1)


@pytest.mark.parametrize("shape,orthogonal_map", [((4, 4), None), ((3, 5), None), ((5, 3), None),
                                                  ((3, 5), "matrix_exp"),
                                                  ((4, 4), "householder")])
def test_parametrizations_orthogonal(shape, orthogonal_map):
    tc, th = _both("Linear", *shape)
    copy_weights(tc, th)
    tracec.nn.utils.parametrizations.orthogonal(tc, orthogonal_map=orthogonal_map)
    torch.nn.utils.parametrizations.orthogonal(th, orthogonal_map=orthogonal_map)
    assert list(tc.state_dict()) == list(th.state_dict()) == [
        "bias", "parametrizations.weight.original", "parametrizations.weight.0.base"]
    close(tc.weight, th.weight, rtol=1e-9, atol=1e-12)  # starts at the orthogonalized weight
    with torch.no_grad():
        orig = th.parametrizations.weight.original
        orig.add_(torch.tensor(rnd(np.random.default_rng(6), *orig.shape, scale=0.3)))
    copy_weights(tc, th)
    _step_compare(tc, th, rnd(np.random.default_rng(7), 2, shape[0]), atol=1e-10)


def test_orthogonal_refuses_unknown_maps():
    # (cayley is supported now: tests/test_tutorials2_gaps.py compares it with torch)
    with pytest.raises(ValueError, match='orthogonal_map has to be one of'):
        tracec.nn.utils.parametrizations.orthogonal(tracec.nn.Linear(3, 3), orthogonal_map="qr")


def test_functional_call_and_memory_format():
    tc = tracec.nn.Sequential(tracec.nn.Linear(2, 3), tracec.nn.ReLU(), tracec.nn.Linear(3, 1))
    w = tracec.ones(3, 2, requires_grad=True)
    keep = tc[0].weight
    with pytest.warns(FutureWarning, match="torch.func.functional_call"):
        y = tracec.nn.utils.stateless.functional_call(tc, {"0.weight": w}, tracec.ones(1, 2))
    y.sum().backward()
    assert w.grad is not None and tc[0].weight is keep and keep.grad is None
    msgs = []
    for lib, m in ((tracec, tc), (torch, torch.nn.Sequential(torch.nn.Linear(2, 3),
                                                             torch.nn.ReLU(),
                                                             torch.nn.Linear(3, 1)))):
        with pytest.raises(RuntimeError) as e:
            _no_future_warnings(lib.nn.utils.stateless.functional_call, m,
                                {"0.weight": lib.ones(3, 2)}, lib.ones(1, 2), strict=True)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    conv = tracec.nn.Sequential(tracec.nn.Conv2d(2, 3, 1))
    before = npy(conv[0].weight).copy()
    assert tracec.nn.utils.convert_conv2d_weight_memory_format(conv, tracec.channels_last) is conv
    close(conv[0].weight, before)
