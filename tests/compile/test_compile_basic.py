"""tracec.compile on raw tensors: results and state updates equal eager,
guards retrace, data-dependent control flow names the user's line."""
import os
import warnings

import numpy as np
import pytest

import tracec
from tracec import TraceError


def _params(seed=0):
    tracec.manual_seed(seed)
    W1 = tracec.randn(6, 5, requires_grad=True)
    b1 = tracec.zeros(5, requires_grad=True)
    W2 = tracec.randn(5, 3, requires_grad=True)
    return [W1, b1, W2]


def _step_fn(params, lr=0.1):
    W1, b1, W2 = params

    def step(x, y):
        for p in params:
            p.grad = None
        h = (x @ W1 + b1).tanh()
        loss = ((h @ W2 - y) ** 2).mean()
        loss.backward()
        with tracec.no_grad():
            for p in params:
                p.sub_(lr * p.grad)
        return loss
    return step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_step_equals_eager_over_10_steps(backend):
    pe, pc = _params(), _params()
    eager, comp = _step_fn(pe), tracec.compile(_step_fn(pc), backend=backend)
    tracec.manual_seed(1)
    x, y = tracec.randn(8, 6), tracec.randn(8, 3)
    held = pc[0]  # a reference the user holds before the calls
    for _ in range(10):
        le, lc = eager(x, y), comp(x, y)
        assert np.allclose(le.item(), lc.item(), rtol=1e-5, atol=1e-6)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert held is pc[0] and held.is_leaf and held.requires_grad
    info = comp.cache_info()
    assert info.traces == 1 and info.hits == 9


def test_new_batch_size_retraces_and_stays_right():
    pe, pc = _params(), _params()
    eager, comp = _step_fn(pe), tracec.compile(_step_fn(pc), backend="interp")
    for n in (4, 4, 7, 7, 4):
        x, y = tracec.randn(n, 6), tracec.randn(n, 3)
        assert np.allclose(eager(x, y).item(), comp(x, y).item(), rtol=1e-5)
    info = comp.cache_info()
    assert info.traces == 2
    assert "argument x changed" in info.reasons[1] and "[7, 6]" in info.reasons[1]


def test_python_bool_argument_specializes():
    W = tracec.randn(3, 3)

    @tracec.compile(backend="interp")
    def f(x, flag):
        return x @ W if flag else x - 1

    x = tracec.randn(2, 3)
    for flag in (True, False, True, False):
        want = (x @ W) if flag else (x - 1)
        np.testing.assert_allclose(f(x, flag).numpy(), want.numpy(), rtol=1e-6)
    assert f.cache_info().traces == 2


def test_data_dependent_control_flow_names_user_line():
    @tracec.compile(backend="interp")
    def f(x):
        if round(x.sum().item()) > 0:  # LINE-MARK (a comparison alone is speculated)
            return x * 2
        return x

    with pytest.raises(TraceError) as e:
        f(tracec.ones(3))
    line = next(i for i, l in enumerate(open(__file__), 1) if "LINE-MARK" in l)
    assert f"{os.path.basename(__file__)}:{line}" in str(e.value)
    assert "fallback" in str(e.value)


def test_item_in_compiled_function_raises_and_fallback_eager_works():
    def g(x):
        s = x.sum().item()
        return x * s

    with pytest.raises(TraceError, match="item"):
        tracec.compile(g, backend="interp")(tracec.ones(3))
    f = tracec.compile(g, backend="interp", fallback="eager")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r1 = f(tracec.ones(3))
        r2 = f(tracec.ones(3) * 2)
        r3 = f(tracec.ones(3) * 2)
    np.testing.assert_allclose(r1.numpy(), [3, 3, 3])
    np.testing.assert_allclose(r3.numpy(), [12, 12, 12])
    np.testing.assert_allclose(r2.numpy(), r3.numpy())
    assert sum("eagerly" in str(x.message) for x in w) == 1


def test_ir_stages_and_locations_and_dump(tmp_path):
    params = _params()
    f = tracec.compile(_step_fn(params), backend="interp", dump=str(tmp_path))
    f(tracec.randn(4, 6), tracec.randn(4, 3))
    trace_ir = f.ir("trace")
    assert "tracec.backward" in trace_ir
    assert "tracec.backward" not in f.ir("autodiff")
    assert f'loc("{__file__}"' in f.ir("optimized")
    files = sorted(os.listdir(tmp_path))
    assert any(n.endswith("trace.mlir") for n in files)
    assert any(n.endswith("optimized.mlir") for n in files)
    # (the autodiff stage is made again for the dump: the passes keep no copy)
    dumped = [n for n in files if n.endswith("autodiff.mlir")]
    assert len(dumped) == 1
    with open(tmp_path / dumped[0]) as fh:
        assert fh.read() == f.ir("autodiff")
    with pytest.raises(ValueError, match="stages"):
        f.ir("nonsense")


def test_every_stage_round_trips():
    params = _params()
    f = tracec.compile(_step_fn(params), backend="interp")
    f(tracec.randn(4, 6), tracec.randn(4, 3))
    for stage in ("trace", "autodiff", "optimized"):
        text = f.ir(stage)
        m = tracec.ir.parse_module(text)
        assert tracec.ir.print_module(m) == text


def test_trace_returns_ir_without_compiling():
    W = tracec.randn(3, 2, requires_grad=True)
    t = tracec.trace(lambda x: (x @ W).sum(), tracec.randn(4, 3))
    text = str(t)
    assert "tracec.matmul" in text and "tracec.reduce_sum" in text


@pytest.mark.usefixtures("counter_rng")
def test_rng_state_is_carried():
    @tracec.compile(backend="interp")
    def f(x):
        return x + tracec.rand(3)

    tracec.manual_seed(5)
    outs = [f(tracec.zeros(3)).numpy().copy() for _ in range(3)]
    tracec.manual_seed(5)
    want = [tracec.rand(3).numpy().copy() for _ in range(3)]
    for a, b in zip(outs, want):
        np.testing.assert_array_equal(a, b)


def test_grad_accumulates_without_zeroing():
    W = tracec.ones(3, requires_grad=True)
    W_e = tracec.ones(3, requires_grad=True)

    def step(W):
        def f(x):
            (W * x).sum().backward()
        return f
    f = tracec.compile(step(W), backend="interp")
    x = tracec.tensor([1.0, 2.0, 3.0])
    for _ in range(3):
        f(x)
        step(W_e)(x)
    np.testing.assert_allclose(W.grad.numpy(), W_e.grad.numpy())
    np.testing.assert_allclose(W.grad.numpy(), [3, 6, 9])


def test_shape_error_inside_compiled_function_names_user_line():
    @tracec.compile(backend="interp")
    def f(x, y):
        return x + y  # SHAPE-MARK

    with pytest.raises(RuntimeError) as e:
        f(tracec.ones(3), tracec.ones(4))
    line = next(i for i, l in enumerate(open(__file__), 1) if "SHAPE-MARK" in l)
    assert f"{__file__}:{line}" in str(e.value)
    assert "(3,)" in str(e.value) and "(4,)" in str(e.value)


def test_same_tensor_twice_does_not_serve_distinct_tensors():
    f = tracec.compile(lambda a, b: a * 2 + b, backend="interp")
    x, z = tracec.ones(3), tracec.full((3,), 5.0)
    f(x, x)
    f(x, x)
    np.testing.assert_allclose(f(x, z).numpy(), [7, 7, 7])
    np.testing.assert_allclose(f(x, z).numpy(), [7, 7, 7])


def test_a_number_changing_every_call_stops_retracing_at_the_limit():
    """Past max_traces, calls matching no trace run eagerly (right results,
    a warning once) instead of tracing forever."""
    import warnings
    # (a number used as a loop count: not lifted, each value its own trace;
    # tests/compile/test_number_arguments.py has the lifted ones)
    f = tracec.compile(lambda x, i: x * 2 + sum(1 for _ in range(i)), backend="interp",
                       max_traces=3)
    x = tracec.ones(2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [f(x, i).tolist() for i in range(6)]
    assert outs == [[2.0 + i] * 2 for i in range(6)]
    assert f.cache_info().traces == 3
    msgs = [str(m.message) for m in w if "max_traces" in str(m.message)]
    assert len(msgs) == 1 and "pass it as a tensor" in msgs[0]
    assert f(x, 2).tolist() == [4.0, 4.0] and f.cache_info().hits >= 1


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_in_place_writes_to_arguments_reach_each_calls_own_argument(backend):
    """x.add_(1) on an argument updates the tensor passed to *this* call
    (it used to be written into the tensor of the traced call)."""
    def f(x, *, y):
        x.add_(1)
        y.mul_(2)
        return (x * y).sum()
    fc = tracec.compile(f, backend=backend)
    for i in range(3):
        xe, ye = tracec.randn(3, 4), tracec.randn(4)
        xc, yc = xe.clone(), ye.clone()
        np.testing.assert_allclose(fc(xc, y=yc).item(), f(xe, y=ye).item(), rtol=1e-5)
        np.testing.assert_array_equal(xc.numpy(), xe.numpy())
        np.testing.assert_array_equal(yc.numpy(), ye.numpy())
    assert fc.cache_info().traces == 1


def test_returned_arguments_and_parameters_are_the_objects_themselves():
    """As eagerly: a returned argument or parameter is that tensor (held
    references see later in-place updates), not a copy of it."""
    from tracec import nn
    tracec.manual_seed(0)
    lin = nn.Linear(3, 2)
    fc = tracec.compile(tracec.no_grad()(lambda x: (x, lin.weight, (x @ lin.weight.T).sum())),
                        backend="cpu")
    for _ in range(3):
        x = tracec.randn(4, 3)
        rx, rw, s = fc(x)
        assert rx is x and rw is lin.weight
        np.testing.assert_allclose(s.item(), (x.numpy() @ lin.weight.detach().numpy().T).sum(),
                                   rtol=1e-5)
    assert fc.cache_info().hits == 2


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.usefixtures("counter_rng")
def test_a_compiled_model_backpropagates_like_eager(backend):
    """compile(model), loss.backward() outside: a compiled backward (the
    forward recomputed, the dropout mask from the RNG state of the forward,
    batch-norm statistics updated once) gives eager's gradients for the
    parameters and for an input that requires grad."""
    from tracec import nn
    F = tracec.nn.functional

    def build():
        tracec.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.BatchNorm1d(16),
                          nn.Linear(16, 3))
        return m, tracec.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    (me, oe), (mc, oc) = build(), build()
    cm = tracec.compile(mc, backend=backend)
    rng = np.random.default_rng(0)
    for i in range(4):
        x = tracec.tensor(rng.standard_normal((10, 6)).astype(np.float32))
        y = tracec.tensor(rng.integers(0, 3, 10))
        xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        for model, opt, xx in ((me, oe, xe), (cm, oc, xc)):
            tracec.manual_seed(100 + i)
            loss = F.cross_entropy(model(xx), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-4, atol=1e-6)
    for (name, a), b in zip(me.state_dict().items(), mc.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    info = cm.cache_info()
    assert info.traces == 1 and info.hits == 3
    cm(x)                     # a new signature (x needs no grad): traced
    out = cm(x)
    assert out.grad_fn is not None and out.grad_fn.name() == "CompiledCallBackward"
    loss = out.sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()
    out = cm(x)
    with tracec.no_grad():
        mc[0].weight.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    out = cm(x)
    x.add_(1.0)           # an input that needs no grad, but the backward reads it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_several_results_needing_a_backward_share_one_compiled_backward(backend):
    """Two results that require grad (a nanoGPT model's ``logits, loss``):
    one compiled backward for both, whichever of them a backward reaches
    (the other gets zeros), gradients equal eager's; no eager fallback."""
    import warnings
    from tracec import nn

    def build():
        tracec.manual_seed(0)
        return nn.Linear(4, 3), nn.Linear(4, 3)
    (ae, be), (ac, bc) = build(), build()
    f = tracec.compile(lambda x: (ac(x), bc(x).tanh()), backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(4):
            x = tracec.tensor(rng.standard_normal((5, 4)).astype(np.float32))
            xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
            for (a, b), xx, fn in (((ae, be), xe, lambda v: (ae(v), be(v).tanh())),
                                   ((ac, bc), xc, f)):
                a.zero_grad(), b.zero_grad()
                p, q = fn(xx)
                # both results, then only the second, then only the first
                loss = (p.sum() * 2 + (q * q).sum()) if i < 2 else (q.sum() if i == 2 else p.sum())
                loss.backward()
            for m_e, m_c in ((ae, ac), (be, bc)):
                for pe, pc in zip(m_e.parameters(), m_c.parameters()):
                    if pe.grad is None:     # a result no gradient reached: None, as eager
                        assert pc.grad is None
                        continue
                    np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5,
                                               atol=1e-6)
            np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
    info = f.cache_info()
    assert info.eager_signatures == 0 and info.traces == 1
    with tracec.no_grad():
        f(x), f(x)


def test_a_compiled_model_inside_a_compiled_step_is_inlined():
    """model = tracec.compile(model) and a compiled training step using it:
    the inner compiled function is traced into the outer one."""
    from tracec import nn
    F = tracec.nn.functional

    def build():
        tracec.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        return m, tracec.optim.SGD(m.parameters(), lr=0.1)
    (me, oe), (mc, oc) = build(), build()
    inner = tracec.compile(mc, backend="cpu")

    @tracec.compile(backend="cpu")
    def step(x, y):
        oc.zero_grad()
        loss = F.cross_entropy(inner(x), y)
        loss.backward()
        oc.step()
        return loss
    x, y = tracec.randn(6, 4), tracec.randint(0, 2, (6,))
    for _ in range(4):
        oe.zero_grad()
        le = F.cross_entropy(me(x), y)
        le.backward()
        oe.step()
        np.testing.assert_allclose(step(x, y).item(), le.item(), rtol=1e-5)
    assert step.cache_info().hits >= 2 and inner.cache_info().traces == 0


def test_compile_decorates_a_method():
    """@tracec.compile on a method binds to each instance (one trace each)."""
    from tracec import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        @tracec.compile(backend="cpu")
        def forward(self, x):
            return self.lin(x).relu()
    tracec.manual_seed(0)
    nets, x = [Net(), Net()], tracec.randn(4, 3)
    with tracec.no_grad():
        for _ in range(3):
            for net in nets:
                w, b = net.lin.weight.detach().numpy(), net.lin.bias.detach().numpy()
                np.testing.assert_allclose(net(x).numpy(), np.maximum(x.numpy() @ w.T + b, 0),
                                           rtol=1e-5, atol=1e-6)
    assert Net.forward.cache_info().traces == 2 and Net.forward.cache_info().hits == 4


def test_a_long_unrolled_loop_is_named_in_cache_info():
    def f(x):
        for _ in range(1100):
            x = x * 1.001 + 1.0   # two ops per iteration
        return x
    comp = tracec.compile(f, backend="interp")
    np.testing.assert_allclose(comp(tracec.ones(2)).numpy(), f(tracec.ones(2)).numpy())
    info = comp.cache_info()
    assert info.timings["ops"] > 2200
    assert len(info.notes) == 1 and "test_compile_basic.py" in info.notes[0]
    assert "unrolled" in info.notes[0]
    short = tracec.compile(lambda x: x + 1, backend="interp")
    short(tracec.ones(1))
    assert short.cache_info().notes == []


def test_compiled_module_reads_the_module_attributes():
    """torch.compile(model) gives PyTorch's OptimizedModule: attribute reads
    go to the module (``_orig_mod``), never to a copy made at compile time:
    llama2.c's train.py reads ``raw_model.last_loss`` the forward just set,
    and calls ``model.eval()`` / ``model.parameters()`` on the compiled one."""
    class M(tracec.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tracec.nn.Linear(2, 2)
            self.last = None

        def forward(self, x):
            y = self.lin(x)
            self.last = 5
            return y

    m = M()
    c = tracec.compile(m, backend="interp")
    assert c._orig_mod is m and c.last is None
    c(tracec.ones(1, 2))
    assert c.last == 5 and m.last == 5
    assert [p is q for p, q in zip(c.parameters(), m.parameters())] == [True, True]
    c.eval()
    assert not m.training and not c.training
    # its forward is the compiled call (Meta llama's generate calls model.forward)
    hits = c.cache_info().hits
    for _ in range(3):
        c.forward(tracec.ones(1, 2))
    assert c.cache_info().hits >= hits + 2
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        c.nope
    f = tracec.compile(lambda x: x + 1, backend="interp")
    with pytest.raises(AttributeError, match="has no attribute '_orig_mod'"):
        f._orig_mod


def test_large_uniform_constant_is_a_broadcast_scalar_and_keeps_signed_zeros():
    """A constant tensor made in the call from data (CapsNet's
    ``Variable(torch.zeros(...))`` routing logits) whose elements are all
    equal is traced as one scalar broadcast, not megabytes of dense data;
    equal means equal bits: a tensor of -0.0 stays -0.0 (1/x is -inf), and
    one differing element keeps it dense."""
    from tracec import tracing
    n = tracing.UNIFORM_CONSTANT + 7

    def f(x):
        zeros = tracec.tensor(np.zeros(n, np.float32))
        negz = tracec.tensor(np.full(n, -0.0, np.float32))
        mixed = np.zeros(n, np.float32)
        mixed[-1] = 2.0
        return x + zeros, 1.0 / negz + x * 0, x * tracec.tensor(mixed)

    comp = tracec.compile(f, backend="cpu")
    for _ in range(2):
        x = tracec.randn(n)
        got, want = comp(x), f(x)
        for g, w in zip(got, want):
            assert np.array_equal(g.numpy(), w.numpy())
    assert np.all(got[1].numpy() == -np.inf)
    text = comp.ir("trace")
    assert text.count(f"tracec.broadcast_to") == 2
    assert f"dense<\"0x" in text           # the mixed one stays dense
    assert len(text) < 8 * n + 10_000      # and only it is written out (8 hex digits each)


def test_a_compiled_sequential_has_its_length():
    """torch's OptimizedModule forwards len() to the original module."""
    seq = tracec.nn.Sequential(tracec.nn.Linear(2, 3), tracec.nn.ReLU())
    assert len(tracec.compile(seq)) == 2
    with pytest.raises(TypeError, match="Linear does not support len"):
        len(tracec.compile(tracec.nn.Linear(2, 3)))


def test_dynamo_explain_says_what_was_recorded():
    """torch._dynamo.explain(fn)(*args): graphs, ops, guards; a call that
    cannot be traced is one break whose reason names the user's line."""
    m = tracec.nn.Linear(3, 2)
    out = tracec._dynamo.explain(lambda t: m(t + 1).sin())(tracec.ones(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0) and out.op_count >= 3
    text = str(out)
    assert "Graph Count: 1" in text and "tracec.sin at" in text and "is unchanged" in text

    def breaks(t):
        return tracec.tensor(t.numpy() * 2)
    out = tracec._dynamo.explain(breaks)(tracec.ones(3))
    assert (out.graph_count, out.graph_break_count) == (0, 1)
    assert "test_compile_basic.py" in out.break_reasons[0].reason
    with pytest.raises(TypeError, match="explain\\(f\\)"):
        tracec._dynamo.explain(breaks, tracec.ones(3))
