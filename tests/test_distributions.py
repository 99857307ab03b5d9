"""tracec.distributions against torch.distributions 2.13: log_prob,
entropy, mean, variance, stddev, cdf and KL values; gradients of log_prob
and entropy in the parameters; sample shapes and (loosely) their
statistics; argument validation errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as TD

import tracec
import tracec.distributions as D

from nn_helpers import tol

DTYPES = [np.float32, np.float64]


def _leaf(a):
    return (tracec.tensor(a.copy(), requires_grad=True),
            torch.tensor(a.copy(), requires_grad=True))


def _close(a, b, dtype, scale=1.0):
    np.testing.assert_allclose(np.asarray(a.detach().tolist(), dtype=np.float64),
                               b.detach().numpy().astype(np.float64), **tol(dtype, scale))


def _check(ours, theirs, leaves, dtype, methods, value_pairs=()):
    """Every property in ``methods`` and log_prob of each value pair agree,
    and so do the gradients of their sum in every leaf."""
    outs = []
    for name in methods:
        a, b = getattr(ours, name), getattr(theirs, name)
        if callable(a):
            a, b = a(), b()
        _close(a, b, dtype)
        assert a.dtype.name == str(b.dtype).removeprefix("torch.")
        outs.append((a, b))
    for va, vb in value_pairs:
        a, b = ours.log_prob(va), theirs.log_prob(vb)
        _close(a, b, dtype)
        assert tuple(a.shape) == tuple(b.shape)
        outs.append((a, b))
    diff = [(a, b) for a, b in outs if a.requires_grad]
    assert diff, "nothing to differentiate"
    sum(a.sum() for a, _ in diff).backward()
    sum(b.sum() for _, b in diff).backward()
    for lt, lb in leaves:
        _close(lt.grad, lb.grad, dtype, 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normal(dtype):
    rng = np.random.default_rng(0)
    loc = rng.standard_normal((3, 4)).astype(dtype)
    scale = (rng.random((3, 4)) + 0.5).astype(dtype)
    value = rng.standard_normal((2, 3, 4)).astype(dtype)
    (l1, l2), (s1, s2) = _leaf(loc), _leaf(scale)
    ours, theirs = D.Normal(l1, s1), TD.Normal(l2, s2)
    assert ours.batch_shape == tuple(theirs.batch_shape) == (3, 4)
    assert ours.event_shape == () and ours.has_rsample
    _check(ours, theirs, [(l1, l2), (s1, s2)], dtype,
           ["mean", "variance", "stddev", "entropy", "mode"],
           [(tracec.tensor(value), torch.tensor(value))])
    _close(ours.cdf(tracec.tensor(value)), theirs.cdf(torch.tensor(value)), dtype)


def test_normal_python_numbers_and_broadcasting():
    ours, theirs = D.Normal(0.5, 2.0), TD.Normal(0.5, 2.0)
    assert ours.batch_shape == () and ours.loc.dtype is tracec.float32
    v = np.array([0.1, -3.0], np.float32)
    _close(ours.log_prob(tracec.tensor(v)), theirs.log_prob(torch.tensor(v)), np.float32)
    mixed = D.Normal(tracec.zeros(3, dtype=tracec.float64), 1.0)
    assert mixed.scale.dtype is tracec.float64 and mixed.batch_shape == (3,)
    assert D.Normal(tracec.zeros(2, 1), tracec.ones(3)).batch_shape == (2, 3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("param", ["probs", "logits"])
def test_categorical(dtype, param):
    rng = np.random.default_rng(1)
    raw = rng.random((3, 5)).astype(dtype) + (0.1 if param == "probs" else -0.5)
    value = rng.integers(0, 5, (4, 3))
    p1, p2 = _leaf(raw)
    ours = D.Categorical(**{param: p1})
    theirs = TD.Categorical(**{param: p2})
    assert ours.batch_shape == (3,) and ours.event_shape == () and ours.param_shape == (3, 5)
    _check(ours, theirs, [(p1, p2)], dtype, ["probs", "logits", "entropy"],
           [(tracec.tensor(value), torch.tensor(value)),
            (tracec.tensor(value[0]), torch.tensor(value[0]))])
    assert ours.mode.tolist() == theirs.mode.tolist()
    assert np.isnan(ours.mean.tolist()).all() and tuple(ours.mean.shape) == (3,)
    assert ours.enumerate_support().tolist() == theirs.enumerate_support().tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("param", ["probs", "logits"])
def test_bernoulli(dtype, param):
    rng = np.random.default_rng(2)
    raw = rng.random((4,)).astype(dtype) * 0.9 + 0.05
    if param == "logits":
        raw = (raw - 0.5) * 6
    value = rng.integers(0, 2, (3, 4)).astype(dtype)
    p1, p2 = _leaf(raw)
    ours, theirs = D.Bernoulli(**{param: p1}), TD.Bernoulli(**{param: p2})
    assert ours.batch_shape == (4,)
    _check(ours, theirs, [(p1, p2)], dtype,
           ["probs", "logits", "mean", "variance", "stddev", "entropy"],
           [(tracec.tensor(value), torch.tensor(value))])
    np.testing.assert_array_equal(
        np.asarray(D.Bernoulli(tracec.tensor([0.5, 0.2, 0.7])).mode.tolist()),
        TD.Bernoulli(torch.tensor([0.5, 0.2, 0.7])).mode.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_uniform_and_one_hot_categorical(dtype):
    rng = np.random.default_rng(3)
    low = rng.standard_normal(3).astype(dtype)
    high = low + rng.random(3).astype(dtype) + 0.5
    (a1, a2), (b1, b2) = _leaf(low), _leaf(high)
    value = (low + 0.25).astype(dtype)
    ours, theirs = D.Uniform(a1, b1), TD.Uniform(a2, b2)
    _check(ours, theirs, [(a1, a2), (b1, b2)], dtype,
           ["mean", "variance", "stddev", "entropy"],
           [(tracec.tensor(value), torch.tensor(value))])
    outside = (high + 1).astype(dtype)
    assert D.Uniform(low.tolist()[0], high.tolist()[0], validate_args=False).log_prob(
        tracec.tensor(outside[0])).item() == -np.inf

    logits = rng.standard_normal((2, 4)).astype(dtype)
    l1, l2 = _leaf(logits)
    onehot = np.eye(4, dtype=dtype)[[1, 3]]
    o1, o2 = D.OneHotCategorical(logits=l1), TD.OneHotCategorical(logits=l2)
    assert o1.event_shape == (4,) and o1.batch_shape == (2,)
    _check(o1, o2, [(l1, l2)], dtype, ["entropy", "mean", "variance"],
           [(tracec.tensor(onehot), torch.tensor(onehot))])
    s = o1.sample((5,))
    assert tuple(s.shape) == (5, 2, 4) and s.sum(-1).tolist() == [[1.0, 1.0]] * 5


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_divergence(dtype):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3)).astype(dtype)
    s, t = (rng.random((2, 3)) + 0.5).astype(dtype)
    _close(D.kl_divergence(D.Normal(tracec.tensor(a), tracec.tensor(s)),
                           D.Normal(tracec.tensor(b), tracec.tensor(t))),
           TD.kl_divergence(TD.Normal(torch.tensor(a), torch.tensor(s)),
                            TD.Normal(torch.tensor(b), torch.tensor(t))), dtype)
    _close(D.kl_divergence(D.Categorical(logits=tracec.tensor(a)),
                           D.Categorical(logits=tracec.tensor(b))),
           TD.kl_divergence(TD.Categorical(logits=torch.tensor(a)),
                            TD.Categorical(logits=torch.tensor(b))), dtype)
    p = (s / 2).astype(dtype)
    _close(D.kl_divergence(D.Bernoulli(tracec.tensor(p)), D.Bernoulli(logits=tracec.tensor(b))),
           TD.kl_divergence(TD.Bernoulli(torch.tensor(p)), TD.Bernoulli(logits=torch.tensor(b))),
           dtype)
    _close(D.kl_divergence(D.Uniform(tracec.tensor(a), tracec.tensor(a + 1)),
                           D.Uniform(tracec.tensor(a - 1), tracec.tensor(a + 2))),
           TD.kl_divergence(TD.Uniform(torch.tensor(a), torch.tensor(a + 1)),
                            TD.Uniform(torch.tensor(a - 1), torch.tensor(a + 2))), dtype)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(tracec.tensor([0.5, 0.5])))
    # Both exponential families, as in PyTorch: the Bregman rule refuses.
    with pytest.raises(NotImplementedError, match="different exponential families"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5))


def test_sample_shapes_and_statistics():
    tracec.manual_seed(0)
    n = D.Normal(tracec.tensor([1.0, -2.0]), tracec.tensor([0.5, 2.0]))
    x = n.sample((20000,))
    assert tuple(x.shape) == (20000, 2) and x.dtype is tracec.float32 and not x.requires_grad
    assert np.allclose(x.mean(0).tolist(), [1.0, -2.0], atol=0.06)
    assert np.allclose(x.std(0).tolist(), [0.5, 2.0], rtol=0.05)
    assert tuple(n.sample().shape) == (2,)

    probs = tracec.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    c = D.Categorical(probs)
    s = c.sample((20000,))
    assert tuple(s.shape) == (20000, 2) and s.dtype is tracec.int64
    freq = np.stack([np.bincount(np.asarray(s[:, i].tolist()), minlength=4) / 20000
                     for i in range(2)])
    assert freq[0, 1] == 0
    np.testing.assert_allclose(freq, probs.tolist(), atol=0.02)
    assert tuple(D.Categorical(logits=tracec.zeros(3)).sample((4, 5)).shape) == (4, 5)
    assert D.Categorical(logits=tracec.zeros(3)).sample().ndim == 0

    b = D.Bernoulli(tracec.tensor([0.2, 0.9]))
    s = b.sample((10000,))
    assert tuple(s.shape) == (10000, 2) and s.dtype is tracec.float32
    assert set(np.unique(np.asarray(s.tolist()))) <= {0.0, 1.0}
    np.testing.assert_allclose(s.mean(0).tolist(), [0.2, 0.9], atol=0.02)

    u = D.Uniform(-1.0, 3.0).sample((10000,))
    arr = np.asarray(u.tolist())
    assert arr.min() >= -1 and arr.max() < 3 and abs(arr.mean() - 1) < 0.06

    tracec.manual_seed(7)
    a = c.sample((10,)).tolist()
    tracec.manual_seed(7)
    assert c.sample((10,)).tolist() == a


def test_rsample_is_differentiable():
    loc = tracec.tensor([0.5, -1.0], requires_grad=True)
    scale = tracec.tensor([1.0, 2.0], requires_grad=True)
    tracec.manual_seed(3)
    x = D.Normal(loc, scale).rsample((1000,))
    assert x.requires_grad
    x.sum().backward()
    assert loc.grad.tolist() == [1000.0, 1000.0]
    eps = (x.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(scale.grad.tolist(), eps.sum(0).tolist(), rtol=1e-4, atol=1e-3)
    assert not D.Normal(loc, scale).sample().requires_grad
    lo = tracec.tensor(0.0, requires_grad=True)
    D.Uniform(lo, 2.0).rsample((5,)).sum().backward()
    assert lo.grad is not None


def test_reinforce_loss_gradient_matches_torch():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    obs = rng.standard_normal((6, 4)).astype(np.float32)
    actions = rng.integers(0, 2, 6)
    rewards = rng.standard_normal(6).astype(np.float32)
    w1, w2 = _leaf(w)
    for lib, dist, wl in ((tracec, D, w1), (torch, TD, w2)):
        probs = lib.softmax(lib.tensor(obs) @ wl, dim=1)
        m = dist.Categorical(probs)
        (-m.log_prob(lib.tensor(actions)) * lib.tensor(rewards)).sum().backward()
    _close(w1.grad, w2.grad, np.float32, 10)


def _msg(fn):
    with pytest.raises(ValueError) as e:
        fn()
    return str(e.value)


@pytest.mark.parametrize("make", [
    lambda m, t: m.Normal(0.0, -1.0),
    lambda m, t: m.Uniform(1.0, 0.0),
    lambda m, t: m.Categorical(),
    lambda m, t: m.Categorical(t.tensor([0.5, 0.5]), logits=t.tensor([1.0, 2.0])),
    lambda m, t: m.Categorical(probs=t.tensor(0.5)),
    lambda m, t: m.Bernoulli(t.tensor(1.5)),
    lambda m, t: m.Bernoulli(t.tensor(0.5)).log_prob(t.tensor(0.3)),
    lambda m, t: m.Normal(0.0, 1.0).log_prob(1.0),
])
def test_validation_errors_match_torch(make):
    assert _msg(lambda: make(D, tracec)) == _msg(lambda: make(TD, torch))


def test_validation_errors_name_the_constraint():
    msg = _msg(lambda: D.Categorical(tracec.tensor([0.5, 0.5])).log_prob(tracec.tensor([3])))
    assert msg.startswith("Expected value argument (Tensor of shape (1,)) to be within the "
                          "support (IntegerInterval(lower_bound=0, upper_bound=1))")
    msg = _msg(lambda: D.Normal(tracec.zeros(2), tracec.tensor([1.0, -1.0])))
    assert "to satisfy the constraint GreaterThan(lower_bound=0.0)" in msg
    # PyTorch prints torch.Size([3]) vs torch.Size([2]).
    assert ("Value is not broadcastable with batch_shape+event_shape: tracec.Size([3]) vs "
            "tracec.Size([2]).") == _msg(
        lambda: D.Normal(tracec.zeros(2), 1.0).log_prob(tracec.zeros(3)))
    D.Normal(0.0, -1.0, validate_args=False)  # no check when asked
