"""Differences from torch 2.13 found by running torch's own OpInfo samples
(``torch.testing._internal.common_methods_invocations.op_db``) through
tracec: each case below failed (wrong values, wrong shapes, a missing
gradient or an exception) before its fix."""
import numpy as np
import pytest
import torch

import tracec

RNG = np.random.default_rng(0)


def _np(v):
    return v.detach().numpy() if hasattr(v, "detach") else np.asarray(v)


def _same(a, b, tol=1e-6):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v, tol)
        return
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(b), _np(a), rtol=tol, atol=tol)


ZERO_D = {
    "softmax": lambda T, a: T.softmax(a, 0),
    "log_softmax": lambda T, a: T.log_softmax(a, -1),
    "softmax_dtype": lambda T, a: T.softmax(a, 0, dtype=T.float64),
    "softmin": lambda T, a: T.nn.functional.softmin(a, 0),
    "logsumexp": lambda T, a: T.logsumexp(a, (0,), True),
    "vector_norm_keepdim": lambda T, a: T.linalg.vector_norm(a, 2, 0, True),
    "normalize": lambda T, a: T.nn.functional.normalize(a, 2, 0),
    "quantile_keepdim": lambda T, a: T.quantile(a, 0.5, dim=0, keepdim=True),
    "flip": lambda T, a: a.flip(0),
    "gather": lambda T, a: a.gather(0, T.tensor(0)),
    "vander": lambda T, a: T.linalg.vander(a, N=3),
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_zero_dim_inputs_as_torch(name):
    f = ZERO_D[name]
    _same(f(torch, torch.tensor(1.5)), f(tracec, tracec.tensor(1.5)))


def test_zero_dim_softmax_gradient():
    a, b = torch.tensor(0.3, requires_grad=True), tracec.tensor(0.3, requires_grad=True)
    torch.log_softmax(a, 0).backward()
    tracec.log_softmax(b, 0).backward()
    _same(a.grad, b.grad)


def test_cov_and_corrcoef_of_one_variable_are_0d():
    x = RNG.standard_normal((1, 5)).astype(np.float32)
    _same(torch.cov(torch.tensor(x)), tracec.cov(tracec.tensor(x)), 1e-5)
    _same(torch.corrcoef(torch.tensor(x)), tracec.corrcoef(tracec.tensor(x)), 1e-5)


def test_cosine_similarity_norms_the_broadcast_operands():
    a = RNG.standard_normal((1, 2, 3)).astype(np.float32)
    b = RNG.standard_normal((2, 1, 3)).astype(np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ca, cb = tracec.tensor(a, requires_grad=True), tracec.tensor(b, requires_grad=True)
    yt = torch.nn.functional.cosine_similarity(ta, tb, dim=-2)
    yc = tracec.nn.functional.cosine_similarity(ca, cb, dim=-2)
    _same(yt, yc, 1e-5)
    yt.sum().backward()
    yc.sum().backward()
    _same(ta.grad, ca.grad, 1e-5)
    _same(tb.grad, cb.grad, 1e-5)


@pytest.mark.parametrize("pad", [(-1, 1), (1, -1), (-2, 1), (-1, 2), (2, -2), (-2, -1),
                                 (-1, 1, -2, 1)])
def test_circular_pad_with_negative_amounts_crops_first(pad):
    lead = (1, 3) if len(pad) == 2 else (1, 3, 4)      # torch's supported ranks

    def data(w):
        return np.arange(float(np.prod(lead) * w), dtype=np.float32).reshape(lead + (w,))
    x = data(4)
    want = torch.nn.functional.pad(torch.tensor(x), pad, "circular")
    _same(want, tracec.nn.functional.pad(tracec.tensor(x), pad, "circular"))
    f = tracec.compile(lambda t: tracec.nn.functional.pad(t, pad, "circular"), dynamic=True)
    for w in (4, 4, 6):          # a symbolic width too
        _same(torch.nn.functional.pad(torch.tensor(data(w)), pad, "circular"),
              f(tracec.tensor(data(w))))


def test_istft_of_a_two_sided_spectrum_reads_it_one_sided():
    c = (RNG.standard_normal((10, 2)) + 1j * RNG.standard_normal((10, 2))).astype(np.complex64)
    _same(torch.istft(torch.tensor(c), n_fft=10), tracec.istft(tracec.tensor(c), n_fft=10), 1e-5)
    _same(torch.istft(torch.tensor(c), n_fft=10, return_complex=True),
          tracec.istft(tracec.tensor(c), n_fft=10, return_complex=True), 1e-5)


@pytest.mark.parametrize("name", ["i1", "i1e"])
def test_bessel_i1_gradient_at_zero(name):
    x = np.array([-40, -3, -0.5, 0, 0.5, 3, 40.0])
    a, b = torch.tensor(x, requires_grad=True), tracec.tensor(x, requires_grad=True)
    ya, yb = getattr(torch.special, name)(a), getattr(tracec.special, name)(b)
    _same(ya, yb, 1e-12)
    ya.sum().backward()
    yb.sum().backward()
    _same(a.grad, b.grad, 1e-12)


def test_lu_factor_unpack_and_solve_are_differentiable():
    A = RNG.standard_normal((2, 4, 4))
    B = RNG.standard_normal((2, 4, 3))
    G = RNG.standard_normal((2, 4, 4))
    grads = {}
    for T in (torch, tracec):
        a, b = T.tensor(A, requires_grad=True), T.tensor(B, requires_grad=True)
        LU, piv = T.linalg.lu_factor(a)
        (LU * T.tensor(G)).sum().backward()
        g_factor = _np(a.grad).copy()
        a.grad = None
        for adjoint in (False, True):
            LU, piv = T.linalg.lu_factor(a)
            x = T.linalg.lu_solve(LU, piv, b, adjoint=adjoint)
            (x * x).sum().backward()
        LU, piv = T.linalg.lu_factor(a)
        x = T.linalg.lu_solve(LU, piv, b.mT @ T.ones(2, 4, 4, dtype=T.float64), left=False)
        (x * x).sum().backward()
        P, L, U = T.linalg.lu(a)
        (L.sum() + (U * U).sum()).backward()
        grads[T.__name__] = (g_factor, _np(a.grad), _np(b.grad))
    for u, v in zip(grads["torch"], grads["tracec"]):
        np.testing.assert_allclose(v, u, rtol=1e-9, atol=1e-9)


def test_small_signature_gaps():
    x, t = tracec.tensor(1.5), torch.tensor(1.5)
    _same(torch.scalar_tensor(2.0, dtype=torch.float64, requires_grad=True),
          tracec.scalar_tensor(2.0, dtype=tracec.float64, requires_grad=True))
    assert tracec.scalar_tensor(2.0, requires_grad=True).requires_grad
    # positional non_blocking and copy, as torch's Tensor.to
    _same(t.to("cpu", torch.float64, True, True), x.to("cpu", tracec.float64, True, True))
    assert x.to(tracec.float32, copy=True) is not x and x.to(tracec.float32) is x
    assert x.to("cpu", tracec.float32, False, True) is not x
    _same(torch.gradient(torch.arange(5.0) ** 2, spacing=None)[0],
          tracec.gradient(tracec.arange(5.0) ** 2, spacing=None)[0])
    # out of place, masked_scatter broadcasts the input with the mask
    _same(torch.zeros(5).masked_scatter(torch.ones(5, 5) > 0, torch.arange(25.0).reshape(5, 5)),
          tracec.zeros(5).masked_scatter(tracec.ones(5, 5) > 0,
                                         tracec.arange(25.0).reshape(5, 5)))


@pytest.mark.parametrize("kw", [{}, dict(reduction="sum"), dict(reduction="none"),
                                dict(label_smoothing=0.1), dict(options=True),
                                dict(options=True, reduction="none")])
def test_linear_cross_entropy_as_torch(kw):
    """torch 2.13's F.linear_cross_entropy (the chunked options compute the
    reference loss), values and every gradient; compiled too."""
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    W = RNG.standard_normal((7, 5)).astype(np.float32)
    b = RNG.standard_normal(7).astype(np.float32)
    y = RNG.integers(0, 7, 6)
    y[2] = -100
    got = {}
    for T in (torch, tracec):
        xi, Wi, bi = (T.tensor(v, requires_grad=True) for v in (x, W, b))
        k = dict(kw, options=T.nn.LinearCrossEntropyOptions()) if "options" in kw else kw
        loss = T.nn.functional.linear_cross_entropy(xi, Wi, T.tensor(y), linear_bias=bi, **k)
        loss.sum().backward()
        got[T.__name__] = [_np(loss), _np(xi.grad), _np(Wi.grad), _np(bi.grad)]
    for u, v in zip(got["torch"], got["tracec"]):
        np.testing.assert_allclose(v, u, rtol=1e-5, atol=1e-6)
    f = tracec.compile(lambda a, w: tracec.nn.functional.linear_cross_entropy(
        a, w, tracec.tensor(y), reduction=kw.get("reduction", "mean")))
    for _ in range(2):
        np.testing.assert_allclose(_np(f(tracec.tensor(x), tracec.tensor(W))), _np(
            torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(W),
                                                     torch.tensor(y),
                                                     reduction=kw.get("reduction", "mean"))),
            rtol=1e-5, atol=1e-6)


def test_linear_cross_entropy_k_dimensional_and_errors():
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    W3 = RNG.standard_normal((7, 3, 5)).astype(np.float32)
    y3 = RNG.integers(0, 7, (6, 3))
    want = torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(W3),
                                                    torch.tensor(y3))
    got = tracec.nn.functional.linear_cross_entropy(tracec.tensor(x), tracec.tensor(W3),
                                                    tracec.tensor(y3))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for args in ((x, W3[:, :, :4], y3), (x[0], W3, y3[0]), (x[None], W3, y3)):
        msgs = []
        for T in (torch, tracec):
            with pytest.raises(RuntimeError) as e:
                T.nn.functional.linear_cross_entropy(*(T.tensor(a) for a in args))
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
    with pytest.raises(ValueError):
        tracec.nn.LinearCrossEntropyOptions(acc_policy="fast")


def test_linear_cross_entropy_loss_module_as_torch():
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    y = RNG.integers(0, 4, (6, 3))
    tm = torch.nn.LinearCrossEntropyLoss(5, 4, out_features=(3,), bias=True, label_smoothing=0.1)
    cm = tracec.nn.LinearCrossEntropyLoss(5, 4, out_features=(3,), bias=True,
                                          label_smoothing=0.1)
    assert repr(cm) == repr(tm) and list(cm.state_dict()) == list(tm.state_dict())
    cm.load_state_dict({k: tracec.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    lt, lc = tm(torch.tensor(x), torch.tensor(y)), cm(tracec.tensor(x), tracec.tensor(y))
    lt.backward()
    lc.backward()
    np.testing.assert_allclose(lc.item(), lt.item(), rtol=1e-6)
    _same(tm.linear.weight.grad, cm.linear.weight.grad, 1e-5)
    _same(tm.linear.bias.grad, cm.linear.bias.grad, 1e-5)


def test_modules_from_torchs_module_db():
    """nn.Module cases of torch's ModuleInfo samples that differed."""
    # an empty batch passes BatchNorm in training, statistics untouched
    for T in (torch, tracec):
        bn = T.nn.BatchNorm2d(5)
        x = T.zeros(0, 5, 2, 2, requires_grad=True)
        y = bn(x)
        y.sum().backward()
        assert tuple(y.shape) == (0, 5, 2, 2) and bn.running_mean.sum().item() == 0
        assert bn.weight.grad is not None
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        tracec.nn.BatchNorm1d(3)(tracec.ones(1, 3))
    # GaussianNLLLoss: a var with one broadcast dimension (homoscedastic)
    x, t, v = RNG.random((4, 3)), RNG.random((4, 3)), RNG.random((1, 3))
    np.testing.assert_allclose(
        tracec.nn.GaussianNLLLoss()(tracec.tensor(x), tracec.tensor(t), tracec.tensor(v)).item(),
        torch.nn.GaussianNLLLoss()(torch.tensor(x), torch.tensor(t), torch.tensor(v)).item())
    # fractional_max_pool3d reads its samples in ATen's T, H, W order
    x = RNG.standard_normal((2, 3, 7, 8, 9)).astype(np.float32)
    s = RNG.random((2, 3, 3)).astype(np.float32)
    want = torch.nn.functional.fractional_max_pool3d(
        torch.tensor(x), (3, 2, 2), output_size=(3, 4, 5), _random_samples=torch.tensor(s),
        return_indices=True)
    got = tracec.nn.functional.fractional_max_pool3d(
        tracec.tensor(x), (3, 2, 2), output_size=(3, 4, 5), _random_samples=tracec.tensor(s),
        return_indices=True)
    _same(want[0], got[0])
    assert (_np(want[1]) == _np(got[1])).all()


@pytest.mark.parametrize("arr", [np.array([[1, 0], [0, 3]]), np.array([1, 0, 2]), np.array(5),
                                 np.zeros((2, 0)), np.array([[0.0, 1, 2], [3, 0, 4]])])
def test_nonzero_static_as_torch(arr):
    for size, fill in ((3, -1), (1, 7), (0, -1), (6, 9)):
        want = torch.nonzero_static(torch.tensor(arr), size=size, fill_value=fill)
        got = tracec.tensor(arr).nonzero_static(size=size, fill_value=fill)
        assert tuple(got.shape) == tuple(want.shape) and (_np(got) == want.numpy()).all()


def test_nonzero_static_traces_once_and_linalg_diagonal():
    f = tracec.compile(lambda x: tracec.nonzero_static(x, size=4))
    for v in ([[1, 0], [0, 3]], [[0, 0], [5, 3]], [[1, 1], [1, 1]], [[0, 0], [0, 0]]):
        want = torch.nonzero_static(torch.tensor(v), size=4)
        assert (_np(f(tracec.tensor(v))) == want.numpy()).all()
    assert f.cache_info().traces == 1
    a = np.arange(24.0).reshape(2, 3, 4)
    _same(torch.linalg.diagonal(torch.tensor(a), offset=1),
          tracec.linalg.diagonal(tracec.tensor(a), offset=1))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_after_overlapping_windows_writes_once(nd):
    """Kernel 3, stride 2: two windows can share an argmax. The unpooled
    value is written once (it was added twice), both get its gradient."""
    x = np.random.default_rng(1).standard_normal((2, 3) + (7, 9, 5)[:nd]).astype(np.float32)
    x[..., 2::4] += 10.0       # maxima on positions two windows share
    res = {}
    for T in (torch, tracec):
        F = T.nn.functional
        pool, unpool = getattr(F, f"max_pool{nd}d"), getattr(F, f"max_unpool{nd}d")
        p, i = pool(T.tensor(x), 3, 2, return_indices=True)
        p = p.detach().requires_grad_()
        u = unpool(p, i, 3, 2, output_size=x.shape[2:])
        (u * u).sum().backward()
        res[T.__name__] = (u, p.grad, i)
    flat = _np(res["torch"][2]).reshape(6, -1)
    assert any(len(set(r)) < len(r) for r in flat)       # the case is exercised
    _same(res["torch"][0], res["tracec"][0])
    _same(res["torch"][1], res["tracec"][1])


@pytest.mark.parametrize("size", [(25, 5), (10, 2), (3, 50)])
def test_resize_inside_a_compiled_function_is_recorded(size):
    """Compiled, resize_ kept the old shape (the trace never saw it)."""
    def f(x):
        y = x * 2
        y.resize_(*size)
        return y + 1
    c = tracec.compile(f)
    x = tracec.tensor(np.arange(125.0).reshape(5, 5, 5))
    want = f(x)
    for _ in range(2):
        got = c(x)
        assert tuple(got.shape) == size
        np.testing.assert_array_equal(_np(got), _np(want))


@pytest.mark.parametrize("name,kw", [("svd_lowrank", dict(q=4)), ("svd_lowrank", dict(q=6)),
                                     ("pca_lowrank", dict(q=4)),
                                     ("pca_lowrank", dict(q=5, center=False))])
def test_lowrank_decompositions_of_a_low_rank_matrix(name, kw):
    """Random test matrices differ from torch's; for an input of rank <= q
    the decomposition is unique: the same singular values and product."""
    A = RNG.standard_normal((20, 4)) @ RNG.standard_normal((4, 12))
    Ut, St, Vt = getattr(torch, name)(torch.tensor(A), **kw)
    Uc, Sc, Vc = getattr(tracec, name)(tracec.tensor(A), **kw)
    assert tuple(Uc.shape) == tuple(Ut.shape) and tuple(Vc.shape) == tuple(Vt.shape)
    np.testing.assert_allclose(_np(Sc)[:4], St.numpy()[:4], atol=1e-9)
    np.testing.assert_allclose((_np(Uc) * _np(Sc)) @ _np(Vc).T,
                               (Ut.numpy() * St.numpy()) @ Vt.numpy().T, atol=1e-9)
    with pytest.raises(ValueError, match="must be non-negative integer"):
        tracec.pca_lowrank(tracec.tensor(A), q=13)


INT_CASES = {
    "relu6": lambda T: T.nn.functional.relu6(T.arange(-3, 9)),
    "hardtanh_float_bounds": lambda T: T.nn.functional.hardtanh(T.arange(-3, 3), -1.5, 1.7),
    "trapezoid": lambda T: T.trapezoid(T.arange(6).reshape(2, 3)),
    "trapezoid_x": lambda T: T.trapezoid(T.arange(6).reshape(2, 3), T.arange(3)),
    "trapezoid_dx": lambda T: T.trapezoid(T.arange(6).reshape(2, 3), dx=2),
    "cumulative_trapezoid": lambda T: T.cumulative_trapezoid(T.arange(6).reshape(2, 3)),
    "mvlgamma": lambda T: T.mvlgamma(T.arange(3, 8), 2),
}


@pytest.mark.parametrize("name", sorted(INT_CASES))
def test_integer_inputs_as_torch(name):
    """trapezoid and mvlgamma of integers computed in integers (all zeros,
    or wrong); relu6 of integers raised."""
    _same(INT_CASES[name](torch), INT_CASES[name](tracec), 1e-6)


def test_integer_arange_as_aten():
    import itertools
    for s, e, st in itertools.product([-8.000001, -3, 0, 0.5, 2.7, 10], [-4.0, 0, 5.5, 11.9],
                                      [1, 2, -2.5, 1.5, -1, 3]):
        for d in ("int64", "int32", "uint8"):
            try:
                want = torch.arange(s, e, st, dtype=getattr(torch, d)).tolist()
            except RuntimeError as err:
                with pytest.raises(RuntimeError, match=str(err)):
                    tracec.arange(s, e, st, dtype=getattr(tracec, d))
                continue
            assert tracec.arange(s, e, st, dtype=getattr(tracec, d)).tolist() == want, (s, e, st)


def test_namespaces_reachable_as_after_import_torch():
    """torch.nn.attention, torch.nn.modules.utils, torch.nn.common_types and
    torch.utils._pytree are attributes after ``import torch``; tracec.nn's
    ``attention`` and ``utils`` were ``modules.attention`` / ``modules.utils``
    (brought in by a star import under the same names)."""
    import subprocess
    import sys
    code = ("import tracec as torch\n"
            "with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH): pass\n"
            "assert torch.nn.modules.utils._pair(3) == (3, 3)\n"
            "torch.nn.utils.clip_grad_value_([torch.ones(2, requires_grad=True)], 1.0)\n"
            "torch.nn.common_types._size_2_t\n"
            "assert torch.utils._pytree.tree_map(lambda v: v + 1, [1, (2,)]) == [2, (3,)]\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_outputs_per_driver(driver):
    """Residuals, rank and singular values as each of torch's cpu drivers
    gives them (tracec gave gelsy's for every driver)."""
    for sa, sb in (((2, 3), (2, 3)), ((4, 3), (4, 3)), ((2, 4, 3), (2, 4, 3)), ((4, 3), (4,))):
        A, B = RNG.standard_normal(sa), RNG.standard_normal(sb)
        want = torch.linalg.lstsq(torch.tensor(A), torch.tensor(B), driver=driver)
        got = tracec.linalg.lstsq(tracec.tensor(A), tracec.tensor(B), driver=driver)
        for u, v in zip(want, got):
            _same(u, v, 1e-9)
    with pytest.raises(RuntimeError, match="should be one of"):
        tracec.linalg.lstsq(tracec.ones(3, 2), tracec.ones(3, 1), driver="gesv")


def test_number_over_tensor_rounds_as_torchs_reciprocal_product():
    x = (RNG.random(2000) * 300 + 0.1).astype(np.float32)
    for c in (1, 255, 2.5, 7):
        np.testing.assert_array_equal((c / tracec.tensor(x)).numpy(), (c / torch.tensor(x)).numpy())
    xi = RNG.integers(1, 100, 50)
    _same(3 / torch.tensor(xi), 3 / tracec.tensor(xi), 0)
    a, b = torch.tensor(x[:5], requires_grad=True), tracec.tensor(x[:5], requires_grad=True)
    (2 / a).sum().backward()
    (2 / b).sum().backward()
    _same(a.grad, b.grad, 1e-6)
    assert (2 / b).grad_fn.name() == (2 / a).grad_fn.name()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss_of_a_0d_input_is_one_class(reduction):
    """A 0-d input is one class, as PyTorch reads it (tracec refused it);
    found by the compiled OpInfo sweep."""
    for T in (torch, tracec):
        x = T.tensor(0.3, requires_grad=True)
        out = T.nn.functional.multi_margin_loss(x, T.tensor(0), reduction=reduction)
        assert out.shape == () and float(out) == 0.0
        out.sum().backward()
        assert float(x.grad) == 0.0


def test_kl_div_of_a_negative_target_is_nan_as_xlogy_makes_it():
    """PyTorch composes kl_div as ``xlogy(t, t) - t * input``: a negative
    target gives NaN, not a finite loss (tracec gave ``-t * input``).
    The one difference left: the target's gradient at exactly 0 (NaN in
    PyTorch, from xlogy's ``other`` derivative 0/0)."""
    t0, x0 = [-0.5, 0.0, 0.5, 2.0], [0.1, 0.2, 0.3, -1.0]
    res = []
    for T in (torch, tracec):
        t, x = T.tensor(t0, requires_grad=True), T.tensor(x0, requires_grad=True)
        loss = T.nn.functional.kl_div(x, t, reduction="none")
        loss.sum().backward()
        res.append((loss.detach().numpy(), t.grad.numpy(), x.grad.numpy()))
    (a, ga, xa), (b, gb, xb) = res
    np.testing.assert_allclose(b, a, rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(xb, xa, rtol=1e-6)
    np.testing.assert_allclose(gb[[0, 2, 3]], ga[[0, 2, 3]], rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss_of_one_sample_with_a_target_of_shape_1(reduction):
    """A 1-D input's target may be ``[1]`` (the loss then has shape [1]
    under ``reduction='none'``); tracec raised 'inconsistent target size'."""
    x = RNG.standard_normal(5).astype(np.float32)
    got = []
    for T in (torch, tracec):
        xt = T.tensor(x, requires_grad=True)
        out = T.nn.functional.multi_margin_loss(xt, T.tensor([2]), p=2, reduction=reduction)
        out.sum().backward()
        got.append((out, xt.grad))
    _same(got[0][0], got[1][0])
    _same(got[0][1], got[1][1])
