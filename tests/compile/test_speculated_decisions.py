"""Decisions a compiled step takes in Python on tensor data (``bool()`` of a
one-element tensor: a NaN check, an inf check that skips the optimizer step,
GradScaler's) are speculated: the trace takes the traced call's branch and
outputs the value; a compiled call whose value decides otherwise applies
nothing and runs the function eagerly (``compiled_entry.Entry.run``), and
an entry that mispredicts three calls in a row is retired (the next call
retraces).  Every call must equal eager: losses, parameters, optimizer and
scaler state."""
import warnings

import numpy as np
import pytest

import tracec
import tracec.nn as nn
from tracec.tracing import TraceError


def _batches(n, bad=()):
    gen = np.random.default_rng(0)
    xs = [tracec.tensor(gen.standard_normal((4, 3)).astype(np.float32)) for _ in range(n)]
    for i in bad:
        xs[i][0, 0] = float("inf")
    return xs


def _skip_on_inf(compiled, xs, backend="cpu"):
    tracec.manual_seed(0)
    m = nn.Linear(3, 1)
    opt = tracec.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).mean()
        loss.backward()
        if not bool(tracec.isfinite(m.weight.grad).all()):   # skip a bad step
            return loss
        opt.step()
        return loss
    f = tracec.compile(step, backend=backend) if compiled else step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        losses = [f(x).item() for x in xs]
    state = [opt.state[p]["momentum_buffer"].tolist() for p in m.parameters()]
    return losses, [p.tolist() for p in m.parameters()], state, f


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_mispredicted_call_runs_eagerly_and_changes_nothing_first(backend):
    xs = _batches(8, bad=(5,))
    la, pa, sa, _ = _skip_on_inf(False, xs)
    lb, pb, sb, f = _skip_on_inf(True, xs, backend)
    np.testing.assert_allclose(lb, la, rtol=1e-6)
    np.testing.assert_allclose(np.array(pb[0]), np.array(pa[0]), rtol=1e-6)
    np.testing.assert_allclose(np.array(sb[0]), np.array(sa[0]), rtol=1e-6)
    info = f.cache_info()
    assert info.traces == 1 and info.hits == 7 and info.eager_signatures == 0, info
    assert info.mispredicted == 1
    assert len(info.speculated[0]) == 1 and "test_speculated_decisions.py:" in info.speculated[0][0]


def test_an_entry_that_keeps_mispredicting_is_retired_and_retraced():
    xs = _batches(9, bad=(3, 4, 5, 6, 7, 8))
    la, pa, _, _ = _skip_on_inf(False, xs)
    lb, pb, _, f = _skip_on_inf(True, xs)
    np.testing.assert_allclose(lb, la, rtol=1e-6)
    np.testing.assert_allclose(np.array(pb[0]), np.array(pa[0]), rtol=1e-6)
    info = f.cache_info()
    # calls 4-6 mispredict (run eagerly), call 7 retraces the skipping
    # branch, calls 8-9 run it compiled
    assert info.traces == 2, info
    assert "came out otherwise 3 calls in a row" in info.reasons[1]


DEBUG = False


def test_nerf_style_nan_check_compiles():
    """yenchenlin/nerf-pytorch's render_rays: ``if (torch.isnan(x).any() or
    torch.isinf(x).any()) and DEBUG: print(...)``."""
    def run(compiled):
        tracec.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))

        def f(x):
            y = m(x)
            if (tracec.isnan(y).any() or tracec.isinf(y).any()) and DEBUG:
                print("! [Numerical Error] y contains nan or inf.")
            return y.sum()
        g = tracec.compile(f) if compiled else f
        return [g(x).item() for x in _batches(4)], g
    a, _ = run(False)
    b, g = run(True)
    np.testing.assert_allclose(b, a, rtol=1e-6)
    assert g.cache_info().traces == 1 and g.cache_info().hits == 3


def _amp(compiled, xs):
    tracec.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = tracec.optim.Adam(m.parameters(), lr=1e-2)
    scaler = tracec.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)

    def step(x):
        opt.zero_grad()
        with tracec.autocast("cpu", dtype=tracec.bfloat16):
            loss = m(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        tracec.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        return loss
    f = tracec.compile(step) if compiled else step
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for x in xs:
            out.append((f(x).item(), scaler.get_scale(), scaler._get_growth_tracker()))
    return out, [p.tolist() for p in m.parameters()], f


def test_grad_scaler_step_compiles_and_skips_an_inf_step_as_eager():
    xs = _batches(9, bad=(4,))
    a, pa, _ = _amp(False, xs)
    b, pb, f = _amp(True, xs)
    assert [s for _, s, _ in b] == [s for _, s, _ in a]          # scale: grown, backed off
    assert [t for _, _, t in b] == [t for _, _, t in a]          # growth tracker
    np.testing.assert_allclose([v for v, _, _ in b], [v for v, _, _ in a], rtol=1e-5)
    for p, q in zip(pb, pa):
        np.testing.assert_allclose(np.array(p), np.array(q), rtol=1e-5, atol=1e-6)
    assert len({s for _, s, _ in a}) > 2      # the scale did change both ways
    info = f.cache_info()
    assert info.eager_signatures == 0 and info.traces <= 2, info


def test_integer_item_used_as_a_size_is_speculated():
    """pytorch-forecasting's TFT: ``max_len = int(lengths.max())`` sizes a
    mask.  The trace specializes on the number, checked at every call; a
    batch with another maximum runs eagerly (and three in a row retrace)."""
    def masks(x, lengths):
        max_len = int(lengths.max())
        mask = tracec.arange(max_len)[None, :] < lengths[:, None]
        return (x[:, :max_len] * mask).sum()
    f = tracec.compile(masks)
    x = tracec.arange(24.).view(3, 8)
    # the max: 5 5 5 (traced) 7 5 (a hit) 6 6 6 (three in a row) 6 (retraced)
    for lens in ([3, 5, 2], [5, 1, 4], [2, 5, 5], [7, 2, 1], [5, 5, 5], [6, 6, 6], [6, 1, 1],
                 [4, 6, 2], [6, 2, 3]):
        lengths = tracec.tensor(lens)
        assert f(x, lengths).item() == masks(x, lengths).item()
    info = f.cache_info()
    assert info.traces == 2 and info.mispredicted == 4, info


def test_decisions_that_keep_changing_end_in_eager_calls():
    """An adaptive loop (``while bool(err > tol)``) whose trip count changes
    from call to call: after a second retired entry the calls run eagerly
    (with one warning) instead of retracing every few calls."""
    def solve(x):
        n = 0
        while bool(x.abs().max() > 1.0):
            x = x * 0.5
            n += 1
        return x
    f = tracec.compile(solve)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(12):
            x = tracec.full((3,), float(2 ** (k % 4)) + 0.5)
            np.testing.assert_array_equal(f(x).numpy(), solve(x).numpy())
    assert f.cache_info().traces == 2
    assert f.cache_info().eager_signatures == 1
    assert any("for the second time" in str(m.message) for m in w)


def test_item_of_a_float_is_still_refused_with_the_line():
    """Only ``bool()`` is speculated: a float read with item() and used in
    the trace would be baked into it (returning it is another matter:
    ``test_item_returned.py``)."""
    @tracec.compile
    def f(x):
        return x * x.sum().item()
    with pytest.raises(TraceError, match=r"test_speculated_decisions\.py:\d+: the number "
                                         r"item\(\) gave at .* is used here \(arithmetic\)"):
        f(tracec.ones(3))


def _packed_step(lib, compiled):
    """The chatbot tutorial's encoder and maskNLLLoss: ``pack_padded_sequence``
    reads the lengths argument and ``masked_select`` the padding mask (whole
    small integer / bool tensors: speculated on all their values)."""
    gen = np.random.default_rng(0)
    gru = lib.nn.GRU(3, 4, bidirectional=True)
    with lib.no_grad():
        for p in gru.parameters():
            p.copy_(lib.from_numpy(gen.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    opt = lib.optim.SGD(gru.parameters(), lr=0.1)

    def step(x, lengths, mask):
        opt.zero_grad()
        packed = lib.nn.utils.rnn.pack_padded_sequence(x, lengths)
        out, _ = gru(packed)
        out, _ = lib.nn.utils.rnn.pad_packed_sequence(out)
        loss = out.sum(2).masked_select(mask).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    f = (tracec.compile(step, fullgraph=True) if lib is tracec else lib.compile(step)) \
        if compiled else step
    x = gen.standard_normal((5, 3, 3)).astype(np.float32)
    out = []
    for lens in ([5, 3, 2], [5, 3, 2], [5, 3, 2], [5, 4, 1], [5, 3, 2], [5, 5, 1], [5, 3, 2]):
        mask = np.arange(5)[:, None] < np.array(lens)[None, :]
        out.append(f(lib.from_numpy(x[:max(lens)]), lib.tensor(lens),
                     lib.from_numpy(mask[:max(lens)])).item())
    return out, [p.detach().numpy().copy() for p in gru.parameters()], f


def test_lengths_and_masks_read_whole_are_speculated():
    torch = pytest.importorskip("torch")
    got, params, f = _packed_step(tracec, True)
    eager, eager_params, _ = _packed_step(tracec, False)
    want, want_params, _ = _packed_step(torch, False)
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for a, b, c in zip(params, eager_params, want_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-6)
    info = f.cache_info()
    # traced once; the calls with other lengths ran eagerly
    assert info.traces == 1 and info.mispredicted == 2, info


def _teacher_forced(compiled, ratio):
    """The chatbot / seq2seq tutorials' ``use_teacher_forcing = True if
    random.random() < teacher_forcing_ratio else False`` inside the step."""
    import random
    tracec.manual_seed(0)
    lin = nn.Linear(3, 3)
    opt = tracec.optim.SGD(lin.parameters(), lr=0.1)

    def step(x, target):
        opt.zero_grad()
        use_teacher_forcing = True if random.random() < ratio else False
        inp, loss = x, 0
        for t in range(target.shape[0]):
            out = lin(inp)
            loss = loss + (out - target[t]).pow(2).mean()
            inp = target[t] if use_teacher_forcing else out
        loss.backward()
        opt.step()
        return loss
    f = tracec.compile(step, fullgraph=True) if compiled else step
    gen = np.random.default_rng(0)
    x = tracec.tensor(gen.standard_normal((2, 3)).astype(np.float32))
    target = tracec.tensor(gen.standard_normal((3, 2, 3)).astype(np.float32))
    random.seed(5)
    losses = [f(x, target).item() for _ in range(10)]
    return losses, [p.tolist() for p in lin.parameters()], random.getstate(), f


@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_python_random_draws_compared_with_a_number_are_speculated(ratio):
    got, params, state, f = _teacher_forced(True, ratio)
    want, want_params, want_state, _ = _teacher_forced(False, ratio)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(np.concatenate([np.ravel(p) for p in params]),
                               np.concatenate([np.ravel(p) for p in want_params]), rtol=1e-5)
    assert state == want_state          # as many draws as eager calls made
    info = f.cache_info()
    # one trace; at ratio 0.5 the calls whose draw decides otherwise ran eagerly
    assert info.traces == 1 and info.hits == 9, info
    assert (info.mispredicted == 0) == (ratio == 1.0), info


def test_other_uses_of_a_python_random_draw_are_refused():
    import random

    def scaled(x):
        return x * (random.random() * 2)

    def uniform(x):
        return x * 2 if random.uniform(0, 1) < 0.5 else x
    with pytest.raises(TraceError, match=r"test_speculated_decisions\.py:\d+: the number "
                                         r"random\.random\(\) gave at .* \(arithmetic\)"):
        tracec.compile(scaled)(tracec.ones(3))
    with pytest.raises(TraceError, match="drew random numbers from Python's random module"):
        tracec.compile(uniform)(tracec.ones(3))
