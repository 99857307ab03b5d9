"""A fuzzer of compiled functions called with sizes that change from call to
call: random chains of shape-generic ops on ``x`` of shape [B, T, C] (matmul,
activations, reductions and softmax over the changing dims, reshape/view with
-1 and with sizes read from ``x.shape``, slices and ``cat`` with sizes
computed from ``x.shape``, cumsum, flip, arange of a size, Python scalars
computed from sizes), a loss, ``backward()`` and a running buffer updated in
place with ``x.mean((0, 1))`` under no_grad, and a KV-cache-like buffer of
the largest sizes read and written through ``cache[:B, :T]``.  The compiled function
(``backend="cpu"``; ``dynamic`` None / True, or ``tracec.mark_dynamic`` on
chosen dims) is called 4-5 times with batch and sequence sizes that change
between calls; outputs, the weight's grad and the buffer must equal eager's,
and eager's must equal real torch 2.13's.

``tests/test_fuzz2_dynamic.py`` replays seeds that found bugs; for a campaign:
``python tests/fuzz_dynamic_shapes.py FIRST_SEED COUNT``."""
import sys

import numpy as np
import torch

import tracec

C = 4
OPS = ("matmul", "tanh", "relu", "sigmoid", "center_T", "softmax_T", "view_m1", "slice_cat",
       "flip_T", "cumsum_T", "transpose", "amax_T", "view_BT", "arange_T", "mean_B",
       "scale_by_T", "reshape_BTC", "logsumexp_T", "narrow_T", "zeros_like_B",
       "std_T", "expand_B", "roll_T", "pad_T", "split_T", "unflatten_T", "unbind_B",
       "sum_all_over_numel")
#: ops added later: drawn only by seeds >= V2 (earlier seeds replay as found)
OPS2 = OPS + ("cache_rw", "cache_last", "length_mask", "full_T", "cache_acc")
V2 = 100_000


def apply(lib, op, h, x, w, cache=None):
    B, T = x.shape[0], x.shape[1]
    if op == "cache_rw":     # a KV-cache-like buffer of the largest sizes, read then written
        out = h + cache[:B, :T] * 0.1
        with lib.no_grad():
            cache[:B, :T] = h.detach()
        return out
    if op == "cache_last":
        with lib.no_grad():
            cache[:B, T - 1] += h[:, -1].detach()
        return h * cache[:B, :T].sum(1, keepdim=True).tanh()
    if op == "cache_acc":
        with lib.no_grad():
            cache[:B].narrow(0, 0, B)[:, :T].mul_(0.5).add_(h.detach())
        return h + 0.0
    if op == "length_mask":
        keep = lib.arange(T).view(1, T, 1) < T - 1
        return h.masked_fill(~keep, 0.0) + keep.float() * 0.5
    if op == "full_T":
        return h + lib.full((B, 1, 1), float(T)) * 0.01 + x.new_zeros(B, T, C)
    if op == "matmul":
        return h @ w
    if op in ("tanh", "relu", "sigmoid"):
        return getattr(h, op)()
    if op == "center_T":
        return h - h.mean(1, keepdim=True)
    if op == "softmax_T":
        return h.softmax(1)
    if op == "view_m1":
        return h.reshape(-1, C).relu().view(B, -1, C)
    if op == "slice_cat":
        k = T // 2 + 1
        return lib.cat([h[:, :k] * 2, h[:, k:]], 1)
    if op == "flip_T":
        return h.flip(1)
    if op == "cumsum_T":
        return h.cumsum(1) / T
    if op == "transpose":
        return (h.transpose(0, 1).contiguous() * 1.5).transpose(0, 1)
    if op == "amax_T":
        return h + h.amax(1, keepdim=True) * 0.5
    if op == "view_BT":
        return h.contiguous().view(B * T, C).sum(1, keepdim=True).view(B, T, 1) + h
    if op == "arange_T":
        return h + lib.arange(h.shape[1], dtype=lib.float32).view(1, -1, 1) * 0.1
    if op == "mean_B":
        return h - h.mean(0)
    if op == "scale_by_T":
        return h * (1.0 / h.shape[1]) + h.size(0)
    if op == "reshape_BTC":
        return h.reshape(B, T * C).relu().reshape(x.shape)
    if op == "logsumexp_T":
        return h - h.logsumexp(1, keepdim=True)
    if op == "narrow_T":
        return lib.cat([h.narrow(1, 0, T - 1), h[:, -1:] * 3], 1)
    if op == "zeros_like_B":
        return h + lib.zeros(B, 1, C) + lib.ones_like(h[:, :1]) * 0.5
    if op == "std_T":
        return h / (h.std(1, keepdim=True) + 1.0)
    if op == "expand_B":
        return h + h[:1].expand(B, T, C) * 0.25
    if op == "roll_T":
        return h.roll(1, 1)
    if op == "pad_T":
        return lib.nn.functional.pad(h, (0, 0, 1, 1))[:, 1:-1] + 0.5
    if op == "split_T":
        parts = h.split(2, 1)
        return lib.cat([p * (i + 1) for i, p in enumerate(parts)], 1)
    if op == "unflatten_T":
        return h.reshape(B * T, C).unflatten(0, (B, T)).tanh()
    if op == "unbind_B":
        return lib.stack([r * 0.5 for r in h.unbind(0)], 0)
    # sum_all_over_numel
    return h - h.sum() / h.numel()


def make_fn(lib, plan, v2=False):
    def step(x, w, buf, cache):
        h = x + (x @ w) * 0.1 if v2 else x
        for op in plan:
            h = apply(lib, op, h, x, w, cache)
        loss = (h * h).mean() + h.sum(1).abs().mean()
        loss.backward()
        with lib.no_grad():
            buf.mul_(0.9).add_(x.mean((0, 1)) * 0.1)
        return loss.detach(), h.detach() * 1, h.detach().sum(1)
    return step


def run_calls(lib, plan, sizes, x0s, w0, mode, compiled, v2=False):
    fn = make_fn(lib, plan, v2)
    if compiled:
        fn = tracec.compile(fn, backend="cpu", dynamic=True if mode == "dynamic" else None)
    w = lib.tensor(w0, requires_grad=True)
    buf = lib.zeros(C)
    cache = lib.zeros(4, 8, C)
    outs = []
    for k, ((bsz, tsz), x0) in enumerate(zip(sizes, x0s)):
        w.grad = None
        x = lib.tensor(x0)
        if compiled and mode.startswith("mark"):
            for d in (0, 1) if mode == "mark01" else ((0,) if mode == "mark0" else (1,)):
                tracec.mark_dynamic(x, d)
        try:
            res = fn(x, w, buf, cache)
        except Exception as e:  # noqa
            return ("raised", k, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
        outs.append(list(res) + [w.grad.numpy().copy(), buf.numpy().copy(),
                                                       cache.numpy().copy()])
    info = fn.cache_info() if compiled else None
    # (results read only after the last call: a later call must not have
    # reused an earlier result's storage)
    outs = [[r.numpy().copy() if hasattr(r, "numpy") else r for r in o] for o in outs]
    return outs, info


def run_one(seed, check_torch=True):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    ops = OPS2 if seed >= V2 else OPS
    plan = [ops[int(rng.integers(len(ops)))] for _ in range(n)]
    ncalls = int(rng.integers(4, 6))
    sizes = [(int(rng.integers(1, 5)), int(rng.integers(2, 9))) for _ in range(ncalls)]
    mode = ("none", "dynamic", "mark0", "mark1", "mark01")[int(rng.integers(5))]
    if mode in ("mark0", "mark1"):   # only the marked dim changes
        keep = 1 if mode == "mark0" else 0
        sizes = [tuple(s[k] if k != keep else sizes[0][k] for k in (0, 1)) for s in sizes]
    x0s = [rng.standard_normal((b, t, C)).astype(np.float32) for b, t in sizes]
    w0 = (rng.standard_normal((C, C)) * 0.5).astype(np.float32)
    case = (plan, sizes, mode)
    e = run_calls(tracec, plan, sizes, x0s, w0, mode, False, seed >= V2)
    bad = []
    if check_torch:
        t = run_calls(torch, plan, sizes, x0s, w0, mode, False, seed >= V2)
        if (e[0] == "raised") != (t[0] == "raised"):
            return [("eager vs torch raised", e if e[0] == "raised" else t)], case
        if e[0] != "raised":
            bad += [("eager!=torch",) + b for b in compare(e[0], t[0])]
    c = run_calls(tracec, plan, sizes, x0s, w0, mode, True, seed >= V2)
    if e[0] == "raised":
        return ([] if c[0] == "raised" else [("eager raised, compiled not", e)]), case
    if c[0] == "raised":
        return [("compiled raised", c)], case
    bad += compare(e[0], c[0])
    if c[1].hits < 1:
        bad.append(("no native call", str(c[1])[:300]))
    return bad, case


NAMES = ("loss", "h", "hsum", "grad", "buf", "cache")


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
