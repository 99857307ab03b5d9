"""RMSprop, Adagrad, Adadelta and LBFGS against torch.optim: signatures,
trajectories (float32 and float64), parameter groups, state dicts (their
format, a round trip, and loading torch's own state dict)."""
import inspect

import numpy as np
import pytest
import torch

import tracec
import tracec.optim as toptim
from test_optim import (NAMES, _case_id, assert_traj_close, run_tc, run_th, tc_loss, tc_params,
                        th_loss, th_params)


def _signature(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "LBFGS"])
def test_constructor_signature_matches_torch(name):
    """Every argument, its kind (positional / keyword-only) and default."""
    assert _signature(getattr(toptim, name).__init__) == \
        _signature(getattr(torch.optim, name).__init__)


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(maximize=True, foreach=False, fused=False, differentiable=False)),
    ("Adam", dict(amsgrad=True, maximize=True, foreach=True, capturable=False,
                  differentiable=False, decoupled_weight_decay=True)),
    ("AdamW", dict(amsgrad=True, maximize=True, foreach=None, fused=None, capturable=False)),
    ("RMSprop", dict(capturable=False, foreach=True, maximize=True, differentiable=False)),
    ("Adagrad", dict(foreach=True, maximize=True, differentiable=False, fused=None)),
    ("Adadelta", dict(foreach=True, capturable=False, maximize=True, differentiable=False)),
])
def test_compatibility_flags_are_accepted_and_stored(name, kw):
    ps, tps = tc_params(), th_params()
    g = getattr(toptim, name)(ps, **kw).param_groups[0]
    tg = getattr(torch.optim, name)(tps, **kw).param_groups[0]
    assert {k: v for k, v in g.items() if k != "params"} == \
        {k: v for k, v in tg.items() if k != "params"}


def test_fused_with_foreach_is_refused_like_torch():
    for lib, ps in ((toptim, tc_params()), (torch.optim, th_params())):
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True`"):
            lib.Adagrad(ps, fused=True, foreach=True)


RMSPROP_CASES = [
    dict(),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, centered=True),
    dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1),
    dict(lr=0.005, momentum=0.5, centered=True, weight_decay=0.05, maximize=True),
    dict(lr=0.01, alpha=0.3, centered=True),   # lerp weight > 0.5: the other branch
    dict(lr=0.01, maximize=True),
]
# Centered RMSprop divides by sqrt(square_avg - grad_avg**2), which cancels
# as the gradient settles: float32 differences of one ulp (the gradients'
# summation order; PyTorch's lerp_ is a fused multiply-add) grow there to
# ~2e-5 absolute over 10 steps.  float64 still matches to 1e-12.
ILL_CONDITIONED_F32 = [RMSPROP_CASES[4], RMSPROP_CASES[5]]
ADAGRAD_CASES = [
    dict(),
    dict(lr=0.1, lr_decay=0.05),
    dict(lr=0.1, initial_accumulator_value=0.3),
    dict(lr=0.05, weight_decay=0.1, eps=1e-6),
    dict(lr=0.1, lr_decay=0.2, initial_accumulator_value=0.1, weight_decay=0.05, maximize=True),
]
ADADELTA_CASES = [
    dict(),
    dict(lr=0.5, rho=0.5),
    dict(rho=0.95, eps=1e-4, weight_decay=0.1),
    dict(lr=2.0, weight_decay=0.05, maximize=True),
]
CASES = ([("RMSprop", kw) for kw in RMSPROP_CASES] + [("Adagrad", kw) for kw in ADAGRAD_CASES]
         + [("Adadelta", kw) for kw in ADADELTA_CASES])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{_case_id(kw)}" for n, kw in CASES])
def test_trajectory_and_state_match_torch(name, kw, dtype):
    a, opt, ps = run_tc(lambda ps: getattr(toptim, name)(ps, **kw), dtype=dtype)
    b, topt, tps = run_th(lambda ps: getattr(torch.optim, name)(ps, **kw), dtype=dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    if dtype == "float32" and kw in ILL_CONDITIONED_F32:
        for pa, pb in zip(a, b):
            for x, y in zip(pa, pb):
                np.testing.assert_allclose(x, y, rtol=1e-4, atol=5e-5)
        return
    assert_traj_close(a, b, dtype)
    for p, tp in zip(ps, tps):
        st, tst = opt.state[p], topt.state[tp]
        assert sorted(st) == sorted(tst)
        assert st["step"].dtype is tracec.float32 and st["step"].shape == ()
        assert st["step"].item() == tst["step"].item() == 10.0
        for k in st:
            assert str(st[k].dtype).split(".")[-1] == str(tst[k].dtype).split(".")[-1]
            np.testing.assert_allclose(st[k].numpy(), tst[k].numpy(), rtol=rtol, atol=rtol / 10)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta"])
def test_lr_change_is_read_at_step_time(name):
    changes = {3: 0.002, 6: 0.03}
    a, _, _ = run_tc(lambda ps: getattr(toptim, name)(ps, lr=0.01), lr_changes=changes)
    b, _, _ = run_th(lambda ps: getattr(torch.optim, name)(ps, lr=0.01), lr_changes=changes)
    # RMSprop's normalized steps at lr 0.03 amplify the 1e-6 gradient
    # differences (matmul sums) to ~5e-5 relative by step 7, whatever the
    # update's own rounding; a step reading the old lr would be off by far more
    assert_traj_close(a, b, "float32", rtol=2e-4 if name == "RMSprop" else None)


def _groups(lib, ps, name):
    if name == "RMSprop":
        return lib.RMSprop([{"params": ps[:2], "centered": True},
                            {"params": ps[2:], "lr": 0.002, "momentum": 0.8}], lr=0.01)
    if name == "Adagrad":
        return lib.Adagrad([{"params": ps[:2], "lr_decay": 0.1},
                            {"params": ps[2:], "lr": 0.05, "initial_accumulator_value": 0.7}],
                           lr=0.1, initial_accumulator_value=0.2)
    return lib.Adadelta([{"params": ps[:2], "rho": 0.6}, {"params": ps[2:], "lr": 0.5}],
                        weight_decay=0.01)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta"])
def test_param_groups_match_torch(name):
    """Per-group options, defaults filled in (Adagrad fills every sum with
    the optimizer's initial_accumulator_value, as PyTorch does)."""
    a, opt, _ = run_tc(lambda ps: _groups(toptim, ps, name))
    b, topt, _ = run_th(lambda ps: _groups(torch.optim, ps, name))
    assert_traj_close(a, b, "float32")
    for g, tg in zip(opt.state_dict()["param_groups"], topt.state_dict()["param_groups"]):
        assert g == tg


def test_adagrad_add_param_group_gets_state_on_its_first_step():
    a, b = tc_params(), th_params()
    for lib, ps, loss in ((toptim, a, tc_loss), (torch.optim, b, th_loss)):
        opt = lib.Adagrad(ps[:2], lr=0.1, initial_accumulator_value=0.5)
        opt.add_param_group({"params": ps[2:], "lr": 0.05})
        for _ in range(3):
            opt.zero_grad()
            loss(ps).backward()
            opt.step()
    for p, tp in zip(a, b):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_constructor_errors_match_torch():
    bad = [("RMSprop", dict(lr=-1)), ("RMSprop", dict(alpha=-0.1)),
           ("RMSprop", dict(momentum=-1)), ("RMSprop", dict(eps=-1)),
           ("Adagrad", dict(lr_decay=-1)), ("Adagrad", dict(initial_accumulator_value=-1)),
           ("Adagrad", dict(weight_decay=-1)), ("Adadelta", dict(rho=1.5)),
           ("Adadelta", dict(eps=-1)), ("LBFGS", dict(lr=-1))]
    for name, kw in bad:
        msgs = []
        for lib, ps in ((toptim, tc_params()), (torch.optim, th_params())):
            with pytest.raises(ValueError) as e:
                getattr(lib, name)(ps, **kw)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
    for lib, ps in ((toptim, tc_params()), (torch.optim, th_params())):
        with pytest.raises(ValueError, match="doesn't support per-parameter options"):
            lib.LBFGS([{"params": ps[:2]}, {"params": ps[2:]}])


# --- state dicts ------------------------------------------------------------------------

SD_CASES = [("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
            ("RMSprop", dict(lr=0.01)),
            ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.2)),
            ("Adadelta", dict(lr=0.5, weight_decay=0.01))]


def _to_tracec(obj):
    """A torch state dict with every tensor made a tracec tensor."""
    if isinstance(obj, torch.Tensor):
        return tracec.tensor(obj.detach().numpy().copy())
    if isinstance(obj, dict):
        return {k: _to_tracec(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_tracec(v) for v in obj)
    return obj


def _continue(opt, ps, loss, steps=5):
    for _ in range(steps):
        opt.zero_grad()
        loss(ps).backward()
        opt.step()
    return [p.detach().numpy().copy() for p in ps]


@pytest.mark.parametrize("name,kw", SD_CASES, ids=[f"{n}-{_case_id(kw)}" for n, kw in SD_CASES])
def test_state_dict_format_equals_torch(name, kw):
    def make(lib, ps):
        return getattr(lib, name)([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.003}], **kw)
    _, opt, _ = run_tc(lambda ps: make(toptim, ps), steps=3)
    _, topt, _ = run_th(lambda ps: make(torch.optim, ps), steps=3)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i, st in sd["state"].items():
        assert sorted(st) == sorted(tsd["state"][i])
        for k, v in st.items():
            tv = tsd["state"][i][k]
            assert tuple(v.shape) == tuple(tv.shape)
            assert str(v.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1]
            np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("via", ["memory", "tracec-file", "torch-file"])
@pytest.mark.parametrize("name,kw", SD_CASES, ids=[f"{n}-{_case_id(kw)}" for n, kw in SD_CASES])
def test_loading_torchs_state_dict_continues_like_torch(name, kw, via, tmp_path):
    """torch trains 5 steps and saves; a tracec optimizer loads that state
    (converted in memory, through tracec.save, or a torch.save file read by
    tracec.load) and 5 more steps match torch's own 5 more steps."""
    make = lambda lib, ps: getattr(lib, name)(ps, **kw)  # noqa: E731
    _, topt, tps = run_th(lambda ps: make(torch.optim, ps), steps=5)
    if via == "torch-file":
        torch.save({"opt": topt.state_dict(), "w": [p.detach() for p in tps]},
                   tmp_path / "ck.pt")
        try:
            ck = tracec.load(str(tmp_path / "ck.pt"))
        except tracec.serialization.CheckpointError as e:
            if "torch.save zip archive" not in str(e):
                raise
            pytest.skip("this tracec.load does not read torch.save files yet")
        sd, weights = ck["opt"], [w.numpy() for w in ck["w"]]
    else:
        sd = _to_tracec(topt.state_dict())
        weights = [p.detach().numpy().copy() for p in tps]
        if via == "tracec-file":
            tracec.save(sd, str(tmp_path / "ck.tc"))
            sd = tracec.load(str(tmp_path / "ck.tc"))
    ps = [tracec.tensor(w, requires_grad=True) for w in weights]
    opt = make(toptim, ps)
    opt.load_state_dict(sd)
    want = _continue(topt, tps, th_loss)
    got = _continue(opt, ps, tc_loss)
    for name_, x, y in zip(NAMES, got, want):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=name_)
    assert opt.state[ps[0]]["step"].item() == 10.0


@pytest.mark.parametrize("name,kw", SD_CASES, ids=[f"{n}-{_case_id(kw)}" for n, kw in SD_CASES])
def test_state_dict_round_trip_continues_identically(name, kw):
    make = lambda ps: getattr(toptim, name)(ps, **kw)  # noqa: E731
    full, _, _ = run_tc(make, steps=8)
    first, opt, ps = run_tc(make, steps=4)
    ps2 = [tracec.tensor(p.detach().numpy(), requires_grad=True) for p in ps]
    opt2 = make(ps2)
    opt2.load_state_dict(opt.state_dict())
    rest = [_continue(opt2, ps2, tc_loss, steps=1) for _ in range(4)]
    for a, b in zip(full, first + rest):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    # as PyTorch's, a live state dict's tensors are loaded aliased
    for p2, p in zip(ps2, ps):
        for k, v in opt2.state[p2].items():
            assert v is opt.state[p][k]


def test_old_checkpoint_with_numeric_step_loads():
    ps = tc_params()
    opt = toptim.RMSprop(ps, momentum=0.9)
    _continue(opt, ps, tc_loss, steps=1)
    sd = opt.state_dict()
    for st in sd["state"].values():
        st["step"] = 1
    opt2 = toptim.RMSprop(tc_params(), momentum=0.9)
    opt2.load_state_dict(sd)
    for st in opt2.state.values():
        assert isinstance(st["step"], tracec.Tensor) and st["step"].dtype is tracec.float32
