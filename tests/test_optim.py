"""tracec.optim against torch.optim: trajectories, groups, zero_grad,
state dicts, schedulers."""
import math

import numpy as np
import pytest
import torch

import tracec
import tracec.optim as toptim
from tracec.optim import lr_scheduler as tsched

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5))
Y = RNG.standard_normal((6, 3))
INIT = {"W1": RNG.standard_normal((5, 7)) * 0.5, "b1": RNG.standard_normal(7) * 0.1,
        "W2": RNG.standard_normal((7, 3)) * 0.5, "b2": RNG.standard_normal(3) * 0.1}
NAMES = ["W1", "b1", "W2", "b2"]


def tc_params(dtype="float32"):
    return [tracec.tensor(INIT[n].astype(dtype), requires_grad=True) for n in NAMES]


def th_params(dtype="float32"):
    return [torch.tensor(INIT[n].astype(dtype), requires_grad=True) for n in NAMES]


def tc_loss(ps):
    W1, b1, W2, b2 = ps
    x = tracec.tensor(X, dtype=W1.dtype)
    y = tracec.tensor(Y, dtype=W1.dtype)
    h = tracec.tanh(x @ W1 + b1)
    return ((h @ W2 + b2 - y) ** 2).mean()


def th_loss(ps):
    W1, b1, W2, b2 = ps
    x = torch.tensor(X, dtype=W1.dtype)
    y = torch.tensor(Y, dtype=W1.dtype)
    h = torch.tanh(x @ W1 + b1)
    return ((h @ W2 + b2 - y) ** 2).mean()


def run_tc(make_opt, steps=10, dtype="float32", params=None, lr_changes=None):
    ps = params if params is not None else tc_params(dtype)
    opt = make_opt(ps)
    traj = []
    for i in range(steps):
        if lr_changes and i in lr_changes:
            for g in opt.param_groups:
                g["lr"] = lr_changes[i]
        opt.zero_grad()
        loss = tc_loss(ps)
        loss.backward()
        opt.step()
        traj.append([p.detach().numpy().copy() for p in ps])
    return traj, opt, ps


def run_th(make_opt, steps=10, dtype="float32", lr_changes=None):
    ps = th_params(dtype)
    opt = make_opt(ps)
    traj = []
    for i in range(steps):
        if lr_changes and i in lr_changes:
            for g in opt.param_groups:
                g["lr"] = lr_changes[i]
        opt.zero_grad()
        loss = th_loss(ps)
        loss.backward()
        opt.step()
        traj.append([p.detach().numpy().copy() for p in ps])
    return traj, opt, ps


def assert_traj_close(a, b, dtype, rtol=None):
    rtol, atol = ((1e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-13)) if rtol is None \
        else (rtol, 1e-6)
    assert len(a) == len(b)
    for step, (pa, pb) in enumerate(zip(a, b)):
        for name, x, y in zip(NAMES, pa, pb):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol,
                                       err_msg=f"step {step + 1}, parameter {name}")


def _case_id(kw):
    return ",".join(f"{k}={v}" for k, v in kw.items()) or "default"


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, dampening=0.3),
    dict(lr=0.1, momentum=0.9, nesterov=True),
    dict(lr=0.1, weight_decay=0.05),
    dict(lr=0.1, momentum=0.5, weight_decay=0.05, nesterov=True),
    dict(lr=0.05, momentum=0.9, maximize=True),
    dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01, maximize=True),
]

ADAM_CASES = [
    dict(),
    dict(lr=0.01),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, amsgrad=True, weight_decay=0.05),
    dict(lr=0.01, maximize=True),
    dict(lr=0.01, betas=(0.3, 0.9)),  # lerp weight > 0.5: the other branch
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", SGD_CASES, ids=lambda kw: _case_id(kw))
def test_sgd_matches_torch(kw, dtype):
    a, opt, _ = run_tc(lambda ps: toptim.SGD(ps, **kw), dtype=dtype)
    b, topt, _ = run_th(lambda ps: torch.optim.SGD(ps, **kw), dtype=dtype)
    assert_traj_close(a, b, dtype)
    assert sorted(opt.state_dict()["param_groups"][0]) == \
        sorted(topt.state_dict()["param_groups"][0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", ADAM_CASES, ids=lambda kw: _case_id(kw))
def test_adam_matches_torch(kw, dtype):
    a, opt, ps = run_tc(lambda ps: toptim.Adam(ps, **kw), dtype=dtype)
    b, topt, tps = run_th(lambda ps: torch.optim.Adam(ps, **kw), dtype=dtype)
    assert_traj_close(a, b, dtype)
    for p, tp in zip(ps, tps):
        st, tst = opt.state[p], topt.state[tp]
        assert sorted(st) == sorted(tst)
        assert st["step"].dtype is tracec.float32 and st["step"].shape == ()
        assert st["step"].item() == tst["step"].item() == 10.0
        for k in st:
            np.testing.assert_allclose(st[k].numpy(), tst[k].numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.01, weight_decay=0.3, amsgrad=True),
                                dict(lr=0.02, weight_decay=0.0)])
def test_adamw_matches_torch(kw, dtype):
    a, opt, _ = run_tc(lambda ps: toptim.AdamW(ps, **kw), dtype=dtype)
    b, topt, _ = run_th(lambda ps: torch.optim.AdamW(ps, **kw), dtype=dtype)
    assert_traj_close(a, b, dtype)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
    assert opt.param_groups[0]["weight_decay"] == topt.param_groups[0]["weight_decay"]


def test_adamw_default_weight_decay():
    p = tracec.zeros(2, requires_grad=True)
    assert toptim.AdamW([p]).param_groups[0]["weight_decay"] == 1e-2
    assert toptim.Adam([p]).param_groups[0]["weight_decay"] == 0


@pytest.mark.parametrize("cls", ["SGD", "Adam"])
def test_lr_change_is_read_at_step_time(cls):
    kw = dict(lr=0.05, momentum=0.9) if cls == "SGD" else dict(lr=0.05)
    changes = {3: 0.01, 6: 0.2}
    a, _, _ = run_tc(lambda ps: getattr(toptim, cls)(ps, **kw), lr_changes=changes)
    b, _, _ = run_th(lambda ps: getattr(torch.optim, cls)(ps, **kw), lr_changes=changes)
    assert_traj_close(a, b, "float32")


def _groups(lib, ps, cls):
    if cls == "SGD":
        return lib.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.02, "momentum": 0.5}],
                       lr=0.1, momentum=0.9)
    return lib.Adam([{"params": ps[:2], "betas": (0.8, 0.9)}, {"params": ps[2:], "lr": 0.05}],
                    lr=0.01, amsgrad=True)


@pytest.mark.parametrize("cls", ["SGD", "Adam"])
def test_param_groups_match_torch(cls):
    a, opt, _ = run_tc(lambda ps: _groups(toptim, ps, cls))
    b, topt, _ = run_th(lambda ps: _groups(torch.optim, ps, cls))
    assert_traj_close(a, b, "float32")
    for g, tg in zip(opt.state_dict()["param_groups"], topt.state_dict()["param_groups"]):
        assert g == tg  # every option, defaults filled in, same values


def test_param_group_options_and_add_param_group():
    ps = tc_params()
    opt = toptim.SGD(ps[:2], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": ps[2], "lr": 0.01})
    assert len(opt.param_groups) == 2
    g = opt.param_groups[1]
    assert g["params"] == [ps[2]] or g["params"][0] is ps[2]
    assert g["lr"] == 0.01 and g["momentum"] == 0.9 and g["nesterov"] is False
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [ps[0]]})
    with pytest.raises(TypeError, match="must be a dict"):
        opt.add_param_group([ps[3]])
    with pytest.raises(TypeError, match="ordered collections"):
        opt.add_param_group({"params": {ps[3]}})


def test_constructor_errors():
    p = tracec.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        toptim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        toptim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        toptim.SGD([1.0], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        toptim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        toptim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid momentum"):
        toptim.SGD([p], lr=0.1, momentum=-0.1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero "
                                         "dampening"):
        toptim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Nesterov"):
        toptim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        toptim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon"):
        toptim.Adam([p], eps=-1.0)
    with pytest.raises(ValueError, match="weight_decay"):
        toptim.AdamW([p], weight_decay=-1.0)


def test_named_parameters_groups():
    ps = tc_params()
    opt = toptim.SGD(list(zip(NAMES, ps)), lr=0.1)
    assert opt.param_groups[0]["param_names"] == NAMES
    assert opt.state_dict()["param_groups"][0]["param_names"] == NAMES


def test_zero_grad_semantics():
    ps = tc_params()
    opt = toptim.SGD(ps, lr=0.1)
    tc_loss(ps).backward()
    grads = [p.grad for p in ps]
    assert all(g is not None for g in grads)
    opt.zero_grad(set_to_none=False)
    for p, g in zip(ps, grads):
        assert p.grad is g  # zeroed in place, same tensor
        assert not np.any(p.grad.numpy())
    tc_loss(ps).backward()
    opt.zero_grad()  # default: set_to_none=True
    assert all(p.grad is None for p in ps)


def test_params_without_grad_are_skipped():
    ps = tc_params()
    opt = toptim.Adam(ps, lr=0.1)
    loss = (ps[0] ** 2).sum()
    loss.backward()
    before = [p.detach().numpy().copy() for p in ps]
    opt.step()
    assert not np.allclose(ps[0].detach().numpy(), before[0])
    for p, b in zip(ps[1:], before[1:]):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    assert set(map(id, opt.state)) == {id(ps[0])}
    sgd = toptim.SGD(ps, lr=0.1)  # momentum 0: SGD keeps no state
    sgd.step()
    assert len(sgd.state) == 0


def test_step_is_in_place_and_keeps_leaves():
    ps = tc_params()
    datas = [p._data for p in ps]
    opt = toptim.Adam(ps, lr=0.1)
    tc_loss(ps).backward()
    opt.step()
    state = opt.state[ps[0]]
    ids = {k: id(v) for k, v in state.items()}
    opt.zero_grad()
    tc_loss(ps).backward()
    opt.step()
    for p, d in zip(ps, datas):
        assert p._data is d and p.is_leaf and p.requires_grad and p.grad_fn is None
    assert {k: id(v) for k, v in opt.state[ps[0]].items()} == ids  # state updated in place
    assert opt.state[ps[0]]["step"].item() == 2.0
    assert not state["exp_avg"].requires_grad


def test_closure():
    ps = tc_params()
    opt = toptim.SGD(ps, lr=0.1)
    calls = []

    def closure():
        opt.zero_grad()
        loss = tc_loss(ps)
        loss.backward()
        calls.append(tracec.is_grad_enabled())
        return loss

    with tracec.no_grad():
        loss = opt.step(closure)
    assert calls == [True] and isinstance(loss, tracec.Tensor)


def test_step_hooks():
    ps = tc_params()
    opt = toptim.SGD(ps, lr=0.1)
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: seen.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: seen.append("post"))
    opt.step()
    assert seen == ["pre", "post"]
    h1.remove()
    opt.step()
    assert seen == ["pre", "post", "post"]


# --- state dicts ---------------------------------------------------------------------

def _sd_structure(sd):
    return ({k: sorted(v) for k, v in sd["state"].items()},
            [sorted(g) for g in sd["param_groups"]],
            [g["params"] for g in sd["param_groups"]])


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                     ("SGD", dict(lr=0.1, nesterov=True, momentum=0.9)),
                                     ("Adam", dict(lr=0.01, amsgrad=True)),
                                     ("AdamW", dict(lr=0.01))])
def test_state_dict_format_matches_torch(name, kw):
    def groups(lib, ps):
        return getattr(lib, name)([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.003}], **kw)
    _, opt, _ = run_tc(lambda ps: groups(toptim, ps), steps=2)
    _, topt, _ = run_th(lambda ps: groups(torch.optim, ps), steps=2)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert set(sd) == set(tsd) == {"state", "param_groups"}
    assert _sd_structure(sd) == _sd_structure(tsd)
    for g, tg in zip(sd["param_groups"], tsd["param_groups"]):
        assert g == tg
    for i, st in sd["state"].items():
        for k, v in st.items():
            tv = tsd["state"][i][k]
            assert isinstance(v, tracec.Tensor)
            assert tuple(v.shape) == tuple(tv.shape)
            assert str(v.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1]
            np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                     ("SGD", dict(lr=0.1)),
                                     ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
                                     ("AdamW", dict(lr=0.01))])
@pytest.mark.parametrize("via_file", [False, True])
def test_state_dict_round_trip_continues_identically(name, kw, via_file, tmp_path):
    make = lambda ps: getattr(toptim, name)(  # noqa: E731
        [{"params": ps[:2]}, {"params": ps[2:], "lr": kw["lr"] / 2}], **kw)
    full, _, _ = run_tc(make, steps=10)

    # 5 steps, checkpoint, fresh params + optimizer, load, 5 more steps.
    first, opt, ps = run_tc(make, steps=5)
    sd = opt.state_dict()
    weights = [p.detach().clone() for p in ps]
    if via_file:
        from tracec.serialization import load, save
        save({"opt": sd, "weights": weights, "epoch": 5}, tmp_path / "ck.tcs")
        ck = load(tmp_path / "ck.tcs")
        assert ck["epoch"] == 5
        sd, weights = ck["opt"], ck["weights"]
    ps2 = [tracec.tensor(w.numpy(), requires_grad=True) for w in weights]
    opt2 = make(ps2)
    opt2.param_groups[0]["lr"] = 123.0  # overwritten by the loaded groups
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    assert opt2.param_groups[0]["params"][0] is ps2[0]
    rest = []
    for _ in range(5):
        opt2.zero_grad()
        tc_loss(ps2).backward()
        opt2.step()
        rest.append([p.detach().numpy().copy() for p in ps2])
    for a, b in zip(full, first + rest):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    # as PyTorch's, a live state dict's tensors are loaded aliased, not
    # copied (torch.optim.Optimizer._process_value_according_to_param_policy)
    if not via_file:
        for p2, p in zip(ps2, ps):
            for k, v in opt2.state[p2].items():
                assert v is opt.state[p][k]


def test_load_state_dict_keeps_step_dtype_and_casts_state():
    ps = tc_params()
    opt = toptim.Adam(ps, lr=0.01)
    tc_loss(ps).backward()
    opt.step()
    sd = opt.state_dict()
    ps64 = tc_params("float64")
    opt64 = toptim.Adam(ps64, lr=0.01)
    opt64.load_state_dict(sd)
    st = opt64.state[ps64[0]]
    assert st["step"].dtype is tracec.float32
    assert st["exp_avg"].dtype is tracec.float64


def test_load_state_dict_step_as_number():
    ps = tc_params()
    opt = toptim.Adam(ps, lr=0.01)
    tc_loss(ps).backward()
    opt.step()
    sd = opt.state_dict()
    for st in sd["state"].values():
        st["step"] = 1  # an old checkpoint format
    opt2 = toptim.Adam(tc_params(), lr=0.01)
    opt2.load_state_dict(sd)
    for st in opt2.state.values():
        assert isinstance(st["step"], tracec.Tensor) and st["step"].item() == 1.0


def test_load_state_dict_mismatch_errors():
    ps = tc_params()
    opt = toptim.SGD([{"params": ps[:2]}, {"params": ps[2:]}], lr=0.1, momentum=0.9)
    sd = opt.state_dict()
    one_group = toptim.SGD(tc_params(), lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        one_group.load_state_dict(sd)
    q = tc_params()
    other_sizes = toptim.SGD([{"params": q[:1]}, {"params": q[1:]}], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        other_sizes.load_state_dict(sd)


def test_state_dict_matches_torch_errors():
    ps, tps = tc_params(), th_params()
    sd = toptim.SGD([{"params": ps[:2]}, {"params": ps[2:]}], lr=0.1).state_dict()
    tsd = torch.optim.SGD([{"params": tps[:2]}, {"params": tps[2:]}], lr=0.1).state_dict()
    for lib, params, d in ((toptim, tc_params(), sd), (torch.optim, th_params(), tsd)):
        with pytest.raises(ValueError) as e:
            lib.SGD(params, lr=0.1).load_state_dict(d)
        msg = str(e.value)
        assert msg == "loaded state dict has a different number of parameter groups"


# --- schedulers ----------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda lib, o: lib.StepLR(o, step_size=3, gamma=0.5),
    lambda lib, o: lib.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.3),
    lambda lib, o: lib.ExponentialLR(o, gamma=0.9),
    lambda lib, o: lib.CosineAnnealingLR(o, T_max=4, eta_min=0.001),
    lambda lib, o: lib.LambdaLR(o, lambda e: 1.0 / (1 + e)),
], ids=["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR"])
def test_schedulers_match_torch(make):
    ps, tps = tc_params(), th_params()
    opt = toptim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.05}], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([{"params": tps[:2]}, {"params": tps[2:], "lr": 0.05}], lr=0.1,
                           momentum=0.9)
    s, ts = make(tsched, opt), make(torch.optim.lr_scheduler, topt)
    lrs, tlrs = [], []
    for _ in range(12):
        opt.zero_grad()
        tc_loss(ps).backward()
        opt.step()
        s.step()
        topt.zero_grad()
        th_loss(tps).backward()
        topt.step()
        ts.step()
        lrs.append(s.get_last_lr())
        tlrs.append(ts.get_last_lr())
    assert len(lrs) == len(tlrs)
    for lr, tlr in zip(lrs, tlrs):
        assert lr == pytest.approx(tlr, rel=1e-12)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 12


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_scheduler_state_dict_resume():
    ps = tc_params()
    opt = toptim.SGD(ps, lr=1.0)
    s = tsched.CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        s.step()
    sd = s.state_dict()
    opt2 = toptim.SGD(tc_params(), lr=1.0)
    s2 = tsched.CosineAnnealingLR(opt2, T_max=10)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr()
    assert math.isclose(s.get_last_lr()[0], (1 + math.cos(math.pi * 5 / 10)) / 2)


# --- traceability ----------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda ps: toptim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: toptim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5, maximize=True),
    lambda ps: toptim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True),
    lambda ps: toptim.AdamW(ps, lr=0.01),
], ids=["sgd-nesterov", "sgd-dampening", "adam-amsgrad", "adamw"])
def test_step_is_pure_tensor_ops(make):
    """A step never reads tensor values into Python (the tracer raises
    there) and issues its math as primitives that a recorder sees; with a
    recorder installed the results are unchanged."""
    import sys
    core = sys.modules["tracec.tensor"]
    reference, _, _ = run_tc(make, steps=3)

    ps = tc_params()
    opt = make(ps)
    traj, prims, concrete = [], [], []
    for _ in range(3):
        opt.zero_grad(set_to_none=False)
        tc_loss(ps).backward()
        core.RECORDERS.append(lambda prim, args, params, out: prims.append(prim))
        core.CONCRETE_CHECKS.append(lambda t, why: concrete.append(why))
        try:
            opt.step()
            opt.zero_grad(set_to_none=False)
        finally:
            core.RECORDERS.pop()
            core.CONCRETE_CHECKS.pop()
        traj.append([p.detach().numpy().copy() for p in ps])
    assert concrete == []
    assert len(prims) > 0
    for a, b in zip(reference, traj):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
