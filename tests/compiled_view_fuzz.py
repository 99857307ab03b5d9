"""A fuzzer of compiled in-place writes through views and aliases: random
chains of views (slices, transposes, select, narrow, diagonal, view/flatten)
of a buffer argument (under no_grad) and of a differentiable value, each
written in place by a random op (add_, copy_, masked_fill_, index_add_,
scatter_, setitem, ...), run for three calls eagerly and through
``tracec.compile(backend="cpu")``; the loss, the written values, every view
read at the end, the buffer and the gradient must agree.  Views of the
buffer, of a returned result and of an intermediate are also returned
uncopied: their layouts and what they are views of must agree, and writes
through them after the call must reach the same tensors.

``tests/test_compiled_alias_reads.py`` replays seeds that found bugs; for a
campaign: ``python tests/compiled_view_fuzz.py FIRST_SEED COUNT [composite]``
(``composite``: the views include ``unfold`` and ``as_strided``,
``COMPOSITE_VIEWS``; without it a seed makes what it always made)."""
import sys
import numpy as np
import tracec

VIEWS = ("slice_row", "slice_col", "t", "narrow", "select", "unsqueeze_sq", "reshape",
         "diag", "step_slice", "flatten")
#: VIEWS and the composite views (tracec.composite_views), of non-overlapping windows
COMPOSITE_VIEWS = VIEWS + ("unfold", "as_strided")
INPLACE = ("add_", "mul_", "copy_", "fill_", "clamp_", "masked_fill_", "zero_", "sub_scaled",
           "index_add_", "div_", "neg_", "relu_", "addcmul_", "lerp_", "exp_", "sigmoid_",
           "setitem", "scatter_")


def make_view(base, k, j, views=VIEWS):
    r, c = base.shape[-2], base.shape[-1]
    v = views[k % len(views)]
    if v == "unfold":
        s = max(1, c // 2)
        return base.unfold(1, s, s)[..., j % s]
    if v == "as_strided":
        return base.as_strided((max(1, r - j % r), max(1, c - 1)), base.stride())
    if v == "slice_row":
        return base[j % r:]
    if v == "slice_col":
        return base[:, j % c:]
    if v == "t":
        return base.t()
    if v == "narrow":
        return base.narrow(1, j % c, max(1, (c - j % c) // 2))
    if v == "select":
        return base[j % r]
    if v == "unsqueeze_sq":
        return base.unsqueeze(0).squeeze(0)
    if v == "reshape":
        return base.view(-1)
    if v == "diag":
        return base.diagonal()
    if v == "step_slice":
        return base[::2, ::2]
    return base.flatten()


def inplace(v, k, j, other):
    op = INPLACE[k % len(INPLACE)]
    o = other.reshape(-1)[: v.numel()].reshape(v.shape) if other.numel() >= v.numel() else \
        other.reshape(-1)[:1].expand(v.shape)
    if op == "add_":
        v.add_(o)
    elif op == "mul_":
        v.mul_(o * 0.5 + 1)
    elif op == "copy_":
        v.copy_(o)
    elif op == "fill_":
        v.fill_(0.25 * (j % 5))
    elif op == "clamp_":
        v.clamp_(-0.3, 0.4)
    elif op == "masked_fill_":
        v.masked_fill_(o > 0, -1.0)
    elif op == "zero_":
        v.zero_()
    elif op == "sub_scaled":
        v.sub_(o, alpha=0.5)
    elif op == "index_add_":
        if v.ndim >= 1 and v.shape[0] > 0:
            idx = tracec.tensor([0, v.shape[0] - 1, 0])
            src = o.reshape(-1)[:1].expand((3,) + tuple(v.shape[1:]))
            v.index_add_(0, idx, src)
    elif op == "div_":
        v.div_(o.abs() + 1.0)
    elif op == "neg_":
        v.neg_()
    elif op == "relu_":
        v.relu_()
    elif op == "addcmul_":
        v.addcmul_(o, o, value=0.3)
    elif op == "lerp_":
        v.lerp_(o, 0.25)
    elif op == "exp_":
        v.clamp_(-2, 2).exp_()
    elif op == "sigmoid_":
        v.sigmoid_()
    elif op == "setitem":
        if v.ndim >= 1 and v.shape[0] > 0:
            v[0] = o[0] * 2 if o.ndim else o * 2
    elif op == "scatter_":
        if v.ndim == 2 and v.shape[1] > 0:
            idx = tracec.zeros(v.shape[0], 1, dtype=tracec.int64)
            v.scatter_(1, idx, o[:, :1] if o.ndim == 2 else o.reshape(-1)[:1].expand(v.shape[0], 1))


def _overlaps(v) -> bool:
    offsets = np.zeros((), np.int64)
    for n, st in zip(v.shape, v.stride()):
        offsets = offsets[..., None] + np.arange(n) * st
    return len(np.unique(offsets)) < v.numel()


def written_through(buf, res):
    """The returned views' layouts and what they are views of, then buf and
    g after a write through each returned view (in order)."""
    raw_b, g, raw_g, raw_t = res[3], res[4], res[5], res[6]
    known = {id(buf): "buf", id(g): "g"}
    layout = [(tuple(v.shape), v.stride(), v.storage_offset(), v.is_contiguous(),
               known.get(id(v._base), v._base is not None)) for v in raw_b + raw_g + raw_t]
    with tracec.no_grad():
        for k, v in enumerate(raw_b + raw_g + raw_t):
            if v.numel() and not _overlaps(v):
                v.add_(k + 1)
    return (layout, buf.numpy().copy(), g.numpy().copy(), [v.numpy().copy() for v in raw_t])


def run_one(seed, views=VIEWS):
    rng = np.random.default_rng(seed)
    r, c = int(rng.integers(2, 7)), int(rng.integers(2, 9))
    if rng.integers(3) == 0:
        c = r   # square: diag and t behave differently
    base0 = rng.standard_normal((r, c)).astype(np.float32)
    w0 = rng.standard_normal((r, c)).astype(np.float32)
    x0 = rng.standard_normal((r, c)).astype(np.float32)
    n = int(rng.integers(1, 7))
    plan = [(int(rng.integers(100)), int(rng.integers(100)), int(rng.integers(100)),
             int(rng.integers(3))) for _ in range(n)]

    def step_fn(buf, w, x):
        # buf: a buffer mutated in place through views (no grad);
        # h: a differentiable value mutated in place through views
        h = (x * w).clone()
        views_b, views_h = [buf], [h]
        for vk, j, ok, which in plan:
            src = views_b if which == 0 else views_h
            base = src[j % len(src)]
            if base.ndim < 2:
                base = src[0]
            v = make_view(base, vk, j, views)
            src.append(v)
            other = (x if which else buf.detach()) * 0.7 + 0.1 * ok
            with tracec.no_grad() if which == 0 else _Null():
                inplace(v, ok, j, other)
        loss = (h * h).sum() + sum(v.sum() for v in views_h[1:]) * 0.1
        loss.backward()
        # returned as views (tracec.view_outputs): of the argument buf, of a
        # returned result g, and of an intermediate t that is not returned
        g = h.detach() * 1.5
        t = h.detach() + 0.25
        views_g, views_t = [g], [t]
        for vk, j, ok, which in plan[:3]:
            views_g.append(make_view(views_g[j % len(views_g)] if views_g[-1].ndim >= 2
                                     else g, vk + ok, j, views))
            views_t.append(make_view(t, vk + 2 * ok, j + 1, views))
        return (loss.detach(), h.detach().clone(), [v.detach().clone() for v in views_b[1:]],
                views_b[1:], g, views_g[1:], views_t[1:2])

    class _Null:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    def go(compiled):
        buf = tracec.tensor(base0.copy())
        w = tracec.tensor(w0, requires_grad=True)
        fn = tracec.compile(step_fn, backend="cpu") if compiled else step_fn
        outs = []
        for _ in range(3):
            w.grad = None
            try:
                res = fn(buf, w, tracec.tensor(x0))
            except Exception as e:  # noqa
                return ("raised", type(e).__name__, str(e).splitlines()[0][:200])
            outs.append((res[0].numpy(), res[1].numpy(), [v.numpy() for v in res[2]],
                         buf.numpy().copy(), None if w.grad is None else w.grad.numpy().copy())
                        + written_through(buf, res))
        info = fn.cache_info() if compiled else None
        return outs, info

    e = go(False)
    cres = go(True)
    if isinstance(e, tuple) and e and e[0] == "raised":
        if not (isinstance(cres, tuple) and cres[0] == "raised"):
            return [("eager raised, compiled not", e)], plan
        return [], plan
    if cres[0] == "raised":
        return [("compiled raised", cres)], plan
    (eo, _), (co, info) = e, cres
    bad = []
    for k, (a, b) in enumerate(zip(eo, co)):
        for name, x, y in (("loss", a[0], b[0]), ("h", a[1], b[1]), ("buf", a[3], b[3]),
                           ("grad", a[4], b[4])):
            if (x is None) != (y is None) or (x is not None and not np.allclose(
                    x, y, rtol=1e-4, atol=1e-4, equal_nan=True)):
                bad.append((k, name))
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            if x.shape != y.shape or not np.allclose(x, y, rtol=1e-4, atol=1e-4, equal_nan=True):
                bad.append((k, f"view{i}"))
        if a[5] != b[5]:
            bad.append((k, "returned view layouts", [(x, y) for x, y in zip(a[5], b[5])
                                                     if x != y][:2]))
        for name, x, y in (("buf written through views", a[6], b[6]),
                           ("g written through views", a[7], b[7])):
            if not np.allclose(x, y, rtol=1e-4, atol=1e-4, equal_nan=True):
                bad.append((k, name))
        for x, y in zip(a[8], b[8]):
            if x.shape != y.shape or not np.allclose(x, y, rtol=1e-4, atol=1e-4, equal_nan=True):
                bad.append((k, "view of an intermediate"))
    if info.hits < 1:
        bad.append(("no native call", str(info)[:300]))
    return bad, plan


if __name__ == "__main__":
    s0, n = int(sys.argv[1]), int(sys.argv[2])
    kinds = COMPOSITE_VIEWS if sys.argv[3:] == ["composite"] else VIEWS
    nbad = 0
    for seed in range(s0, s0 + n):
        try:
            bad, plan = run_one(seed, kinds)
        except Exception as ex:  # noqa
            print("ERROR", seed, type(ex).__name__, str(ex).splitlines()[0][:300], flush=True)
            continue
        if bad:
            nbad += 1
            print("MISMATCH", seed, bad[:6], plan, flush=True)
    print("done", s0, n, nbad, flush=True)
