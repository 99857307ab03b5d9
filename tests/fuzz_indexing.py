"""A fuzzer of compiled indexing: random chains of gather, scatter /
scatter_add / scatter_reduce, index_put_ (accumulate True with duplicate
indices, False with distinct ones), index_select, index_add, masked_select,
masked_fill, boolean-mask assignment, advanced indexing mixing tensors and
slices, take_along_dim and embedding with repeated ids, on a differentiable
``h`` of shape [N, C].  The index and mask tensors are arguments whose values
change from call to call (and, in some seeds, whose lengths change); a
buffer argument is written in place under no_grad by an indexing op
(index_put_ accumulate, scatter_add_, mask assignment, index_copy_,
masked_scatter_, put_, ...) at every call.  The
function runs eagerly, under real torch 2.13 and through
``tracec.compile(backend="cpu")`` for 4 calls; the loss, ``h``, the buffer and
the grads of the weight and of the embedding table must agree.

``tests/test_fuzz2_indexing.py`` replays seeds that found bugs; for a
campaign: ``python tests/fuzz_indexing.py FIRST_SEED COUNT``."""
import sys

import numpy as np
import torch

import tracec

N, C, V = 5, 4, 6
OPS = ("gather", "scatter", "scatter_add", "scatter_reduce", "index_put_acc", "index_put",
       "index_select", "index_add", "masked_select", "masked_fill", "mask_assign",
       "adv_slice", "adv_pair", "take_along_dim", "embedding", "setitem_rows", "adv_getitem_neg",
       "index_fill", "mask_getitem_rows", "where_mask")
#: in-place indexing writes of a buffer argument (no grad), one per call
BUF_OPS = ("none", "index_put_acc_", "index_put_", "scatter_add_", "scatter_", "mask_set",
           "index_add_", "rows_set", "index_copy_", "masked_scatter_", "adv_pair_add",
           "index_fill_", "put_acc_")
#: seeds from here on also pass a bad index at one call (error parity)
V2 = 100_000


def apply(lib, op, h, a):
    """One step: a new [N, C] value from ``h`` and the index arguments ``a``."""
    if op == "gather":
        return h.gather(1, a["cidx"]) + h
    if op == "scatter":
        return h.scatter(1, a["cperm"][:, :2], h[:, :2] * 2)
    if op == "scatter_add":
        return h.scatter_add(1, a["cidx"], h * 0.5)
    if op == "scatter_reduce":
        return h.scatter_reduce(1, a["cidx"], h.tanh(), reduce="amax", include_self=True)
    if op == "index_put_acc":
        return h.clone().index_put_((a["rdup"],), h[: a["rdup"].shape[0]] * 0.5, accumulate=True)
    if op == "index_put":
        return h.clone().index_put_((a["runiq"],), h[: a["runiq"].shape[0]].sigmoid())
    if op == "index_select":
        return h.index_select(0, a["rfull"]) * 0.5 + h
    if op == "index_add":
        return h.index_add(0, a["rdup"], h[: a["rdup"].shape[0]], alpha=0.5)
    if op == "masked_select":
        return h + h.masked_select(a["mask"]).sum()
    if op == "masked_fill":
        return h.masked_fill(a["mask"], 0.3)
    if op == "mask_assign":
        g = h.clone()
        g[a["mask"]] = h[a["mask"]] * -2
        return g
    if op == "adv_slice":
        g = h * 1
        g[a["runiq"], 1:] = h[a["runiq"], :-1] + 1
        return g
    if op == "adv_pair":
        return h + h[a["rfull"], a["cfull"]].unsqueeze(1) * 0.5
    if op == "take_along_dim":
        return lib.take_along_dim(h, a["cidx"], 1) * h
    if op == "embedding":
        return h + lib.nn.functional.embedding(a["ids"], a["table"])
    if op == "setitem_rows":
        g = h.clone()
        g[a["runiq"]] = 0.0
        return g + h * 0.1
    if op == "adv_getitem_neg":
        return h[a["rfull"] - N] + h
    if op == "index_fill":
        return h.index_fill(1, a["cperm"][0, :2], -0.5)
    if op == "mask_getitem_rows":
        rows = a["mask"][:, 0]
        return h + h[rows].sum(0)
    return lib.where(a["mask"], h, -h)


def buf_update(lib, op, buf, h, a):
    """``buf`` written in place by indexing op ``op`` (values from ``h``)."""
    v = h.detach()
    if op == "index_put_acc_":
        buf.index_put_((a["rdup"],), v[: a["rdup"].shape[0]], accumulate=True)
    elif op == "index_put_":
        buf.index_put_((a["runiq"], a["cfull"][: a["runiq"].shape[0]]), v[0, 0] + 1)
    elif op == "scatter_add_":
        buf.scatter_add_(1, a["cidx"], v)
    elif op == "scatter_":
        buf.scatter_(1, a["cperm"][:, :2], v[:, :2])
    elif op == "mask_set":
        buf[a["mask"]] = -1.0
    elif op == "index_add_":
        buf.index_add_(0, a["rdup"], v[: a["rdup"].shape[0]])
    elif op == "rows_set":
        buf[a["runiq"]] = v[: a["runiq"].shape[0]] * 0.5
    elif op == "index_copy_":
        buf.index_copy_(0, a["runiq"], v[: a["runiq"].shape[0]])
    elif op == "masked_scatter_":
        buf.masked_scatter_(a["mask"], v * 3)
    elif op == "adv_pair_add":
        buf[a["rfull"], a["cfull"]] += 1.0
    elif op == "index_fill_":
        buf.index_fill_(0, a["runiq"], 2.0)
    elif op == "put_acc_":
        buf.put_(a["rdup"] * 3, v.reshape(-1)[: a["rdup"].shape[0]], accumulate=True)


def make_fn(lib, plan, bop="none"):
    def step(x, w, a, buf):
        h = x @ w
        for op in plan:
            h = apply(lib, op, h, a)
        loss = (h * h).sum() + h.sum(0).tanh().sum()
        loss.backward()
        with lib.no_grad():
            buf_update(lib, bop, buf, h, a)
        return loss.detach(), h.detach() * 1, buf * 1
    return step


def make_args(rng, lib, nrows, bad=False):
    def t(v, **kw):
        return lib.tensor(v, **kw)
    k = int(rng.integers(1, N + 1))
    a = {
        "cidx": t(rng.integers(0, C, (N, C))),
        "cperm": t(np.stack([rng.permutation(C) for _ in range(N)])),
        "rdup": t(rng.integers(0, N, nrows)),
        "runiq": t(rng.permutation(N)[: min(nrows, N)]),
        "rfull": t(rng.integers(0, N, N)),
        "cfull": t(rng.integers(-C, C, N)),
        "mask": t(rng.random((N, C)) < 0.5),
        "ids": t(rng.integers(0, V, N)),
    }
    if bad:     # one entry of one index argument out of range (or negative)
        key = ("cidx", "cperm", "rdup", "runiq", "rfull", "cfull", "ids")[int(rng.integers(7))]
        v = a[key].numpy().copy()
        size = {"cidx": C, "cperm": C, "cfull": C, "ids": V}.get(key, N)
        v.reshape(-1)[0] = (-1, -size - 1, size)[int(rng.integers(3))]
        a[key] = t(v)
    return a, k


def _kind(ex):
    """PyTorch's exception class of ``ex`` (compiled code's CpuIndexError is
    an IndexError, its CpuRuntimeError a RuntimeError)."""
    return "IndexError" if isinstance(ex, IndexError) else \
        "RuntimeError" if isinstance(ex, RuntimeError) else type(ex).__name__


def run_calls(lib, plan, arg_seeds, x0, w0, e0, compiled, bop="none", bad_call=-1):
    fn = make_fn(lib, plan, bop)
    buf = lib.zeros(N, C)
    if compiled:
        fn = tracec.compile(fn, backend="cpu")
    w = lib.tensor(w0, requires_grad=True)
    table = lib.tensor(e0, requires_grad=True)
    outs = []
    for k, (s, nrows) in enumerate(arg_seeds):
        w.grad = None
        table.grad = None
        a, _ = make_args(np.random.default_rng(s), lib, nrows, bad=k == bad_call)
        a["table"] = table
        try:
            res = fn(lib.tensor(x0), w, a, buf)
        except Exception as ex:  # noqa
            return ("raised", k, _kind(ex), str(ex).splitlines()[0][:200] if str(ex) else "")
        outs.append(list(res) + [
            w.grad.numpy().copy(), np.zeros_like(e0) if table.grad is None else table.grad.numpy().copy(),
            buf.numpy().copy()])
    # (results read only after the last call: a later call must not have
    # reused an earlier result's storage)
    outs = [[r.numpy().copy() if hasattr(r, "numpy") else r for r in o] for o in outs]
    return outs, (fn.cache_info() if compiled else None)


def run_one(seed, check_torch=True):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    plan = [OPS[int(rng.integers(len(OPS)))] for _ in range(n)]
    vary_len = rng.integers(3) == 0
    nr = int(rng.integers(1, N + 1))
    arg_seeds = [(int(rng.integers(1 << 30)), int(rng.integers(1, N + 1)) if vary_len else nr)
                 for _ in range(4)]
    x0 = rng.standard_normal((N, C)).astype(np.float32)
    w0 = (rng.standard_normal((C, C)) * 0.5).astype(np.float32)
    e0 = rng.standard_normal((V, C)).astype(np.float32)
    bop = BUF_OPS[int(rng.integers(len(BUF_OPS)))]
    # seeds >= V2: one call after the first (traced) one gets a bad index
    bad_call = int(rng.integers(1, 4)) if seed >= V2 else -1
    case = (plan, arg_seeds, bop, bad_call)
    e = run_calls(tracec, plan, arg_seeds, x0, w0, e0, False, bop, bad_call)
    bad = []
    if check_torch:
        t = run_calls(torch, plan, arg_seeds, x0, w0, e0, False, bop, bad_call)
        if (e[0] == "raised") != (t[0] == "raised"):
            return [("eager vs torch raised", e if e[0] == "raised" else t)], case
        if e[0] == "raised" and e[1:3] != t[1:3]:
            return [("eager vs torch error", e, t)], case
        if e[0] != "raised":
            bad += [("eager!=torch",) + b for b in compare(e[0], t[0])]
    c = run_calls(tracec, plan, arg_seeds, x0, w0, e0, True, bop, bad_call)
    if e[0] == "raised":
        if c[0] != "raised":
            return [("eager raised, compiled not", e)], case
        return ([] if c[1:3] == e[1:3] else [("eager vs compiled error", e, c)]), case
    if c[0] == "raised":
        return [("compiled raised", c)], case
    bad += compare(e[0], c[0])
    if c[1].hits < 1:
        bad.append(("no native call", str(c[1])[:300]))
    return bad, case


NAMES = ("loss", "h", "bufout", "wgrad", "tablegrad", "buf")


def compare(eo, co):
    bad = []
    for k, (a, b) in enumerate(zip(eo, co)):
        for name, x, y in zip(NAMES, a, b):
            # (atol scaled by the array: a sum of large terms cancelling
            # to a small one keeps their rounding)
            if x.shape != y.shape or not np.allclose(
                    x, y, rtol=1e-4, equal_nan=True,
                    atol=1e-4 * max(1.0, float(np.abs(y).max(initial=0)))):
                bad.append((k, name))
    return bad


if __name__ == "__main__":
    s0, n = int(sys.argv[1]), int(sys.argv[2])
    nbad = 0
    for seed in range(s0, s0 + n):
        if (seed - s0) % 100 == 0:
            print("at", seed, nbad, flush=True)
        try:
            bad, case = run_one(seed)
        except Exception as ex:  # noqa
            print("ERROR", seed, type(ex).__name__, str(ex).splitlines()[0][:300], flush=True)
            continue
        perf = [b for b in bad if b[0] == "no native call"]
        bad = [b for b in bad if b[0] != "no native call"]
        if perf:
            print("PERF", seed, perf, case, flush=True)
        if bad:
            nbad += 1
            print("MISMATCH", seed, bad[:6], case, flush=True)
    print("done", s0, n, nbad, flush=True)
