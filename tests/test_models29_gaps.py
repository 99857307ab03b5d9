"""Gaps the models29 programs (tests/programs/models29) found in tracec,
each checked against torch 2.13."""
import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")


def _sparse_grad_cases(lib):
    """(name, is_sparse, dense gradient) of an Embedding(sparse=True)'s
    weight after backward passes mixing its lookups with dense uses."""
    idx = lib.tensor([1, 3, 3])
    out = []

    def case(name, f):
        e = lib.nn.Embedding(6, 3, sparse=True)
        with lib.no_grad():
            e.weight.copy_(lib.arange(18.).reshape(6, 3) / 10)
        f(e)
        out.append((name, e.weight.grad.is_sparse, e.weight.grad.to_dense().numpy().copy()))

    def twice(e, a, b):
        (e(idx).sum() if a else e.weight.sum()).backward()
        (e(idx).sum() if b else e.weight.sum()).backward()

    case("lookup", lambda e: e(idx).sum().backward())
    case("two lookups", lambda e: (e(idx).sum() + e(lib.tensor([0])).sum()).backward())
    case("plus l2", lambda e: (e(idx).sum() + e.weight.pow(2).sum()).backward())
    case("sparse then dense", lambda e: twice(e, True, False))
    case("dense then sparse", lambda e: twice(e, False, True))
    case("sparse then sparse", lambda e: twice(e, True, True))
    case("bag plus dense", lambda e: (lib.nn.functional.embedding_bag(
        idx, e.weight, lib.tensor([0, 1]), sparse=True).sum() + e.weight.sum()).backward())
    return out


def test_a_dense_gradient_added_to_a_sparse_one_makes_it_dense():
    # DeepCTR-Torch's L2 term over a whole sparse=True table: PyTorch's
    # engine sums the lookup's sparse gradient with the dense one into a
    # dense gradient (and AccumulateGrad adds sparse + dense to dense).
    # tracec reported every gradient of a sparse=True weight as sparse.
    got, want = _sparse_grad_cases(tracec), _sparse_grad_cases(pt)
    for (name, gs, gv), (_, ws, wv) in zip(got, want):
        assert gs == ws, name
        np.testing.assert_allclose(gv, wv, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_sparse_adam_refuses_a_gradient_made_dense(lib):
    # ...so SparseAdam refuses to step it, with PyTorch's message; tracec
    # accepted any gradient of a sparse=True weight
    e = lib.nn.Embedding(6, 3, sparse=True)
    opt = lib.optim.SparseAdam(e.parameters(), lr=0.1)
    (e(lib.tensor([1, 3])).sum() + 1e-3 * lib.sum(lib.square(e.weight))).backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, "
                                           "please consider Adam instead"):
        opt.step()
    opt.zero_grad()
    before = e.weight.detach().clone()
    e(lib.tensor([1, 3])).sum().backward()
    opt.step()
    moved = (e.weight.detach() != before).any(1).nonzero().flatten().tolist()
    assert moved == [1, 3]


def test_topk_orders_equal_values_as_torchs_cpu_kernel():
    # davidmrau/mixture-of-experts: w_gate starts at zeros, so every gate
    # logit ties and logits.topk(k + 1) picks PyTorch's kernel's experts
    # (libstdc++'s nth_element then sort: [3, 5, 4] of six equal values,
    # not the lowest indices): the whole first training step follows it.
    # tracec returned the stable order (lowest index first).
    r = np.random.default_rng(0)
    for case in range(400):
        n = int(r.choice([2, 3, 5, 6, 7, 16, 17, 40, 64, 130, 300]))
        k = int(r.integers(1, n + 1)) if r.random() < 0.7 else 1   # (k * 64 <= n: partial_sort)
        x = r.integers(0, int(r.integers(1, 4)), (3, n)).astype(np.float32)
        if r.random() < 0.2:
            x[r.random(x.shape) < 0.2] = np.nan
        if r.random() < 0.2:
            x *= r.choice([-1.0, 1.0], x.shape).astype(np.float32)   # 0.0 and -0.0 tie
        largest, srt = bool(r.random() < 0.6), bool(r.random() < 0.8)
        want = pt.from_numpy(x).topk(k, dim=1, largest=largest, sorted=srt)
        got = tracec.from_numpy(x).topk(k, dim=1, largest=largest, sorted=srt)
        if srt or (x[:, None, :] == x[:, :, None]).sum() > x.size:   # (unsorted: rows with ties)
            assert np.array_equal(got.indices.numpy(), want.indices.numpy()), (n, k, largest, srt)
            assert np.array_equal(got.values.numpy(), want.values.numpy(), equal_nan=True)


@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "float16", "bfloat16"])
def test_topk_tie_order_on_other_dtypes_and_dims(dtype):
    x = np.random.default_rng(1).integers(0, 3, (4, 9, 5))
    for dim in (0, 1, -1):
        for k in (1, 3):
            want = pt.tensor(x, dtype=getattr(pt, dtype)).topk(k, dim=dim)
            got = tracec.tensor(x, dtype=getattr(tracec, dtype)).topk(k, dim=dim)
            assert np.array_equal(got.indices.numpy(), want.indices.numpy()), (dim, k)
            assert got.indices.is_contiguous()


def test_topk_tie_order_in_the_moe_gating_and_its_gradient():
    # six tied softmax gates, top 3: the gradient reaches the experts torch picks
    for lib in (tracec, pt):
        w = lib.zeros(4, 6, requires_grad=True)
        logits = lib.softmax(lib.ones(2, 4) @ w, 1)
        top, idx = logits.topk(3, dim=1)
        (top * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        if lib is tracec:
            got = (idx.tolist(), w.grad.numpy().copy())
        else:
            want = (idx.tolist(), w.grad.numpy().copy())
    assert got[0] == want[0] == [[3, 5, 4], [3, 5, 4]]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", [
    ((8,), (1, 8), (3, 1, 8)),      # rtdl's CLSToken.expand(len(x), 1)
    ((2, 1, 3), None, (2, 1, 3)),
    ((2, 1, 3), None, (4, 2, 1, 3)),
    ((3,), None, (1, 3)),
    ((3,), None, (1, 1, 3)),
    ((2, 1), None, (2, 5)),
    ((1,), None, (4, 1)),
    ((4, 6), None, (1, 4, 6)),
], ids=str)
def test_expand_keeps_the_strides_of_size_one_dimensions(case):
    # PyTorch's expand keeps a size-1 dimension's stride when its size stays
    # 1 and gives a new leading size-1 dimension the next one's extent;
    # tracec took NumPy's broadcast strides (0 for every size-1 dimension):
    # weight.view(1, -1).expand(3, 1, -1).stride() was (0, 0, 1), not (0, 8, 1)
    shape, view, target = case
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    for lib in (pt, tracec):
        t = lib.from_numpy(a.copy())
        t = t.view(*view) if view else t
        e = t.expand(*target)
        if lib is pt:
            want = (e.stride(), e.is_contiguous(), e.numpy().copy())
        else:
            got = (e.stride(), e.is_contiguous(), e.numpy().copy())
    assert got[:2] == want[:2]
    assert np.array_equal(got[2], want[2])


def test_expand_to_the_same_size_stays_a_writable_view():
    x = tracec.zeros(3)
    x.expand(1, 3)[0, 1] = 5.0
    assert x.tolist() == [0.0, 5.0, 0.0]
    assert x.t().expand(1, 3).stride() == pt.zeros(3).t().expand(1, 3).stride()


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_without_self_shares_ties_with_the_left_out_input(reduce):
    # a max aggregation of ReLU outputs onto zeros (include_self=False):
    # PyTorch's backward divides a target's gradient among the entries equal
    # to the result counting the left-out input too (then drops its share),
    # so two zero sources onto a zero get 1/3 each; tracec gave 1/2
    r = np.random.default_rng(0)
    for case in range(200):
        n, m = int(r.integers(1, 6)), int(r.integers(1, 9))
        base = r.integers(-1, 2, (n, 3)).astype(np.float32)
        src = r.integers(-1, 2, (m, 3)).astype(np.float32)
        idx, idx1 = r.integers(0, n, (m, 3)), r.integers(0, n, m)
        weight = np.arange(n * 3, dtype=np.float32).reshape(n, 3) + 1
        for include_self in (False, True):
            res = []
            for lib in (pt, tracec):
                b, s = lib.tensor(base, requires_grad=True), lib.tensor(src, requires_grad=True)
                o = b.scatter_reduce(0, lib.tensor(idx), s, reduce=reduce, include_self=include_self)
                o2 = b.index_reduce(0, lib.tensor(idx1), s, reduce=reduce, include_self=include_self)
                ((o + o2) * lib.tensor(weight)).sum().backward()
                res.append((o.detach().numpy(), o2.detach().numpy(), b.grad.numpy(), s.grad.numpy()))
            for got, want in zip(res[1], res[0]):
                np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{case} {include_self}")


def test_a_sparse_tensor_times_a_number_stays_sparse():
    # APPNP's register_buffer('A_hat', (1 - alpha) * adj): PyTorch keeps the
    # COO layout (indices, coalesced state) under scalar * and /; tracec's
    # product was dense
    for lib in (pt, tracec):
        s = lib.sparse_coo_tensor(lib.tensor([[0, 1, 1], [2, 0, 2]]), lib.tensor([3., 4., 5.]), (2, 3))
        outs = [0.9 * s, s * 2, s / 2, s * lib.tensor(3.0), s.coalesce() * 2, lib.mul(s, 0.5)]
        got = [(o.is_sparse, o.is_coalesced(), o._nnz(), o._values().tolist(), o.to_dense().tolist())
               for o in outs]
        if lib is pt:
            want = got
    assert got == pytest.approx(want)
    assert not (tracec.ones(2, 3) * 2).is_sparse


def test_copies_of_a_sparse_tensor_are_sparse():
    # best_state = copy.deepcopy(model.state_dict()) with a sparse buffer;
    # tracec's deepcopy / clone / detach were dense
    import copy
    for lib in (pt, tracec):
        s = lib.sparse_coo_tensor(lib.tensor([[0, 1], [2, 0]]), lib.tensor([3., 4.]), (2, 3))
        m = lib.nn.Module()
        m.register_buffer("a", 0.5 * s)
        sd = copy.deepcopy(m.state_dict())
        got = [(t.is_sparse, t.is_coalesced(), t._indices().tolist(), t.to_dense().tolist())
               for t in (copy.deepcopy(s), s.clone(), s.detach(), s.coalesce().clone(), sd["a"])]
        if lib is pt:
            want = got
    assert got == want


def test_topk_of_constant_rows_uses_the_kernels_order_for_every_row():
    # (the constant-row order is computed once per size and reused)
    for x in (np.zeros((5, 100), np.float32), np.full((3, 70), np.nan, np.float32),
              np.ones((4, 6), np.float32)):
        for k, largest, srt in ((1, True, True), (5, True, True), (5, False, True), (2, True, False)):
            want = pt.from_numpy(x).topk(k, largest=largest, sorted=srt).indices.numpy()
            got = tracec.from_numpy(x).topk(k, largest=largest, sorted=srt).indices.numpy()
            assert np.array_equal(got, want), (x.shape, k, largest, srt)


def _coo_cases(lib):
    s = lib.sparse_coo_tensor(lib.tensor([[0, 1, 1], [2, 0, 2]]), lib.tensor([3., 4., 5.]), (3, 3))
    c = s.coalesce()
    s2 = lib.sparse_coo_tensor(lib.tensor([[1, 0, 1], [0, 2, 2]]), lib.tensor([3., 4., 5.]), (3, 3))
    s3 = lib.sparse_coo_tensor(lib.tensor([[0, 1], [2, 0]]), lib.tensor([3., 4.]), (3, 3))
    h = lib.sparse_coo_tensor(lib.tensor([[0, 2]]), lib.tensor([[1., 2.], [3., 4.]]), (3, 2))
    return [s + s, c + c, c + c.t(), s2 + c, c - c, c + s3, c.add(c, alpha=2), c - c.t(),
            h + h.coalesce(), s.to(lib.float64), c.double(), s.half(), s.to(lib.float32, copy=True)]


def test_sparse_sums_and_casts_are_sparse_as_in_torch():
    # plain-torch GCN code symmetrizes by adj + adj.t() and casts with
    # .double() / .to(dtype): PyTorch's results are COO (its CPU add merges
    # the two entry lists by linear index, summing equal heads, keeping
    # zeros; coalesced when both operands are); tracec's were dense, so a
    # following .coalesce() / ._values() raised
    def summary(t):
        return (t.is_sparse, t.is_coalesced(), t._nnz(), t._indices().tolist(), t._values().tolist(),
                str(t.dtype).split(".")[-1], t.to_dense().tolist())
    got = [summary(t) for t in _coo_cases(tracec)]
    want = [summary(t) for t in _coo_cases(pt)]
    assert got == want


def test_sparse_sum_of_large_unsorted_operands_matches_torch():
    r = np.random.default_rng(0)
    i = r.integers(0, 40, (2, 300))
    v = r.normal(size=300).astype(np.float32)
    res = []
    for lib in (pt, tracec):
        a = lib.sparse_coo_tensor(lib.tensor(i), lib.tensor(v), (40, 40))
        b = a.coalesce()
        out = [a + b.t(), b + b.t(), a - a, b + b * 2]
        res.append([(t.is_coalesced(), t._indices().numpy().copy(), t._values().numpy().copy()) for t in out])
    for (gc, gi, gv), (wc, wi, wv) in zip(res[1], res[0]):
        assert gc == wc and np.array_equal(gi, wi)
        np.testing.assert_allclose(gv, wv, rtol=1e-6)


def test_a_sparse_tensor_times_a_dense_one_is_sparse():
    # PyTorch: sparse * dense (broadcast to the sparse shape) keeps the COO
    # indices, each value times the dense value there; sparse / non-scalar
    # dense is refused
    def run(lib):
        s = lib.sparse_coo_tensor(lib.tensor([[0, 1, 1], [2, 0, 2]]), lib.tensor([3., 4., 5.]), (2, 3))
        d = lib.arange(6.).reshape(2, 3)
        out = [(t.is_sparse, t.is_coalesced(), t._indices().tolist(), t._values().tolist(), t.to_dense().tolist())
               for t in (s * d, d * s, s * d[0], s * d[:, :1], s.coalesce() * d)]
        with pytest.raises(RuntimeError, match="Sparse division requires a scalar or zero-dim dense tensor "
                                               r"divisor \(got shape \[2, 3\] for divisor\)"):
            s / (d + 1)
        return out
    assert run(tracec) == run(pt)


def test_sparse_gradient_after_a_compiled_step_stays_sparse():
    # a compiled step's gradients carry no sparse mark; an eager lookup's
    # gradient added to one is sparse, as in PyTorch, and SparseAdam takes it
    tracec.manual_seed(0)
    e = tracec.nn.Embedding(10, 3, sparse=True)
    opt = tracec.optim.SparseAdam(e.parameters(), lr=0.1)
    idx = tracec.tensor([1, 4, 4])

    def step(i):
        opt.zero_grad()
        loss = e(i).sum()
        loss.backward()
        opt.step()
        return loss
    c = tracec.compile(step)
    c(idx)
    c(idx)
    e(idx).sum().backward()
    assert e.weight.grad.is_sparse
    opt.step()
    (e(idx).sum() + e.weight.sum()).backward()
    assert not e.weight.grad.is_sparse
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_topk_of_long_rows_partitions_and_equals_torch(dtype, monkeypatch):
    # ImageNet-style top-5 accuracy over 1000 logits: eager topk takes the
    # k + 1 largest by partition instead of sorting whole rows (40 ms ->
    # ~5 ms for 512 x 1000), with the same indices as torch's kernel,
    # ties at the boundary and inside the top k included
    import tracec.sorting as sorting
    calls = []
    real = sorting._head
    monkeypatch.setattr(sorting, "_head", lambda *a: calls.append(1) or real(*a))
    r = np.random.default_rng(5)
    for case in range(60):
        n = int(r.choice([32, 33, 100, 257, 1000]))
        k = int(r.integers(1, n // 4))
        hi = int(r.choice([3, 50, 10 ** 6]))            # many ties, some, none
        x = r.integers(-hi, hi, (int(r.integers(1, 9)), n))
        if r.random() < 0.3:
            x = x.T.copy()
        dim = 0 if x.shape[0] == n else 1
        largest = bool(r.random() < 0.7)
        want = pt.tensor(x, dtype=getattr(pt, dtype)).topk(k, dim=dim, largest=largest)
        got = tracec.tensor(x, dtype=getattr(tracec, dtype)).topk(k, dim=dim, largest=largest)
        assert np.array_equal(got.indices.numpy(), want.indices.numpy()), (case, n, k, largest)
        assert np.array_equal(got.values.numpy(), want.values.numpy())
    assert len(calls) == 60
    y = tracec.tensor(r.standard_normal((4, 64)).astype(np.float32))
    y[1, 7] = float("nan")      # NaN sorts as the largest value: the full sort's path
    calls.clear()
    np.testing.assert_array_equal(y.topk(3, 1).indices.numpy(),
                                  pt.from_numpy(y.numpy()).topk(3, 1).indices.numpy())
    assert not calls
