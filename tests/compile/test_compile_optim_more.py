"""Compiled training steps with RMSprop, Adagrad and Adadelta equal eager
ones and a learning-rate schedule does not retrace them, nor does a cycled
momentum (OneCycleLR, CyclicLR; SGD, RMSprop, Adam); LBFGS runs
eagerly around a compiled closure, and compiling a whole LBFGS step raises
TraceError naming the user's line (or runs eagerly with fallback)."""
import inspect

import numpy as np
import pytest

import tracec
import tracec.nn.functional as F

OPTS = {
    "rmsprop_centered_momentum": lambda ps: tracec.optim.RMSprop(
        ps, lr=1e-2, momentum=0.9, centered=True, weight_decay=1e-3),
    "rmsprop_maximize": lambda ps: tracec.optim.RMSprop(ps, lr=1e-3, maximize=True),
    "adagrad_lr_decay": lambda ps: tracec.optim.Adagrad(
        ps, lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1, weight_decay=1e-3),
    "adadelta": lambda ps: tracec.optim.Adadelta(ps, lr=1.0, rho=0.8, weight_decay=1e-3),
    "adagrad_groups": lambda ps: tracec.optim.Adagrad(
        [{"params": ps[:2], "lr": 0.05}, {"params": ps[2:], "lr_decay": 0.1}], lr=0.1),
}


def _setup(opt_name, seed=0, table=OPTS):
    tracec.manual_seed(seed)
    params = [tracec.randn(6, 8).requires_grad_(), tracec.zeros(8, requires_grad=True),
              tracec.randn(8, 4).requires_grad_(), tracec.zeros(4, requires_grad=True)]
    opt = table[opt_name](params)

    def step(x, y):
        opt.zero_grad()
        h = (x @ params[0] + params[1]).relu()
        loss = F.cross_entropy(h @ params[2] + params[3], y)
        loss.backward()
        opt.step()
        return loss
    return params, opt, step


STATE_FIRST = {
    "adadelta": OPTS["adadelta"],
    "rprop": lambda ps: tracec.optim.Rprop(ps, lr=0.02, etas=(0.4, 1.3)),
    "rprop_maximize": lambda ps: tracec.optim.Rprop(ps, lr=0.01, maximize=True),
    "rmsprop_centered_momentum": OPTS["rmsprop_centered_momentum"],
    "adagrad_lr_decay": OPTS["adagrad_lr_decay"],
}


@pytest.mark.parametrize("opt_name", list(STATE_FIRST))
def test_state_made_before_the_first_traced_step_serves_the_second_call(opt_name):
    """Adadelta's and Rprop's state (zeros; Rprop's step size the first
    step's lr) is made before the traced first step, as Adam's: the second
    call runs that trace compiled instead of retracing, equal to eager,
    state included."""
    pe, oe, se = _setup(opt_name, table=STATE_FIRST)
    pc, oc, sc = _setup(opt_name, table=STATE_FIRST)
    sc = tracec.compile(sc, backend="cpu")
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for _ in range(4):
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5, atol=1e-6)
    info = sc.cache_info()
    assert info.traces == 1 and info.hits == 3, info.reasons
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-5)
    for (ka, va), (kb, vb) in zip(_state(oe), _state(oc)):
        assert ka == kb
        np.testing.assert_allclose(vb, va, rtol=1e-5, atol=1e-5)


def _state(opt):
    return [(k, v.numpy()) for g in opt.param_groups for p in g["params"]
            for k, v in sorted(opt.state[p].items())]


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("opt_name", list(OPTS))
def test_compiled_step_equals_eager_and_schedule_does_not_retrace(opt_name, backend):
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    sc = tracec.compile(sc, backend=backend)
    scheds = [tracec.optim.lr_scheduler.ExponentialLR(o, gamma=0.8) for o in (oe, oc)]
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for _ in range(4):
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5, atol=1e-6)
        for s in scheds:
            s.step()
    # (parameters and buffers of magnitude ~20; centered RMSprop divides by
    # sqrt(square_avg - grad_avg**2), which cancels: the compiled kernel's
    # rounding of it shows at ~1e-6 absolute in a small element)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-5)
    for (ka, va), (kb, vb) in zip(_state(oe), _state(oc)):
        assert ka == kb
        np.testing.assert_allclose(vb, va, rtol=1e-5, atol=1e-5)
    assert oc.param_groups[0]["lr"] == oe.param_groups[0]["lr"]
    info = sc.cache_info()
    # the first call makes the state (another path), the second is the steady state
    assert info.traces <= 2, info.reasons
    assert info.hits == 4 - info.traces


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_one_cycle_without_momentum_cycling_does_not_retrace(backend):
    pe, oe, se = _setup("rmsprop_centered_momentum")
    pc, oc, sc = _setup("rmsprop_centered_momentum")
    sc = tracec.compile(sc, backend=backend)
    scheds = [tracec.optim.lr_scheduler.OneCycleLR(o, max_lr=0.02, total_steps=8,
                                                   cycle_momentum=False) for o in (oe, oc)]
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for _ in range(8):
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5, atol=1e-6)
        for s in scheds:
            s.step()
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert sc.cache_info().traces <= 2, sc.cache_info().reasons


OPTS.update({
    "sgd_nesterov": lambda ps: tracec.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adamw_amsgrad": lambda ps: tracec.optim.AdamW(ps, lr=1e-2, amsgrad=True),
    "adam_small_beta1": lambda ps: tracec.optim.Adam(ps, lr=1e-2, betas=(0.3, 0.9)),
})


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("opt_name,make", [
    ("rmsprop_centered_momentum", lambda o: tracec.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.02, total_steps=8)),
    ("sgd_nesterov", lambda o: tracec.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.1, total_steps=8, three_phase=True)),
    ("adamw_amsgrad", lambda o: tracec.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.01, total_steps=8, base_momentum=0.6)),
    ("adamw_amsgrad", lambda o: tracec.optim.lr_scheduler.CyclicLR(
        o, 0.001, 0.01, step_size_up=2)),
], ids=["onecycle-rmsprop", "onecycle-sgd", "onecycle-adamw", "cyclic-adamw"])
@pytest.mark.usefixtures("counter_rng")
def test_cycled_momentum_does_not_retrace(opt_name, make, backend):
    """OneCycleLR / CyclicLR cycle the momentum (betas[0] for Adam) every
    step: the compiled step reads it from a holder, as the lr."""
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    sc = tracec.compile(sc, backend=backend)
    scheds = [make(o) for o in (oe, oc)]
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for _ in range(8):
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5, atol=1e-6)
        for s in scheds:
            s.step()
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (ka, va), (kb, vb) in zip(_state(oe), _state(oc)):
        np.testing.assert_allclose(vb, va, rtol=1e-5, atol=1e-6)
    g = oc.param_groups[0]
    assert g.get("momentum", g.get("betas", (None,))[0]) == \
        oe.param_groups[0].get("momentum", oe.param_groups[0].get("betas", (None,))[0])
    assert sc.cache_info().traces <= 2, sc.cache_info().reasons


@pytest.mark.parametrize("opt_name,key,values,traces", [
    # first call, then the steady state; 0.0 takes the other branch; 0.5
    # finds the momentum trace again
    # (SGD without dampening, RMSprop and Adam make their zero state before
    # the first traced step: that trace is already the steady one)
    ("sgd_nesterov", "momentum", [0.9, 0.8, 0.0, 0.0, 0.5], 2),
    ("rmsprop_centered_momentum", "momentum", [0.9, 0.7, 0.7, 0.0, 0.3], 2),
    # lerp's weight 1 - beta1 crosses 0.5 and back; then betas[1] changes
    ("adam_small_beta1", "betas", [(0.3, 0.9), (0.6, 0.9), (0.4, 0.9), (0.4, 0.8)], 3),
])
def test_a_lifted_momentum_still_guards_its_branches(opt_name, key, values, traces):
    """Once lifted, a momentum's value is read at run time, but what the
    update decides from it in Python (momentum != 0, lerp's branch at
    0.5; betas[1] is still guarded) retraces when it changes."""
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    for o in (oe, oc):
        o._lift("beta1" if key == "betas" else "momentum")
    sc = tracec.compile(sc, backend="interp")
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for v in values:
        for o in (oe, oc):
            for g in o.param_groups:
                g[key] = v
        for _ in range(2):
            np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5, atol=1e-6)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    info = sc.cache_info()
    assert info.traces == traces, info.reasons


# --- LBFGS ------------------------------------------------------------------------------

def _lbfgs_setup(dtype=tracec.float64, **kw):
    tracec.manual_seed(0)
    model = tracec.nn.Sequential(tracec.nn.Linear(4, 6), tracec.nn.Tanh(),
                                 tracec.nn.Linear(6, 2)).to(dtype)
    opt = tracec.optim.LBFGS(model.parameters(), **kw)
    tracec.manual_seed(1)
    x, y = tracec.randn(40, 4, dtype=dtype), tracec.randn(40, 2, dtype=dtype)

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss
    return model, opt, closure


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("kw", [dict(max_iter=4), dict(max_iter=4, history_size=3,
                                                        line_search_fn="strong_wolfe")])
def test_lbfgs_with_a_compiled_closure_equals_eager(kw, backend):
    me, oe, ce = _lbfgs_setup(**kw)
    mc, oc, cc = _lbfgs_setup(**kw)
    cc = tracec.compile(cc, backend=backend)
    for _ in range(4):
        np.testing.assert_allclose(oc.step(cc).item(), oe.step(ce).item(), rtol=1e-9)
    for a, b in zip(me.parameters(), mc.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-8,
                                   atol=1e-10)
    pe, pc = next(me.parameters()), next(mc.parameters())
    assert oc.state[pc]["func_evals"] == oe.state[pe]["func_evals"]
    info = cc.cache_info()
    assert info.traces == 1 and info.hits == oc.state[pc]["func_evals"] - 1, info.reasons


def test_compiling_a_whole_lbfgs_step_names_the_users_line():
    _, opt, closure = _lbfgs_setup(max_iter=3)
    step = tracec.compile(lambda: opt.step(closure), backend="interp")
    line = inspect.currentframe().f_lineno - 1
    with pytest.raises(tracec.TraceError) as e:
        step()
    assert f"test_compile_optim_more.py:{line}" in str(e.value)
    assert "fallback" in str(e.value)


def test_compiling_a_whole_lbfgs_step_with_fallback_runs_eagerly():
    me, oe, ce = _lbfgs_setup(max_iter=3, line_search_fn="strong_wolfe")
    mc, oc, cc = _lbfgs_setup(max_iter=3, line_search_fn="strong_wolfe")
    step = tracec.compile(lambda: oc.step(cc), backend="interp", fallback="eager")
    with pytest.warns(UserWarning, match="running eagerly"):
        step()
    oe.step(ce)
    for _ in range(2):
        np.testing.assert_array_equal(step().item(), oe.step(ce).item())
    for a, b in zip(me.parameters(), mc.parameters()):
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())
