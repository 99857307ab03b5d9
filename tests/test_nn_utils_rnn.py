"""``tracec.nn.utils.rnn`` and packed input to RNN/LSTM/GRU against PyTorch:
packing/padding values, batch sizes, index permutations, lengths, error
messages, gradients through pack/pad, and packed recurrent layers
(bidirectional, 2 layers, unsorted lengths, given ``hx``) including every
parameter's gradient."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as TR

import tracec
import tracec.nn.utils.rnn as R
from nn_helpers import close, compare_params_grads, copy_weights, npy, rnd, tol


def _ints(t):
    return None if t is None else npy(t).tolist()


def _same_packed(a, b):
    close(a.data, b.data, **tol(np.float64))
    assert _ints(a.batch_sizes) == _ints(b.batch_sizes)
    assert _ints(a.sorted_indices) == _ints(b.sorted_indices)
    assert _ints(a.unsorted_indices) == _ints(b.unsorted_indices)
    assert a.batch_sizes.dtype == tracec.int64


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([4, 3, 1], True), ([2, 4, 3], False),
                                                    ([3, 3, 1], False)])
def test_pack_pad_roundtrip_and_grads(batch_first, lengths, enforce_sorted):
    rng = np.random.default_rng(0)
    x = rnd(rng, 4, 3, 2)
    if batch_first:
        x = np.ascontiguousarray(x.transpose(1, 0, 2))
    xa, xb = tracec.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lens_b = torch.tensor(lengths)
    pa = R.pack_padded_sequence(xa, tracec.tensor(lengths), batch_first, enforce_sorted)
    pb = TR.pack_padded_sequence(xb, lens_b, batch_first, enforce_sorted)
    assert isinstance(pa, tuple) and pa._fields == pb._fields
    _same_packed(pa, pb)
    ya, la = R.pad_packed_sequence(pa, batch_first, padding_value=-2.0, total_length=5)
    yb, lb = TR.pad_packed_sequence(pb, batch_first, padding_value=-2.0, total_length=5)
    close(ya, yb)
    assert _ints(la) == _ints(lb) and la.dtype == tracec.int64
    g = rnd(rng, *yb.shape)
    ya.backward(tracec.tensor(g))
    yb.backward(torch.tensor(g))
    close(xa.grad, xb.grad)


def test_pad_sequence_sides_and_values():
    rng = np.random.default_rng(1)
    seqs = [rnd(rng, n, 2) for n in (2, 4, 1)]
    for bf in (False, True):
        for side in ("left", "right"):
            a = R.pad_sequence([tracec.tensor(s) for s in seqs], bf, 3.0, side)
            b = TR.pad_sequence([torch.tensor(s) for s in seqs], bf, 3.0, side)
            close(a, b)
    close(R.pad_sequence(tracec.tensor(seqs[0][None])), TR.pad_sequence(torch.tensor(seqs[0][None])))


def test_pack_sequence_unpack_unpad():
    rng = np.random.default_rng(2)
    seqs = [rnd(rng, n, 3) for n in (2, 5, 3)]
    pa = R.pack_sequence([tracec.tensor(s) for s in seqs], enforce_sorted=False)
    pb = TR.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    _same_packed(pa, pb)
    for u, s in zip(R.unpack_sequence(pa), seqs):
        close(u, s)
    padded = R.pad_sequence([tracec.tensor(s) for s in seqs])
    for u, s in zip(R.unpad_sequence(padded, tracec.tensor([2, 5, 3])), seqs):
        close(u, s)
    assert tuple(padded.shape) == (3, 5, 3)  # torch's in-place transpose_, kept


def test_packed_sequence_methods():
    p = R.pack_sequence([tracec.ones(3, 2), tracec.ones(1, 2)])
    assert p.double().data.dtype == tracec.float64
    assert p.to(tracec.float64).batch_sizes is p.batch_sizes
    assert not p.is_cuda
    a, b = R.PackedSequence(p.data, p.batch_sizes), R.PackedSequence((p.data, p.batch_sizes))
    assert a.data is b.data and a.sorted_indices is None
    perm = tracec.tensor([2, 0, 1])
    assert R.invert_permutation(perm).tolist() == [1, 2, 0]


@pytest.mark.parametrize("call,msg", [
    (lambda m, x: m.pack_padded_sequence(x, [1, 2, 3]), "must be sorted in decreasing order"),
    (lambda m, x: m.pack_padded_sequence(x, [3, 2, 0]), "has to be greater than 0"),
    (lambda m, x: m.pack_padded_sequence(x, [3, 2]), "to be equal to batch_size, but got 2"),
    (lambda m, x: m.pad_packed_sequence(m.pack_padded_sequence(x, [3, 2, 1]), total_length=2),
     "total_length=2 and max sequence length being 3"),
    (lambda m, x: m.pad_sequence([x[0], x[0]], padding_side="up"),
     "padding_side to be one of left or right, but got up"),
    (lambda m, x: m.pad_sequence([]), "received an empty list of sequences"),
    (lambda m, x: m.pad_sequence(3), "Expected iterable for input sequences"),
])
def test_errors_match_torch(call, msg):
    x = np.zeros((4, 3, 2), np.float32)
    errors = []
    for mod, lib in ((R, tracec), (TR, torch)):
        with pytest.raises((RuntimeError, ValueError)) as e:
            call(mod, lib.tensor(x))
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1] and msg in errors[0][1]


def _packed_rnn_case(kind, batch_first, with_hx, dtype=np.float64, proj=0):
    rng = np.random.default_rng(3)
    kw = dict(num_layers=2, bidirectional=True, batch_first=batch_first)
    if proj:
        kw["proj_size"] = proj
    th = getattr(torch.nn, kind)(3, 4, **kw).to(torch.float64 if dtype == np.float64 else
                                                torch.float32)
    tc = getattr(tracec.nn, kind)(3, 4, **kw).to(tracec.float64 if dtype == np.float64 else
                                                 tracec.float32)
    copy_weights(tc, th)
    lengths = [3, 5, 1, 4]
    x = rnd(rng, 5, 4, 3, dtype=dtype)
    if batch_first:
        x = np.ascontiguousarray(x.transpose(1, 0, 2))
    xa, xb = tracec.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    args_a, args_b = [], []
    if with_hx:
        h = rnd(rng, 4, 4, proj or 4, dtype=dtype)
        c = rnd(rng, 4, 4, 4, dtype=dtype)
        ha, hb = tracec.tensor(h, requires_grad=True), torch.tensor(h, requires_grad=True)
        if kind == "LSTM":
            args_a, args_b = [(ha, tracec.tensor(c))], [(hb, torch.tensor(c))]
        else:
            args_a, args_b = [ha], [hb]
    oa, sa = tc(R.pack_padded_sequence(xa, lengths, batch_first, enforce_sorted=False), *args_a)
    ob, sb = th(TR.pack_padded_sequence(xb, lengths, batch_first, enforce_sorted=False), *args_b)
    assert isinstance(oa, R.PackedSequence)
    _same_packed(oa, ob) if dtype == np.float64 else None
    sa = sa if isinstance(sa, tuple) else (sa,)
    sb = sb if isinstance(sb, tuple) else (sb,)
    t = tol(dtype, 10)
    for u, v in zip(sa, sb):
        close(u, v, **t)
    ya, _ = R.pad_packed_sequence(oa, batch_first)
    yb, _ = TR.pad_packed_sequence(ob, batch_first)
    close(ya, yb, **t)
    loss_a = ya.sum() + sum((s * s).sum() for s in sa)
    loss_b = yb.sum() + sum((s * s).sum() for s in sb)
    loss_a.backward()
    loss_b.backward()
    close(xa.grad, xb.grad, **t)
    if with_hx:
        close(args_a[0][0].grad if kind == "LSTM" else args_a[0].grad,
              args_b[0][0].grad if kind == "LSTM" else args_b[0].grad, **t)
    compare_params_grads(tc, th, **t)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first,with_hx", [(False, False), (True, True)])
def test_packed_rnn_matches_torch(kind, batch_first, with_hx):
    _packed_rnn_case(kind, batch_first, with_hx)


def test_packed_lstm_proj_float32():
    _packed_rnn_case("LSTM", False, True, dtype=np.float32, proj=2)


def test_packed_rnn_checks():
    lstm = tracec.nn.LSTM(2, 3)
    bad = R.PackedSequence(tracec.zeros(6, 2, 1), tracec.tensor([3, 2, 1]))
    with pytest.raises(RuntimeError, match="input must have 2 dimensions, got 3"):
        lstm(bad)
    p = R.pack_sequence([tracec.zeros(3, 2), tracec.zeros(2, 2)])
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 3\), got \[1, 3, 3\]"):
        lstm(p, (tracec.zeros(1, 3, 3), tracec.zeros(1, 2, 3)))


def test_packed_lstm_traces_without_reading_tensors():
    """Lengths given as Python ints stay Python ints through packing, the
    layer and unpacking, so ``tracec.compile`` records the packed LSTM."""
    m = tracec.nn.LSTM(3, 4, bidirectional=True)

    def f(x):
        o, (h, _) = m(R.pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False))
        return R.pad_packed_sequence(o)[0].sum() + h.sum()

    x = tracec.randn(4, 3, 3)
    g = tracec.compile(f, backend="interp")
    close(g(x), f(x), rtol=1e-5)
    close(g(x + 1), f(x + 1), rtol=1e-5)
