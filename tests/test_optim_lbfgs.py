"""LBFGS against torch.optim.LBFGS: trajectories, returned losses and
counters (fixed step and strong-Wolfe line search), errors, state dicts.

L-BFGS iterates a map that amplifies rounding (each iteration's direction
comes from dot products of the previous ones): float64 runs are compared at
rtol 1e-10, float32 ones at rtol 1e-3, over configurations whose 10 steps
stay out of the chaotic regime; the number of function evaluations and
iterations (every decision the algorithm takes) must be equal exactly."""
import warnings

import numpy as np
import pytest
import torch

import tracec

R = np.random.default_rng(1)
X = R.standard_normal((40, 4))
Y = np.sin(X @ R.standard_normal((4, 2))) + 0.3 * R.standard_normal((40, 2))
INIT = [R.standard_normal((4, 6)) * 0.5, R.standard_normal(6) * 0.1,
        R.standard_normal((6, 2)) * 0.5, R.standard_normal(2) * 0.1]


def _params(lib, dtype):
    return [lib.tensor(a.astype(dtype), requires_grad=True) for a in INIT]


def _loss(lib, ps):
    W1, b1, W2, b2 = ps
    x, y = lib.tensor(X, dtype=W1.dtype), lib.tensor(Y, dtype=W1.dtype)
    return ((lib.tanh(x @ W1 + b1) @ W2 + b2 - y) ** 2).mean()


def _closure(lib, opt, ps):
    def closure():
        opt.zero_grad()
        loss = _loss(lib, ps)
        loss.backward()
        return loss
    return closure


def _run(lib, dtype, kw, steps=10, ps=None, opt=None):
    ps = ps if ps is not None else _params(lib, dtype)
    opt = opt if opt is not None else lib.optim.LBFGS(ps, **kw)
    closure = _closure(lib, opt, ps)
    traj, losses = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: float() of a tensor that requires grad
        for _ in range(steps):
            losses.append(float(opt.step(closure)))
            traj.append([p.detach().numpy().copy() for p in ps])
    st = opt.state[ps[0]]
    return traj, losses, (st["func_evals"], st["n_iter"]), opt, ps


CASES = [
    dict(max_iter=3),
    dict(lr=0.3, max_iter=3),
    dict(max_iter=3, history_size=2),
    dict(max_iter=3, max_eval=10, line_search_fn="strong_wolfe"),
    dict(tolerance_grad=1e-2),  # 20 iterations, stops on the gradient tolerance
]
CASES64 = [dict(max_iter=3, max_eval=8, history_size=2, line_search_fn="strong_wolfe",
                tolerance_change=1e-3)]


def _id(kw):
    return ",".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("dtype,kw", [(d, kw) for kw in CASES for d in ("float32", "float64")]
                         + [("float64", kw) for kw in CASES64],
                         ids=[f"{d}-{_id(kw)}" for kw in CASES for d in ("float32", "float64")]
                         + [f"float64-{_id(kw)}" for kw in CASES64])
def test_lbfgs_matches_torch(kw, dtype):
    a, la, counts, opt, ps = _run(tracec, dtype, kw)
    b, lb, tcounts, topt, tps = _run(torch, dtype, kw)
    assert counts == tcounts
    # float32: rtol 1e-3, and an atol of 1e-3 of the parameters' scale (~0.1-1)
    # for elements near zero, where the amplified rounding is relative to
    # the whole vector (a 0.031 weight 5e-5 apart at step 8, the counts equal).
    rtol, atol = (1e-3, 1e-4) if dtype == "float32" else (1e-10, 1e-12)
    np.testing.assert_allclose(la, lb, rtol=rtol, atol=atol)
    for step, (pa, pb) in enumerate(zip(a, b)):
        for x, y in zip(pa, pb):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"step {step + 1}")
    st, tst = opt.state[ps[0]], topt.state[tps[0]]
    assert sorted(st) == sorted(tst)
    assert len(st["old_dirs"]) == len(tst["old_dirs"]) <= opt.param_groups[0]["history_size"]
    for k in ("t", "H_diag", "prev_loss", "func_evals"):  # number or tensor, as torch
        assert type(st[k]).__name__ == type(tst[k]).__name__, k


def test_step_returns_the_closures_first_loss():
    ps = _params(tracec, "float64")
    opt = tracec.optim.LBFGS(ps, max_iter=5)
    closure = _closure(tracec, opt, ps)
    first = _loss(tracec, ps).item()
    out = opt.step(closure)
    assert isinstance(out, tracec.Tensor) and out.item() == first
    assert _loss(tracec, ps).item() < first


def test_defaults_and_errors_match_torch():
    ps, tps = _params(tracec, "float32"), _params(torch, "float32")
    g = tracec.optim.LBFGS(ps).param_groups[0]
    tg = torch.optim.LBFGS(tps).param_groups[0]
    assert {k: v for k, v in g.items() if k != "params"} == \
        {k: v for k, v in tg.items() if k != "params"}
    assert g["max_eval"] == 25
    for lib, p in ((tracec, ps), (torch, tps)):
        opt = lib.optim.LBFGS(p, line_search_fn="armijo")
        with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
            opt.step(_closure(lib, opt, p))
        with pytest.raises(TypeError):
            lib.optim.LBFGS(p).step()


def test_converged_parameters_stop_at_once():
    """A zero gradient meets tolerance_grad: one evaluation, no iteration."""
    p = tracec.zeros(3, requires_grad=True)
    opt = tracec.optim.LBFGS([p])

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    assert opt.state[p]["func_evals"] == 1 and opt.state[p]["n_iter"] == 0


def _to_tracec(obj):
    if isinstance(obj, torch.Tensor):
        return tracec.tensor(obj.detach().numpy().copy())
    if isinstance(obj, dict):
        return {k: _to_tracec(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_tracec(v) for v in obj)
    return obj


@pytest.mark.parametrize("kw", [dict(max_iter=3), dict(max_iter=3, history_size=2,
                                                        line_search_fn="strong_wolfe")])
def test_loading_torchs_state_dict_continues_like_torch(kw, tmp_path):
    """torch runs 3 steps; its state dict (lists of tensors, floats, ints,
    None) goes through tracec.save/load into a tracec LBFGS, and 3 more
    steps equal torch's."""
    _, _, _, topt, tps = _run(torch, "float64", kw, steps=3)
    tsd = topt.state_dict()
    sd = _to_tracec(tsd)
    tracec.save(sd, str(tmp_path / "lbfgs.tc"))
    sd = tracec.load(str(tmp_path / "lbfgs.tc"))
    ps = [tracec.tensor(p.detach().numpy().copy(), requires_grad=True) for p in tps]
    opt = tracec.optim.LBFGS(ps, **kw)
    opt.load_state_dict(sd)
    assert sorted(opt.state_dict()["state"][0]) == sorted(tsd["state"][0])
    a, la, counts, _, _ = _run(tracec, "float64", kw, steps=3, ps=ps, opt=opt)
    b, lb, tcounts, _, _ = _run(torch, "float64", kw, steps=3, ps=tps, opt=topt)
    assert counts == tcounts
    for x, y in zip(a[-1], b[-1]):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


def test_state_dict_round_trip_continues_identically():
    kw = dict(max_iter=4, line_search_fn="strong_wolfe")
    full, _, _, _, _ = _run(tracec, "float64", kw, steps=4)
    first, _, _, opt, ps = _run(tracec, "float64", kw, steps=2)
    ps2 = [tracec.tensor(p.detach().numpy(), requires_grad=True) for p in ps]
    opt2 = tracec.optim.LBFGS(ps2, **kw)
    opt2.load_state_dict(opt.state_dict())
    rest, _, _, _, _ = _run(tracec, "float64", kw, steps=2, ps=ps2, opt=opt2)
    for x, y in zip(full[-1], rest[-1]):
        np.testing.assert_array_equal(x, y)
