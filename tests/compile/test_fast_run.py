"""The specialized call of a compiled cpu entry (tracec.fast_run) and its
native header check (backends/cpu/checked_call): the fast path is taken in
the steady state (``Entry.failed_guard`` is not called at all), its results
and in-place updates equal eager ones step by step, every change a guard
watches still retraces, arrays the native code must not take fall back to
the general path, and output memory something still refers to is never
written again."""
import numpy as np
import pytest

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tracec import fast_run
from tracec.backends.cpu import checked_call
from tracec.compiled_entry import Entry

SCALE = 2.0


@pytest.fixture
def counted(monkeypatch):
    """Counts the general path's guard checks (the fast path makes none)."""
    calls = [0]
    orig = Entry.failed_guard

    def failed_guard(self, *a, **k):
        calls[0] += 1
        return orig(self, *a, **k)
    monkeypatch.setattr(Entry, "failed_guard", failed_guard)
    return calls


def _twins(momentum=0.9, groups=None):
    out = []
    for _ in range(2):
        tracec.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
        params = model.parameters() if groups is None else groups(model)
        opt = tracec.optim.SGD(params, lr=0.1, momentum=momentum)

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) * SCALE
            loss.backward()
            opt.step()
            return loss
        out.append((model, opt, step))
    return out


def _same_state(pair):
    (m_e, o_e, _), (m_c, o_c, _) = pair
    for p_e, p_c in zip(m_e.parameters(), m_c.parameters()):
        np.testing.assert_allclose(p_c.detach().numpy(), p_e.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        assert (p_c.grad is None) == (p_e.grad is None)
        if p_e.grad is not None:
            np.testing.assert_allclose(p_c.grad.numpy(), p_e.grad.numpy(), rtol=1e-5,
                                       atol=1e-6)
        assert (p_c in o_c.state) == (p_e in o_e.state)
        if p_e in o_e.state:
            np.testing.assert_allclose(o_c.state[p_c]["momentum_buffer"].numpy(),
                                       o_e.state[p_e]["momentum_buffer"].numpy(),
                                       rtol=1e-5, atol=1e-6)


def _run(pair, changes, calls=8):
    (m_e, o_e, eager), (m_c, o_c, step) = pair
    comp = tracec.compile(step)
    x = tracec.from_numpy(np.random.default_rng(0).standard_normal((4, 6), dtype=np.float32))
    y = tracec.tensor([0, 2, 1, 2])
    for k in range(calls):
        if k in changes:
            changes[k](m_e, o_e)
            changes[k](m_c, o_c)
        want, got = eager(x, y), comp(x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        _same_state(pair)
    return comp


def test_one_add_takes_the_fast_path(counted):
    f = tracec.compile(lambda a, b: a + b)
    a, b = tracec.ones(4), tracec.arange(4.0)
    for _ in range(3):
        f(a, b)
    before = counted[0]
    outs = [f(a, b) for _ in range(5)]
    assert counted[0] == before, "the steady state checked guards on the general path"
    assert callable(f._last._fast_run)
    for o in outs:
        np.testing.assert_array_equal(o.numpy(), [1, 2, 3, 4])
    # every result its own memory: the earlier ones were not written again
    assert len({o._data.ctypes.data for o in outs}) == len(outs)


def test_training_step_fast_path_equals_eager_and_updates_in_place(counted):
    pair = _twins()
    comp = _run(pair, {}, calls=4)
    before, traces = counted[0], comp.traces
    _run_more(pair, comp, 4)
    assert counted[0] == before and comp.traces == traces
    assert callable(comp._last._fast_run)


def _run_more(pair, comp, n, change=None):
    (m_e, o_e, eager), (m_c, o_c, _) = pair
    x = tracec.from_numpy(np.random.default_rng(0).standard_normal((4, 6), dtype=np.float32))
    y = tracec.tensor([0, 2, 1, 2])
    for _ in range(n):
        if change is not None:
            change(m_e, o_e)
            change(m_c, o_c)
        want, got = eager(x, y), comp(x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        _same_state(pair)


def _momentum(m, o):
    o.param_groups[0]["momentum"] = 0.5


def _requires_grad(m, o):
    m[2].bias.requires_grad_(False)


def _attribute(m, o):
    m[0].in_features = 7       # a module attribute the guard compares


def _new_weight(m, o):
    m[0].weight = nn.Parameter(tracec.ones(5, 6) * 0.1)


@pytest.mark.parametrize("change", [_momentum, _requires_grad, _attribute, _new_weight])
def test_a_watched_change_retraces(change):
    pair = _twins()
    comp = _run(pair, {5: change})
    assert comp.traces >= 2, comp.reasons      # (a new weight: once more for its .grad)


def test_global_number_changed_retraces():
    global SCALE
    pair = _twins()
    try:
        comp = _run(pair, {5: lambda m, o: globals().__setitem__("SCALE", 3.0)})
    finally:
        SCALE = 2.0
    assert comp.traces == 2, comp.reasons


def test_learning_rate_changes_without_retracing():
    pair = _twins()
    comp = _run(pair, {3: lambda m, o: o.param_groups[0].__setitem__("lr", 0.05),
                       5: lambda m, o: o.param_groups[0].__setitem__("lr", 0.2)})
    assert comp.traces == 1, comp.reasons


def test_a_group_dict_the_user_passed_is_checked_every_call(counted):
    held = []

    def groups(model):
        g = {"params": list(model.parameters()), "momentum": 0.9}
        held.append(g)
        return [g]
    pair = _twins(groups=groups)
    comp = _run(pair, {}, calls=4)
    assert pair[1][1].param_groups[0] is held[1]      # the user's own dict, not a copy
    before = counted[0]
    _run_more(pair, comp, 3)
    assert counted[0] == before                        # its guards checked on the fast path
    for g in held:
        g["momentum"] = 0.3                            # plain dict: no epoch change
    _run_more(pair, comp, 3)
    assert comp.traces == 2, comp.reasons


def test_non_contiguous_argument_falls_back():
    f = tracec.compile(lambda a, b: a * 2 + b)
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    a, b = tracec.from_numpy(np.ascontiguousarray(base.T)), tracec.ones(4, 3)
    for _ in range(4):
        f(a, b)
    assert callable(f._last._fast_run)
    t = tracec.from_numpy(base.T)           # same shape and dtype, not C-contiguous
    np.testing.assert_array_equal(f(t, b).numpy(), base.T * 2 + 1)
    assert f._last._fast_misses == 1
    np.testing.assert_array_equal(f(a, b).numpy(), base.T * 2 + 1)
    assert f._last._fast_misses == 0          # misses in a row only
    for _ in range(fast_run.MAX_MISSES):
        np.testing.assert_array_equal(f(t, b).numpy(), base.T * 2 + 1)
    assert f._last._fast_run is False         # that entry keeps to the general path
    np.testing.assert_array_equal(f(a, b).numpy(), base.T * 2 + 1)


def test_argument_sharing_memory_with_updated_state_falls_back():
    results = []
    for compiled in (False, True):
        s = tracec.ones(3)

        def f(x, s=s):
            s.add_(x)
            return s * 2
        g = tracec.compile(f) if compiled else f
        for _ in range(4):
            g(tracec.ones(3))
        if compiled:
            assert callable(g._last._fast_run)
        alias = tracec.from_numpy(s._data)     # another tensor on s's memory
        out = g(alias)
        results.append((out.numpy().copy(), s.numpy().copy()))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_array_equal(results[1][1], results[0][1])


def _warm_twins():
    """Twins whose compiled step is past its first calls (on the fast path)."""
    pair = _twins()
    (_, _, eager), (m_c, _, step) = pair
    comp = tracec.compile(step)
    x = tracec.ones(4, 6)
    y = tracec.tensor([0, 2, 1, 2])
    for _ in range(4):
        comp(x, y)
        eager(x, y)
    return pair, comp, eager, m_c, x, y


def test_held_outputs_and_grads_are_not_written_again():
    pair, comp, eager, m_c, x, y = _warm_twins()
    losses, grads = [], []
    for _ in range(3):
        losses.append((comp(x, y), eager(x, y)))
        grads.append([(pc.grad, pc.grad.numpy().copy()) for pc in m_c.parameters()])
    for got, want in losses:
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for held in grads:                       # each .grad tensor kept its own values
        for g, values in held:
            np.testing.assert_array_equal(g.numpy(), values)
    assert len({id(g._data) for held in grads for g, _ in held}) == 3 * len(grads[0])


def test_an_unheld_grad_tensor_is_kept_and_a_held_one_is_not():
    """A .grad nothing else holds is updated in its own tensor object (its
    version bumped), not replaced by a new one; a held one, or one the
    user gave an attribute, is replaced and keeps its values."""
    pair, comp, eager, m_c, x, y = _warm_twins()
    p = next(m_c.parameters())
    ids, versions = set(), []
    for _ in range(3):
        comp(x, y)
        eager(x, y)
        ids.add(id(p.grad))
        versions.append(p.grad._version)
    assert len(ids) == 1 and versions[0] < versions[1] < versions[2]
    _same_state(pair)
    held = p.grad
    values = held.numpy().copy()
    comp(x, y)
    eager(x, y)
    assert p.grad is not held
    np.testing.assert_array_equal(held.numpy(), values)
    _same_state(pair)
    del held
    p.grad.tag = "mine"
    tagged = id(p.grad)
    comp(x, y)
    eager(x, y)
    assert id(p.grad) != tagged or not hasattr(p.grad, "tag")
    _same_state(pair)


def test_checked_call_rejects_wrong_headers():
    if not checked_call.available():
        pytest.skip("NumPy's array layout is not the one checked_call reads")
    f = tracec.compile(lambda a, b: a + b)
    a, b = tracec.ones(4), tracec.ones(4)
    for _ in range(3):
        f(a, b)
    exe = f._last.executable
    f32 = np.dtype(np.float32)
    C, W = checked_call.C_CONTIGUOUS, checked_call.WRITEABLE
    ctx = checked_call.context(exe._tracker[exe.signature["entry_py"]],
                               [checked_call.row((4,), f32, C),
                                checked_call.row((4,), f32, C | W)], [None])
    call = checked_call.call()
    bound = checked_call.bound(ctx, 1)
    ws = exe._workspace()
    forms = []

    def run(x, y):
        # the ctypes form and the builtin (fast path) form give the same
        out = np.zeros(4, np.float32)
        tin, tout = (x, y), (out,)
        rc = call(id(tin) + 24, id(tout) + 24, ws[1], 1, ctx.ctypes.data)
        out2 = np.zeros(4, np.float32)
        rc2 = bound(tin, (out2,), ws[1])
        assert type(rc2) is int and rc2 == rc and out2.tolist() == out.tolist()
        forms.append(rc2)
        return rc, out
    assert type(bound).__name__ == "builtin_function_or_method"
    ones = np.ones(4, np.float32)
    rc, out = run(ones, np.arange(4, dtype=np.float32))
    assert rc == 0 and out.tolist() == [1, 2, 3, 4]
    read_only = np.ones(4, np.float32)
    read_only.flags.writeable = False
    for bad in (np.ones(5, np.float32), np.ones(4, np.float64), np.ones((4, 1), np.float32),
                np.ones(8, np.float32)[::2], read_only, np.ones(4, np.float32).view(np.matrix)):
        rc, out = run(ones, bad)
        assert rc == -1 and out.tolist() == [0, 0, 0, 0], bad
    rc, out = run(read_only, ones)          # the first row does not ask for writeable
    assert rc == 0 and out.tolist() == [2, 2, 2, 2]


def test_checked_call_checks_object_fields():
    if not checked_call.available():
        pytest.skip("NumPy's array layout is not the one checked_call reads")
    f = tracec.compile(lambda a, b: a + b)
    a, b = tracec.ones(4), tracec.ones(4)
    for _ in range(3):
        f(a, b)
    exe = f._last.executable
    w = nn.Parameter(tracec.ones(2))
    off_rg = checked_call.slot_offset(type(w), "requires_grad")
    off_dt = checked_call.slot_offset(type(w), "dtype")
    assert off_rg is not None and off_dt is not None and off_rg != off_dt
    f32 = np.dtype(np.float32)
    row = checked_call.row((4,), f32, checked_call.C_CONTIGUOUS)
    ctx = checked_call.context(exe._tracker[exe.signature["entry_py"]], [row, row], [None],
                               [(w, off_rg, True), (w, off_dt, tracec.float32)])
    ws = exe._workspace()
    x = np.ones(4, np.float32)

    def run():
        out = np.zeros(4, np.float32)
        tin, tout = (x, x), (out,)
        return checked_call.call()(id(tin) + 24, id(tout) + 24, ws[1], 1, ctx.ctypes.data)
    assert run() == 0
    w.requires_grad_(False)
    assert run() == -1
    w.requires_grad_(True)
    assert run() == 0


def test_a_new_batch_every_step_stays_on_the_fast_path(counted):
    pair = _twins()
    (m_e, o_e, eager), (m_c, o_c, step) = pair
    comp = tracec.compile(step)
    rng = np.random.default_rng(1)
    batches = [(tracec.from_numpy(rng.standard_normal((4, 6), dtype=np.float32)),
                tracec.tensor([0, 2, 1, 2])) for _ in range(8)]
    for k, (x, y) in enumerate(batches):
        if k == 4:
            before = counted[0]
        np.testing.assert_allclose(comp(x, y).item(), eager(x, y).item(), rtol=1e-5)
        _same_state(pair)
    assert counted[0] == before and comp._last._fast_misses == 0


def test_unshared_never_accepts_what_the_exact_test_refuses():
    from tracec.fast_run import _unshared
    buf = np.zeros(12, np.float32)
    foreign = np.frombuffer(bytearray(48), np.float32)
    cases = [(np.zeros(4), np.zeros(4)), (buf[:6], buf[6:]), (buf, buf[2:5]),
             (foreign, np.zeros(12, np.float32)), (np.zeros(3), foreign[:3])]
    for arrays in cases:
        for j in range(2):
            exact = not np.may_share_memory(arrays[j], arrays[1 - j]) and \
                arrays[j].flags.writeable
            fast = _unshared(arrays, [None, None], (j,))
            assert exact or not fast, (arrays, j)
    # roots of unchanged arrays are reused, a new array's root is found
    last = [None, None]
    a, b = np.zeros(3), buf[:4]
    assert _unshared((a, b), last, (0,)) and last[1][1][1] is buf
    assert not _unshared((buf[4:], b), last, (0,))


def test_size_generic_code_takes_the_fast_path_per_size(counted):
    """A symbolic batch (one size-generic compile) alternating between two
    sizes: each size's calls take their own specialized call, with the
    sizes bound in its workspace, and every step equals eager."""
    pair = _twins()
    (m_e, o_e, eager), (m_c, o_c, step) = pair
    comp = tracec.compile(step, dynamic=True)
    rng = np.random.default_rng(1)
    batches = {n: (tracec.from_numpy(rng.standard_normal((n, 6), dtype=np.float32)),
                   tracec.from_numpy(rng.integers(0, 3, n)))
               for n in (4, 7)}
    before = None
    for k in range(12):
        n = (4, 7)[k % 2]
        want, got = eager(*batches[n]), comp(*batches[n])
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        _same_state(pair)
        if k == 7:
            before = counted[0]
    info = comp.cache_info()
    assert info.traces == 1 and info.compiles == 1, info
    generic = comp._fast[1]
    assert generic.size_env is not None
    assert len(generic._fast_by_key) == 2 and all(map(callable, generic._fast_by_key.values()))
    assert counted[0] == before, "the steady state checked guards on the general path"
