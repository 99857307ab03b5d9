"""Issue 15 item 1: traced arguments and results carry the user's names, in
the IR (surviving a print/parse round trip), in ``tracec dump``, in guard
failures and in errors from compiled code."""
import os

import pytest

import tracec
from tracec import ir
from inspect_programs import batch, mlp_step
from program_runner import tracec_cli

HERE = os.path.dirname(os.path.abspath(__file__))


def _steady(step, *args, backend="interp"):
    f = tracec.compile(step, backend=backend)
    for _ in range(3):
        f(*args)
    return f


def test_sgd_momentum_step_names_params_grads_and_buffers():
    step, model, opt = mlp_step("sgd")
    f = _steady(step, *batch())
    text = f.ir("optimized")
    for name in ("x", "y", "model.0.weight", "model.2.bias",
                 "opt.state[model.0.weight].momentum_buffer", "opt.param_groups[0].lr"):
        assert f'loc("{name}")' in text, name
    for name in ("return", "model.0.weight", "model.0.weight.grad",
                 "opt.state[model.2.weight].momentum_buffer"):
        assert f'tracec.name = "{name}"' in text, name
    assert "%model.0.weight:" in text        # the SSA name reads the same
    m = ir.parse_module(text)
    fn = next(iter(m.ops))
    assert [ir.arg_name(a) for a in fn.body.block.args] == \
        [s.name for s in f._last.trace.inputs]
    assert ir.result_names(fn)[0] == "return"


def test_adam_step_names_its_moments():
    step, model, opt = mlp_step("adam")
    f = _steady(step, *batch())
    names = [s.name for s in f._last.trace.inputs]
    assert "opt.state[model.0.weight].exp_avg" in names
    assert "opt.state[model.2.bias].exp_avg_sq" in names
    outs = [s.name for s in f._last.trace.outputs]
    assert "model.2.weight.grad" in outs and "opt.state[model.0.weight].exp_avg" in outs
    assert all(n for n in names + outs)


def test_container_arguments_and_rng_are_named():
    def f(hidden, scale):
        return hidden[0] * tracec.randn(3) + hidden[1] * scale["k"]

    tr = tracec.trace(f, (tracec.ones(3), tracec.ones(3)), {"k": tracec.ones(3)})
    text = str(tr)
    for name in ("hidden[0]", "hidden[1]", "scale['k']", "rng"):
        assert f'loc("{name}")' in text, name


def test_dump_shows_the_names():
    r = tracec_cli(["dump", os.path.join(HERE, "inspect_programs.py") + ":step",
                    "--arg", "x=f32[8,32]", "--arg", "y=i64[8]", "--stage", "trace"],
                   timeout=300)
    assert r.returncode == 0, r.stderr
    assert 'loc("model.0.weight")' in r.stdout
    assert 'tracec.name = "model.0.weight.grad"' in r.stdout


def test_guard_failures_name_the_tensor():
    w = tracec.ones(3)

    def f(x):
        return x * w

    c = tracec.compile(f, backend="interp", dynamic=False)
    c(tracec.ones(3))
    w.data = tracec.ones(1)          # the state tensor's shape changes
    c(tracec.ones(3))
    assert "state tensor w changed: float32[3] -> float32[1]" in c.cache_info().reasons[-1]
    c(tracec.ones(5, 1))
    assert "tensor argument x changed" in c.cache_info().reasons[-1]


def test_plain_object_argument_retrace_says_so_not_its_id():
    class Batch:          # a batch object holding a module: keyed by identity
        def __init__(self, src):
            self.src = src
            self.norm = tracec.nn.LayerNorm(3)

    c = tracec.compile(lambda b: b.norm(b.src) * 2, backend="interp")
    c(Batch(tracec.ones(3)))
    c(Batch(tracec.ones(3)))
    reason = c.cache_info().reasons[-1]
    assert "another Batch object" in reason and "make its class a dataclass" in reason
    assert "holds a module" in reason
    assert not any(ch.isdigit() for ch in reason), reason


def test_grad_guard_names_the_parameter():
    step, model, opt = mlp_step("sgd")

    def no_zero_grad(x, y):     # .grad accumulates: its presence is guarded
        tracec.nn.functional.cross_entropy(model(x), y).backward()

    c = tracec.compile(no_zero_grad, backend="interp")
    c(*batch())
    c(*batch())
    model[0].weight.grad = None
    c(*batch())
    assert "model.0.weight.grad" in c.cache_info().reasons[-1]


def test_compiled_index_error_names_the_argument():
    step, model, opt = mlp_step("sgd")
    f = _steady(step, *batch(), backend="cpu")
    x, y = batch()
    y[0] = 20
    with pytest.raises(IndexError, match=r"i64\[8,1\] from y\).*index 20 is out of bounds"):
        f(x, y)
