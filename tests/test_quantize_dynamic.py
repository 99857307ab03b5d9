"""torch.ao.quantization.quantize_dynamic (and torch.quantization): int8
dynamic Linear with PyTorch's x86 numerics, float16 dynamic Linear, repr,
module swapping rules, eager and under tracec.compile, against torch 2.13."""
import warnings

import numpy as np
import pytest
import torch

import tracec


def pair(shapes, rng, scale=1.0):
    """The same float MLP in both libraries."""
    layers = []
    for i, (k, n) in enumerate(shapes):
        layers.append((rng.standard_normal((n, k)) * scale).astype(np.float32))
        layers.append(rng.standard_normal(n).astype(np.float32))
    mods = {}
    for T in (torch, tracec):
        seq = []
        for k, n in shapes:
            seq += [T.nn.Linear(k, n), T.nn.ReLU()]
        m = T.nn.Sequential(*seq[:-1])
        with T.no_grad():
            for lin, w, b in zip([x for x in m if isinstance(x, T.nn.Linear)], layers[::2],
                                 layers[1::2]):
                lin.weight.copy_(T.tensor(w))
                lin.bias.copy_(T.tensor(b))
        mods[T] = m
    return mods[torch], mods[tracec]


def quantize(T, m, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # torch.ao's deprecation notice
        return T.ao.quantization.quantize_dynamic(m, *args, **kwargs)


def test_int8_linear_matches_torch_bit_for_bit():
    rng = np.random.default_rng(0)
    for trial in range(24):
        k, n = int(rng.integers(1, 40)), int(rng.integers(1, 20))
        pm, cm = pair([(k, n), (n, 3)], rng, scale=float(rng.choice([0.01, 0.3, 3.0])))
        pq = quantize(torch, pm, {torch.nn.Linear}, dtype=torch.qint8)
        cq = quantize(tracec, cm, {tracec.nn.Linear}, dtype=tracec.qint8)
        assert cq is not cm and isinstance(cm[0], tracec.nn.Linear)   # a copy, as torch
        assert cq[0].weight_scale.item() == np.float32(pq[0].weight().q_scale())
        np.testing.assert_array_equal(cq[0].weight_q.numpy(),
                                      pq[0].weight().int_repr().numpy())
        shape = [(5, k), (2, 3, k), (1, k)][trial % 3]
        x = (rng.standard_normal(shape) * rng.choice([1e-6, 0.01, 1.0, 50.0])
             + rng.choice([0.0, 2.0])).astype(np.float32)
        if trial % 5 == 0:
            x = np.abs(x)
        if trial % 8 == 0:
            x = np.zeros_like(x)
        want = pq(torch.tensor(x))
        got = cq(tracec.tensor(x))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got.requires_grad is want.requires_grad is False


def test_float16_dynamic_and_repr_match_torch():
    rng = np.random.default_rng(1)
    pm, cm = pair([(6, 4), (4, 2)], rng)
    pq = quantize(torch, pm, {torch.nn.Linear}, dtype=torch.float16)
    cq = quantize(tracec, cm, {tracec.nn.Linear}, dtype=tracec.float16)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    # (torch's float16 layer returns a tensor requiring grad; tracec's does not)
    want = pq(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(cq(tracec.tensor(x)).numpy(), want, rtol=1e-6, atol=1e-6)
    q8 = quantize(tracec, cm, {tracec.nn.Linear}, dtype=tracec.qint8)
    p8 = quantize(torch, pm, {torch.nn.Linear}, dtype=torch.qint8)
    assert repr(q8).replace("tracec.", "torch.") == repr(p8)
    assert repr(cq).replace("tracec.", "torch.") == repr(pq)
    assert tracec.quantization.quantize_dynamic is tracec.ao.quantization.quantize_dynamic
    np.testing.assert_allclose(q8[0].weight().numpy(), p8[0].weight().dequantize().numpy())


def test_swapping_rules_match_torch():
    rng = np.random.default_rng(2)
    pm, cm = pair([(4, 4), (4, 2)], rng)
    # the model itself is never swapped; inplace=True swaps its children in place
    lone = tracec.nn.Linear(2, 2)
    assert quantize(tracec, lone, {tracec.nn.Linear}) is not lone
    assert type(quantize(tracec, lone, {tracec.nn.Linear})) is tracec.nn.Linear
    assert type(quantize(torch, torch.nn.Linear(2, 2), {torch.nn.Linear})) is torch.nn.Linear
    out = quantize(tracec, cm, {tracec.nn.Linear}, inplace=True)
    assert out is cm and type(cm[0]).__name__ == "Linear" and \
        type(cm[0]).__module__ == "tracec.ao.nn.quantized.dynamic.linear"
    # a name in the spec quantizes only that child
    _, cm2 = pair([(4, 4), (4, 2)], rng)
    q = quantize(tracec, cm2, {"2": tracec.ao.quantization.default_dynamic_qconfig})
    assert type(q[0]) is tracec.nn.Linear and type(q[2]).__name__ == "Linear" and \
        type(q[2]) is not tracec.nn.Linear
    with pytest.raises(NotImplementedError, match="nn.Linear and nn.LSTM only"):
        quantize(tracec, cm2, {tracec.nn.GRU})


def test_quantized_model_compiles_with_the_same_numbers():
    rng = np.random.default_rng(3)
    pm, cm = pair([(8, 6), (6, 3)], rng)
    pq = quantize(torch, pm, {torch.nn.Linear}, dtype=torch.qint8)
    cq = quantize(tracec, cm, {tracec.nn.Linear}, dtype=tracec.qint8)
    f = tracec.compile(cq)
    for scale in (1.0, 0.05, 7.0):
        x = (rng.standard_normal((4, 8)) * scale).astype(np.float32)
        np.testing.assert_allclose(f(tracec.tensor(x)).numpy(), pq(torch.tensor(x)).numpy(),
                                   rtol=1e-6, atol=1e-6)
    info = f.__dict__["_compiled"].cache_info()
    assert info.traces == 1 and info.eager_signatures == 0 and info.hits == 2


@pytest.mark.parametrize("cfg", [{}, {"num_layers": 2, "bidirectional": True,
                                      "batch_first": True}])
def test_dynamic_lstm_matches_torch(cfg):
    rng = np.random.default_rng(4)
    pm = torch.nn.LSTM(4, 3, **cfg)
    cm = tracec.nn.LSTM(4, 3, **cfg)
    cm.load_state_dict({k: tracec.tensor(v.detach().numpy()) for k, v in pm.state_dict().items()})
    pq = quantize(torch, torch.nn.Sequential(pm), {torch.nn.LSTM}, dtype=torch.qint8)[0]
    cq = quantize(tracec, tracec.nn.Sequential(cm), {tracec.nn.LSTM}, dtype=tracec.qint8)[0]
    assert repr(cq) == repr(pq)
    dirs = 2 if cfg.get("bidirectional") else 1
    for steps, batch in ((5, 2), (1, 3)):
        shape = (batch, steps, 4) if cfg.get("batch_first") else (steps, batch, 4)
        x = (rng.standard_normal(shape) * rng.choice([0.1, 3.0])).astype(np.float32)
        hx = [rng.standard_normal((cm.num_layers * dirs, batch, 3)).astype(np.float32)
              for _ in range(2)]
        for with_hx in (False, True):
            want = pq(torch.tensor(x), tuple(map(torch.tensor, hx)) if with_hx else None)
            got = cq(tracec.tensor(x), tuple(map(tracec.tensor, hx)) if with_hx else None)
            # integer parts exact; sigmoid/tanh within an ulp of PyTorch's
            for g, w in ((got[0], want[0]), (got[1][0], want[1][0]), (got[1][1], want[1][1])):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=0, atol=5e-7)
    with pytest.raises(RuntimeError, match="input must have 3 dimensions, got 2"):
        cq(tracec.ones(3, 4))
    with pytest.raises(AssertionError, match="mod.bias must be True"):
        quantize(tracec, tracec.nn.Sequential(tracec.nn.LSTM(2, 2, bias=False)),
                 {tracec.nn.LSTM})
