"""A user ``autograd.Function`` under ``tracec.compile(model)`` with
``backward()`` outside the compiled call (the torch.compile idiom): the
tracer runs the user's backward once on a seed while recording the forward
(``autograd._record_vjp``), the trace holds ``tracec.custom_vjp``, and the
compiled backward is the user's backward, not the derivative of the
recorded forward.  Every step must equal eager (parameters updated, new
inputs each call), with one trace and no eager signature; what cannot be
recorded keeps running eagerly and says why."""
import numpy as np
import pytest

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tracec import ir

from test_custom_function_backward import functions


MemoryEfficientSwish, StraightThrough, GradReverse = functions(tracec)


class ScaleBy(tracec.autograd.Function):
    """Two differentiable inputs, setup_context style; w's gradient reduced."""
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(8, 3)
        self.w = nn.Parameter(tracec.linspace(0.5, 1.5, 8))

    def forward(self, x):
        h = MemoryEfficientSwish.apply(self.a(x))
        h = StraightThrough.apply(h * 4) / 4 + GradReverse.apply(h, 0.5)
        return self.b(ScaleBy.apply(h, self.w))


def _train(model, forward, batches):
    opt = tracec.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(forward(tracec.tensor(x)), tracec.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def _batches(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n))
            for n in sizes]


def _net():
    tracec.manual_seed(0)
    return Net()


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_model_with_backward_outside_runs_the_users_backward(backend):
    batches = _batches([5] * 5)
    model = _net()
    want = _train(model, model, batches)
    model = _net()
    compiled = tracec.compile(model, backend=backend)
    got = _train(model, compiled, batches)
    info = compiled.cache_info()
    assert info.traces == 1 and info.eager_signatures == 0 and info.hits == 4, info
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_symbolic_batch_keeps_one_trace():
    batches = _batches([5, 7, 3, 9, 4])
    model = _net()
    want = _train(model, model, batches)
    model = _net()
    compiled = tracec.compile(model, backend="cpu", dynamic=True)
    got = _train(model, compiled, batches)
    assert compiled.cache_info().traces == 1
    assert compiled.cache_info().eager_signatures == 0
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_gradients_equal_pytorchs():
    torch = pytest.importorskip("torch")
    model = _net()
    compiled = tracec.compile(model, backend="cpu")
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    for _ in range(3):          # the third call's backward is compiled code
        model.zero_grad()
        compiled(tracec.tensor(x)).pow(2).sum().backward()

    TSwish, TRound, TRev = functions(torch)
    p = {k: torch.tensor(v.detach().numpy(), requires_grad=True)
         for k, v in model.named_parameters()}
    h = TSwish.apply(torch.tensor(x) @ p["a.weight"].T + p["a.bias"])
    h = TRound.apply(h * 4) / 4 + TRev.apply(h, 0.5)
    (((h * p["w"]) @ p["b.weight"].T + p["b.bias"]) ** 2).sum().backward()
    for k, v in model.named_parameters():
        np.testing.assert_allclose(v.grad.numpy(), p[k].grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=k)


def test_the_trace_holds_custom_vjp_and_round_trips():
    model = _net()
    compiled = tracec.compile(model, backend="interp")
    compiled(tracec.ones(2, 6)).sum().backward()
    text = compiled.ir("trace")
    assert text.count("tracec.custom_vjp") == 4, text
    assert "tracec.custom_vjp" in ir.print_module(ir.parse_module(text))
    assert "tracec.custom_vjp" not in compiled.ir("optimized")


class TwoOut(tracec.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        return ga * 5 + gb * 7


class Recompute(tracec.autograd.Function):
    """A checkpoint-style backward that runs a backward of its own."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return tracec.tanh(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        with tracec.enable_grad():
            xd = x.detach().requires_grad_()
            y = tracec.tanh(xd)
            gx, = tracec.autograd.grad(y, xd, g)
        return gx


@pytest.mark.parametrize("fn", [lambda x: sum(TwoOut.apply(x)), Recompute.apply],
                         ids=["two outputs", "recompute"])
def test_what_cannot_be_recorded_runs_eagerly_and_says_why(fn):
    w = nn.Parameter(tracec.tensor([0.3, -1.2, 2.0]))
    f = tracec.compile(lambda x: fn(x * w).sum())
    want = []
    for xv in ([1.0, 2.0, 3.0], [0.5, 0.25, -1.0]):
        w.grad = None
        fn(tracec.tensor(xv) * w).sum().backward()
        want.append(w.grad.numpy().copy())
    with pytest.warns(UserWarning):
        for xv, wv in zip(([1.0, 2.0, 3.0], [0.5, 0.25, -1.0]), want):
            w.grad = None
            f(tracec.tensor(xv)).backward()
            np.testing.assert_allclose(w.grad.numpy(), wv, rtol=1e-6)
    info = f.cache_info()
    assert info.eager_signatures == 1 and "backward outside the compiled call" in \
        info.eager_reasons[0]


def test_mark_dirty_as_pytorch():
    class Double(tracec.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = tracec.ones(3, requires_grad=True)
    b = a.clone()
    out = Double.apply(b)
    assert out is b and out.grad_fn is not None
    out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used "
                                           "in an in-place operation"):
        Double.apply(tracec.ones(3, requires_grad=True))
