"""Compiled functions that return views of (or the very) inputs, state or
other results return real views, as eager code does (tracec.view_outputs):
each case runs eagerly, compiled (calls 1-3, then a 4th with new inputs of
the same shapes) and in PyTorch, and compares the results' values, shapes,
strides, storage offsets, contiguity, which input or result each is a view
of (``_base``), storage sharing, version counters, and what writes through
the inputs and through the results do to each other."""
import numpy as np
import pytest
import torch

import tracec

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
Y = RNG.standard_normal((3, 4)).astype(np.float32)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flat(out[k])]
    return [out]


def _storage(t):
    return t.untyped_storage().data_ptr()


def _base_of(o, ins, outs, k):
    """Which input ("i", n) or earlier result ("o", n) ``o`` is, or is a view of."""
    for n, x in enumerate(ins):
        if o is x:
            return ("is_i", n)
    for n, x in enumerate(outs[:k]):
        if o is x:
            return ("is_o", n)
    b = o._base
    if b is None:
        return None
    for n, x in enumerate(ins):
        if b is x:
            return ("i", n)
    for n, x in enumerate(outs):
        if b is x:
            return ("o", n)
    return "other"


def _overlaps(o) -> bool:
    """Do two elements of ``o`` share memory (expand, unfold)?"""
    offsets = np.zeros((), np.int64)
    for n, st in zip(o.shape, o.stride()):
        offsets = offsets[..., None] + np.arange(n) * st
    return len(np.unique(offsets)) < o.numel()


def _observe(fn, ins, lib, write_outputs=True):
    """What a call shows: per result its layout and aliasing, then the
    values after a write into the first input and after writes through the
    results that share an input's memory."""
    outs = _flat(fn(*ins))
    istor = [_storage(x) for x in ins]
    seen = []
    for k, o in enumerate(outs):
        seen.append((tuple(o.shape), tuple(o.stride()), o.storage_offset(), o.is_contiguous(),
                     str(o.dtype).split(".")[-1],
                     [n for n, s in enumerate(istor) if _storage(o) == s],
                     o.requires_grad, None if o.grad_fn is None else type(o.grad_fn).__name__
                     if lib is torch else o.grad_fn.name()))
    bases = [_base_of(o, ins, outs, k) for k, o in enumerate(outs)]
    vals = [o.detach().numpy().copy() for o in outs]
    with lib.no_grad():
        ins[0].mul_(2)
        after_in = [o.detach().numpy().copy() for o in outs]
        if write_outputs:
            for k, o in enumerate(outs):
                if not _overlaps(o) and o.dtype == ins[0].dtype and o.numel() and \
                        _storage(o) in istor:
                    o.add_(k + 1)
        after_out = [x.detach().numpy().copy() for x in ins]
    versions = [x._version for x in ins] + [o._version for o in outs]
    return seen, bases, vals, after_in, after_out, versions


def _inputs(lib, arrays, grad=False):
    ts = [lib.tensor(a.copy()) for a in arrays]
    if grad:
        ts[0].requires_grad_(True)
    return ts


def _same(a, b, what, torch_side=False):
    seen_a, bases_a, *rest_a = a
    seen_b, bases_b, *rest_b = b
    if torch_side:      # grad_fn names differ between the libraries
        seen_a = [s[:-1] for s in seen_a]
        seen_b = [s[:-1] for s in seen_b]
    assert seen_a == seen_b, what
    if not torch_side:
        assert bases_a == bases_b, what
    for x, y in zip(rest_a[:-1], rest_b[:-1]):
        assert len(x) == len(y), what
        for u, v in zip(x, y):
            np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6, err_msg=what)
    assert rest_a[-1] == rest_b[-1], what + " (versions)"


def _check(fn, arrays=(X,), grad=False, backend="cpu", torch_fn=None, write_outputs=True):
    eager = _observe(fn, _inputs(tracec, arrays, grad), tracec, write_outputs)
    ref = _observe(torch_fn or fn, _inputs(torch, arrays, grad), torch, write_outputs)
    _same(eager, ref, "eager vs torch", torch_side=True)
    cf = tracec.compile(fn, backend=backend)
    for call in range(4):
        got = _observe(cf, _inputs(tracec, arrays if call < 3 else
                                   [a[::-1].copy() for a in arrays], grad), tracec, write_outputs)
        want = eager if call < 3 else _observe(fn, _inputs(tracec, [a[::-1].copy()
                                                                   for a in arrays], grad),
                                               tracec, write_outputs)
        _same(got, want, f"call {call + 1}")
    assert cf.cache_info().hits >= 2


CASES = {
    "select_t_self": lambda x: (x[0], x.t(), x),
    "slices": lambda x: (x[1:], x[:, 1:3], x[::2, ::2], x[1:][:, 1:]),
    "view_reshape": lambda x: (x.view(-1), x.reshape(2, 6), x.view(4, 3)[1:]),
    "transpose_permute": lambda x: (x.transpose(0, 1), x.unsqueeze(0).permute(2, 0, 1)),
    "expand": lambda x: (x[:1].expand(5, 4), x.unsqueeze(0).expand(2, 3, 4)),
    "unsqueeze_squeeze": lambda x: (x.unsqueeze(1), x[:1].squeeze(0), x.unsqueeze(-1)[..., 0]),
    "narrow_diagonal": lambda x: (x.narrow(1, 1, 2), x.diagonal(), x.diagonal(1)),
    "computed_and_views": lambda x: (lambda y: (y, y[0], y.t(), x[1]))(x * 2),
    "view_before_base": lambda x: (lambda y: (y[1:], y))(x + 1),
    "returned_twice": lambda x: (lambda y: (y, y, x, x))(x * 3),
    "in_place_then_returned": lambda x: (x.add_(1), x[0]),
    "view_written_in_call": lambda x: (lambda v: (v.mul_(3), x))(x[1]),
    "dict_of_views": lambda x: {"a": x[0], "b": [x.t(), x[:, 0]]},
    "views_of_one_intermediate": lambda x: (lambda y: (y[0], y[:2], y.t()))(x * 2),
    "view_of_an_intermediate": lambda x: ((x @ x.t()).t()[1:], (x * 2)[::2].unsqueeze(0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_views_of_arguments(name):
    _check(CASES[name])


def test_two_arguments_and_views_of_views():
    _check(lambda x, y: (y[1], x[:, 1:].t(), (x + y)[1], y), arrays=(X, Y))


def test_detach_of_argument():
    # (tracec's eager detach() keeps _base, PyTorch's does not: compared with eager)
    def f(x):
        return x.detach(), x.detach()[1:], x[0].detach()
    eager = _observe(f, _inputs(tracec, (X,)), tracec)
    cf = tracec.compile(f)
    for _ in range(3):
        _same(_observe(cf, _inputs(tracec, (X,)), tracec), eager, "detach")


def test_no_grad_view_of_an_intermediate_that_requires_grad_is_a_value():
    # loss.detach(): the loss is not made a result (it would need a backward)
    def f(x, w):
        loss = (x * w).sum()
        return loss.detach(), (x * w).detach()[0]
    cf = tracec.compile(f)
    w = tracec.tensor(Y, requires_grad=True)
    for _ in range(3):
        a, b = cf(tracec.tensor(X), w)
        assert not a.requires_grad and a.grad_fn is None and b._base is not None
        np.testing.assert_allclose(a.item(), float((X * Y).sum()), rtol=1e-5)
        np.testing.assert_allclose(b.numpy(), X[0] * Y[0], rtol=1e-6)
    assert cf._last.backward_plan is None


def test_argument_that_is_a_view():
    def f(x):
        return x[0], x.t()
    cf = tracec.compile(f)
    for _ in range(4):
        root = tracec.tensor(np.concatenate([X, Y]))
        x = root[3:]
        a, b = cf(x)
        assert a._base is root and b._base is root   # as eager: views of the root
        a.add_(1)
        np.testing.assert_allclose(root[3].numpy(), Y[0] + 1)
        assert b.stride() == (1, 4) and b.storage_offset() == 12


def test_leaf_requiring_grad():
    def f(w):
        return w[0], w.t()
    _check(f, grad=True, write_outputs=False)
    cf = tracec.compile(f)
    for _ in range(3):
        w = tracec.tensor(X, requires_grad=True)
        a, b = cf(w)
        assert a.grad_fn is not None and b._base is w
        (a.sum() + 2 * b.sum()).backward()
        want = np.full_like(X, 2.0)
        want[0] += 1
        np.testing.assert_allclose(w.grad.numpy(), want)


def test_view_of_result_requiring_grad():
    def f(w):
        y = w * 2
        return y, y[0]
    cf = tracec.compile(f)
    for _ in range(3):
        w = tracec.tensor(X, requires_grad=True)
        y, v = cf(w)
        assert v._base is y and v.grad_fn is not None
        v.sum().backward()
        want = np.zeros_like(X)
        want[0] = 2
        np.testing.assert_allclose(w.grad.numpy(), want)


class _Net(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = tracec.nn.Parameter(tracec.tensor(X))
        self.register_buffer("buf", tracec.tensor(Y))

    def forward(self, x):
        return x @ self.w.t(), self.w[0], self.buf.view(-1), self.buf[1:]


def test_views_of_parameters_and_buffers():
    net = _Net()
    cnet = tracec.compile(net)
    for _ in range(3):
        out, w0, flat, b1 = cnet(tracec.tensor(X))
        assert w0._base is net.w and flat._base is net.buf and b1._base is net.buf
        assert w0.grad_fn is not None and w0.grad_fn.name() == net.w[0].grad_fn.name()
        net.zero_grad()
        w0.sum().backward()
        assert net.w.grad[0].tolist() == [1.0] * 4 and net.w.grad[1:].abs().sum().item() == 0
        with tracec.no_grad():
            flat.add_(1)
            b1.sub_(1)
        np.testing.assert_allclose(net.buf.numpy(), Y + np.array([[1.0], [0.0], [0.0]]), rtol=1e-6)
        net.buf.copy_(tracec.tensor(Y))


def test_dynamic_shapes():
    def f(x):
        return x[0], x.t(), x.view(-1), x[:, 1:], x.narrow(1, 1, x.shape[1] - 1), \
            x.unsqueeze(0).expand(2, *x.shape)
    cf = tracec.compile(f, dynamic=True)
    for n in (4, 4, 4, 5, 5, 6):
        x = tracec.tensor(RNG.standard_normal((3, n)).astype(np.float32))
        outs = cf(x)
        want = f(tracec.tensor(x.numpy()))
        for o, w in zip(outs, want):
            assert o._base is x and o.shape == w.shape and o.stride() == w.stride()
            assert o.storage_offset() == w.storage_offset()
            np.testing.assert_array_equal(o.numpy(), w.numpy())
        outs[0].add_(1)
        assert x[0].tolist() == (want[0] + 1).tolist()


def test_interp_backend():
    _check(CASES["select_t_self"], backend="interp")
    _check(CASES["computed_and_views"], backend="interp")
