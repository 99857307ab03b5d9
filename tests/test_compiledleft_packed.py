"""An LSTM / GRU over a packed batch (``pack_padded_sequence`` ->
RNN -> ``pad_packed_sequence``) inside a compiled training step, with
lengths that change at every call: every step equals eager (and torch's
numbers), for lengths given as a tensor (speculated: a call whose lengths
differ runs its own code or eagerly, never the traced lengths) and as a
Python list (keyed by value)."""
import numpy as np
import pytest
import torch

import tracec

LENGTHS = [[6, 4, 2], [3, 6, 5], [1, 2, 6], [6, 4, 2], [3, 6, 5]]


def _run(lib, compiled, cell, as_list, sorted_):
    nn = lib.nn
    pack, unpack = nn.utils.rnn.pack_padded_sequence, nn.utils.rnn.pad_packed_sequence
    lib.manual_seed(0)
    rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(4, 5, batch_first=True)
    head = nn.Linear(5, 2)
    opt = lib.optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=0.05)

    def step(x, lengths):
        opt.zero_grad()
        packed = pack(x, lengths, batch_first=True, enforce_sorted=sorted_)
        out, h = rnn(packed)
        h = h[0] if cell == "lstm" else h
        pad, lens = unpack(out, batch_first=True, total_length=x.shape[1])
        loss = head(pad).pow(2).mean() + h.pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach(), lens
    fn = tracec.compile(step) if compiled else step
    g = np.random.default_rng(1)
    losses = []
    for L in LENGTHS:
        if sorted_:
            L = sorted(L, reverse=True)
        x = lib.tensor(g.standard_normal((3, 6, 4)).astype(np.float32))
        loss, lens = fn(x, list(L) if as_list else lib.tensor(L))
        assert lens.tolist() == L
        losses.append(float(loss))
    params = [p.detach().numpy().copy() for p in list(rnn.parameters()) + list(head.parameters())]
    return np.array(losses), params, fn


@pytest.mark.parametrize("cell,as_list,sorted_", [("lstm", False, False), ("gru", False, True),
                                                  ("gru", True, False)])
def test_packed_rnn_step_with_changing_lengths(cell, as_list, sorted_):
    lt, pt, _ = _run(torch, False, cell, as_list, sorted_)
    le, pe, _ = _run(tracec, False, cell, as_list, sorted_)
    lc, pc, fn = _run(tracec, True, cell, as_list, sorted_)
    np.testing.assert_allclose(le, lt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lc, le, rtol=1e-5, atol=1e-6)
    for a, b, c in zip(pt, pe, pc):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
    info = fn.cache_info()
    assert not info.eager_reasons, info.eager_reasons
    # each distinct lengths vector at most once (the last two repeat
    # earlier ones)
    assert info.traces <= len(LENGTHS) - 2, info.reasons
