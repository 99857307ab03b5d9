"""A user ``autograd.Function`` inside a compiled training step: its
``backward`` is the user's Python, so the tracer records the eager
backward op by op (``Recorder._record_eager_backward``) instead of leaving
it to the autodiff pass.  Each step must equal eager on every call (with
new inputs and updated parameters each time: nothing of the traced call may
be baked in), with one trace and no eager fallback."""
import numpy as np
import pytest

import tracec


def functions(T):
    """The Functions below for library ``T`` (tracec or torch, as oracle)."""
    class MemoryEfficientSwish(T.autograd.Function):
        # lukemelas EfficientNet-PyTorch utils.py
        @staticmethod
        def forward(ctx, i):
            result = i * T.sigmoid(i)
            ctx.save_for_backward(i)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            i = ctx.saved_tensors[0]
            sigmoid_i = T.sigmoid(i)
            return grad_output * (sigmoid_i * (1 + i * (1 - sigmoid_i)))

    class StraightThrough(T.autograd.Function):
        """round() forward; a gradient that is not round's derivative."""
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g * 3.0

    class GradReverse(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g.neg() * ctx.alpha, None
    return MemoryEfficientSwish, StraightThrough, GradReverse


MemoryEfficientSwish, StraightThrough, GradReverse = functions(tracec)


class SplitScale(tracec.autograd.Function):
    """Two outputs, one of them unused by the loss, setup_context style."""
    @staticmethod
    def forward(x, w):
        return x * w, x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w)
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, ga, gb):
        x, w = ctx.saved_tensors
        gx = ga * w if ga is not None else None
        if gb is not None:
            gx = gx + gb * x.exp() if gx is not None else gb * x.exp()
        gw = (ga * x).sum(0) if ga is not None and ctx.needs_input_grad[1] else None
        return gx, gw


def _make():
    tracec.manual_seed(0)
    lin = tracec.nn.Linear(4, 3)
    lin2 = tracec.nn.Linear(3, 2)
    scale = tracec.nn.Parameter(tracec.ones(3) * 0.5)
    params = list(lin.parameters()) + list(lin2.parameters()) + [scale]
    opt = tracec.optim.SGD(params, lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        h = MemoryEfficientSwish.apply(lin(x))
        h = StraightThrough.apply(h * 4) / 4 + GradReverse.apply(h, 0.5)
        a, _ = SplitScale.apply(h, scale)
        loss = ((lin2(a) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step, params


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_custom_functions_in_a_compiled_step_equal_eager(backend):
    rng = np.random.default_rng(3)
    data = [(rng.standard_normal((5, 4)).astype(np.float32),
             rng.standard_normal((5, 2)).astype(np.float32)) for _ in range(5)]
    step, params = _make()
    eager = [step(tracec.tensor(x), tracec.tensor(y)).item() for x, y in data]
    eager_params = [p.detach().numpy().copy() for p in params]
    step, params = _make()
    compiled = tracec.compile(step, backend=backend)
    got = [compiled(tracec.tensor(x), tracec.tensor(y)).item() for x, y in data]
    info = compiled.cache_info()
    assert info.traces == 1 and info.eager_signatures == 0, info
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    for p, want in zip(params, eager_params):
        np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-5, atol=1e-6)


def test_the_users_backward_is_what_runs():
    """The straight-through gradient (3, not round's 0) reaches the input."""
    w = tracec.tensor([0.3, -1.2, 2.6], requires_grad=True)

    def step(x):
        w.grad = None
        (StraightThrough.apply(x * w)).sum().backward()
        return w.grad * 1

    compiled = tracec.compile(step, backend="cpu")
    for scale in (1.0, 2.0, -0.5):
        x = tracec.ones(3) * scale
        np.testing.assert_allclose(compiled(x).numpy(), np.full(3, 3.0 * scale))


def test_with_complex_numbers_in_the_same_backward_it_is_refused():
    """Complex ops' backward is the autodiff pass's (not recordable eagerly):
    with a custom Function in the same backward the trace is refused, naming
    the user's line, and ``fallback="eager"`` computes eager's numbers."""
    w = tracec.tensor([0.3, -1.2, 2.6, 0.5], requires_grad=True)

    def step(x):
        w.grad = None
        z = tracec.view_as_complex(StraightThrough.apply(x * w).reshape(2, 2))
        (z * z).abs().sum().backward()
        return w.grad * 1

    with pytest.raises(tracec.TraceError, match=r"test_custom_function_backward.py:\d+: a custom "
                       r"autograd.Function \(StraightThrough\) and complex numbers"):
        tracec.compile(step, backend="cpu")(tracec.ones(4))
    want = [step(tracec.ones(4) * s).numpy() for s in (1.0, 2.0)]
    compiled = tracec.compile(step, backend="cpu", fallback="eager")
    with pytest.warns(UserWarning):
        got = [compiled(tracec.ones(4) * s).numpy() for s in (1.0, 2.0)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
