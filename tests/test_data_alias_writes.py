"""Writes through ``.data`` (and the legacy size constructors that tensors
feed), as NVIDIA/tacotron2 makes them, against torch: ``.data`` has its own
version counter, the ops that saved the written tensor read the written
values at backward time (the eager convolution's weight gradient included),
and a compiled call keeps the gradient path of a tensor masked through
``.data`` before anything read it, and refuses (falling back to eager) a
write to a tensor some recorded op already read."""
import numpy as np
import pytest
import torch

import tracec


def _both(fn):
    return fn(torch), fn(tracec)


@pytest.mark.parametrize("args", [(2, "t3"), ("t3", 2), ("np3", 2), ("t[2]", 3), ("size",)])
def test_legacy_size_constructor_takes_integer_tensors(args):
    def make(m):
        conv = {"t3": m.tensor(3), "np3": np.int64(3), "t[2]": m.tensor([2]),
                "size": m.Size([2, 3])}
        a = tuple(conv.get(x, x) for x in args)
        return m.LongTensor(*a).shape, m.Tensor(*a).shape, m.zeros(1).new(*a).shape
    want, got = _both(make)
    assert [tuple(s) for s in got] == [tuple(s) for s in want]


@pytest.mark.parametrize("args", [("f", 3), (2, 3.0)])
def test_legacy_size_constructor_refuses_non_integers(args):
    for m in (torch, tracec):
        a = tuple(m.tensor(2.0) if x == "f" else x for x in args)
        with pytest.raises(TypeError):
            m.Tensor(*a)


def test_data_has_its_own_version_counter():
    def run(m):
        a = m.tensor([1., 2., 3.], requires_grad=True)
        b = a * 1
        c = (b * b).sum()
        d = b.data
        d.mul_(10)
        c.backward()       # no "modified by an inplace operation": .data hides the write
        return a.grad.tolist(), b._version, d._version
    want, got = _both(run)
    assert got == want


def test_conv_weight_grad_reads_input_written_through_data():
    def run(m):
        w = m.tensor(np.arange(12, dtype=np.float32).reshape(2, 2, 3) / 10, requires_grad=True)
        x0 = m.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(2, 5, 2),
                      requires_grad=True)
        x = (x0 * 2).transpose(1, 2)
        y = m.nn.functional.conv1d(x, w, padding=1)
        x.data.masked_fill_(m.tensor([False, False, True, True, True]), 0.0)   # after the conv
        (y.sum() + (x * x).sum()).backward()
        return w.grad.numpy(), x0.grad.numpy()
    (ww, wx), (gw, gx) = _both(run)
    np.testing.assert_allclose(gw, ww, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gx, wx, rtol=1e-6, atol=1e-6)


def _masked_attention(m, compile_=None):
    w = m.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), requires_grad=True)
    mask = m.tensor([[False, False, True, True], [False, True, False, True]])

    def step(x):
        w.grad = None
        e = x @ w.t()
        e.data.masked_fill_(mask, -float("inf"))      # tacotron2's Attention.forward
        a = m.nn.functional.softmax(e, dim=1)
        loss = (a * m.arange(4.)).sum()
        loss.backward()
        return loss, e
    f = compile_(step) if compile_ else step
    out = []
    for k in range(3):
        x = m.tensor(np.linspace(-2, 1, 6, dtype=np.float32).reshape(2, 3) * (k + 1))
        loss, e = f(x)
        out.append((loss.item(), e.detach().numpy().copy(), w.grad.numpy().copy()))
    return out


def test_compiled_masking_through_data_keeps_the_gradient():
    want = _masked_attention(torch)
    with np.errstate(invalid="ignore"):
        got = _masked_attention(tracec, tracec.compile)
    for (wl, we, wg), (gl, ge, gg) in zip(want, got):
        assert abs(gl - wl) <= 1e-5 * abs(wl)
        np.testing.assert_allclose(ge, we, rtol=1e-5)
        assert np.abs(gg).max() > 0.1
        np.testing.assert_allclose(gg, wg, rtol=1e-4, atol=1e-6)


def test_compiled_write_through_data_after_a_read_runs_eagerly():
    def run(m, compile_=None):
        w = m.tensor(np.arange(12, dtype=np.float32).reshape(2, 2, 3) / 10, requires_grad=True)

        def step(x0):
            w.grad = None
            x = (x0 * 2).transpose(1, 2)
            y = m.nn.functional.conv1d(x, w, padding=1)
            x.data.masked_fill_(m.tensor([False, False, True, True, True]), 0.0)
            loss = y.sum() + (x * x).sum()
            loss.backward()
            return loss
        f = compile_(step) if compile_ else step
        res = []
        for k in range(3):
            x0 = m.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(2, 5, 2) * (k + 1),
                          requires_grad=True)
            res.append((f(x0).item(), w.grad.numpy().copy(), x0.grad.numpy().copy()))
        return res
    want = run(torch)
    with pytest.warns(UserWarning, match="through .data or detach.. writes a tensor after "
                      "an op read it .tracec.pad., then a backward runs"):
        got = run(tracec, lambda f: tracec.compile(f, fallback="eager"))
    # the first call, traced and refused at its backward, included: the
    # convolution's weight gradient reads the written input there too
    for (wl, wg, wx), (gl, gg, gx) in zip(want, got):
        assert abs(gl - wl) <= 1e-5 * abs(wl)
        np.testing.assert_allclose(gg, wg, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gx, wx, rtol=1e-5, atol=1e-5)


def test_compiled_write_through_data_with_no_later_backward_compiles():
    # a write through .data after the backward: no gradient is left to read it
    def run(m, compile_):
        lin = m.nn.Linear(3, 2)
        with m.no_grad():
            lin.weight.copy_(m.tensor([[0.5, -1.0, 0.25], [1.5, 0.5, -0.75]]))
            lin.bias.copy_(m.tensor([0.1, -0.2]))

        def step(x):
            lin.zero_grad()
            h = lin(x)
            y = (h * h).sum()
            y.backward()
            h.data.clamp_(min=0)
            return y, h
        f = compile_(step)
        out = []
        for k in range(3):
            y, h = f(m.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3) * (k + 1)))
            out.append((y.item(), h.detach().numpy().copy(), lin.weight.grad.numpy().copy()))
        return out, f
    want, _ = run(torch, lambda f: f)
    got, f = run(tracec, tracec.compile)
    for (wy, wh, wg), (gy, gh, gg) in zip(want, got):
        assert abs(gy - wy) <= 1e-5 * abs(wy)
        np.testing.assert_allclose(gh, wh, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gg, wg, rtol=1e-5, atol=1e-6)
    assert f.cache_info().traces == 1 and f.cache_info().compiles + f.cache_info().loads == 1


def test_inplace_into_a_detached_alias_joins_the_graph():
    # Tacotron2's attention_weights_cum = Variable(memory.data.new(B, T).zero_())
    # then ``attention_weights_cum += attention_weights`` each decoder step
    def run(m, compile_=lambda f: f):
        w = m.tensor([1., 2., 3.], requires_grad=True)

        def step(x):
            w.grad = None
            root = x.new(3).zero_()
            acc = m.autograd.Variable(root)
            for i in range(2):
                acc += w * x * (i + 1)
            loss = (acc * acc).sum() + root.sum()
            loss.backward()
            return loss, acc.requires_grad, root.requires_grad
        f = compile_(step)
        return [(lambda r: (r[0].item(), r[1], r[2], w.grad.tolist()))(f(m.tensor([1., -1., .5]) * k))
                for k in (1, 2, 3)]
    want = run(torch)
    assert run(tracec) == want
    got = run(tracec, tracec.compile)
    for (wl, *wr), (gl, *gr) in zip(want, got):
        assert abs(gl - wl) <= 1e-6 * abs(wl) and gr[:2] == wr[:2]
        np.testing.assert_allclose(gr[2], wr[2], rtol=1e-6)


def test_compiled_masking_a_view_through_data_keeps_the_gradient():
    # Attention.get_alignment_energies returns energies.squeeze(-1): a view
    def run(m, compile_):
        v = m.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 6), requires_grad=True)
        mask = m.tensor([[False, False, True], [False, True, False]])

        def step(h):
            v.grad = None
            alignment = (h * v.sum() + 0.5).unsqueeze(-1).squeeze(-1)
            alignment.data.masked_fill_(mask, -float("inf"))
            a = m.nn.functional.softmax(alignment, dim=1)
            loss = (a * m.arange(3.)).sum()
            loss.backward()
            return loss
        f = compile_(step)
        out = []
        for k in range(3):
            h = m.tensor(np.linspace(-1, 2, 6, dtype=np.float32).reshape(2, 3) * (k + 1))
            out.append((f(h).item(), v.grad.numpy().copy()))
        return out
    want = run(torch, lambda f: f)
    got = run(tracec, tracec.compile)
    for (wl, wg), (gl, gg) in zip(want, got):
        assert abs(gl - wl) <= 1e-5 * abs(wl)
        assert np.abs(gg).max() > 1e-3
        np.testing.assert_allclose(gg, wg, rtol=1e-4, atol=1e-6)


def test_compiled_masking_a_saved_output_through_data_runs_eagerly():
    # tanh's gradient reads its output, which the write changed (PyTorch: NaN)
    def run(m, compile_):
        v = m.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 6), requires_grad=True)
        mask = m.tensor([[False, False, True], [False, True, False]])

        def step(h):
            v.grad = None
            alignment = m.tanh(h * v.sum()).unsqueeze(-1).squeeze(-1)
            alignment.data.masked_fill_(mask, -float("inf"))
            loss = (m.nn.functional.softmax(alignment, dim=1) * m.arange(3.)).sum()
            loss.backward()
            return loss
        f = compile_(step)
        return [(f(m.tensor(np.linspace(-1, 2, 6, dtype=np.float32).reshape(2, 3) * k)).item(),
                 v.grad.numpy().copy()) for k in (1, 2, 3)]
    want = run(torch, lambda f: f)
    with pytest.warns(UserWarning, match=r"writes a tensor after an op read it \(tracec.tanh\)"):
        got = run(tracec, lambda f: tracec.compile(f, fallback="eager"))
    for (wl, wg), (gl, gg) in zip(want[1:], got[1:]):
        assert abs(gl - wl) <= 1e-5 * abs(wl)
        np.testing.assert_array_equal(np.isnan(gg), np.isnan(wg))


def test_write_through_data_into_a_conv_input_requiring_no_grad_runs_eagerly():
    # the input requires no grad (data, not an activation): PyTorch's weight
    # gradient still reads it as it is at backward time
    def run(m, compile_=None):
        w = m.tensor(np.arange(12, dtype=np.float32).reshape(2, 2, 3) / 10, requires_grad=True)

        def step(x0):
            w.grad = None
            x = (x0 * 2).transpose(1, 2)
            y = m.nn.functional.conv1d(x, w, padding=1)
            x.data.masked_fill_(m.tensor([False, True, True, False, True]), 0.0)
            loss = (y * y).sum()
            loss.backward()
            return loss
        f = compile_(step) if compile_ else step
        res = []
        for k in range(3):
            x0 = m.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(2, 5, 2) * (k + 1))
            res.append((f(x0).item(), w.grad.numpy().copy()))
        return res
    want = run(torch)
    with pytest.warns(UserWarning, match="writes the input of a convolution whose weight "
                      "gradient reads it"):
        got = run(tracec, lambda f: tracec.compile(f, fallback="eager"))
    for (wl, wg), (gl, gg) in zip(want, got):
        assert abs(gl - wl) <= 1e-5 * abs(wl)
        np.testing.assert_allclose(gg, wg, rtol=1e-5, atol=1e-5)
    with pytest.raises(tracec.TraceError, match="writes the input of a convolution"):
        run(tracec, tracec.compile)
