"""A compiled step that returns a leaf's ``.grad`` (``return loss,
model.weight.grad``) returns that very tensor, as eager does: a write to
the returned tensor is a write to ``.grad``. Before, compiled calls
returned a copy of its value (``r is p.grad`` False from call 2 on, and
``r.zero_()`` left ``p.grad`` alone)."""
import numpy as np
import pytest
import torch

import tracec

A = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)


def _linear(T):
    m = T.nn.Linear(3, 2)
    with T.no_grad():
        m.weight.copy_(T.tensor(A[:2]))
        m.bias.fill_(0.3)
    return m


def _zero_grad_modes(T, wrap):
    m = _linear(T)
    opt = T.optim.SGD(m.parameters(), lr=0.1)

    def step(x, none):
        opt.zero_grad(set_to_none=none)
        (m(x) ** 2).sum().backward()
        opt.step()
        return m.weight.grad, (m.bias.grad, m.weight.grad)
    g = wrap(step)
    out = []
    for i, none in enumerate((True, False, False, True, False)):
        r, (b, r2) = g(T.tensor(A * (i + 1)), none)
        out += [r is m.weight.grad, r2 is r, b is m.bias.grad, r.numpy().copy()]
        r.mul_(0.5)          # through the returned tensor: into .grad
        out.append(m.weight.grad.numpy().copy())
    return out + [m.weight.detach().numpy().copy()]


def _accumulating(T, wrap):
    m = _linear(T)

    def step(x):
        (m(x) ** 2).sum().backward()
        return m.weight.grad
    g = wrap(step)
    out = []
    for _ in range(4):
        r = g(T.tensor(A))
        out += [r is m.weight.grad, r.numpy().copy()]
    return out


def _argument_grad(T, wrap):
    def step(x):
        (x * 3).sum().backward()
        return x.grad
    g = wrap(step)
    out = []
    for i in range(3):
        x = T.tensor(A * i, requires_grad=True)
        r = g(x)
        out += [r is x.grad, r.numpy().copy()]
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)
        else:
            assert x == y


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("case", [_zero_grad_modes, _accumulating, _argument_grad],
                         ids=["zero_grad_modes", "accumulating", "argument_grad"])
def test_returned_grad_is_the_grad(case, backend):
    want = case(torch, lambda f: f)
    _same(want, case(tracec, lambda f: f))
    _same(want, case(tracec, lambda f: tracec.compile(f, backend=backend)))
