"""Changes made between compiled calls that the compiled function depends on,
found by ``tests/fuzz_guards.py`` to give results different from eager
ones: each test changes one thing between two calls and checks that the
compiled call equals the eager call (and that the change retraced, where a
retrace is the only way to see it)."""
import types
from collections import OrderedDict

import numpy as np
import pytest

import tracec
from tracec import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.lin(x))


def _same(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_a_submodule_swapped_between_calls_is_called():
    # (fuzz_guards seed 1: the trace kept calling the first Linear)
    tracec.manual_seed(0)
    m = Net()

    def step(x):
        return m(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(2, 4)
    _same(f(x), step(x))
    m.lin = nn.Linear(4, 4)          # new parameters, in a new module
    _same(f(x), step(x))
    m.act = nn.ReLU()                # no parameters at all
    _same(f(x), step(x))
    assert f(x) is not None and f.cache_info().traces == 3


def test_a_submodule_of_a_sequential_replaced_by_index():
    tracec.manual_seed(1)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    f = tracec.compile(m, backend="cpu")
    x = tracec.ones(3, 4)
    _same(f(x), m(x))
    m[1] = nn.Sigmoid()
    _same(f(x), m(x))
    del m[1]
    _same(f(x), m(x))


def test_the_default_dtype_set_between_calls_retraces():
    # (fuzz_guards seed 37: randn / ones kept making float32 tensors)
    def step(x):
        return x + tracec.ones(3) * 0.5 + tracec.arange(3) * 0.25

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(3)
    _same(f(x), step(x))
    _same(f(x), step(x))             # (the fast path's matcher made)
    old = tracec.get_default_dtype()
    tracec.set_default_dtype(tracec.float64)
    try:
        y = f(x)
        assert y.dtype is tracec.float64
        _same(y, step(x))
        assert "default dtype changed" in f.cache_info().reasons[-1]
    finally:
        tracec.set_default_dtype(old)
    _same(f(x), step(x))
    assert f.cache_info().traces == 2


def _run_both(m, step, f, x):
    """``step`` and its compiled ``f`` from one RNG state (counter draws:
    dropout masks agree bit for bit); their results."""
    from tracec import torch_rng
    with torch_rng.counter_draws():
        st = tracec.get_rng_state()
        e = step(x)
        tracec.set_rng_state(st)
        return e, f(x)


def test_dropout_p_set_between_calls_is_lifted():
    # (fuzz_guards seed 114: the lifted p reached a primitive, a TypeError)
    tracec.manual_seed(2)
    m = nn.Dropout(0.25)

    def step(x):
        return m(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.randn(8, 4)
    for p in (0.25, 0.1, 0.6):
        m.p = p
        e, c = _run_both(m, step, f, x)
        _same(c, e)
    assert "Dropout.p: lifted" in f.cache_info().reasons[-1]


def test_batch_norm_momentum_set_to_none_after_it_was_lifted():
    # (fuzz_guards seed 111: the retrace lifted None, a TypeError)
    tracec.manual_seed(3)
    m, twin = nn.BatchNorm1d(3), nn.BatchNorm1d(3)

    def step(x):
        return m(x) * 2

    def eager(x):
        return twin(x) * 2

    f = tracec.compile(step, backend="cpu")
    x = tracec.randn(4, 3)
    for momentum in (0.1, 0.2, None, 0.3, None):
        m.momentum = twin.momentum = momentum
        _same(f(x), eager(x))
        _same(m.running_mean, twin.running_mean)
        _same(m.running_var, twin.running_var)
        assert int(m.num_batches_tracked) == int(twin.num_batches_tracked)


CFG = types.SimpleNamespace(scale=1.0, shift=0.0)


def test_a_lifted_attribute_of_a_global_rebound_to_a_new_object():
    # (fuzz_guards seed 100281: the lifted number was read from the old
    # object while the guard, which follows the path, looked at the new one)
    global CFG

    def step(x):
        return x * CFG.scale + CFG.shift

    f = tracec.compile(step, backend="cpu")
    x = tracec.ones(2)
    _same(f(x), step(x))
    CFG.scale = 1.25                 # lifted from now on
    _same(f(x), step(x))
    CFG = types.SimpleNamespace(scale=1.25, shift=0.5)
    _same(f(x), step(x))
    CFG.scale = 1.75
    _same(f(x), step(x))
    CFG.scale = 2.0
    _same(f(x), step(x))


def _sgd_world(compiled):
    tracec.manual_seed(7)
    m = nn.Linear(4, 4)
    opt = tracec.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

    def step(x):
        loss = m(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss
    return m, (tracec.compile(step, backend="cpu") if compiled else step)


def test_a_grad_set_on_a_parameter_no_backward_reaches_is_zeroed():
    # (fuzz_guards seed 100343: zero_grad(set_to_none=False) wrote the zeros
    # into the trace's grad tensor, not into the one set since)
    got = []
    for compiled in (False, True):
        m, f = _sgd_world(compiled)
        x = tracec.ones(2, 4)
        f(x)
        f(x)
        m.weight.requires_grad_(False)
        f(x)
        m.weight.grad = tracec.full((4, 4), 0.5)
        f(x)
        got.append((m.weight, m.weight.grad))
    (w0, g0), (w1, g1) = got
    _same(w1, w0)
    _same(g1, g0)


def test_an_old_grad_the_program_holds_is_not_written():
    got = []
    for compiled in (False, True):
        m, f = _sgd_world(compiled)
        x = tracec.ones(2, 4)
        f(x)
        f(x)
        old = m.weight.grad
        old.fill_(3.0)
        m.weight.grad = tracec.full((4, 4), 0.5)
        f(x)
        got.append((old, m.weight.grad, m.weight))
    for a, b in zip(*got):
        _same(b, a)


def test_requires_grad_toggled_after_a_size_change_retraces():
    # (fuzz_guards seed 100738: a symbolic trace, made when the batch size
    # changed, did not guard its state tensors' requires_grad)
    got = []
    for compiled in (False, True):
        tracec.manual_seed(8)
        m = nn.Linear(4, 4)
        opt = tracec.optim.Adam(m.parameters(), lr=0.1)

        def step(x):
            m(x).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        f = tracec.compile(step, backend="cpu") if compiled else step
        for k in range(5):
            if k == 4:
                m.bias.requires_grad_(False)
            f(tracec.ones(5 if k >= 2 else 3, 4))
        got.append((m.bias, opt.state[m.bias]["exp_avg"]))
    for a, b in zip(*got):
        _same(b, a)


def test_a_lifted_module_attribute_deleted_between_calls():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 1.0

        def forward(self, x):
            return x * getattr(self, "t", 3.0)

    m = M()
    f = tracec.compile(lambda x: m(x), backend="cpu")
    x = tracec.ones(2)
    for k in range(4):
        if k == 1:
            m.t = 2.0                # lifted from now on
        if k == 2:
            del m.t                  # (was a KeyError reading it)
        if k == 3:
            m.t = 5.0
        _same(f(x), m(x))


# --- hooks changed between calls (docs/guards.md row 12b; fuzz_guards seed
# 59: a hook registered on a submodule after the first call never ran) ---

BACKENDS = pytest.mark.parametrize("backend", ["interp", "cpu"])


def _hooks_world(backend, seed=4):
    """A Net, a step calling it, the compiled step, an input, and ``check()``:
    one compiled call equals one eager call."""
    tracec.manual_seed(seed)
    m = Net()

    def step(x):
        return m(x) + 1

    f = tracec.compile(step, backend=backend)
    x = tracec.ones(2, 4)

    def check():
        _same(f(x), step(x))
    check()
    return m, f, check


@BACKENDS
def test_module_hooks_registered_and_removed_between_calls(backend):
    m, f, check = _hooks_world(backend)
    h = m.act.register_forward_hook(lambda mod, inp, out: out * 1.5)
    check()
    pre = m.lin.register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,))
    check()
    kw = m.lin.register_forward_pre_hook(lambda mod, a, k: ((a[0] - 1,), k), with_kwargs=True)
    check()
    kwo = m.act.register_forward_hook(lambda mod, a, k, out: out + 3, with_kwargs=True)
    check()
    first = m.act.register_forward_hook(lambda mod, inp, out: out * -2, prepend=True)
    check()
    for handle in (h, kw, first, pre, kwo):
        handle.remove()
        check()
    info = f.cache_info()
    # (the last state is the first one: its trace is found again)
    assert info.traces == 10 and info.hits == 1, info.reasons
    assert all("mode_and_tensors" in r for r in info.reasons[1:]), info.reasons


@BACKENDS
def test_hook_tables_changed_directly_between_calls(backend):
    # (what torch.nn.utils.prune, weight_norm and user code do to the tables)
    m, f, check = _hooks_world(backend)
    m.act.register_forward_hook(lambda mod, inp, out: out * 1.5)
    m.act.register_forward_hook(lambda mod, inp, out: out - 0.25)
    check()
    first, second = list(m.act._forward_hooks)
    m.act._forward_hooks.move_to_end(first)          # reordered
    check()
    m.act._forward_hooks[first] = lambda mod, inp, out: out * 4   # replaced
    check()
    del m.act._forward_hooks[second]
    check()
    m.lin._forward_pre_hooks["mine"] = lambda mod, inp: (inp[0] + 1,)   # added
    check()
    m.lin._forward_pre_hooks.clear()
    check()
    m.act._forward_hooks.pop(first)
    check()
    # a table of the program's own (not watched: the guard is read each call)
    m.act._forward_hooks = OrderedDict([(0, lambda mod, inp, out: out / 3)])
    check()
    m.act._forward_hooks[1] = lambda mod, inp, out: out + 7
    check()
    m.act._forward_hooks.clear()
    check()


@BACKENDS
def test_global_module_hooks_registered_and_removed_between_calls(backend):
    from tracec.nn.modules import module as mm
    _, f, check = _hooks_world(backend)
    g = mm.register_module_forward_hook(lambda mod, inp, out: out + 0.5)
    try:
        check()
        gp = mm.register_module_forward_pre_hook(lambda mod, inp: tuple(a * 0.5 for a in inp))
        try:
            check()
        finally:
            gp.remove()
        check()
    finally:
        g.remove()
    check()
    assert f.cache_info().traces == 3     # (the first trace served the last call)


def _grads_world(backend, seed=5):
    """A Net, a step returning its loss and input gradient (the backward
    runs the modules' backward hooks), the compiled step, and ``check()``.
    (A full backward hook is not compiled yet: its trace falls back to
    eager, which the guard must reach instead of replaying the trace made
    without it.)"""
    tracec.manual_seed(seed)
    m = Net()

    def step(x):
        x = x.detach().requires_grad_()
        loss = (m(x) ** 2).sum()
        (gx,) = tracec.autograd.grad(loss, [x])
        return loss, gx

    f = tracec.compile(step, backend=backend, fallback="eager")
    x = tracec.ones(2, 4) * 0.3

    def check():
        (a, b), (c, d) = f(x), step(x)
        _same(a, c)
        _same(b, d)
    check()
    return m, f, check


@BACKENDS
@pytest.mark.parametrize("kind", ["full", "pre", "global"])
def test_backward_hooks_registered_between_calls(backend, kind):
    from tracec.nn.modules import module as mm
    m, f, check = _grads_world(backend)
    g = None
    if kind == "full":
        m.act.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
    elif kind == "pre":
        m.lin.register_full_backward_pre_hook(lambda mod, go: (go[0] - 0.5,))
    else:
        g = mm.register_module_full_backward_hook(
            lambda mod, gi, go: None if gi[0] is None else (gi[0] * 2,))
    try:
        check()
    finally:
        if g is not None:
            g.remove()
    assert f.cache_info().eager_signatures == 1      # (the retrace met the hook)


@BACKENDS
def test_a_hook_the_step_registers_and_removes_compiles_once(backend):
    # (a feature extractor's pattern: the guard holds the hooks the call
    # began with, not the one it registered for its own use)
    tracec.manual_seed(5)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    feats = {}

    def step(x):
        h = m[1].register_forward_hook(lambda mod, i, o: feats.__setitem__("f", o))
        y = m(x)
        h.remove()
        return y, feats.pop("f") * 2

    f = tracec.compile(step, backend=backend)
    x = tracec.ones(3, 4)
    for _ in range(3):
        (a, b), (c, d) = f(x), step(x)
        _same(a, c)
        _same(b, d)
    info = f.cache_info()
    assert info.traces == 1 and info.hits == 2, info.reasons


@BACKENDS
def test_a_hook_the_step_leaves_registered_is_not_replayed_stale(backend):
    tracec.manual_seed(6)
    m, twin = Net(), Net()
    twin.load_state_dict(m.state_dict())

    def make(mod):
        def step(x):
            mod.act.register_forward_hook(lambda _, i, o: o * 2)
            return mod(x)
        return step

    f, eager = tracec.compile(make(m), backend=backend), make(twin)
    x = tracec.ones(2, 4)
    for _ in range(3):           # (each call stacks one more hook, as eager's)
        _same(f(x), eager(x))
    assert len(m.act._forward_hooks) == len(twin.act._forward_hooks) == 3


def test_hook_tables_print_and_check_as_pytorchs_ordered_dicts():
    # (torch.nn.utils.prune's tutorial prints the table's class name)
    m = nn.Linear(2, 2)
    hook = m.register_forward_pre_hook(lambda mod, inp: None)
    t = m._forward_pre_hooks
    assert t.__class__.__name__ == "OrderedDict" and isinstance(t, OrderedDict)
    assert repr(t) == repr(OrderedDict(t)) and repr(t).startswith("OrderedDict(")
    assert repr(nn.modules.module._global_forward_hooks) == "OrderedDict()"
    hook.remove()
    assert repr(t) == "OrderedDict()"


def _a_kwargs_hook_runs_once_and_is_removed(m):
    calls = []
    h = m.register_forward_hook(lambda mod, a, k, out: calls.append(1), with_kwargs=True)
    m(tracec.ones(1, 2))
    h.remove()
    m(tracec.ones(1, 2))
    assert calls == [1] and not m._forward_hooks and not m._forward_hooks_with_kwargs


def test_a_module_saved_in_pytorchs_format_keeps_ordered_dict_hook_tables(tmp_path):
    # (ultralytics under thop: its best.pt held plain-dict hook tables, a
    # with_kwargs hook's flag took no weak reference, registering raised
    # after the hook was in, and thop's counter outlived the profile)
    import pickle
    from tracec import torch_save
    torch = pytest.importorskip("torch")
    m = nn.Linear(2, 2)
    m.register_forward_hook(lambda *a: None, with_kwargs=True).remove()
    path = tmp_path / "ckpt.pt"
    with open(path, "wb") as fh:
        torch_save.write_records(torch_save.torch_records({"model": m}), fh, "ckpt")
    theirs = torch.load(path, weights_only=False)["model"]
    assert type(theirs) is torch.nn.Linear
    assert type(theirs._forward_hooks_with_kwargs) is OrderedDict      # as PyTorch's own
    assert type(theirs._forward_hooks) is OrderedDict
    n = tracec.load(path, weights_only=False)["model"]
    assert type(n._forward_hooks) is type(m._forward_hooks)      # watched again
    _a_kwargs_hook_runs_once_and_is_removed(n)
    assert pickle.loads(pickle.dumps(n))._forward_hooks_with_kwargs == {}


def test_a_hook_flag_table_taking_no_weak_reference_is_removed_with_its_hook():
    m = nn.Linear(2, 2)
    m.__dict__["_forward_hooks_with_kwargs"] = {}     # (an old checkpoint's)
    _a_kwargs_hook_runs_once_and_is_removed(m)
