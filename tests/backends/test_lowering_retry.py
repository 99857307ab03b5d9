"""``lower_module``'s second run: where the donations would let a kernel
fail after a state update was written in place, the module is lowered
again without them, taking over the first run's kernels (built once);
the result is the module a lowering without donations makes."""
import io

import numpy as np

import tracec
from tracec.backends.cpu import entry_symbol, lower
from tracec.compiled_entry import donations


def _print(module) -> str:
    from xdsl.printer import Printer
    out = io.StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


def _entry():
    """An SGD step, then a lookup (an index check, which can fail) of the
    updated weight: donating the weight would not be atomic."""
    tracec.manual_seed(0)
    w = tracec.randn(16, 8, requires_grad=True)
    opt = tracec.optim.SGD([w], lr=0.1, momentum=0.9)

    @tracec.compile
    def step(x, idx):
        opt.zero_grad()
        loss = ((x @ w).tanh() * 2 + 1).sum()
        loss.backward()
        opt.step()
        return loss, w[idx] * 3

    x, idx = tracec.randn(4, 16), tracec.tensor([1, 5, 2])
    for _ in range(3):
        step(x, idx)
    return step._last, (x, idx), step


def test_retry_takes_over_kernels_and_equals_a_plain_lowering(monkeypatch):
    entry, args, step = _entry()
    module = entry.optimized()
    donate = donations(entry.trace)
    assert donate
    symbol = entry_symbol(module)
    built = []
    orig = lower.Kernels._take_over

    def spy(self, key, name):
        got = orig(self, key, name)
        built.append(got is not None)
        return got
    monkeypatch.setattr(lower.Kernels, "_take_over", spy)
    retried = lower.lower_module(module, symbol, donate)
    assert retried.signature["donated"] == [] and retried.signature["atomic"]
    assert any(built)            # kernels of the first run were taken over
    monkeypatch.setattr(lower.Kernels, "_take_over", orig)
    plain = lower.lower_module(module, symbol, {})
    assert _print(retried.module) == _print(plain.module)
    assert retried.signature == plain.signature
    assert retried.wide == plain.wide and retried.small == plain.small


def test_retried_step_matches_eager():
    entry, (x, idx), step = _entry()
    tracec.manual_seed(0)
    w = tracec.randn(16, 8, requires_grad=True)
    opt = tracec.optim.SGD([w], lr=0.1, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        loss = ((x @ w).tanh() * 2 + 1).sum()
        loss.backward()
        opt.step()
    got_loss, got_rows = step(x, idx)
    opt.zero_grad()
    loss = ((x @ w).tanh() * 2 + 1).sum()
    loss.backward()
    opt.step()
    np.testing.assert_allclose(got_loss.item(), loss.item(), rtol=1e-5)
    np.testing.assert_allclose(got_rows.detach().numpy(), (w[idx] * 3).detach().numpy(), rtol=1e-5)
