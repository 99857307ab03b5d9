"""A fuzzer of compiled optimizer-style updates: a small two-layer model's
loss, one or two ``backward()`` calls per step (grads accumulate), then a
random sequence of in-place updates under no_grad of the parameters and of
state buffers (``p.add_``, ``p.data.mul_``, momentum buffers, Adam-like
moments with a 0-d step counter, ``torch._foreach_*`` ops, grad clipping,
``p.grad.zero_()`` / ``p.grad = None`` inside the step) or a real optimizer
(SGD with momentum / nesterov / weight decay, Adam, AdamW, RMSprop, foreach
or not) stepped inside the function; between calls the grads are zeroed
(set_to_none True or False) or left to accumulate.  Run eagerly, under real
torch 2.13 and through ``tracec.compile(backend="cpu")`` for 4 calls; the
loss, parameters, grads and state must agree.

``tests/test_fuzz2_optim.py`` replays seeds that found bugs; for a campaign:
``python tests/fuzz_optim_updates.py FIRST_SEED COUNT``."""
import sys

import numpy as np
import torch

import tracec

UPDATES = ("sgd", "momentum", "data_mul", "foreach_momentum", "adam_like", "clip", "grad_zero",
           "grad_none", "clamp_copy", "foreach_lerp", "step_count", "grad_scale", "data_assign",
           "foreach_addcmul", "weight_decay_data")
#: updates added later: drawn only by seeds >= V2 (earlier seeds replay as
#: found), which also keep the state buffers as views of one flat buffer
UPDATES2 = UPDATES + ("grad_row_zero", "param_row_add", "data_col_mul", "flat_decay",
                      "grad_t_add", "state_view_copy")
V2 = 100_000
OPTIMS = ("none", "none", "SGD", "SGDm", "SGDnesterov", "Adam", "AdamW", "RMSprop", "Adagrad")


def loss_of(lib, params, x, y):
    w1, b1, w2 = params
    h = (x @ w1 + b1).tanh()
    return ((h @ w2 - y) ** 2).mean()


def update(lib, u, params, state, lr):
    bufs, m, v = state["buf"], state["m"], state["v"]
    grads = [p.grad for p in params]
    if u in ("sgd", "momentum", "adam_like", "clamp_copy", "foreach_lerp", "foreach_addcmul",
             "foreach_momentum", "step_count") and any(g is None for g in grads):
        return
    if u == "sgd":
        for p in params:
            p.add_(p.grad, alpha=-lr)
    elif u == "momentum":
        for p, b in zip(params, bufs):
            b.mul_(0.9).add_(p.grad)
            p.sub_(b * lr)
    elif u == "data_mul":
        for p in params:
            p.data.mul_(0.99)
    elif u == "foreach_momentum":
        lib._foreach_mul_(bufs, 0.8)
        lib._foreach_add_(bufs, grads)
        lib._foreach_add_(params, bufs, alpha=-lr)
    elif u == "adam_like":
        state["step"] += 1
        for p, mm, vv in zip(params, m, v):
            mm.lerp_(p.grad, 0.1)
            vv.mul_(0.99).addcmul_(p.grad, p.grad, value=0.01)
            bc = 1 - 0.9 ** state["step"]
            p.addcdiv_(mm / bc, vv.sqrt().add_(1e-3), value=-lr)
    elif u == "clip":
        if all(g is not None for g in grads):
            lib.nn.utils.clip_grad_norm_(params, 0.5)
    elif u == "grad_zero":
        for p in params:
            if p.grad is not None:
                p.grad.zero_()
    elif u == "grad_none":
        params[0].grad = None
    elif u == "clamp_copy":
        for p in params:
            p.copy_(p.clamp(-0.8, 0.8))
    elif u == "foreach_lerp":
        lib._foreach_lerp_(m, grads, 0.3)
        lib._foreach_sub_(params, lib._foreach_mul(m, lr))
    elif u == "step_count":
        state["step"].add_(1)
        params[1].add_(state["step"] * 0.01)
    elif u == "grad_scale":
        for p in params:
            if p.grad is not None:
                p.grad.mul_(0.5)
    elif u == "data_assign":
        params[2].data = params[2].data * 0.9 + 0.01
    elif u == "foreach_addcmul":
        lib._foreach_addcmul_(v, grads, grads, value=0.5)
        lib._foreach_addcdiv_(params, grads, lib._foreach_add(lib._foreach_sqrt(v), 1.0),
                              value=-lr)
    elif u == "weight_decay_data":
        for p in params:
            p.data.add_(p.data, alpha=-0.01)
    elif u == "grad_row_zero":
        if params[0].grad is not None:
            params[0].grad[1].zero_()
    elif u == "param_row_add":
        params[0][2].add_(bufs[0][2] + 0.01)
    elif u == "data_col_mul":
        params[2].data[:, 1].mul_(0.5)
    elif u == "flat_decay":
        if "flat" in state:
            state["flat"].mul_(0.5)
        else:
            lib._foreach_mul_(bufs, 0.5)
    elif u == "grad_t_add":
        if params[2].grad is not None:
            params[2].grad.t()[0].add_(1.0)
    elif u == "state_view_copy":
        m[0][:, 0].copy_(v[0][:, 1] + 1)


def make_optim(lib, kind, params, foreach):
    if kind == "none":
        return None
    o = lib.optim
    if kind == "SGD":
        return o.SGD(params, lr=0.1, weight_decay=0.01, foreach=foreach)
    if kind == "SGDm":
        return o.SGD(params, lr=0.1, momentum=0.9, dampening=0.1, foreach=foreach)
    if kind == "SGDnesterov":
        return o.SGD(params, lr=0.05, momentum=0.8, nesterov=True, foreach=foreach)
    if kind == "Adam":
        return o.Adam(params, lr=0.01, foreach=foreach, amsgrad=foreach)
    if kind == "AdamW":
        return o.AdamW(params, lr=0.01, weight_decay=0.1, foreach=foreach)
    if kind == "RMSprop":
        return o.RMSprop(params, lr=0.01, momentum=0.5, foreach=foreach)
    return o.Adagrad(params, lr=0.1, foreach=foreach)


def run_calls(lib, cfg, data, p0, compiled):
    plan, nback, zero_mode, kind, foreach, set_none_in = cfg[:6]
    flat = len(cfg) > 6 and cfg[6]
    params = [lib.tensor(a, requires_grad=True) for a in p0]
    state = {"buf": [lib.zeros_like(p) for p in params], "m": [lib.zeros_like(p) for p in params],
             "v": [lib.zeros_like(p) for p in params], "step": lib.tensor(0.0)}
    if flat:     # every state buffer a view of one flat buffer
        n = sum(p.numel() for p in params)
        state["flat"] = lib.zeros(3 * n)
        k = 0
        for key in ("buf", "m", "v"):
            for i, p in enumerate(params):
                state[key][i] = state["flat"][k:k + p.numel()].view(p.shape)
                k += p.numel()
    opt = make_optim(lib, kind, params, foreach)

    def step(x, y):
        loss = None
        for k in range(nback):
            lo = loss_of(lib, params, x[k::nback], y[k::nback])
            lo.backward()
            loss = lo if loss is None else loss + lo
        with lib.no_grad():
            for u in plan:
                update(lib, u, params, state, 0.05)
        if opt is not None:
            opt.step()
            if set_none_in is not None:
                opt.zero_grad(set_to_none=set_none_in)
        return loss.detach()
    fn = tracec.compile(step, backend="cpu") if compiled else step
    outs = []
    for k, (x0, y0) in enumerate(data):
        if zero_mode == "none_":
            for p in params:
                p.grad = None
        elif zero_mode == "zero_":
            for p in params:
                if p.grad is not None:
                    p.grad.zero_()
        try:
            loss = fn(lib.tensor(x0), lib.tensor(y0))
        except Exception as ex:  # noqa
            return ("raised", k, type(ex).__name__, str(ex).splitlines()[0][:200] if str(ex) else "")
        snap = {"loss": loss.numpy().copy()}
        for i, p in enumerate(params):
            snap[f"p{i}"] = p.detach().numpy().copy()
            snap[f"g{i}"] = None if p.grad is None else p.grad.numpy().copy()
            for s in ("buf", "m", "v"):
                snap[f"{s}{i}"] = state[s][i].numpy().copy()
        snap["step"] = state["step"].numpy().copy()
        if "flat" in state:
            snap["flat"] = state["flat"].numpy().copy()
        if opt is not None:
            for i, p in enumerate(params):
                for key, val in sorted(opt.state[p].items()):
                    if hasattr(val, "numpy"):
                        snap[f"opt{i}.{key}"] = val.detach().numpy().copy()
        outs.append(snap)
    return outs, (fn.cache_info() if compiled else None)


def run_one(seed, check_torch=True):
    rng = np.random.default_rng(seed)
    ups = UPDATES2 if seed >= V2 else UPDATES
    plan = [ups[int(rng.integers(len(ups)))] for _ in range(int(rng.integers(0, 4)))]
    kind = OPTIMS[int(rng.integers(len(OPTIMS)))]
    cfg = (plan, int(rng.integers(1, 3)), ("none_", "zero_", "keep")[int(rng.integers(3))],
           kind, bool(rng.integers(2)), (None, True, False)[int(rng.integers(3))])
    if seed >= V2:
        cfg += (bool(rng.integers(2)),)
    data = [(rng.standard_normal((4, 4)).astype(np.float32),
             rng.standard_normal((4, 2)).astype(np.float32)) for _ in range(4)]
    p0 = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in ((4, 3), (3,), (3, 2))]
    e = run_calls(tracec, cfg, data, p0, False)
    bad = []
    if check_torch:
        t = run_calls(torch, cfg, data, p0, False)
        if (e[0] == "raised") != (t[0] == "raised"):
            return [("eager vs torch raised", e if e[0] == "raised" else t)], cfg
        if e[0] != "raised":
            bad += [("eager!=torch",) + b for b in compare(e[0], t[0])]
    c = run_calls(tracec, cfg, data, p0, True)
    if e[0] == "raised":
        return ([] if c[0] == "raised" else [("eager raised, compiled not", e)]), cfg
    if c[0] == "raised":
        return [("compiled raised", c)], cfg
    bad += compare(e[0], c[0])
    if c[1].hits < 1:
        bad.append(("no native call", str(c[1])[:300]))
    return bad, cfg


def compare(eo, co):
    bad = []
    for k, (a, b) in enumerate(zip(eo, co)):
        if sorted(a) != sorted(b):
            bad.append((k, "keys", sorted(set(a) ^ set(b))))
        for name in a:
            x, y = a[name], b.get(name)
            if (x is None) != (y is None) or (x is not None and (
                    x.shape != y.shape or
                    # (atol scaled by the array: RMSprop/Adam divide by
                    # small square averages, which scales rounding up)
                    not np.allclose(x, y, rtol=1e-4, equal_nan=True,
                                    atol=1e-5 * max(1.0, float(np.abs(y).max(initial=0)))))):
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
