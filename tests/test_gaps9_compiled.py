"""gaps9, continued: what now records inside ``tracec.compile``, against
PyTorch 2.13 (eager and compiled, backends interp and cpu):

* ``linalg.inv`` / ``inverse``: Gauss-Jordan with getrf's pivots in
  primitives, PyTorch's gradient and singular-matrix message;
* ``saved_tensors_hooks``: eager semantics and errors as PyTorch's;
  ``save_on_cpu`` recorded (its hooks give the value back), other hooks
  refused at the user's line or run eagerly with ``fallback="eager"``;
* writes into ``expand`` views: the fills and index writes PyTorch allows,
  recorded; the overlapping ones refused with PyTorch's message."""
import warnings

import numpy as np
import pytest
import torch

import tracec


# --- inverse inside tracec.compile --------------------------------------------------

def _inv_step(lib, name):
    def step(x, w):
        fn = lib.inverse if name == "inverse" else lib.linalg.inv
        y = fn(x)
        (y * w).sum().backward()
        return y
    return step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("shape,dtype", [((4, 4), "float32"), ((3, 5, 5), "float64"),
                                         ((2, 3, 3, 3), "float32"), ((1, 1), "float64")])
def test_inverse_compiled_matches_torch(shape, dtype, backend):
    rng = np.random.RandomState(0)
    n = shape[-1]
    A = (rng.randn(*shape) + 3 * np.eye(n)).astype(dtype)
    A[..., [0, n - 1], :] = A[..., [n - 1, 0], :]          # (a pivot away from the diagonal)
    W = rng.randn(*shape).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    for name in ("inverse", "linalg.inv"):
        tx = torch.tensor(A, requires_grad=True)
        want = _inv_step(torch, name)(tx, torch.tensor(W))
        x = tracec.tensor(A, requires_grad=True)
        fn = tracec.compile(_inv_step(tracec, name), backend=backend)
        got = fn(x, tracec.tensor(W))
        assert fn.cache_info().eager_signatures == 0          # traced, not run eagerly
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
        assert got.grad_fn.name() == want.grad_fn.name()


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_inverse_compiled_singular_raises_torch_message(backend):
    cases = [np.zeros((3, 3), np.float32),
             np.stack([np.eye(3), np.zeros((3, 3))]).astype(np.float32),
             np.array([[1., 2, 3], [2, 4, 6], [1, 1, 1]], np.float32)]
    fn = tracec.compile(lambda a: tracec.linalg.inv(a) * 2, backend=backend)
    for A in cases:
        with pytest.raises(RuntimeError) as want:
            torch.linalg.inv(torch.tensor(A))
        with pytest.raises(RuntimeError) as got:
            fn(tracec.tensor(A))
        assert str(got.value).endswith(str(want.value))
        assert "test_gaps9_compiled.py" in str(got.value)              # the user's line


# --- saved_tensors_hooks / save_on_cpu ------------------------------------------------

def _hooked(lib, log):
    def pack(x):
        log.append(("pack", tuple(x.shape)))
        return x * 10          # (the docs' "what unpack gets is what pack gave")

    def unpack(x):
        log.append(("unpack", tuple(x.shape)))
        return x / 10
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (a * b).sin()
    saved = y.grad_fn._saved_self.tolist()
    y.sum().backward()
    return a.grad.tolist(), b.grad.tolist(), saved


def test_saved_tensors_hooks_eager_as_torch():
    want_log, got_log = [], []
    want, got = _hooked(torch, want_log), _hooked(tracec, got_log)
    np.testing.assert_allclose(np.array(got[0] + got[1]), np.array(want[0] + want[1]), rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
    assert got_log == want_log


def test_saved_tensors_hooks_errors_as_torch():
    for lib in (torch, tracec):
        x = lib.randn(3, requires_grad=True)

        def bad_pack(t):
            t.mul_(2)
            return t
        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input "
                                               "in place"):
            with lib.autograd.graph.saved_tensors_hooks(bad_pack, lambda t: t):
                x.exp()
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
            y = x * x
        with pytest.raises(TypeError, match="Output of saved tensor unpack_hook expected to be a "
                                            "Tensor but got result of type int"):
            y.sum().backward()


def _on_cpu_step(lib):
    def step(a, w):
        with lib.autograd.graph.save_on_cpu(pin_memory=False):
            y = (a * w).sin() * a
        y.sum().backward()
        return y
    return step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_save_on_cpu_compiles(backend):
    rng = np.random.RandomState(5)
    a, w = rng.randn(7).astype(np.float32), rng.randn(7).astype(np.float32)
    ta = torch.tensor(a, requires_grad=True)
    want = _on_cpu_step(torch)(ta, torch.tensor(w))
    ga = tracec.tensor(a, requires_grad=True)
    fn = tracec.compile(_on_cpu_step(tracec), backend=backend)
    got = fn(ga, tracec.tensor(w))
    assert fn.cache_info().eager_signatures == 0
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-6)


def test_custom_saved_hooks_compiled_refused_at_line_or_eager_fallback():
    log = []

    def step(a):
        with tracec.autograd.graph.saved_tensors_hooks(lambda t: log.append(1) or t, lambda t: t):
            y = a.exp()
        y.sum().backward()
        return y
    with pytest.raises(tracec.TraceError, match=r"test_gaps9_compiled.py:\d+: a tensor saved for backward "
                                                 "under torch.autograd.graph.saved_tensors_hooks"):
        tracec.compile(step)(tracec.ones(3, requires_grad=True))
    a = tracec.ones(3, requires_grad=True)
    with pytest.warns(UserWarning, match="running eagerly from now on"):
        tracec.compile(step, fallback="eager")(a)
    assert log                                   # the hook ran, eagerly
    np.testing.assert_allclose(a.grad.numpy(), np.exp(1.0), rtol=1e-6)


# --- writes into expand views --------------------------------------------------------

def _expand_write(lib, kind):
    def f(b):
        e = b.expand(2, 3, 4) if kind.startswith("lead") else b.expand(3, 4)
        if kind == "fill_":
            e.fill_(5)
        elif kind == "zero_":
            e.zero_()
        elif kind == "setitem element":
            e[1, 2] = 9.0
        elif kind == "setitem column":
            e[:, 0] = lib.tensor([4., 5., 6.])
        elif kind == "index_put_":
            e.index_put_((lib.tensor([0, 2]), lib.tensor([2, 1])), lib.tensor([8., 7.]))
        elif kind == "masked_fill_ partial":
            e.masked_fill_(lib.arange(12).reshape(3, 4) == 6, -2.)
        elif kind == "index_fill_":
            e.index_fill_(1, lib.tensor([3]), 3.)
        elif kind == "lead slice fill_":
            e[1].fill_(4.)
        elif kind == "add_":            # refused by PyTorch: internal overlap
            e.add_(1)
        elif kind == "setitem all":     # refused too
            e[:] = 9.0
        return b * 1
    return f


EXPAND_WRITES = ["fill_", "zero_", "setitem element", "setitem column", "index_put_",
                 "masked_fill_ partial", "index_fill_", "lead slice fill_", "add_", "setitem all"]


def _expand_outcome(lib, kind, compiled=None, start=0.0):
    b = (lib.arange(3.) + start).reshape(3, 1).clone()
    fn = _expand_write(lib, kind)
    if compiled:
        fn = tracec.compile(fn, backend=compiled)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(b)
    except RuntimeError as e:
        return "error: " + str(e)
    return b.tolist()


@pytest.mark.parametrize("backend", [None, "interp", "cpu"])
@pytest.mark.parametrize("kind", EXPAND_WRITES)
def test_writes_into_expand_views_as_torch(kind, backend):
    want = _expand_outcome(torch, kind)
    got = _expand_outcome(tracec, kind, backend)
    if isinstance(want, str):
        assert isinstance(got, str) and got.endswith(want[len("error: "):])
    else:
        assert got == want


@pytest.mark.parametrize("kind", ["setitem element", "index_put_", "masked_fill_ partial"])
def test_expand_write_compiled_reruns_with_new_values(kind):
    fn = tracec.compile(_expand_write(tracec, kind), backend="cpu")
    for start in (0.0, 10.0, -3.0):
        b = (tracec.arange(3.) + start).reshape(3, 1).clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(b)
        assert b.tolist() == _expand_outcome(torch, kind, start=start)
    assert fn.cache_info().hits == 2
