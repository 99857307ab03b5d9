"""Differential tests against PyTorch: autograd.functional, tracec.func /
vmap, optim.swa_utils, module backward hooks, in-place random methods."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.random(3)
B = RNG.random(3)
M = RNG.random((4, 3, 2))


def both(*arrays):
    return ([tracec.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays])


def close(a, b, atol=1e-6):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, atol)
    elif b is None:
        assert a is None
    else:
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol)


# --- autograd.functional ----------------------------------------------------------

def _two(x, y):
    return x * y.sin(), (x ** 2).sum() * y


@pytest.mark.parametrize("fn, args", [(_two, (A, B)), (lambda x: x.exp() * x[0], (A,)),
                                      (lambda x, y: (x * y).sum(), (A, B))])
def test_jacobian_matches_torch(fn, args):
    import tracec.autograd.functional as AF
    import torch.autograd.functional as TF
    ta, pa = both(*args)
    single = len(args) == 1
    close(AF.jacobian(fn, ta[0] if single else tuple(ta)),
          TF.jacobian(fn, pa[0] if single else tuple(pa)))


def test_jacobian_strict_and_create_graph():
    from tracec.autograd.functional import jacobian
    x = tracec.tensor(A)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        jacobian(lambda a, b: a * 2, (x, tracec.tensor(B)), strict=True)
    zeros = jacobian(lambda a, b: a * 2, (x, tracec.tensor(B)))[1]
    assert not zeros.numpy().any()
    xr = tracec.tensor(A, requires_grad=True)
    j = jacobian(lambda a: a ** 3, xr, create_graph=True)
    assert j.requires_grad and not jacobian(lambda a: a ** 3, xr).requires_grad
    j.sum().backward()
    xt = torch.tensor(A, requires_grad=True)
    torch.autograd.functional.jacobian(lambda a: a ** 3, xt, create_graph=True).sum().backward()
    close(xr.grad, xt.grad)


def test_hessian_vjp_jvp_hvp_vhp_match_torch():
    import tracec.autograd.functional as AF
    import torch.autograd.functional as TF
    f = lambda x, y: (x ** 2 * y.exp()).sum()  # noqa: E731
    g = lambda x, y: x * y.exp()  # noqa: E731
    ta, pa = both(A, B)
    tv, pv = both(B, A)
    close(AF.hessian(f, tuple(ta)), TF.hessian(f, tuple(pa)))
    close(AF.hessian(lambda x: (x ** 3).prod(), ta[0]), TF.hessian(lambda x: (x ** 3).prod(), pa[0]))
    close(AF.vjp(g, tuple(ta), tv[0]), TF.vjp(g, tuple(pa), pv[0]))
    close(AF.jvp(g, tuple(ta), tuple(tv)), TF.jvp(g, tuple(pa), tuple(pv)))
    close(AF.hvp(f, tuple(ta), tuple(tv)), TF.hvp(f, tuple(pa), tuple(pv)))
    close(AF.vhp(f, tuple(ta), tuple(tv)), TF.vhp(f, tuple(pa), tuple(pv)))


# --- tracec.func ------------------------------------------------------------------

def test_grad_argnums_has_aux_and_nesting():
    import tracec.func as F
    import torch.func as TF
    f = lambda x, y: ((x.sin() * y).sum(), x.cos())  # noqa: E731
    ta, pa = both(A, B)
    close(F.grad(f, argnums=(0, 1), has_aux=True)(*ta), TF.grad(f, argnums=(0, 1), has_aux=True)(*pa))
    close(F.grad_and_value(f, 1, has_aux=True)(*ta), TF.grad_and_value(f, 1, has_aux=True)(*pa))
    h = lambda x: (x ** 3).sum()  # noqa: E731
    close(F.grad(lambda x: F.grad(h)(x).sum())(ta[0]), TF.grad(lambda x: TF.grad(h)(x).sum())(pa[0]))
    assert not F.grad(h)(ta[0]).requires_grad


def test_vjp_jacrev_jacfwd_hessian():
    import tracec.func as F
    import torch.func as TF
    f = lambda x, y: (x * y.exp(), x.sum())  # noqa: E731
    ta, pa = both(A, B)
    (o, fn), (po, pfn) = F.vjp(f, *ta), TF.vjp(f, *pa)
    close(o, po)
    close(fn((ta[1], tracec.tensor(2.0, dtype=tracec.float64))),
          pfn((pa[1], torch.tensor(2.0, dtype=torch.float64))))
    close(F.jacrev(f, argnums=(0, 1))(*ta), TF.jacrev(f, argnums=(0, 1))(*pa))
    close(F.jacfwd(f, 1)(*ta), TF.jacfwd(f, 1)(*pa))
    g = lambda x, y: (x.sin() * y ** 2).sum()  # noqa: E731
    close(F.hessian(g, argnums=1)(*ta), TF.hessian(g, argnums=1)(*pa))


def test_vmap_in_out_dims_and_nested():
    import torch.func as TF
    ta, pa = both(M, B[:2])
    mm = lambda x, w: x @ w  # noqa: E731
    close(tracec.vmap(mm, in_dims=(0, None))(*ta), torch.vmap(mm, in_dims=(0, None))(*pa))
    close(tracec.func.vmap(mm, in_dims=(2, None), out_dims=1)(ta[0], tracec.tensor(B)),
          TF.vmap(mm, in_dims=(2, None), out_dims=1)(pa[0], torch.tensor(B)))
    s = lambda x: (x.sum(), x * 2)  # noqa: E731
    close(tracec.vmap(tracec.vmap(s), in_dims=1, out_dims=(0, 1))(ta[0]),
          torch.vmap(torch.vmap(s), in_dims=1, out_dims=(0, 1))(pa[0]))
    # per-example gradients, the usual use
    w_t, w_p = tracec.tensor(B[:2]), torch.tensor(B[:2])
    loss = lambda w, x: (x @ w).pow(2).sum()  # noqa: E731
    close(tracec.vmap(tracec.func.grad(loss), in_dims=(None, 0))(w_t, ta[0]),
          torch.vmap(TF.grad(loss), in_dims=(None, 0))(w_p, pa[0]))
    with pytest.raises(ValueError, match="same size"):
        tracec.vmap(mm)(ta[0], tracec.tensor(M[:2]))


def test_functional_call_reexport():
    import tracec.func as F
    lin = tracec.nn.Linear(3, 2)
    w = tracec.ones(2, 3)
    out = F.functional_call(lin, {"weight": w, "bias": tracec.zeros(2)}, (tracec.ones(1, 3),))
    assert out.numpy().tolist() == [[3.0, 3.0]]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.functional_call(lin, ({"weight": w}, {"bias": tracec.ones(2)}), tracec.ones(1, 3))
    assert lin.weight is not w


# --- swa_utils ----------------------------------------------------------------------

def _swa_run(T, kind):
    su = T.optim.swa_utils
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.BatchNorm1d(4))
    kw = {"ema": dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.9)),
          "avg": dict(avg_fn=su.get_ema_avg_fn(0.8), use_buffers=True),
          "swa": {}, "swafn": dict(avg_fn=su.get_swa_avg_fn())}[kind]
    swa = su.AveragedModel(m, **kw)
    opt = T.optim.SGD(m.parameters(), lr=0.5)
    sched = su.SWALR(opt, swa_lr=0.05, anneal_epochs=3,
                     anneal_strategy="linear" if kind == "ema" else "cos")
    x = T.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
    lrs = []
    for k in range(4):
        with T.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(T.tensor(np.sin(np.arange(p.numel()) * (k + 1) + i)
                                 .reshape(tuple(p.shape)).astype(np.float32)))
        m(x * (k + 1))  # moves the batch-norm buffers
        opt.step()
        swa.update_parameters(m)
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    before = {k: v.detach().numpy().copy() for k, v in swa.state_dict().items()}
    su.update_bn([(x, 0), (x * 2, 1)], swa)
    after = {k: v.detach().numpy() for k, v in swa.state_dict().items()}
    return before, after, lrs, swa.module[1].momentum


@pytest.mark.parametrize("kind", ["swa", "swafn", "ema", "avg"])
def test_swa_utils_match_torch(kind):
    a = _swa_run(tracec, kind)
    b = _swa_run(torch, kind)
    for mine, theirs in zip(a[:2], b[:2]):
        assert list(mine) == list(theirs)
        for k in mine:
            np.testing.assert_allclose(mine[k], theirs[k], rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(a[2], b[2])
    assert a[3] == b[3] == 0.1


# --- backward hooks -----------------------------------------------------------------

def _gradcam(T):
    conv = T.nn.Conv2d(2, 3, 3)
    model = T.nn.Sequential(conv, T.nn.ReLU(), T.nn.Flatten(), T.nn.Linear(48, 2))
    lin = model[3]
    with T.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(T.tensor(np.sin(np.arange(p.numel()) + i).reshape(tuple(p.shape))
                             .astype(np.float32)))
    got, calls = {}, []
    conv.register_full_backward_hook(lambda mod, gi, go: got.update(conv=(gi, go)))
    lin.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    h = lin.register_full_backward_hook(lambda mod, gi, go: got.update(lin=(gi, go)))
    model[1].register_backward_hook(lambda mod, gi, go: calls.append(len(gi)))
    x = T.tensor(np.cos(np.arange(144)).reshape(2, 2, 6, 6).astype(np.float32))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(x)[:, 1].sum().backward()
        h.remove()
        model(x).sum().backward()
    return got, calls, conv.weight.grad


def test_full_backward_hooks_gradcam_match_torch():
    (a, ca, wa), (b, cb, wb) = _gradcam(tracec), _gradcam(torch)
    assert a["conv"][0] == (None,) and b["conv"][0] == (None,)
    close(a["conv"][1], b["conv"][1], 1e-5)      # Grad-CAM's activation gradient
    close(a["lin"], b["lin"], 1e-5)
    close(wa, wb, 1e-4)                          # the pre-hook's doubling flowed on
    assert ca == cb == [1, 1]


def test_backward_hook_replaces_grad_input():
    lin = tracec.nn.Linear(3, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0 + 7,))
    x = tracec.ones(1, 3, requires_grad=True)
    lin(x).sum().backward()
    assert x.grad.numpy().tolist() == [[7.0, 7.0, 7.0]]


# --- in-place random methods ---------------------------------------------------------

N = 20000


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inplace_random_moments(dtype):
    tracec.manual_seed(1)
    x = tracec.empty(N // 100, 100, dtype=getattr(tracec, dtype))
    b = x.bernoulli_(0.3).numpy()
    assert set(np.unique(b)) <= {0, 1} and abs(b.mean() - 0.3) < 0.02
    e = x.exponential_(2.0).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02 and abs(e.std() - 0.5) < 0.03
    g = x.geometric_(0.25).numpy()
    assert g.min() >= 1 and np.all(g == np.round(g)) and abs(g.mean() - 4) < 0.15
    c = x.cauchy_(1.0, 2.0).numpy()
    q = np.quantile(c, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(q, [-1.0, 1.0, 3.0], atol=0.15)
    ln = x.log_normal_(0.5, 0.4).numpy()
    assert ln.min() > 0 and abs(np.log(ln).mean() - 0.5) < 0.02 and abs(np.log(ln).std() - 0.4) < 0.02
    assert x.dtype == getattr(tracec, dtype) and tuple(x.shape) == (N // 100, 100)


def test_inplace_random_integers_and_checks():
    r = tracec.empty(N, dtype=tracec.int64).random_(3, 9).numpy()
    assert set(np.unique(r)) == set(range(3, 9))
    assert set(np.unique(tracec.empty(N, dtype=tracec.int32).random_(4).numpy())) == {0, 1, 2, 3}
    f = tracec.empty(N).random_().numpy()
    assert f.min() >= 0 and f.max() <= 2 ** 24 and np.all(f == np.round(f)) and f.max() > 2 ** 23
    i8 = tracec.empty(N, dtype=tracec.int8).random_().numpy()
    assert i8.min() >= 0 and i8.max() == 127
    pt = tracec.empty(N).bernoulli_(tracec.tensor([0.0, 1.0]).repeat(N // 2)).numpy()
    assert pt[0::2].sum() == 0 and pt[1::2].sum() == N // 2
    for bad in (lambda: tracec.empty(3).exponential_(-1), lambda: tracec.empty(3).geometric_(1.5),
                lambda: tracec.empty(3).random_(5, 2),
                lambda: tracec.empty(3, dtype=tracec.int64).cauchy_()):
        with pytest.raises(RuntimeError):
            bad()


def test_transforms_trace_inside_compile():
    f = tracec.compile(lambda x: tracec.func.grad(lambda y: (y * y * y).sum())(x))
    f(tracec.ones(3))
    np.testing.assert_allclose(f(tracec.tensor([1.0, 2.0, -3.0])).numpy(), [3.0, 12.0, 27.0])


def test_replace_all_batch_norm_modules_then_vmap_over_a_model_batch():
    """torch.func's per-model-batch recipe: batch norms switched to batch
    statistics (no running buffers), then vmap of functional_call, as torch."""
    x = np.random.default_rng(1).standard_normal((3, 5, 3, 6, 6)).astype(np.float32)
    weights = None
    results = []
    for lib in (torch, tracec):
        nn = lib.nn
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(64, 2), nn.BatchNorm1d(2))
        if weights is None:
            weights = {k: v.detach().numpy() for k, v in m.state_dict().items()}
        m.load_state_dict({k: lib.tensor(v) for k, v in weights.items()})
        assert lib.func.replace_all_batch_norm_modules_(m) is m
        bns = [b for b in m.modules() if isinstance(b, nn.modules.batchnorm._BatchNorm)]
        assert len(bns) == 2 and all(b.running_mean is None and b.num_batches_tracked is None
                                     and not b.track_running_stats for b in bns)
        params = {k: v.detach() for k, v in m.named_parameters()}
        out = lib.func.vmap(lambda xb: lib.func.functional_call(m, params, (xb,)))(lib.tensor(x))
        results.append((sorted(m.state_dict()), out.detach().numpy()))
    assert results[1][0] == results[0][0]
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-4, atol=1e-5)

def test_increment_version_bumps_each_tensor_once_per_mention():
    t = tracec.zeros(3)
    v = t._version
    tracec.autograd.graph.increment_version(t)
    tracec.autograd.graph.increment_version([t, t])
    assert t._version == v + 3
    with tracec.inference_mode():
        u = tracec.zeros(2)
    tracec.autograd.graph.increment_version(u)      # no counter: nothing to bump, no error
