"""``detach()`` and ``.data`` inside a compiled function stop gradients as
they do eagerly (they once vanished from the trace, and compiled calls
differentiated through them: silently wrong gradients)."""
import numpy as np
import pytest

import tracec


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_detach_and_data_stop_gradients_in_every_call(backend):
    p = tracec.tensor([1.0, -2.0, 3.0], requires_grad=True)

    def step():
        p.grad = None
        loss = (p * p.detach()).sum() + (p.data * p).sum() + (p.detach().exp() * p).sum()
        loss.backward()
        return p.grad.clone()
    want = step().numpy()
    np.testing.assert_allclose(want, 2 * p.detach().numpy() + np.exp(p.detach().numpy()))
    f = tracec.compile(step, backend=backend)
    for _ in range(3):
        np.testing.assert_allclose(f().numpy(), want, rtol=1e-6)
    assert "stop_gradient" in f.ir("trace")


def test_softmax_gradient_through_compiled_code_matches_eager():
    x = tracec.randn(4, 7, requires_grad=True)
    w = tracec.randn(4, 7)

    def step():
        x.grad = None
        (tracec.log_softmax(x, 1) * w).sum().backward()
        return x.grad.clone()
    want = step().numpy()
    f = tracec.compile(step)
    for _ in range(2):
        np.testing.assert_allclose(f().numpy(), want, rtol=1e-5, atol=1e-6)
