"""``return loss.item()`` in a compiled step (``tracec.item_value``).

The number is an output of the compiled code: every call returns its own
value, equal to eager's; any other use of it inside the compiled function
(which would freeze the first call's value into the trace or into Python
state) is refused naming the line of the use and of the item() call.
"""
import copy
import dataclasses
import math
from collections import namedtuple

import numpy as np
import pytest

import tracec
from tracec import TraceError, nn

Stats = namedtuple("Stats", "loss acc")


@dataclasses.dataclass
class Report:
    loss: float
    grad_norm: float


def _setup():
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    return model, tracec.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)


def _step(model, opt, x, y, kind):
    opt.zero_grad()
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    norm = sum((p.grad ** 2).sum() for p in model.parameters()).sqrt()
    opt.step()
    acc = (out.argmax(1) == y).float().mean()
    if kind == "float":
        return loss.item()
    if kind == "tuple":
        return loss.detach().item(), {"acc": acc.item(), "loss_t": loss.detach()}
    if kind == "namedtuple":
        return Stats(loss.item(), acc.item())
    return Report(loss.data.item(), norm.item())


@pytest.mark.parametrize("kind", ["float", "tuple", "namedtuple", "dataclass"])
def test_returned_item_is_each_calls_value_and_equals_eager(kind):
    model, opt = _setup()
    model_e, opt_e = copy.deepcopy(model), None
    opt_e = tracec.optim.SGD(model_e.parameters(), lr=0.2, momentum=0.9)
    step = tracec.compile(lambda x, y: _step(model, opt, x, y, kind))
    got, want = [], []
    for i in range(5):
        x, y = tracec.randn(16, 6), tracec.randint(0, 3, (16,))
        got.append(step(x, y))
        want.append(_step(model_e, opt_e, x, y, kind))

    def numbers(r):
        if isinstance(r, float):
            return [r]
        if isinstance(r, Report):
            return [r.loss, r.grad_norm]
        if isinstance(r, tuple) and isinstance(r[1], dict):
            return [r[0], r[1]["acc"], r[1]["loss_t"].item()]
        return list(r)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        for a, b in zip(numbers(g), numbers(w)):
            assert type(a) is float and a == pytest.approx(b, rel=1e-5, abs=1e-6)
    losses = [numbers(g)[0] for g in got]
    assert len(set(losses)) == len(losses)          # a new value every call
    info = step.cache_info()
    assert info.traces == 1 and info.hits == 4


TOTAL = [0.0]
KEPT = []


class _Holder:
    pass


HOLDER = _Holder()


def _uses():
    def accumulate(loss):
        TOTAL[0] += loss.item()
        return loss

    def fmt(loss):
        print(f"{loss.item():.3f}")
        return loss

    def operand(loss):
        return loss * loss.item()

    def math_exp(loss):
        return math.exp(loss.item())

    def numpy_mean(loss):
        return np.mean([loss.item(), loss.item()])

    def clamp(loss):
        return loss.clamp(max=loss.item())

    def kept_in_attribute(loss):
        HOLDER.last = loss.item()
        return loss

    def tensor_data(loss):
        return tracec.tensor([loss.item(), 1.0]) + loss

    def kept_in_list(loss):
        KEPT.append(loss.item())
        return loss
    return [accumulate, fmt, operand, math_exp, numpy_mean, clamp, tensor_data,
            kept_in_attribute, kept_in_list]


@pytest.mark.parametrize("use", _uses(), ids=lambda f: f.__name__)
def test_other_uses_are_refused_naming_the_line(use):
    model, _ = _setup()
    x = tracec.randn(4, 6)

    def f(x):
        return use(model(x).pow(2).mean())
    with pytest.raises(TraceError, match=r"test_item_returned\.py:\d+.*item\(\)") as e:
        tracec.compile(f)(x)
    assert "may only be returned" in str(e.value)


def test_fallback_eager_still_gives_plain_floats():
    model, _ = _setup()
    x = tracec.randn(4, 6)
    total = []

    def f(x):
        v = model(x).pow(2).mean().item()
        total.append(v)
        return v * 2
    c = tracec.compile(f, fallback="eager")
    with pytest.warns(UserWarning, match="running eagerly"):
        r = c(x)
    assert type(r) is float and type(total[0]) is float and r == pytest.approx(2 * total[0])


def _masked_losses(lib, compiled, fallback=None):
    """The chatbot tutorial's train(): per-step ``mask_loss.item() * nTotal``
    appended to a list, ``sum(print_losses) / n_totals`` returned."""
    gen = np.random.default_rng(0)
    lin = lib.nn.Linear(4, 3)
    with lib.no_grad():
        for p in lin.parameters():
            p.copy_(lib.from_numpy(gen.standard_normal(tuple(p.shape)).astype(np.float32)))
    opt = lib.optim.SGD(lin.parameters(), lr=0.1)

    def step(x, target, mask):
        opt.zero_grad()
        loss = 0
        print_losses, n_totals = [], 0
        for t in range(x.shape[0]):
            out = lin(x[t]).log_softmax(1)
            n_total = mask[t].sum().item()
            mask_loss = -out.gather(1, target[t].view(-1, 1)).squeeze(1).masked_select(mask[t]).mean()
            loss += mask_loss
            print_losses.append(mask_loss.item() * n_total)
            n_totals += n_total
        loss.backward()
        opt.step()
        return sum(print_losses) / n_totals, -(loss.item() / 2) + 1
    if compiled:
        step = tracec.compile(step, fallback=fallback) if lib is tracec else lib.compile(step)
    x = lib.from_numpy(gen.standard_normal((3, 5, 4)).astype(np.float32))
    target = lib.from_numpy(gen.integers(0, 3, (3, 5)))
    mask = lib.from_numpy(np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 1, 0, 0]], bool))
    return [step(x, target, mask) for _ in range(4)], step


@pytest.mark.parametrize("fallback", [None, "eager"])
def test_arithmetic_of_returned_items_is_traced(fallback):
    torch = pytest.importorskip("torch")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no "running eagerly"
        got, f = _masked_losses(tracec, True, fallback)
    eager, _ = _masked_losses(tracec, False)
    want, _ = _masked_losses(torch, False)
    for g, e, w in zip(got, eager, want):
        assert all(type(v) is float for v in g)
        np.testing.assert_allclose(g, e, rtol=1e-6)   # (float32 kernels: ulps apart)
        np.testing.assert_allclose(g, w, rtol=1e-6)
    info = f.cache_info()
    assert info.traces == 1 and info.hits == 3, info


def test_fallback_eager_leaves_floats_in_the_programs_state():
    """With fallback="eager", item() inside the call gives a number the call
    may return; one the call kept (a list, a dict, an attribute) is a float
    there once the call has run eagerly."""
    model, _ = _setup()
    x = tracec.randn(4, 6)
    kept, stats, history = [], {}, []

    def f(x):
        v = model(x).pow(2).mean().item()
        kept.append(v * 3)
        history.append((1, v))
        history.append(Stats(v, 2))
        stats["last"] = v
        HOLDER.value = v
        return v + 1
    c = tracec.compile(f, fallback="eager")
    with pytest.warns(UserWarning, match="running eagerly"):
        r = c(x)
    v = model(x).pow(2).mean().item()
    assert type(r) is float and r == v + 1
    assert type(kept[0]) is float and kept[0] == v * 3
    assert type(stats["last"]) is float and type(HOLDER.value) is float and HOLDER.value == v
    assert history == [(1, v), Stats(v, 2)] and type(history[0][1]) is float
    assert type(history[1]) is Stats and type(history[1].loss) is float
