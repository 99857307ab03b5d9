"""tracec.optim.lr_scheduler against torch.optim.lr_scheduler: learning
rates (and cycled momenta) over 15+ steps for every scheduler and option,
signatures, state dicts (same keys and values; a round trip continues the
schedule), the deprecated step(epoch), warnings, tensor learning rates."""
import inspect
import math
import warnings

import numpy as np
import pytest
import torch

import tracec
import tracec.optim as toptim
from tracec.optim import lr_scheduler as tsched

TS = torch.optim.lr_scheduler


def _pair(opt_name="SGD", **kw):
    """The same two-group optimizer in tracec and in torch."""
    tp = [tracec.zeros(3, requires_grad=True), tracec.zeros(2, requires_grad=True)]
    pp = [torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)]
    kw = kw or ({"momentum": 0.9} if opt_name == "SGD" else {})
    make = lambda lib, ps: getattr(lib, opt_name)(  # noqa: E731
        [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}], lr=0.1, **kw)
    return make(toptim, tp), make(torch.optim, pp)


def _hyper(opt):
    """What a scheduler may write into the groups, comparable across libs."""
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]


def _steps(sched, opt, n, metrics=None):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            opt.step()
            if metrics is None:
                sched.step()
            else:
                sched.step(metrics[i])
            out.append((list(sched.get_last_lr()), _hyper(opt)))
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for i, ((lr, hyp), (tlr, thyp)) in enumerate(zip(a, b)):
        assert lr == pytest.approx(tlr, rel=1e-13, abs=1e-16), f"step {i + 1}"
        for (g_lr, g_m, g_b), (t_lr, t_m, t_b) in zip(hyp, thyp):
            assert g_lr == pytest.approx(t_lr, rel=1e-13, abs=1e-16), f"step {i + 1}"
            assert g_m == pytest.approx(t_m, rel=1e-13), f"step {i + 1}"
            assert (g_b is None) == (t_b is None)
            if g_b is not None:
                assert tuple(g_b) == pytest.approx(tuple(t_b), rel=1e-13), f"step {i + 1}"


def _plain(v):
    """A state-dict value with Counters/tuples made comparable."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


SCHEDULERS = {
    "LambdaLR": lambda S, o: S.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    "LambdaLR-per-group": lambda S, o: S.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 + e]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95),
    "StepLR": lambda S, o: S.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=4),
    "ConstantLR-default": lambda S, o: S.ConstantLR(o),
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6),
    "LinearLR-default": lambda S, o: S.LinearLR(o),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=8, power=2.0),
    "PolynomialLR-default": lambda S, o: S.PolynomialLR(o),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.001),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3),
    "CosineAnnealingWarmRestarts-mult": lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.01),
    "CyclicLR": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3),
    "CyclicLR-triangular2": lambda S, o: S.CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=2, step_size_down=4,
        mode="triangular2", base_momentum=0.7, max_momentum=[0.95, 0.9]),
    "CyclicLR-exp_range": lambda S, o: S.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range", gamma=0.9,
        cycle_momentum=False),
    "CyclicLR-scale_fn": lambda S, o: S.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda x: 1 / (1 + x),
        scale_mode="iterations"),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=16),
    "OneCycleLR-all-args": lambda S, o: S.OneCycleLR(
        o, max_lr=[0.5, 0.3], epochs=4, steps_per_epoch=4, pct_start=0.25,
        anneal_strategy="linear", cycle_momentum=True, base_momentum=[0.8, 0.7],
        max_momentum=0.9, div_factor=10.0, final_div_factor=100.0, three_phase=True),
    "OneCycleLR-three-phase-cos": lambda S, o: S.OneCycleLR(
        o, max_lr=0.4, total_steps=20, three_phase=True, cycle_momentum=False),
    "SequentialLR": lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.9)],
        milestones=[4]),
    "SequentialLR-3": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.5, total_iters=2), S.StepLR(o, 2, 0.5),
            S.CosineAnnealingLR(o, T_max=5)], milestones=[3, 8]),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.5, total_iters=3), S.ExponentialLR(o, gamma=0.9)]),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_matches_torch(name):
    opt, topt = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s, ts = SCHEDULERS[name](tsched, opt), SCHEDULERS[name](TS, topt)
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-13)
    _assert_same(_steps(s, opt, 16), _steps(ts, topt, 16))
    sd, tsd = s.state_dict(), ts.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        if k in ("lr_lambdas", "_scale_fn_custom"):
            continue
        assert _plain(sd[k]) == pytest.approx(_plain(tsd[k]), rel=1e-13) \
            if isinstance(sd[k], float) else _plain(sd[k]) == _plain(tsd[k]), k


@pytest.mark.parametrize("name", ["OneCycleLR", "CyclicLR"])
def test_cycled_betas_of_adam_match_torch(name):
    opt, topt = _pair("Adam")
    make = {"OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=0.01, total_steps=12),
            "CyclicLR": lambda S, o: S.CyclicLR(o, 0.001, 0.01, step_size_up=3)}[name]
    s, ts = make(tsched, opt), make(TS, topt)
    _assert_same(_steps(s, opt, 12), _steps(ts, topt, 12))
    assert opt.param_groups[0]["betas"][1] == 0.999


def test_one_cycle_lr_past_total_steps_raises_like_torch():
    for S, o in zip((tsched, TS), _pair()):
        s = S.OneCycleLR(o, max_lr=0.1, total_steps=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                o.step()
                s.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number "
                                             "of total steps is 3"):
            s.step()


@pytest.mark.parametrize("kw", [
    dict(),
    dict(mode="max", factor=0.5, patience=1),
    dict(patience=2, threshold=0.1, threshold_mode="abs", cooldown=2),
    dict(mode="max", patience=0, threshold_mode="abs", threshold=0.01, min_lr=[0.02, 0.001]),
    dict(patience=0, factor=0.5, min_lr=0.06, eps=1e-3),
])
def test_reduce_lr_on_plateau_matches_torch(kw):
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.89, 0.9, 0.91, 0.92, 0.93, 0.5, 0.6, 0.7, 0.8,
               0.9, 1.0, 1.1, 1.2, 0.4, 0.4]
    if kw.get("mode") == "max":
        metrics = [-m for m in metrics]
    opt, topt = _pair()
    s, ts = tsched.ReduceLROnPlateau(opt, **kw), TS.ReduceLROnPlateau(topt, **kw)
    # a 0-d tensor metric, as users pass a loss
    tmetrics = [tracec.tensor(m) for m in metrics]
    pmetrics = [torch.tensor(m) for m in metrics]
    _assert_same(_steps(s, opt, len(metrics), tmetrics),
                 _steps(ts, topt, len(metrics), pmetrics))
    assert s.state_dict() == ts.state_dict()


def test_reduce_lr_on_plateau_errors_match_torch():
    opt, topt = _pair()
    for S, o in ((tsched, opt), (TS, topt)):
        with pytest.raises(ValueError, match="Factor should be < 1.0."):
            S.ReduceLROnPlateau(o, factor=1.0)
        with pytest.raises(ValueError, match="mode avg is unknown!"):
            S.ReduceLROnPlateau(o, mode="avg")
        with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
            S.ReduceLROnPlateau(o, min_lr=[0.1])


def test_constructor_errors_match_torch():
    cases = [lambda S, o: S.OneCycleLR(o, max_lr=0.1),
             lambda S, o: S.OneCycleLR(o, max_lr=0.1, total_steps=0),
             lambda S, o: S.OneCycleLR(o, max_lr=0.1, total_steps=5, pct_start=1),
             lambda S, o: S.OneCycleLR(o, max_lr=0.1, total_steps=5, anneal_strategy="x"),
             lambda S, o: S.CyclicLR(o, 0.1, 1.0, mode="nope"),
             lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=0),
             lambda S, o: S.LinearLR(o, start_factor=0),
             lambda S, o: S.ConstantLR(o, factor=2),
             lambda S, o: S.SequentialLR(o, [S.StepLR(o, 2)], milestones=[3]),
             lambda S, o: S.SequentialLR(o, [S.ReduceLROnPlateau(o), S.StepLR(o, 2)], [3])]
    for make in cases:
        msgs = []
        for S, o in zip((tsched, TS), _pair()):
            with pytest.raises(ValueError) as e:
                make(S, o)
            msgs.append(str(e.value).replace("torch.optim.sgd.", "").replace("tracec.optim.", ""))
        assert msgs[0] == msgs[1]
    opt = toptim.Adagrad([tracec.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        tsched.OneCycleLR(opt, max_lr=0.1, total_steps=4)


def test_signatures_match_torch():
    def sig(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]
    for name in TS.__all__:
        ours, theirs = getattr(tsched, name), getattr(TS, name)
        assert sig(ours.__init__) == sig(theirs.__init__), name
        assert sig(ours.step) == sig(theirs.step), name


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR-all-args",
                                  "CyclicLR-triangular2", "CosineAnnealingWarmRestarts-mult",
                                  "LinearLR", "SequentialLR"])
def test_state_dict_round_trip_continues_the_schedule(name):
    opt, _ = _pair()
    s = SCHEDULERS[name](tsched, opt)
    _steps(s, opt, 5)
    sd = s.state_dict()
    opt2, _ = _pair()
    s2 = SCHEDULERS[name](tsched, opt2)
    s2.load_state_dict(sd)
    opt2.load_state_dict(opt.state_dict())
    _assert_same(_steps(s2, opt2, 8), _steps(s, opt, 8))


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                  "ConstantLR", "LinearLR", "PolynomialLR", "LambdaLR",
                                  "CosineAnnealingWarmRestarts-mult"])
def test_step_with_epoch_uses_the_closed_form_and_warns(name):
    """The same warnings as torch (CosineAnnealingWarmRestarts takes
    fractional epochs and does not warn)."""
    opt, topt = _pair()
    s, ts = SCHEDULERS[name](tsched, opt), SCHEDULERS[name](TS, topt)
    for epoch in [3, 7, 2, 10, 2.5 if "Warm" in name else 4]:
        said = []
        for sch in (s, ts):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                sch.step(epoch)
            said.append([str(x.message) for x in w])
        assert said[0] == said[1]
        assert any("The epoch parameter" in m for m in said[0]) == ("Warm" not in name)
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-13)


def test_order_warning_and_get_lr_warning_like_torch():
    opt, _ = _pair()
    s = tsched.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    opt2, _ = _pair()
    s2 = tsched.StepLR(opt2, 2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        s2.get_lr()


def test_tensor_lr_is_filled_in_place():
    """A group lr held as a tensor (torch.compile's advice) stays the same
    tensor; the scheduler fills it, and get_last_lr returns copies."""
    p = tracec.zeros(2, requires_grad=True)
    lr = tracec.tensor(0.1, dtype=tracec.float64)
    opt = toptim.SGD([p], lr=lr)
    s = tsched.ExponentialLR(opt, gamma=0.5)
    for _ in range(3):
        opt.step()
        s.step()
    assert opt.param_groups[0]["lr"] is lr
    assert math.isclose(lr.item(), 0.1 * 0.5 ** 3)
    last = s.get_last_lr()[0]
    assert isinstance(last, tracec.Tensor) and last is not lr
    np.testing.assert_allclose(last.numpy(), lr.numpy())
