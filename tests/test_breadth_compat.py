"""Gaps found by running more public programs (tests/programs/breadth), each
checked against torch 2.13: the same call in both libraries, same values,
gradients and errors."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


def _pair(a):
    return tracec.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("name,args,kwargs", [
    ("sum", (), {"axis": 1, "keepdims": True}), ("mean", (), {"axis": 0}),
    ("cumprod", (), {"axis": 0}), ("cumsum", (), {"axis": 1}),
    ("amax", (), {"axis": 1, "keepdims": True}), ("std", (), {"axis": 0}),
    ("softmax", (), {"axis": -1}), ("log_softmax", (), {"axis": 0}),
    ("logsumexp", (), {"axis": 1, "keepdims": True}), ("argmax", (), {"axis": 1}),
    ("prod", (), {"axis": 1}), ("squeeze", (), {"axis": 0}), ("unsqueeze", (), {"axis": 2}),
])
def test_numpy_keyword_names(name, args, kwargs):
    a = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    t, r = _pair(a)
    for got, want in ((getattr(tracec, name)(t, *args, **kwargs),
                       getattr(torch, name)(r, *args, **kwargs)),
                      (getattr(t, name)(*args, **kwargs), getattr(r, name)(*args, **kwargs))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        assert tuple(got.shape) == tuple(want.shape)


def test_numpy_keyword_names_on_tuple_results_and_lists():
    a = np.random.default_rng(1).random((3, 4)).astype(np.float32)
    t, r = _pair(a)
    got, want = tracec.max(t, axis=1, keepdims=True), torch.max(r, axis=1, keepdims=True)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    assert tuple(tracec.cat([t, t], axis=1).shape) == tuple(torch.cat([r, r], axis=1).shape)
    assert tuple(tracec.stack([t, t], axis=2).shape) == tuple(torch.stack([r, r], axis=2).shape)
    with pytest.raises(TypeError):
        t.sum(dim=0, axis=0)
    for name in ("softmax", "log_softmax", "logsumexp"):   # torch.special's too
        np.testing.assert_allclose(getattr(tracec.special, name)(t, axis=1).numpy(),
                                   getattr(torch.special, name)(r, axis=1).numpy(), rtol=1e-6)


def _mvn_args(lib, rng):
    A = rng.standard_normal((3, 3))
    cov = (A @ A.T + 3 * np.eye(3)).astype(np.float64)
    loc = rng.standard_normal((2, 3))
    return (lib.tensor(loc, requires_grad=True), lib.tensor(cov, requires_grad=True))


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_matches_torch(param):
    rng = np.random.default_rng(0)
    value = rng.standard_normal((4, 2, 3))
    outs = []
    for lib in (tracec, torch):
        loc, cov = _mvn_args(lib, np.random.default_rng(1))
        given = lib.linalg.cholesky(cov) if param == "scale_tril" else \
            lib.linalg.inv(cov) if param == "precision_matrix" else cov
        d = lib.distributions.MultivariateNormal(loc, **{param: given})
        lp = d.log_prob(lib.tensor(value))
        ent = d.entropy()
        (lp.sum() + ent.sum()).backward()
        outs.append([lp, ent, d.variance, d.covariance_matrix, d.precision_matrix,
                     d.scale_tril, loc.grad, cov.grad])
        assert str(d.batch_shape) == "torch.Size([2])".replace("torch", lib.__name__)
        assert tuple(d.event_shape) == (3,)
    for got, want in zip(*outs):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                   rtol=1e-7, atol=1e-9)


def test_multivariate_normal_rsample_and_errors():
    loc, cov = _mvn_args(tracec, np.random.default_rng(2))
    d = tracec.distributions.MultivariateNormal(loc, cov)
    s = d.rsample((5,))
    assert tuple(s.shape) == (5, 2, 3) and s.requires_grad
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        tracec.distributions.MultivariateNormal(loc, cov, scale_tril=cov)
    with pytest.raises(ValueError, match="positive_definite|PositiveDefinite"):
        tracec.distributions.MultivariateNormal(loc.detach(), -cov.detach())
    with pytest.raises(ValueError, match="loc must be at least one-dimensional"):
        tracec.distributions.MultivariateNormal(tracec.tensor(0.0), cov)


def test_independent_matches_torch():
    rng = np.random.default_rng(3)
    loc, scale, value = rng.standard_normal((4, 3)), rng.random((4, 3)) + 0.5, \
        rng.standard_normal((2, 4, 3))
    outs = []
    for lib in (tracec, torch):
        D = lib.distributions
        d = D.Independent(D.Normal(lib.tensor(loc), lib.tensor(scale)), 1)
        outs.append((d.log_prob(lib.tensor(value)), d.entropy(), tuple(d.batch_shape),
                     tuple(d.event_shape), repr(d.support)))
    (lp, ent, b, e, sup), (lp2, ent2, b2, e2, sup2) = outs
    np.testing.assert_allclose(lp.numpy(), lp2.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ent.numpy(), ent2.numpy(), rtol=1e-6)
    assert (b, e, sup) == (b2, e2, sup2)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        tracec.distributions.Independent(tracec.distributions.Normal(0.0, 1.0), 1)


def test_float_of_a_tensor_that_requires_grad_warns_once(recwarn):
    import sys
    sys.modules["tracec.tensor"]._WARNED["float_requires_grad"] = False
    x = tracec.ones((), requires_grad=True) * 2
    x.item()
    assert not recwarn.list
    float(x), float(x)
    assert [str(w.message).split(".")[0] for w in recwarn.list] == [
        "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
        "behavior"]


def test_cholesky_ex_reports_the_failing_minor_like_torch():
    a = np.array([[[4., 2, 1], [2, 1, 3], [1, 3, 5]], [[2, 0, 0], [0, 3, 0], [0, 0, 1.]]])
    for upper in (False, True):
        got = tracec.linalg.cholesky_ex(tracec.tensor(a), upper=upper)
        want = torch.linalg.cholesky_ex(torch.tensor(a), upper=upper)
        np.testing.assert_allclose(got.L.numpy(), want.L.numpy())
        np.testing.assert_array_equal(got.info.numpy(), want.info.numpy())
    with pytest.raises(RuntimeError, match="not positive-definite"):
        tracec.linalg.cholesky_ex(tracec.tensor(a), check_errors=True)


def test_tensor_of_a_tensor_warns_like_torch():
    src = tracec.ones(2)
    with pytest.warns(UserWarning, match=r"To copy construct from a tensor, it is recommended "
                                         r"to use sourceTensor\.detach\(\)\.clone\(\)"):
        tracec.tensor(src)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tracec.as_tensor(src, dtype=tracec.float64)   # torch.as_tensor does not warn
        x = tracec.ones((), requires_grad=True) * 2
        with tracec.no_grad():
            float(x)                                   # nor float() without grad mode


_GRAD_FN_EXPRS = [
    "F.mse_loss(x, p)", "F.mse_loss(x, p, reduction='none')", "F.cross_entropy(x, t)",
    "F.cross_entropy(img, ti)", "F.cross_entropy(img, ti, reduction='none')",
    "F.nll_loss(x.log_softmax(1), t, reduction='sum')", "F.cross_entropy(x, t, weight=w)",
    "F.cross_entropy(x, t, label_smoothing=0.1)", "F.cross_entropy(x, p.softmax(1), reduction='sum')",
    "F.binary_cross_entropy(x.sigmoid(), p)", "F.binary_cross_entropy_with_logits(x, p)",
    "F.smooth_l1_loss(x, p)", "F.huber_loss(x, p)", "F.l1_loss(x, p)", "F.soft_margin_loss(x, p)",
    "F.conv2d(img, img[:, :, :3, :3])",     "F.max_pool2d(img, 2)", "F.avg_pool2d(img, 2)", "F.layer_norm(x, (3,))",
    "F.group_norm(img, 3)", "F.batch_norm(img, None, None, training=True)", "F.embedding(t, x)",
    "F.elu(x)", "F.leaky_relu(x, 0.2)", "F.softplus(x)", "F.hardtanh(x)", "F.logsigmoid(x)",
    "2 - x", "lib.rsub(x, p)", "2 / x", "2 ** x", "x ** 2", "x ** p", "lib.pow(2, x)",
    "lib.nn.MSELoss()(x, p)", "lib.nn.CrossEntropyLoss()(x, t)", "lib.nn.LeakyReLU(0.1)(x)",
    "x[0]", "x[:, 0]", "x[0, 1:]", "x[1:, 0]", "x[1:]", "x[None]", "x[..., None]", "x[None, 0]",
    "x[0, None]", "x[:]", "x[...]", "x[:, None, :]", "x[1:2, None]", "x[-1]", "img[0, :, 1]",
    "list(x)[1]", "x.unbind(1)[0]", "x.split([1, 2], 1)[0]", "x.split(2)[1]", "x.chunk(2)[0]",
]


@pytest.mark.parametrize("expr", _GRAD_FN_EXPRS)
def test_grad_fn_names_match_torch(expr):
    names = []
    for lib in (tracec, torch):
        F = lib.nn.functional  # noqa: F841 (used by eval)
        g = np.random.default_rng(0)
        x = lib.tensor(g.random((4, 3), dtype=np.float32), requires_grad=True)  # noqa: F841
        p = lib.tensor(g.random((4, 3), dtype=np.float32))  # noqa: F841
        t = lib.tensor([0, 1, 2, 0])  # noqa: F841
        w = lib.ones(3)  # noqa: F841
        img = lib.tensor(g.random((2, 3, 4, 4), dtype=np.float32), requires_grad=True)  # noqa: F841
        ti = lib.zeros(2, 4, 4, dtype=lib.long)  # noqa: F841
        names.append(str(eval(expr).grad_fn).split(" ")[0])
    assert names[0] == names[1]


def test_inplace_activation_does_not_rename_its_input():
    x = tracec.rand(3, requires_grad=True) * 1
    before = x.grad_fn
    y = tracec.nn.functional.leaky_relu(x, 0.2, True)
    assert y is x and "LeakyReluBackward0" not in str(y.grad_fn) and before.name() == "MulBackward0"


def test_boolean_mask_fill_inside_compile_equals_eager():
    def norm(deg, w):
        d = deg.pow(-0.5)
        d[d == float("inf")] = 0
        out = d[:, None] * w
        out[out < 0.1] = torch_like_value
        return out
    torch_like_value = tracec.tensor(-1.0)
    deg = tracec.tensor([0.0, 1.0, 4.0, 0.0, 9.0])
    w = tracec.rand(5, 3)
    want = norm(deg.clone(), w)
    got = tracec.compile(norm)(deg.clone(), w)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    r = torch.tensor(deg.numpy()).pow(-0.5)
    r[r == float("inf")] = 0
    r = r[:, None] * torch.tensor(w.numpy())
    r[r < 0.1] = -1.0
    np.testing.assert_array_equal(got.numpy(), r.numpy())


def test_compile_called_as_torch_falls_back_to_eager_on_a_graph_break():
    import sys
    names = sys.modules["tracec.dtypes"].PUBLIC_NAME   # "torch" once installed as torch
    old = names[0]
    names[0] = "torch"
    try:
        _graph_break_checks()
    finally:
        names[0] = old


def _graph_break_checks():

    def f(x):
        return tracec.bincount(x, minlength=4).float() * 2

    x = tracec.tensor([0, 1, 1, 3])
    with pytest.warns(UserWarning, match="running eagerly"):
        got = tracec.compile(f)(x)
    np.testing.assert_array_equal(got.numpy(), [2.0, 4.0, 0.0, 2.0])
    with pytest.raises(tracec.TraceError, match="bincount"):
        tracec.compile(f, fullgraph=True)(x)


def test_set_grad_enabled_is_a_context_manager_and_decorator_like_torch():
    for lib in (tracec, torch):
        x = lib.ones(2, requires_grad=True)
        seen = []
        with lib.set_grad_enabled(False):
            seen.append((x * 2).requires_grad)
        seen.append(lib.is_grad_enabled())
        lib.set_grad_enabled(False)
        seen.append(lib.is_grad_enabled())
        lib.set_grad_enabled(True)

        @lib.set_grad_enabled(False)
        def f():
            return lib.is_grad_enabled()
        seen += [lib.is_grad_enabled(), f(), lib.is_grad_enabled()]
        with lib.no_grad():
            with lib.set_grad_enabled(True):
                seen.append((x * 2).requires_grad)
            seen.append(lib.is_grad_enabled())
        assert seen == [False, True, False, True, False, True, True, False], lib.__name__


def test_variable_is_the_legacy_wrapper_of_torch():
    from tracec.autograd import Variable
    x = tracec.ones(2, requires_grad=True) * 2
    v = Variable(x)
    assert not v.requires_grad and v.grad_fn is None and isinstance(x, Variable)
    v.add_(1)                                  # shares memory, as torch's detach()
    assert x.detach().tolist() == [3.0, 3.0]
    w = Variable(tracec.ones(2), requires_grad=True)
    assert w.requires_grad and w.is_leaf
    assert tuple(Variable().shape) == (0,)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0])
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(tracec.ones(1), volatile=True)


def test_autograd_grad_takes_only_inputs_like_torch():
    outs = []
    for lib in (tracec, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x ** 3).sum()
        g, = lib.autograd.grad(y, x, None, True, True, True)   # ..., only_inputs=True
        gg, = lib.autograd.grad(g.sum(), x, only_inputs=True)
        outs.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0])
    np.testing.assert_allclose(outs[0][1], outs[1][1])


def test_func_jvp_and_stack_module_state_match_torch():
    rng = np.random.default_rng(5)
    x, v = rng.standard_normal(6), rng.standard_normal(6)
    outs = []
    for lib in (tracec, torch):
        f = lambda t: (t.sin() * t).sum()  # noqa: E731
        val, jv = lib.func.jvp(lambda t: t.tanh() * t, (lib.tensor(x),), (lib.tensor(v),))
        hvp = lib.func.jvp(lib.func.grad(f), (lib.tensor(x),), (lib.tensor(v),))[1]
        lib.manual_seed(0)
        models = [lib.nn.Linear(3, 2) for _ in range(3)]
        params, buffers = lib.func.stack_module_state(models)
        outs.append((val.numpy(), jv.numpy(), hvp.numpy(),
                     {k: (tuple(p.shape), p.requires_grad, p.is_leaf) for k, p in params.items()},
                     buffers))
        with pytest.raises(RuntimeError, match="Expected at least one model"):
            lib.func.stack_module_state([])
    for a, b in zip(outs[0][:3], outs[1][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    assert outs[0][3] == outs[1][3] and outs[0][4] == outs[1][4] == {}


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_legacy_amp_spellings_warn_deprecation_like_torch(device):
    amp = getattr(tracec, device).amp
    with pytest.warns(FutureWarning, match=rf"`torch.{device}.amp.GradScaler\(args...\)` is "
                                           rf"deprecated. Please use `torch.amp.GradScaler\('{device}'"):
        amp.GradScaler(enabled=False)
    with pytest.warns(FutureWarning, match=rf"`torch.{device}.amp.autocast\(args...\)` is "
                                           rf"deprecated. Please use `torch.amp.autocast\('{device}'"):
        with amp.autocast(enabled=False):
            pass


def test_sync_batchnorm_without_a_process_group_is_batchnorm_like_torch():
    x = np.random.default_rng(7).standard_normal((3, 4, 2, 2)).astype(np.float32)
    outs = []
    for lib in (tracec, torch):
        net = lib.nn.Sequential(lib.nn.Conv2d(4, 4, 1, bias=False), lib.nn.BatchNorm2d(4))
        with lib.no_grad():
            net[0].weight.copy_(lib.eye(4).view(4, 4, 1, 1))
        bn = net[1]
        net = lib.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        assert type(net[1]).__name__ == "SyncBatchNorm" and net[1].weight is bn.weight
        y = net(lib.tensor(x))
        net.eval()
        outs.append((y.detach().numpy(), net(lib.tensor(x)).detach().numpy(),
                     net[1].running_var.numpy(), repr(net[1]), list(net.state_dict())))
        with pytest.raises(ValueError, match="expected at least 2D input"):
            lib.nn.SyncBatchNorm(4)(lib.ones(4))
    for a, b in zip(outs[0][:3], outs[1][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert outs[0][3:] == outs[1][3:]


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window"])
@pytest.mark.parametrize("length,periodic,dtype", [(7, True, "float32"), (8, False, "float32"),
                                                   (5, True, "float64"), (1, True, "float32"),
                                                   (0, False, "float32")])
def test_windows_match_torch(name, length, periodic, dtype):
    got = getattr(tracec, name)(length, periodic, dtype=getattr(tracec, dtype))
    want = getattr(torch, name)(length, periodic, dtype=getattr(torch, dtype))
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_logspace_indices_pair_and_bernoulli_method_match_torch():
    for args, kw in (((-3, 0, 5), {}), ((0, 2, 3), {"base": 2}), ((1, 1, 1), {})):
        np.testing.assert_allclose(tracec.logspace(*args, **kw).numpy(),
                                   torch.logspace(*args, **kw).numpy(), rtol=1e-6)
    for fn in ("tril_indices", "triu_indices"):
        for r, c, o in ((3, 4, 0), (4, 3, -1), (5, 5, 2)):
            np.testing.assert_array_equal(getattr(tracec, fn)(r, c, o).numpy(),
                                          getattr(torch, fn)(r, c, o).numpy())
    from tracec.nn.modules.utils import _pair, _quadruple, _reverse_repeat_tuple
    assert (_pair(3), _pair((1, 2)), _quadruple(0), _reverse_repeat_tuple((1, 2), 2)) == \
        ((3, 3), (1, 2), (0, 0, 0, 0), (2, 2, 1, 1))
    b = tracec.full((2000,), 0.25).bernoulli()
    assert b.dtype is tracec.float32 and abs(b.mean().item() - 0.25) < 0.05
    assert tracec.zeros(3).bernoulli(1.0).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="p_in >= 0"):
        tracec.full((2,), 2.0).bernoulli()


def _dist_values(lib, make, value):
    d = make(lib)
    v = lib.tensor(value)
    out = [d.log_prob(v)]
    for attr in ("mean", "variance", "entropy", "cdf"):
        try:
            x = getattr(d, attr)
            out.append(x(v) if attr == "cdf" else x() if callable(x) else x)
        except NotImplementedError:
            out.append(None)
    return out, d


@pytest.mark.parametrize("make,value", [
    (lambda L: L.distributions.Exponential(L.tensor([0.5, 2.0])), [[0.3, 1.7], [2.0, 0.0]]),
    (lambda L: L.distributions.Laplace(L.tensor([0.0, 1.0]), L.tensor([1.0, 0.5])),
     [[0.3, -1.7], [2.0, 1.0]]),
    (lambda L: L.distributions.LogNormal(L.tensor([0.0, 1.0]), L.tensor([1.0, 0.5])),
     [[0.3, 1.7], [2.0, 4.0]]),
    (lambda L: L.distributions.TransformedDistribution(
        L.distributions.Normal(L.tensor([0.2, -0.4]), L.tensor([1.0, 0.7])),
        [L.distributions.transforms.TanhTransform(),
         L.distributions.transforms.AffineTransform(1.0, 2.0)]), [[0.5, -0.9], [2.5, 1.0]]),
    (lambda L: L.distributions.TransformedDistribution(
        L.distributions.Normal(L.tensor([0.2]), L.tensor([1.0])),
        L.distributions.transforms.SigmoidTransform()), [[0.25], [0.75]]),
])
def test_transformed_and_simple_distributions_match_torch(make, value):
    (got, d1), (want, d2) = (_dist_values(tracec, make, value), _dist_values(torch, make, value))
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-6, atol=1e-6)
    assert tuple(d1.batch_shape) == tuple(d2.batch_shape) and repr(d1.support) == repr(d2.support)
    s = d1.rsample((3,))
    assert tuple(s.shape) == (3,) + tuple(d2.batch_shape)


def test_sac_tanh_squashed_policy_log_prob_uses_the_cached_pre_tanh_value():
    D = tracec.distributions
    loc = tracec.zeros(4, requires_grad=True)
    dist = D.TransformedDistribution(D.Normal(loc, tracec.ones(4) * 3.0),
                                     D.transforms.TanhTransform(cache_size=1))
    a = dist.rsample()
    lp = dist.log_prob(a)                      # no atanh: finite even where tanh saturates
    assert bool(tracec.isfinite(lp).all())
    lp.sum().backward()
    assert loc.grad is not None and tuple(loc.grad.shape) == (4,)
