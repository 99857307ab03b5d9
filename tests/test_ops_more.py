"""The tensor ops public PyTorch programs use beyond the core set (tril
narrow diag index_select repeat cumsum flip roll addmm einsum sort topk
multinomial sparse_coo_tensor ...): forward and backward against torch
2.13 in float32 and float64, options, bad input, and each op inside
``tracec.compile`` (interp and cpu) equal to eager, also on a second call
with new data (nothing data-dependent frozen into the trace)."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from _torch_ref import run_both, torch

FLOATS = ["float32", "float64"]


def _r(shape, dtype, seed=0, distinct=False):
    rng = np.random.default_rng(seed)
    if distinct:  # no ties: sort orders and top-k picks are unique
        n = int(np.prod(shape))
        return (rng.permutation(n).reshape(shape) * 0.37 - n / 7).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


IDX = np.array([2, 0, 2, 1], np.int64)
SP_I = np.array([[0, 1, 1, 2, 0], [2, 0, 2, 3, 2]], np.int64)  # (0, 2) appears twice


def _cases(d):
    x34, x234 = _r((3, 4), d), _r((2, 3, 4), d, 1)
    v3, m33 = _r((3,), d, 2), _r((3, 3), d, 3)
    dist = _r((3, 5), d, 4, distinct=True)
    return {
        "tril": (lambda L, x: L.tril(x, 1), [x34]),
        "triu_method": (lambda L, x: x.triu(-1), [x234]),
        "tril_batched": (lambda L, x: x.tril(), [x234]),
        "narrow": (lambda L, x: x.narrow(1, 1, 2), [x34]),
        "narrow_negative": (lambda L, x: L.narrow(x, 0, -2, 2), [x34]),
        "diag_embed": (lambda L, v: L.diag(v), [v3]),
        "diag_embed_up": (lambda L, v: L.diag(v, 2), [v3]),
        "diag_embed_down": (lambda L, v: v.diag(-1), [v3]),
        "diag_of": (lambda L, m: L.diag(m), [x34]),
        "diag_of_up": (lambda L, m: L.diag(m, 1), [x34]),
        "diag_of_down": (lambda L, m: m.diag(-2), [x34]),
        "index_select": (lambda L, x, i: x.index_select(1, i), [x34, IDX]),
        "index_select_fn": (lambda L, x, i: L.index_select(x, 0, i[:2]), [x34, IDX]),
        "repeat": (lambda L, x: x.repeat(2, 1, 3), [x34]),
        "repeat_interleave": (lambda L, x: x.repeat_interleave(2, dim=1), [x34]),
        "repeat_interleave_flat": (lambda L, x: L.repeat_interleave(x, 3), [x34]),
        "cumsum": (lambda L, x: x.cumsum(1), [x234]),
        "cumsum_dim0": (lambda L, x: L.cumsum(x, dim=0), [_r((7, 2), d, 5)]),
        "cumprod": (lambda L, x: x.cumprod(-1), [x34]),
        "flip": (lambda L, x: x.flip(0), [x34]),
        "flip_dims": (lambda L, x: L.flip(x, (0, 2)), [x234]),
        "fliplr": (lambda L, x: L.fliplr(x), [x34]),
        "roll": (lambda L, x: L.roll(x, 1, 0), [x34]),
        "roll_dims": (lambda L, x: x.roll((1, -3), (0, 1)), [x34]),
        "roll_flat": (lambda L, x: L.roll(x, 5), [x34]),
        "addmm": (lambda L, b, m1, m2: L.addmm(b, m1, m2), [_r((4,), d), x34.T.copy(), x34]),
        "addmm_scaled": (lambda L, b, m1, m2: b.addmm(m1, m2, beta=0.5, alpha=-2.0),
                         [_r((3, 3), d), x34, x34.T.copy()]),
        "baddbmm": (lambda L, b, p, q: L.baddbmm(b, p, q, beta=2.0, alpha=0.5),
                    [_r((2, 3, 3), d, 6), x234, x234.transpose(0, 2, 1).copy()]),
        "clamp_min": (lambda L, x: x.clamp_min(0.3), [x34]),
        "clamp_max": (lambda L, x: L.clamp_max(x, -0.1), [x34]),
        "masked_fill_": (lambda L, x: (x * 1).masked_fill_(x > 0.5, 0.25), [x34]),
        "tril_": (lambda L, x: (x * 1).tril_(1), [x34]),
        "triu_": (lambda L, x: (x * 1).triu_(), [x34]),
        "outer": (lambda L, a, b: L.outer(a, b), [v3, _r((4,), d, 7)]),
        "expand_as": (lambda L, a, b: a.expand_as(b), [_r((3, 1), d), x34]),
        "type_as": (lambda L, a, b: a.type_as(b), [x34, _r((2,), "float64")]),
        "pad": (lambda L, x: L.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), [x34]),
        "einsum_mm": (lambda L, a, b: L.einsum("ij,jk->ik", a, b), [x34, x34.T.copy()]),
        "einsum_bmm": (lambda L, a, b: L.einsum("bij,bkj->bik", a, b), [x234, x234]),
        "einsum_attn": (lambda L, q, k: L.einsum("bhqd,bhkd->bhqk", q, k),
                        [_r((2, 2, 3, 4), d, 8), _r((2, 2, 5, 4), d, 9)]),
        "einsum_diag": (lambda L, m: L.einsum("ii->i", m), [m33]),
        "einsum_trace": (lambda L, m: L.einsum("ii", m), [m33]),
        "einsum_sum": (lambda L, m: L.einsum("ij->", m), [x34]),
        "einsum_outer": (lambda L, a, b: L.einsum("i,j", a, b), [v3, _r((4,), d, 7)]),
        "einsum_ellipsis": (lambda L, a, b: L.einsum("...ij,jk->...ik", a, b),
                            [x234, x34.T.copy()]),
        "einsum_chain": (lambda L, a, b, c: L.einsum("ij,jk,kl->il", [a, b, c]),
                         [x34, x34.T.copy(), m33]),
        "einsum_hadamard_sum": (lambda L, a, b: L.einsum("ij,ij->i", a, b), [x34, x34 * 2]),
        "einsum_permute": (lambda L, x: L.einsum("ijk->kji", x), [x234]),
        "einsum_broadcast": (lambda L, a, b: L.einsum("ij,ij->ij", a, b),
                             [_r((3, 1), d), x34]),
        "einsum_sublist": (lambda L, a, b: L.einsum(a, [..., 0, 1], b, [..., 1, 2], [..., 0, 2]),
                           [x234, _r((2, 4, 5), d, 10)]),
        "einsum_sublist_implicit": (lambda L, a, b: L.einsum(a, [0, 1], b, [1, 27]),
                                    [x34, _r((4, 5), d, 11)]),
        "sort": (lambda L, x: L.sort(x), [dist]),
        "sort_desc_dim0": (lambda L, x: x.sort(dim=0, descending=True), [dist]),
        "sort_stable": (lambda L, x: L.sort(x, stable=True, dim=1), [dist]),
        "argsort": (lambda L, x: L.argsort(x, dim=1, descending=True), [dist]),
        "topk": (lambda L, x: x.topk(2), [dist]),
        "topk_smallest": (lambda L, x: L.topk(x, 3, dim=0, largest=False), [dist]),
        "msort": (lambda L, x: L.msort(x), [dist]),
        "sparse_spmm": (lambda L, i, v, m: L.spmm(L.sparse_coo_tensor(i, v, (3, 4)), m),
                        [SP_I, _r((5,), d, 10), _r((4, 2), d, 11)]),
    }


SPARSE_REF = {"sparse_spmm": lambda L, i, v, m: L.sparse_coo_tensor(i, v, (3, 4), check_invariants=True).to_dense() @ m}
NAMES = sorted(_cases("float32"))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", NAMES)
def test_op_matches_torch(name, dtype):
    fn, arrays = _cases(dtype)[name]
    run_both(fn, *arrays, tfn=SPARSE_REF.get(name))


def _compiled_case(name, dtype, backend):
    fn, arrays = _cases(dtype)[name]

    def step(*xs):
        out = fn(tracec, *xs)
        outs = out if isinstance(out, tuple) else (out,)
        loss = None
        for k, o in enumerate(outs):
            if o.requires_grad:
                w = tracec.tensor(np.random.default_rng(k).standard_normal(
                    tuple(o.shape)).astype(o.dtype.np))
                term = (o * w).sum()
                loss = term if loss is None else loss + term
        if loss is not None:
            loss.backward()
        return tuple(o.detach() for o in outs)

    comp = tracec.compile(step, backend=backend)
    # The compiled function gets the same tensor objects at every call (as
    # parameters are): a guard holds the traced arguments' .grad state.
    held = [tracec.tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]
    for call in range(2):
        # The second call has new values of the same shapes.
        distinct = name.startswith(("sort", "topk", "argsort", "msort"))
        data = [a if call == 0 or a.dtype.kind != "f" else
                _r(a.shape, a.dtype, 50 + k, distinct=distinct) for k, a in enumerate(arrays)]
        runs = []
        for f in (step, comp):
            if f is comp:
                xs = held
                with tracec.no_grad():
                    for x, a in zip(xs, data):
                        x.copy_(tracec.tensor(a))
                        x.grad = None
            else:
                xs = [tracec.tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in data]
            runs.append((f(*xs), [None if x.grad is None else x.grad.clone() for x in xs]))
        (oe, ge), (oc, gc) = runs
        tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-9, atol=1e-10)
        for a, b in zip(oe, oc):
            assert a.dtype is b.dtype and a.shape == b.shape
            np.testing.assert_allclose(b.numpy(), a.numpy(), **tol)
        for a, b in zip(ge, gc):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(b.numpy(), a.numpy(), **tol)
    assert comp.cache_info().traces == 1


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("name", NAMES)
def test_op_compiled_equals_eager(name, backend):
    _compiled_case(name, "float64" if backend == "interp" else "float32", backend)


def test_integer_and_bool_results_match_torch():
    i = np.array([[3, -1, 2], [0, 5, 5]], np.int64)
    b = np.array([True, False, True, True])
    f = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    for fn, args in [
        (lambda L, x: x.cumsum(1), [i]), (lambda L, x: x.cumprod(0), [i]),
        (lambda L, x: x.cumsum(0), [b]), (lambda L, x: L.cumsum(x, 0, dtype=L.float64), [b]),
        (lambda L, x: x.cumsum(0, dtype=L.float32), [i[0]]),
        (lambda L, x: x.sort(descending=True), [i]), (lambda L, x: x.topk(2), [i]),
        (lambda L, x: x.argsort(), [b]), (lambda L, x: x.tril(), [i]),
        (lambda L, x: L.isinf(x), [f]), (lambda L, x: L.isnan(x), [f]),
        (lambda L, x: L.isfinite(x), [f]), (lambda L, x: L.isposinf(x), [f]),
        (lambda L, x: L.isneginf(x), [f]), (lambda L, x: L.isinf(x), [i]),
        (lambda L, x: L.isfinite(x), [i]), (lambda L, x: x.clamp_min(1.5), [i]),
        (lambda L, x: L.diag(x), [i]), (lambda L, x: x.flip(1), [i]),
        (lambda L, x: x.repeat_interleave(L.tensor([2, 0, 1]), dim=1), [i]),
        (lambda L, x: L.repeat_interleave(x[0].clamp_min(0)), [i]),
        (lambda L, x: x.sort(), [f]), (lambda L, x: x.sort(descending=True), [f]),
    ]:
        run_both(fn, *args, grad=False)


def test_sort_ties_and_nan_follow_torch_stable():
    x = np.array([[2.0, 1.0, 2.0, np.nan, 1.0, -0.5, np.nan, 2.0]], np.float64)
    for desc in (False, True):
        run_both(lambda L, t: L.sort(t, dim=1, descending=desc, stable=True), x)
        run_both(lambda L, t: L.argsort(t, descending=desc, stable=True), x, grad=False)


def test_tensor_repeats_gradient_and_compile_refuses():
    run_both(lambda L, x, r: x.repeat_interleave(r, dim=0), _r((3, 2), "float64"),
             np.array([1, 0, 3]))

    @tracec.compile(backend="interp")
    def f(x, r):
        return x.repeat_interleave(r, dim=0)
    with pytest.raises(tracec.TraceError, match=r"test_ops_more.py:\d+.*repeat_interleave"):
        f(tracec.randn(3, 2), tracec.tensor([1, 0, 3]))


def test_state_tensor_read_in_python_is_refused_not_frozen():
    w = tracec.tensor([3.0])

    @tracec.compile(backend="interp")
    def f(x):
        return x * w.item()
    with pytest.raises(tracec.TraceError, match=r"test_ops_more.py:\d+: item\(\)"):
        f(tracec.ones(2))


def test_new_constructors():
    for d in ("float64", "int64", "float32"):
        a = np.arange(3).astype(d)
        tc, th = tracec.tensor(a), torch.tensor(a)
        for fn in (lambda x: x.new_zeros(2, 3), lambda x: x.new_ones((2,)),
                   lambda x: x.new_full((2, 2), 7), lambda x: x.new_tensor([1, 2]),
                   lambda x: x.new_tensor([1.5, 2]), lambda x: x.new_empty(2, 1).shape,
                   lambda x, L=None: x.new_zeros(2, dtype=x.dtype)):
            a1, a2 = fn(tc), fn(th)
            if isinstance(a2, torch.Tensor):
                assert str(a1.dtype).split(".")[-1] == str(a2.dtype).split(".")[-1]
                np.testing.assert_array_equal(a1.numpy(), a2.numpy())
            else:
                assert tuple(a1) == tuple(a2)
    t = tracec.randn(2).new_ones(3, dtype=tracec.float64, requires_grad=True)
    assert t.dtype is tracec.float64 and t.requires_grad and t.is_leaf
    src = tracec.randn(2, requires_grad=True)
    c = tracec.zeros(1).new_tensor(src)
    assert not c.requires_grad and c.is_leaf
    c.add_(1)  # a copy: the source is untouched
    assert not np.allclose(c.numpy(), src.detach().numpy())


def test_format_like_torch():
    for v in (1.23456, -0.5, 3):
        for spec in (".4f", "+.2f", ">10.3e", "", "g"):
            a, b = tracec.tensor(v), torch.tensor(v)
            if isinstance(v, int) and spec in (".4f", "+.2f", ">10.3e", "g"):
                assert format(a, spec) == format(b, spec)
            assert format(a, spec) == format(b, spec)
    loss = tracec.tensor(2.5, requires_grad=True) * 2
    assert f"{loss:.4f}" == "5.0000"
    assert "{:+.2f}".format(tracec.tensor(1.0)) == "+1.00"
    for shape in ((1,), (2, 2)):
        with pytest.raises(TypeError, match="unsupported format string passed to Tensor"):
            format(tracec.ones(*shape), ".2f")
        with pytest.raises(TypeError):
            format(torch.ones(*shape), ".2f")
    assert format(tracec.ones(2), "") == str(tracec.ones(2))


@pytest.mark.parametrize("fn, exc, msg", [
    (lambda L: L.randn(3, 4).topk(5), RuntimeError, "selected index k out of range"),
    (lambda L: L.randn(3, 4).sort(dim=2), IndexError, "Dimension out of range"),
    (lambda L: L.randn(3, 4).narrow(0, 2, 2), RuntimeError, r"start \(2\) \+ length \(2\) exceeds"),
    (lambda L: L.randn(3, 4).index_select(0, L.tensor([3])), IndexError, "index out of range"),
    (lambda L: L.randn(3, 4).index_select(0, L.tensor([[1]])), IndexError, "supposed to be a vector"),
    (lambda L: L.randn(3, 4).index_select(0, L.tensor([1.0])), RuntimeError, "int32 or int64"),
    (lambda L: L.randn(3, 4).repeat(2), RuntimeError, "can not be smaller"),
    (lambda L: L.randn(3).tril(), RuntimeError, "at least 2 dimensions"),
    (lambda L: L.diag(L.randn(2, 2, 2)), RuntimeError, r"Supports 1D or 2D tensors. Got 3D"),
    (lambda L: L.randn(3, 4).repeat_interleave(L.tensor([1, 2]), dim=0), RuntimeError,
     "repeats must have the same size"),
    (lambda L: L.roll(L.randn(3, 4), (1, 2), (0,)), RuntimeError, "shifts and dimensions must align"),
    (lambda L: L.flip(L.randn(3, 4), (0, 0)), RuntimeError, "appears multiple times"),
    (lambda L: L.addmm(L.randn(3), L.randn(3, 4), L.randn(3, 2)), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x2\)"),
    (lambda L: L.einsum("ij,jk->ik", L.randn(3, 4), L.randn(3, 4)), RuntimeError,
     "subscript j has size 3 for operand 1"),
    (lambda L: L.multinomial(L.tensor([0.5, 0.5]), 3), RuntimeError, "n_sample > prob_dist"),
    (lambda L: L.multinomial(L.tensor([0.5, -1.0]), 1), RuntimeError, "element < 0"),
    (lambda L: L.multinomial(L.tensor([0.0, 0.0]), 1, True), RuntimeError, "sum of probabilities"),
    (lambda L: L.multinomial(L.tensor([[[0.5]]]), 1), RuntimeError, "prob_dist must be 1 or 2 dim"),
    (lambda L: L.multinomial(L.tensor([0.5, 0.5]), 0), RuntimeError, "n_sample <= 0"),
    (lambda L: L.multinomial(L.tensor([1, 2]), 1), RuntimeError, "floating-point dtypes.*Long"),
])
def test_bad_input_like_torch(fn, exc, msg):
    for lib in (torch, tracec):
        with pytest.raises(exc, match=msg):
            fn(lib)


def test_multinomial_distribution():
    tracec.manual_seed(0)
    p = tracec.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]], dtype=tracec.float64)
    n = 4000
    s = tracec.multinomial(p, n, replacement=True)
    assert s.shape == (2, n) and s.dtype is tracec.int64
    want = p.numpy() / p.numpy().sum(1, keepdims=True)
    for r in range(2):
        freq = np.bincount(s[r].numpy(), minlength=4) / n
        np.testing.assert_allclose(freq, want[r], atol=0.03)
        assert freq[want[r] == 0].sum() == 0
    # Without replacement: distinct picks; the first is distributed as p,
    # the second as p renormalized without the first.
    q = np.array([0.5, 0.3, 0.2])
    draws = np.stack([tracec.multinomial(tracec.tensor(q), 2).numpy() for _ in range(3000)])
    assert (draws[:, 0] != draws[:, 1]).all()
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=3) / 3000, q, atol=0.03)
    second = np.array([sum(q[i] * q[j] / (1 - q[i]) for i in range(3) if i != j)
                       for j in range(3)])
    np.testing.assert_allclose(np.bincount(draws[:, 1], minlength=3) / 3000, second, atol=0.03)
    full = tracec.tensor([0.2, 0.2, 0.6]).multinomial(3)
    assert sorted(full.tolist()) == [0, 1, 2]
    # Zero weights come last, once the positive ones are drawn (as torch).
    z = tracec.tensor([0.0, 0.5, 0.0, 0.5]).multinomial(4)
    assert sorted(z.tolist()[:2]) == [1, 3] and sorted(z.tolist()[2:]) == [0, 2]


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.usefixtures("counter_rng")
def test_multinomial_compiled_draws_like_eager(backend, replacement):
    p = tracec.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.0, 0.3, 0.3]])

    def draw(p):
        return tracec.multinomial(p, 3 if not replacement else 6, replacement)
    comp = tracec.compile(draw, backend=backend)
    tracec.manual_seed(5)
    eager = [draw(p).numpy().copy() for _ in range(3)]
    tracec.manual_seed(5)
    compiled = [comp(p).numpy().copy() for _ in range(3)]
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(eager[0], e) for e in eager[1:])  # not frozen


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.usefixtures("counter_rng")
def test_randperm_compiled_is_recorded(backend):
    comp = tracec.compile(lambda x: x[tracec.randperm(6)], backend=backend)
    x = tracec.arange(6)
    tracec.manual_seed(3)
    eager = [x[tracec.randperm(6)].numpy().copy() for _ in range(3)]
    tracec.manual_seed(3)
    got = [comp(x).numpy().copy() for _ in range(3)]
    for a, b in zip(eager, got):
        np.testing.assert_array_equal(a, b)
        assert sorted(b) == list(range(6))


def test_sparse_coo_tensor_reports_and_prints_its_coo_form():
    # a GCN's normalized adjacency: sparse_coo_tensor(...).coalesce(), printed, _nnz()
    outs = []
    for L in (tracec, torch):
        v = L.tensor([1.0, 2, 3, 4, 5], requires_grad=True)
        s = L.sparse_coo_tensor(L.tensor(SP_I), v, (3, 4))
        c = s.coalesce()
        h = L.sparse_coo_tensor(L.tensor([[0, 1, 0]]), L.ones(3, 2, dtype=L.float64), (3, 2))
        L.sparse.mm(c, L.ones(4, 2)).sum().backward()
        errs = []
        for f in (lambda: s.indices(), lambda: s.values(), lambda: L.ones(2).coalesce(),
                  lambda: L.ones(2).indices(), lambda: L.ones(2).values()):
            with pytest.raises(RuntimeError) as e:
                f()
            errs.append(str(e.value))
        outs.append((repr(s), repr(c), repr(h), repr(h.coalesce()), repr(s.to_dense()),
                     repr(L.tensor([[0, 1.0], [2, 0]]).to_sparse()), str(s.layout), s.is_sparse,
                     L.ones(2).is_sparse, str(s.to_dense().layout), s.is_coalesced(),
                     c.is_coalesced(), c.coalesce() is c, s._nnz(), c._nnz(), s.sparse_dim(),
                     h.dense_dim(), c.indices().tolist(), c.values().tolist(),
                     s._values().tolist(), v.grad.tolist(), errs))
    assert eval(repr(outs[0]).replace("tracec.", "torch.")) == outs[1]


def test_sparse_coo_tensor_warns_once_about_invariant_checks(monkeypatch):
    # PyTorch's TORCH_WARN_ONCE when check_invariants is left None
    import warnings
    from tracec import contraction
    monkeypatch.setattr(contraction, "_INVARIANTS_WARNED", [])
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for c in (None, None, False):
            tracec.sparse_coo_tensor(tracec.tensor([[0]]), tracec.tensor([1.0]), (2,),
                                     check_invariants=c)
    assert [(w.category, str(w.message)[:48]) for w in got] == \
        [(UserWarning, "Sparse invariant checks are implicitly disabled.")]
    assert got[0].filename == __file__


def test_sparse_transpose_matches_torch():
    outs = []
    for L in (tracec, torch):
        s = L.sparse_coo_tensor(L.tensor([[0, 1, 0], [1, 0, 2]]), L.tensor([1.0, 2, 3]),
                                (2, 3)).coalesce()
        h = L.sparse_coo_tensor(L.tensor([[0, 2]]), L.ones(2, 3), (4, 3))
        with pytest.raises(RuntimeError) as e:
            h.t()
        outs.append((repr(s.t()), s.t().is_coalesced(), repr(s.transpose(0, 1).coalesce()),
                     repr(L.t(s).to_dense()), str(e.value)))
    assert outs[0] == outs[1]


def test_sparse_sum_matches_torch():
    outs = []
    for L in (tracec, torch):
        s = L.sparse_coo_tensor(L.tensor([[0, 1, 0], [1, 0, 2]]), L.tensor([1.0, 2, 3]), (2, 3))
        h = L.sparse_coo_tensor(L.tensor([[0, 2]]), L.ones(2, 3), (4, 3))
        got = [L.sparse.sum(s), L.sparse.sum(s, dim=0), L.sparse.sum(s, dim=(0, 1)),
               L.sparse.sum(s, 1, dtype=L.float64), L.sparse.sum(h, 0), L.sparse.sum(h, 1)]
        with pytest.raises(RuntimeError) as e:
            L.sparse.sum(L.ones(2))
        outs.append([repr(t) for t in got] + [str(e.value)])
    assert eval(repr(outs[0]).replace("tracec.", "torch.")) == outs[1]


def test_sparse_coo_tensor_dense_stand_in():
    i = tracec.tensor(SP_I)
    v = tracec.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    a = tracec.sparse_coo_tensor(i, v, (3, 4))
    b = torch.sparse_coo_tensor(torch.tensor(SP_I), torch.tensor([1.0, 2, 3, 4, 5]), (3, 4))
    np.testing.assert_array_equal(a.coalesce().to_dense().numpy(), b.to_dense().numpy())
    np.testing.assert_array_equal(tracec.sparse_coo_tensor(i, v).numpy(),
                                  torch.sparse_coo_tensor(torch.tensor(SP_I),
                                                          torch.tensor([1.0, 2, 3, 4, 5])
                                                          ).to_dense().numpy())
    m = tracec.ones(4, 2)
    np.testing.assert_array_equal(tracec.sparse.mm(a, m).numpy(), (a @ m).numpy())
    legacy = tracec.sparse.FloatTensor(i, v, (3, 4))
    assert legacy.dtype is tracec.float32 and legacy.shape == (3, 4)
    hybrid = tracec.sparse_coo_tensor(tracec.tensor([[0, 2]]), tracec.ones(2, 3), (4, 3))
    assert hybrid.shape == (4, 3) and hybrid.numpy()[[0, 2]].sum() == 6
    with pytest.raises(RuntimeError, match="out of bounds"):
        tracec.sparse_coo_tensor(i, v, (2, 4))
