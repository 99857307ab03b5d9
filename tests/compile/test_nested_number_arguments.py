"""Python numbers inside arguments (``step(x, {"lr": lr})``,
``step(x, hparams)`` with ``hparams.scale``, ``shifts[0]``, an
``argparse.Namespace``, a dataclass config) are lifted like top-level
number arguments (``test_number_arguments.py``): the retrace after one
changes reads it as an input, so one trace serves every value.  Before,
each new value was a new trace and a new native compile (12 calls: 12
traces), until the trace limit sent calls to eager mode.  Containers that
cannot take an item (tuples, frozen dataclasses) still retrace."""
import argparse
import dataclasses

import numpy as np
import pytest

import tracec

W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
X = np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4)


def _step(get):
    """An SGD step reading its learning rate and loss scale through
    ``get(hp)`` -> (lr, scale); (weight, step)."""
    w = tracec.tensor(W, requires_grad=True)

    def step(x, hp):
        lr, scale = get(hp)
        w.grad = None
        loss = ((x @ w) ** 2).mean() * scale
        loss.backward()
        with tracec.no_grad():
            w.sub_(lr * w.grad)
        return loss
    return w, step


@dataclasses.dataclass
class HP:
    lr: float
    scale: float


@dataclasses.dataclass(frozen=True)
class FrozenHP:
    lr: float
    scale: float


CASES = {
    "dict": (lambda lr, s: {"lr": lr, "scale": s}, lambda hp: (hp["lr"], hp["scale"])),
    "nested dict and list": (lambda lr, s: {"opt": {"lr": lr}, "scales": [1.0, s]},
                             lambda hp: (hp["opt"]["lr"], hp["scales"][1])),
    "namespace": (lambda lr, s: argparse.Namespace(lr=lr, scale=s),
                  lambda hp: (hp.lr, hp.scale)),
    "dataclass": (lambda lr, s: HP(lr, s), lambda hp: (hp.lr, hp.scale)),
}


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("case", list(CASES))
def test_numbers_inside_arguments_are_lifted_and_equal_eager(case, backend):
    make, get = CASES[case]
    we, eager = _step(get)
    wc, comp = _step(get)
    comp = tracec.compile(comp, backend=backend)
    x = tracec.tensor(X)
    for i in range(10):
        hp_e, hp_c = make(0.1 * 0.8 ** i, 1.0 + i % 3), make(0.1 * 0.8 ** i, 1.0 + i % 3)
        want, got = eager(x, hp_e), comp(x, hp_c)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert hp_c == hp_e     # the user's container holds its own numbers again
    info = comp.cache_info()
    assert info.traces == 2, info.reasons
    assert "lifted, read as an input" in info.reasons[1]
    assert any("lr" in label for label in info.lifted[1]), info.lifted
    if backend == "cpu":
        assert info.compiles + info.loads == 1


def test_tuples_and_frozen_dataclasses_still_retrace_and_equal_eager():
    for make in (lambda lr: (lr, 2.0), lambda lr: FrozenHP(lr, 2.0)):
        get = (lambda hp: hp) if isinstance(make(0.1), tuple) else (lambda hp: (hp.lr, hp.scale))
        we, eager = _step(get)
        wc, comp = _step(get)
        comp = tracec.compile(comp, backend="interp")
        x = tracec.tensor(X)
        for i in range(4):
            np.testing.assert_allclose(comp(x, make(0.1 + i)).item(), eager(x, make(0.1 + i)).item(),
                                       rtol=1e-5)
        assert comp.cache_info().traces == 4


def test_a_nested_number_used_as_a_loop_count_specializes_again():
    def f(x, cfg):
        for _ in range(cfg["n"]):
            x = x * cfg["k"]
        return x
    comp = tracec.compile(f, backend="interp")
    x = tracec.ones(2)
    for n, k in ((1, 2.0), (2, 2.0), (3, 2.0), (3, 3.0), (2, 0.5)):
        assert comp(x, {"n": n, "k": k}).tolist() == [k ** n] * 2
    info = comp.cache_info()
    # n is specialized again after its lifting was refused; k stays lifted
    assert info.traces <= 5, info.reasons


def test_a_branch_on_a_nested_number_is_a_guard():
    comp = tracec.compile(lambda x, c: x * c["t"] if c["t"] > 2 else x - c["t"], backend="interp")
    x = tracec.ones(3)
    for t in (1.0, 1.5, 3.0, 4.0, 0.5, 5.0):
        want = t if t > 2 else 1.0 - t
        assert comp(x, {"t": t}).tolist() == [want] * 3
    assert comp.cache_info().traces == 3


def test_a_call_that_changes_its_dict_still_changes_the_users():
    """The lifted number sits in the user's own dict during the recording
    call: a key the call adds, or a number it overwrites, stays there."""
    def f(x, cfg):
        cfg["seen"] = cfg.get("seen", 0) + 1
        return x * cfg["s"]
    comp = tracec.compile(f, backend="interp", fallback="eager")
    x = tracec.ones(2)
    for s in (1.0, 2.0, 3.0, 4.0):
        cfg = {"s": s}
        assert comp(x, cfg).tolist() == [s, s]
        assert cfg["seen"] == 1 and cfg["s"] == s


def test_a_call_that_removes_the_lifted_number_from_its_dict_runs_as_eager():
    """A call that deletes the key of a lifted number leaves the user's
    dict as it made it (nothing put back), and runs as eager code does."""
    def f(x, cfg):
        s = cfg.pop("s")
        return x * s
    comp = tracec.compile(f, backend="interp", fallback="eager")
    x = tracec.ones(2)
    for s in (1.0, 2.0, 3.0):
        cfg = {"s": s}
        assert comp(x, cfg).tolist() == [s, s]
        assert cfg == {}
