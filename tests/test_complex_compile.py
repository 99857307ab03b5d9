"""Complex values inside tracec.compile (tracec/complex_trace.py): recorded
as real ``[..., 2]`` tensors, each complex op by its real decomposition.
Compiled results and gradients must equal eager ones (interp and cpu) and
PyTorch's; ops with no decomposition, complex arguments and complex results
are refused naming the user's line."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

BACKENDS = ["interp", "cpu"]


def _arr(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _both(fn, arrays, backend, steps=2):
    """``fn(lib, *tensors)`` -> (loss, outputs...) in torch, tracec eager and
    tracec compiled (run ``steps`` times: the first call traces, the next run
    the compiled code); returns the three (outputs, input grads)."""
    def run(lib, call):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = call(*xs)
        outs = [o.detach().numpy() for o in out]
        return outs, [x.grad.numpy() if x.grad is not None else None for x in xs]

    def step(*xs):
        loss, *outs = fn(tracec, *xs)
        loss.backward()
        return (loss, *outs)

    def torch_step(*xs):
        loss, *outs = fn(torch, *xs)
        loss.backward()
        return (loss, *outs)
    ref = run(torch, torch_step)
    eager = run(tracec, step)
    compiled = tracec.compile(step, backend=backend, fullgraph=True)
    for _ in range(steps):
        got = run(tracec, compiled)
    assert compiled.cache_info().hits >= steps - 1
    return ref, eager, got


def _close(a, b, rtol=1e-5, atol=1e-5):
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None
            continue
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def _check(fn, arrays, backend):
    ref, eager, got = _both(fn, arrays, backend)
    for r, e, g in zip(ref, eager, got):
        _close(e, r)
        _close(g, e)


def _rope(lib, xq, fc_re, fc_im):
    # Meta llama's apply_rotary_emb, freqs_cis built with polar from real inputs
    freqs_cis = lib.polar(lib.sqrt(fc_re ** 2 + fc_im ** 2), lib.atan2(fc_im, fc_re))
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    out = lib.view_as_real(xq_ * freqs_cis.view(*shape)).flatten(3).type_as(xq)
    return (out * lib.arange(8.0)).sum(), out


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_complex_compiles_with_gradients(backend):
    rng = np.random.default_rng(0)
    _check(_rope, [_arr(rng, 2, 5, 3, 8), _arr(rng, 5, 4), _arr(rng, 5, 4)], backend)


def _arith(lib, a, b, c):
    z = lib.complex(a, b)                      # complex(re, im)
    w = lib.view_as_complex(lib.stack([c, a], -1))
    y = z * w + z / (w + 3.0) - 2.0 * z.conj() + (z * (0.5 - 1j)) / (1 + 2j)
    y = y - c + (-y).exp() * 0.1 + lib.where(a > 0, z, w)
    m = (y.reshape(4, 3) @ w.reshape(3, 4)).transpose(0, 1)   # complex matmul
    s = m.sum(0) + lib.cat([z, w]).reshape(4, 6).sum(1)
    e = (z == w).float().sum() + (z != z.conj()).float().sum()
    loss = (s.abs() ** 2).sum() + s.real.sum() * 2 - s.imag.sum() + e + y.abs().sum()
    return loss, lib.view_as_real(s), lib.view_as_real(y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_arithmetic_matmul_and_comparisons_compile(backend):
    rng = np.random.default_rng(1)
    _check(_arith, [_arr(rng, 12), _arr(rng, 12), _arr(rng, 12)], backend)


def _movement(lib, a, b):
    z = lib.polar(a.abs() + 0.5, b)            # [3, 4]
    t = z.t()[1:3].unsqueeze(0).expand(2, 2, 3)   # transpose, slice, broadcast
    i = z[lib.tensor([2, 0, 2])]               # index (gather rows)
    p = lib.nn.functional.pad(lib.view_as_real(z), (0, 0, 1, 1))
    loss = lib.view_as_real(t).pow(2).sum() + lib.view_as_real(i)[..., 1].sum() + p.sum()
    return loss, lib.view_as_real(t.flatten(1)), lib.view_as_real(i)


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_movement_and_indexing_compile(backend):
    rng = np.random.default_rng(2)
    _check(_movement, [_arr(rng, 3, 4), _arr(rng, 3, 4)], backend)


def test_complex_state_is_read_through_a_real_view():
    """A complex tensor the function reads (a module attribute, as Meta
    llama's freqs_cis) is an input of every call: changed in place outside,
    the compiled code sees the new values."""
    state = {"f": tracec.polar(tracec.ones(4), tracec.arange(4.0))}

    def step(x):
        return tracec.view_as_real(tracec.view_as_complex(x) * state["f"])

    f = tracec.compile(step, backend="interp", fullgraph=True)
    x = tracec.randn(4, 2)
    for _ in range(2):
        np.testing.assert_allclose(f(x).numpy(), step(x).numpy(), rtol=1e-5, atol=1e-6)
    state["f"].mul_(2j)
    np.testing.assert_allclose(f(x).numpy(), step(x).numpy(), rtol=1e-5, atol=1e-6)
    assert f.cache_info().traces == 1
    # new storage (``.data =``): the view the trace read is stale, so it retraces
    state["f"].data = tracec.polar(tracec.ones(4), tracec.arange(4.0) * 3)
    np.testing.assert_allclose(f(x).numpy(), step(x).numpy(), rtol=1e-5, atol=1e-6)
    assert f.cache_info().reasons[-1] == ("guarded Python state changed: a complex tensor the "
                                          "trace reads (complex64[4]) has new storage")


def test_complex_state_written_in_place_is_written_back():
    buf = tracec.zeros(3, dtype=tracec.complex64)

    def step(x):
        buf.add_(tracec.view_as_complex(x))
        return tracec.view_as_real(buf).sum()

    f = tracec.compile(step, backend="interp", fullgraph=True)
    x = tracec.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, -1.0]])
    for k in range(1, 4):
        f(x)
        np.testing.assert_allclose(tracec.view_as_real(buf).numpy(), k * x.numpy())
    assert f.cache_info().hits == 2


def test_complex_state_written_by_slice_assignment():
    """A complex cache written through a slice (Meta llama's KV-cache pattern
    on a complex buffer)."""
    buf = tracec.zeros(2, 5, dtype=tracec.complex64)
    ref = tracec.zeros(2, 5, dtype=tracec.complex64)

    def step(x, b):
        b[:, 1:3] = tracec.view_as_complex(x)
        return tracec.view_as_real(b).sum(-1)

    f = tracec.compile(lambda x: step(x, buf), backend="interp", fullgraph=True)
    for k in range(3):
        x = tracec.randn(2, 2, 2) * (k + 1)
        np.testing.assert_allclose(f(x).numpy(), step(x, ref).numpy(), rtol=1e-6)
        np.testing.assert_allclose(tracec.view_as_real(buf).numpy(),
                                   tracec.view_as_real(ref).numpy())
    assert f.cache_info().hits == 2


def test_complex_in_a_symbolic_trace():
    fc = tracec.polar(tracec.ones(16, 4), tracec.rand(16, 4))

    def step(x):
        z = tracec.view_as_complex(x.reshape(x.shape[0], 4, 2))
        return tracec.view_as_real(z * fc[:x.shape[0]]).flatten(1)

    f = tracec.compile(step, backend="interp", fullgraph=True)
    for n in (5, 7, 9, 6, 7):
        x = tracec.randn(n, 8)
        np.testing.assert_allclose(f(x).numpy(), step(x).numpy(), rtol=1e-5, atol=1e-6)
    info = f.cache_info()
    assert info.traces == 2 and info.symbolic[1] and not info.notes   # one static, one symbolic


def test_complex_argument_and_result_are_refused_naming_the_function():
    def double(z):
        return z * 2

    def make(x):
        return tracec.view_as_complex(x) * 2

    f = tracec.compile(double, backend="interp")
    with pytest.raises(tracec.TraceError, match=r"double \(.*test_complex_compile.py:\d+\)\): "
                                               "argument z is a tracec.complex64 tensor; "
                                               "complex values are eager only"):
        f(tracec.ones(2, dtype=tracec.cfloat))
    g = tracec.compile(make, backend="interp")
    with pytest.raises(tracec.TraceError, match=r"make \(.*test_complex_compile.py:\d+\)\): the "
                                               "function returns a tracec.complex64 tensor: the "
                                               "results of a compiled function cannot be "
                                               "complex"):
        g(tracec.ones(2, 2))


def test_in_place_write_through_view_as_real_is_seen_by_the_complex_tensor():
    """view_as_real / view_as_complex share the representation of their
    operand in the trace: a write through one (a slice of it included) is a
    write to the other, as eagerly."""
    def step(x):
        z = tracec.view_as_complex(x.clone())
        r = tracec.view_as_real(z)
        r[:, 0] = 0.5
        r.mul_(3.0)
        r[1:].add_(1.0)
        zz = z * (2 + 1j)
        return zz.real, zz.imag, r * 1

    f = tracec.compile(step, backend="interp")
    for k in range(2):
        x = tracec.tensor(np.arange(6, dtype=np.float32).reshape(3, 2) + k)
        for e, c in zip(step(x), f(x)):
            np.testing.assert_allclose(c.numpy(), e.numpy())
    assert f.cache_info().traces == 1


def test_in_place_write_through_real_or_imag_is_refused():
    def step(x):
        z = tracec.view_as_complex(x.clone())
        zr = z.real
        zr.mul_(2.0)           # changes z too: the trace would not see it
        return (z * 2).real

    line = step.__code__.co_firstlineno + 3
    f = tracec.compile(step, backend="interp")
    with pytest.raises(tracec.TraceError, match=rf"test_complex_compile.py:{line}: an in-place "
                                               "write to a tensor that shares memory"):
        f(tracec.ones(3, 2))


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_complex_parameter_trained_compiled(opt):
    """A complex Parameter's gradient (view_as_real of dL/da + i dL/db) and
    the optimizer's update through view_as_real (its moments per component),
    compiled: the parameters, their .grad and the optimizer state eager
    gives, from one trace; without zero_grad the gradient accumulates."""
    def make():
        rng = np.random.default_rng(0)
        w = tracec.nn.Parameter(tracec.tensor(
            (rng.random((3, 4)) + 1j * rng.random((3, 4))).astype(np.complex64)))
        b = tracec.nn.Parameter(tracec.tensor(rng.random(4).astype(np.float32)))
        o = getattr(tracec.optim, opt)([w, b], lr=0.05)

        def step(x, zero):
            if zero:
                o.zero_grad()
            z = tracec.complex(x, x * 0.5) @ w
            loss = (z.abs() + b).pow(2).mean() + (z * z.conj()).real.mean()
            loss.backward()
            o.step()
            return loss
        return step, w, b, o
    se, we, be, oe = make()
    sc, wc, bc, oc = make()
    c = tracec.compile(sc, backend="interp")
    for k in range(4):
        x = tracec.tensor(np.random.default_rng(k).standard_normal((2, 3)).astype(np.float32))
        zero = k < 2
        np.testing.assert_allclose(c(x, zero).item(), se(x, zero).item(), rtol=1e-5)
    assert wc.grad.dtype == tracec.complex64 and tuple(wc.grad.shape) == (3, 4)
    for e, g in ((we, wc), (be, bc), (we.grad, wc.grad)):
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)
    for key, v in oe.state[we].items():
        if isinstance(v, tracec.Tensor):
            np.testing.assert_allclose(oc.state[wc][key].numpy(), v.numpy(), rtol=1e-5, atol=1e-7)
    assert c.cache_info().traces == 2     # zero_grad or not: one trace each


def test_dtype_to_real_and_to_complex_are_methods():
    assert tracec.complex64.to_real() is tracec.float32
    assert tracec.complex128.to_real() is tracec.float64
    assert tracec.float32.to_real() is tracec.float32
    assert tracec.float64.to_complex() is tracec.complex128
    assert str(torch.complex64.to_real()) == "torch.float32"


def test_state_requires_grad_guard_is_taken_when_first_read():
    """A buffer written inside the step with values that require grad (a KV
    cache) requires grad after the eager first call; detached again before
    the next, that call must reuse the trace (requires_grad as the call
    found it), not retrace at every step."""
    cache = tracec.zeros(4)
    w = tracec.ones(2, requires_grad=True)

    def step():
        cache[:2] = w * 3
        loss = cache.sum()
        loss.backward()
        return loss

    f = tracec.compile(step, backend="interp", fullgraph=True)
    for _ in range(3):
        w.grad = None
        cache.detach_()
        assert f().item() == 6.0
        assert w.grad.tolist() == [3.0, 3.0]
    assert f.cache_info().traces == 1


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_writes_reach_every_tensor_of_one_representation(backend):
    """A real tensor, its view_as_complex and that one's view_as_real are one
    representation: a write through any reaches the others (the argument
    included), and a write to the argument is seen through its complex view."""
    def through_views(x):
        c = tracec.view_as_complex(x)
        tracec.view_as_real(c).mul_(2.0)
        return x.sum() + c.abs().sum()

    def to_the_base(x):
        c = tracec.view_as_complex(x)
        x.mul_(2.0)
        return c.abs().sum()

    for fn in (through_views, to_the_base):
        f = tracec.compile(fn, backend=backend)
        for _ in range(3):
            a = tracec.tensor(np.arange(16, dtype=np.float32).reshape(8, 2))
            b = tracec.tensor(np.arange(16, dtype=np.float32).reshape(8, 2))
            np.testing.assert_allclose(f(b).item(), fn(a).item(), rtol=1e-6)
            np.testing.assert_array_equal(b.numpy(), a.numpy())


def test_complex_views_the_trace_cannot_keep_current_are_refused():
    """Writes the trace would drop: through view_as_complex of a reshape of
    the argument (the write must reach the argument), and to a tensor whose
    complex view is read afterwards without sharing its representation."""
    def of_a_view(x):
        tracec.view_as_complex(x.reshape(4, 2, 2)).mul_(2.0)
        return x.sum()

    def stale(x):
        c = tracec.view_as_complex(x.reshape(4, 2, 2))
        x.mul_(2.0)
        return c.abs().sum()

    for fn, msg in ((of_a_view, "view_as_real/view_as_complex of a view of another tensor"),
                    (stale, r"read after the tensor it views was written in place")):
        line = fn.__code__.co_firstlineno + (1 if fn is of_a_view else 3)
        with pytest.raises(tracec.TraceError, match=rf"test_complex_compile.py:{line}: .*{msg}"):
            tracec.compile(fn, backend="interp")(tracec.ones(4, 4))
