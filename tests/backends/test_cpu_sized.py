"""Size-generic code on the cpu backend (issue 10 items 4-5): one native
compile of a symbolic trace serves every size; the disk cache holds it for
every size; a size guard of the passes or the lowering gets another
version.  See tracec/size_generic.py and tracec/backends/cpu/sized.py."""
import os
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tracec
import tracec.nn as nn
import tracec.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "compile"))
from lm_program import make_step, random_batches  # noqa: E402
from program_runner import python_c  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _close(a, b, tol=1e-4):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _generic_entries(comp):
    return [g for es in comp._sym.values() for e in es for g in e.generic]


def test_random_length_lm_loop_compiles_once(fresh_cache):
    """40 steps of random sequence length (5..40): at most 3 traces and 2
    native compiles, every step equal to eager, nothing run eagerly after
    the retrace and no per-size fallback."""
    _, eager = make_step()
    _, step = make_step()
    comp = tracec.compile(step)
    for idx, tgt in random_batches(40):
        _close(eager(idx, tgt).item(), comp(idx, tgt).item())
    info = comp.cache_info()
    assert info.traces <= 3 and info.eager_signatures == 0
    assert info.compiles + info.loads <= 2 and info.compiles >= 1
    assert not info.notes
    assert len(_generic_entries(comp)) == 1


def _mlp(seed=0, sizes=(784, 512, 512, 10)):
    tracec.manual_seed(seed)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, step


def _batch(rng, n, features=784, classes=10):
    return (tracec.tensor(rng.standard_normal((n, features)).astype(np.float32)),
            tracec.tensor(rng.integers(0, classes, n)))


@pytest.mark.slow
def test_mlp_step_symbolic_batch_one_compile(fresh_cache):
    """The 784-512-512-10 SGD step: after the retrace that makes the batch
    symbolic, new batch sizes (odd, prime, below and above the GEMM's
    tiles) compile nothing and match eager."""
    me, eager = _mlp()
    mc, step = _mlp()
    comp = tracec.compile(step)
    rng = np.random.default_rng(0)
    for n in (32, 32, 48, 48):
        x, y = _batch(rng, n)
        _close(eager(x, y).item(), comp(x, y).item())
    before = comp.cache_info()
    for n in (2, 3, 7, 31, 33, 97, 129, 256, 257):
        x, y = _batch(rng, n)
        _close(eager(x, y).item(), comp(x, y).item())
    after = comp.cache_info()
    assert after.traces == before.traces
    assert after.compiles + after.loads == before.compiles + before.loads
    for a, b in zip(me.parameters(), mc.parameters()):
        _close(a.detach().numpy(), b.detach().numpy(), 1e-3)


def test_a_broken_size_guard_gets_another_version(fresh_cache):
    """Guards the passes recorded (``roll`` over a symbolic dimension: the
    slices of its two halves, one of them a single row at ``B == 2``): a
    size that breaks one gets a second size-generic version, and every size
    stays equal to NumPy."""
    comp = tracec.compile(lambda x: (x.roll(1, 0) * x).sum(1), dynamic=True)
    rng = np.random.default_rng(1)

    def check(n):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        _close(comp(tracec.tensor(x)).numpy(), (np.roll(x, 1, 0) * x).sum(1))
    for n in (5, 6, 7, 6):
        check(n)
    (g,) = _generic_entries(comp)
    assert g.executable.signature["size_guards"]
    n0 = comp.cache_info().compiles
    for n in (2, 2, 5):
        check(n)
    assert comp.cache_info().compiles == n0 + 1
    assert len(_generic_entries(comp)) == 2


def test_the_lm_step_compiles_once_for_every_length(fresh_cache):
    """The sequence length against the batch size is no guard (fusion
    compares sizes structurally): one size-generic version serves lengths
    on both sides of the batch, each step equal to eager."""
    _, eager = make_step()
    _, step = make_step()
    comp = tracec.compile(step)
    rng = np.random.default_rng(1)
    for T in (6, 9, 9, 7, 4, 3, 4, 12):
        idx, tgt = (tracec.tensor(rng.integers(0, 32, (4, T))),
                    tracec.tensor(rng.integers(0, 32, (4, T))))
        _close(eager(idx, tgt).item(), comp(idx, tgt).item())
    (g,) = _generic_entries(comp)
    assert not any(x[0] == "T" and x[2] == "4" for x in g.executable.signature["size_guards"])
    assert comp.cache_info().compiles == 1


def _attention_like(x, w):
    h = (x @ w).tanh()                                  # M = B*T, K static
    a = (h @ h.transpose(-2, -1) * 0.1).softmax(-1)     # batched, N = T
    y = a @ h                                           # K = T
    return y.sum(1), y.mean(), (x.reshape(-1, 8) ** 2).sum(0)


_W = tracec.randn(8, 24)
_COMPILED = {}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(B=st.sampled_from([2, 3, 5, 7, 13, 16, 17]),
       T=st.sampled_from([2, 3, 5, 8, 15, 16, 17, 31, 33, 64, 97, 129, 200]))
def test_generic_code_over_random_shapes(B, T):
    """One compiled symbolic trace (B and T symbolic) against eager at odd
    sizes, primes, sizes below and above the vector width and the GEMM's
    register and cache tiles: every size served without a compile."""
    comp = _COMPILED.get("f")
    if comp is None:
        comp = _COMPILED["f"] = tracec.compile(_attention_like)
        x = tracec.mark_dynamic(tracec.mark_dynamic(tracec.randn(4, 6, 8), 0, "B"), 1, "T")
        comp(x, _W)
        assert _generic_entries(comp), comp.cache_info().notes
    n0 = comp.cache_info().compiles + comp.cache_info().loads
    x = tracec.randn(B, T, 8)
    for got, want in zip(comp(x, _W), _attention_like(x, _W)):
        _close(got.numpy(), want.numpy(), 1e-4)
    info = comp.cache_info()
    assert info.traces == 1
    if B != 8 and T != 8 and B != 24 and T != 24:
        # (sizes equal to a static one may break a shape comparison's guard)
        assert info.compiles + info.loads == n0


def _run_script(script: str, *sizes):
    """The last line ``script`` prints, evaluated: the script run in a new
    process with the sizes as arguments."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    # (a new process: forked from a zygote that has only imported tracec)
    out = python_c(script, *sizes, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return eval(out.stdout.strip().splitlines()[-1])


def test_fresh_process_with_a_filled_cache_compiles_nothing(fresh_cache):
    """A second process loads the trace's size-generic code from the disk
    cache and runs a batch size never seen before without compiling."""
    script = textwrap.dedent("""
        import sys, json, numpy as np, tracec
        import tracec.nn as nn, tracec.nn.functional as F
        tracec.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
        opt = tracec.optim.SGD(model.parameters(), lr=0.1)
        @tracec.compile
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        rng = np.random.default_rng(0)
        for n in map(int, sys.argv[1:]):
            x = tracec.tensor(rng.standard_normal((n, 6)).astype(np.float32))
            y = tracec.tensor(rng.integers(0, 3, n))
            step(tracec.mark_dynamic(x, 0), tracec.mark_dynamic(y, 0))
        i = step.cache_info()
        print(json.dumps([i.traces, i.compiles, i.loads]))
    """)

    def run(*sizes):
        return _run_script(script, *sizes)
    traces, compiles, loads = run(5, 7)
    assert compiles >= 1
    traces, compiles, loads = run(5, 11, 13)
    assert compiles == 0 and loads >= 1


def test_fresh_process_loads_the_size_generic_backward_of_a_compiled_model(fresh_cache):
    """``compile(model)`` with ``loss.backward()`` outside: a second process
    loads both the size-generic forward and its size-generic backward from
    the disk cache, for batch sizes never seen before, and computes the
    same gradients as eager."""
    script = textwrap.dedent("""
        import sys, json, numpy as np, tracec
        import tracec.nn as nn, tracec.nn.functional as F
        tracec.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
        ref = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
        ref.load_state_dict(model.state_dict())
        cm = tracec.compile(model)
        rng = np.random.default_rng(0)
        worst = 0.0
        for n in map(int, sys.argv[1:]):
            x = tracec.tensor(rng.standard_normal((n, 6)).astype(np.float32))
            y = tracec.tensor(rng.integers(0, 3, n))
            for m in (model, ref):
                m.zero_grad()
            F.cross_entropy(cm(tracec.mark_dynamic(x, 0)), y).backward()
            F.cross_entropy(ref(x), y).backward()
            worst = max(worst, max(float((p.grad - q.grad).abs().max())
                                   for p, q in zip(model.parameters(), ref.parameters())))
        i = cm.cache_info()
        print(json.dumps([i.traces, i.compiles, i.loads, worst]))
    """)

    def run(*sizes):
        return _run_script(script, *sizes)
    traces, compiles, loads, worst = run(5, 7, 9)
    assert compiles >= 2 and worst < 1e-5
    traces, compiles, loads, worst = run(5, 11, 13)
    assert compiles == 0 and loads >= 2 and worst < 1e-5, (traces, compiles, loads)
