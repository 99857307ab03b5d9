"""Compiled training steps with tracec.optim equal eager over 10 steps:
losses, parameters, .grad and optimizer state."""
import numpy as np
import pytest

import tracec
import tracec.nn.functional  # noqa: F401


def _setup(opt_name, seed=0):
    tracec.manual_seed(seed)
    params = [tracec.randn(6, 8).requires_grad_(), tracec.zeros(8, requires_grad=True),
              tracec.randn(8, 4).requires_grad_(), tracec.zeros(4, requires_grad=True)]
    opts = {
        "sgd_momentum": lambda: tracec.optim.SGD(params, lr=0.05, momentum=0.9),
        "sgd_nesterov_wd": lambda: tracec.optim.SGD(params, lr=0.05, momentum=0.9,
                                                     nesterov=True, weight_decay=1e-3),
        "adam": lambda: tracec.optim.Adam(params, lr=1e-2),
        "adamw_amsgrad": lambda: tracec.optim.AdamW(params, lr=1e-2, amsgrad=True),
        "groups": lambda: tracec.optim.SGD([{"params": params[:2], "lr": 0.1},
                                            {"params": params[2:], "momentum": 0.5}], lr=0.02),
    }
    opt = opts[opt_name]()

    def step(x, y):
        opt.zero_grad()
        h = (x @ params[0] + params[1]).relu()
        loss = tracec.nn.functional.cross_entropy(h @ params[2] + params[3], y)
        loss.backward()
        opt.step()
        return loss
    return params, opt, step


def _state_arrays(opt):
    out = []
    for g in opt.param_groups:
        for p in g["params"]:
            for k, v in sorted(opt.state[p].items()):
                out.append((k, v.numpy() if isinstance(v, tracec.Tensor) else v))
    return out


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "sgd_nesterov_wd", "adam",
                                      "adamw_amsgrad", "groups"])
def test_compiled_optimizer_step_equals_eager(opt_name, backend):
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    sc = tracec.compile(sc, backend=backend)
    tracec.manual_seed(3)
    x = tracec.randn(16, 6)
    y = tracec.randint(0, 4, (16,))
    state_refs = None
    for i in range(10):
        le, lc = se(x, y), sc(x, y)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5, atol=1e-6)
        if i == 2:
            state_refs = [v for g in oc.param_groups for p in g["params"]
                          for v in oc.state[p].values() if isinstance(v, tracec.Tensor)]
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (ka, va), (kb, vb) in zip(_state_arrays(oe), _state_arrays(oc)):
        assert ka == kb
        np.testing.assert_allclose(vb, va, rtol=1e-5, atol=1e-6)
    # Optimizer state tensors held since step 3 were updated in place.
    now = [v for g in oc.param_groups for p in g["params"] for v in oc.state[p].values()
           if isinstance(v, tracec.Tensor)]
    assert all(a is b for a, b in zip(state_refs, now))
    info = sc.cache_info()
    assert info.traces <= 2, info.reasons
    assert info.hits == 10 - info.traces


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam", "adamw_amsgrad", "groups"])
def test_lr_schedule_neither_retraces_nor_drifts_from_eager(opt_name, backend):
    """The learning rate is read from a tensor the compiled step refreshes
    per call: a scheduler changing it every step costs no retrace, and the
    parameters stay equal to eager ones (same float32 rounding of lr)."""
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    sc = tracec.compile(sc, backend=backend)
    scheds = [tracec.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.7) for o in (oe, oc)]
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for i in range(8):
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5, atol=1e-6)
        for sch in scheds:
            sch.step()
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert oc.param_groups[0]["lr"] == oe.param_groups[0]["lr"] < 0.01
    info = sc.cache_info()
    assert info.traces <= 2, info.reasons


def test_changing_another_hyperparameter_retraces():
    pe, oe, se = _setup("sgd_momentum")
    pc, oc, sc = _setup("sgd_momentum")
    sc = tracec.compile(sc, backend="interp")
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for i in range(5):
        if i == 3:
            for o in (oe, oc):
                o.param_groups[0]["momentum"] = 0.5
                o.param_groups[0]["lr"] = 0.01
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5)
    assert any("guarded Python state" in r for r in sc.cache_info().reasons[1:])


def test_lr_given_as_a_tensor_is_traced_as_state():
    """torch.compile's advice for schedules (a Tensor lr) works here too."""
    pe, oe, se = _setup("sgd_momentum")
    pc, oc, sc = _setup("sgd_momentum")
    for o in (oe, oc):
        o.param_groups[0]["lr"] = tracec.tensor(0.05, dtype=tracec.float64)
    sc = tracec.compile(sc, backend="cpu")
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for i in range(6):
        if i == 4:
            for o in (oe, oc):
                o.param_groups[0]["lr"].fill_(0.01)
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert sc.cache_info().traces <= 2


@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adamw_amsgrad"])
def test_a_step_whose_state_exists_traces_once(opt_name):
    """Optimizer state made by an eager step: the compiled step's first trace
    is its steady state, reused from the second call (lifting the lr into a
    holder does not cost a retrace)."""
    params, opt, step = _setup(opt_name)
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    step(x, y)
    cstep = tracec.compile(step, backend="interp")
    for _ in range(4):
        cstep(x, y)
    info = cstep.cache_info()
    assert info.traces == 1 and info.hits == 3, info.reasons


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_resuming_from_a_checkpoint_matches_eager(backend, tmp_path):
    """load_state_dict gives the optimizer new state tensors: a trace holding
    the old ones must not be reused (it would update tensors nobody reads)."""
    pe, oe, se = _setup("sgd_momentum")
    pc, oc, sc = _setup("sgd_momentum")
    sc = tracec.compile(sc, backend=backend)
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for _ in range(3):
        se(x, y), sc(x, y)
    path = str(tmp_path / "ckpt.tc")
    tracec.save({"opt": oe.state_dict(), "params": [p.detach() for p in pe]}, path)
    for _ in range(2):
        se(x, y), sc(x, y)
    for params, opt in ((pe, oe), (pc, oc)):
        # each its own load: one loaded dict's tensors become the state of
        # the optimizer loading it (aliased, as PyTorch's), not of both
        ck = tracec.load(path)
        with tracec.no_grad():
            for p, v in zip(params, ck["params"]):
                p.copy_(v)
        opt.load_state_dict(ck["opt"])
    for _ in range(3):
        np.testing.assert_allclose(sc(x, y).item(), se(x, y).item(), rtol=1e-5)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_replaced_parameter_is_read_by_the_compiled_function():
    from tracec import nn
    tracec.manual_seed(0)
    model = nn.Linear(3, 2)
    f = tracec.compile(tracec.no_grad()(lambda x: model(x)), backend="cpu")
    x = tracec.randn(4, 3)
    f(x), f(x)
    model.weight = nn.Parameter(tracec.ones(2, 3))
    with tracec.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(f(x).detach().numpy(), want, rtol=1e-6)
    assert "mode_and_tensors" in f.cache_info().reasons[-1]


@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam"])
def test_a_compiled_optimizer_step_alone_matches_eager(opt_name):
    """tracec.compile(opt.step) beside an eager forward/backward."""
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    ostep = tracec.compile(oc.step, backend="cpu")
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    F = tracec.nn.functional
    for _ in range(5):
        for params, opt, step in ((pe, oe, oe.step), (pc, oc, ostep)):
            opt.zero_grad()
            h = (x @ params[0] + params[1]).relu()
            F.cross_entropy(h @ params[2] + params[3], y).backward()
            step()
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert ostep.cache_info().traces <= 2 and ostep.cache_info().hits >= 3


@pytest.mark.parametrize("opt_name", ["adam", "adamw_amsgrad", "sgd_momentum",
                                      "sgd_nesterov_wd", "groups"])
def test_zero_initialized_state_is_made_before_the_first_traced_step(opt_name):
    """Adam's state starts as zeros (SGD's momentum buffer, without dampening, may): the first traced step makes it as state
    the trace reads, so that trace is the steady step and the second call
    runs it compiled (no retrace), equal to eager, state included."""
    pe, oe, se = _setup(opt_name)
    pc, oc, sc = _setup(opt_name)
    comp = tracec.compile(sc, backend="cpu")
    x, y = tracec.randn(16, 6), tracec.randint(0, 4, (16,))
    for k in range(4):
        np.testing.assert_allclose(comp(x, y).item(), se(x, y).item(), rtol=1e-5)
    info = comp.cache_info()
    assert info.traces == 1 and info.hits == 3, info.reasons
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (ka, a), (kb, b) in zip(_state_arrays(oe), _state_arrays(oc)):
        assert ka == kb
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
