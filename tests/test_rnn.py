"""Recurrent layers (RNN, LSTM, GRU and their cells) against PyTorch with
copied weights: outputs, final states, input/state gradients and every
parameter's gradient over all options, in float32 and float64; state-dict
keys and order, init bounds, reprs, dropout, and the error messages for
bad shapes."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn as tnn

import tracec
import tracec.nn.functional as F
from tracec import nn
from nn_helpers import close, compare_params_grads, copy_weights, npy, rnd, tol

T, N, IN, H = 4, 3, 5, 4
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported")

TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}
TC_DTYPE = {np.float32: tracec.float32, np.float64: tracec.float64}

LAYERS = {"RNN": (nn.RNN, tnn.RNN), "LSTM": (nn.LSTM, tnn.LSTM), "GRU": (nn.GRU, tnn.GRU)}
CELLS = {"RNNCell": (nn.RNNCell, tnn.RNNCell), "LSTMCell": (nn.LSTMCell, tnn.LSTMCell),
         "GRUCell": (nn.GRUCell, tnn.GRUCell)}


def build(pair, dtype, *args, **kw):
    """The same module in tracec and torch, torch's weights loaded into tracec."""
    tc_cls, th_cls = pair
    torch.manual_seed(0)
    b = th_cls(*args, dtype=TORCH_DTYPE[dtype], **kw)
    a = tc_cls(*args, dtype=TC_DTYPE[dtype], **kw)
    copy_weights(a, b)
    return a, b


def flat(out):
    """``out, h`` / ``out, (h, c)`` / ``(h, c)`` / ``h`` as a flat tuple."""
    if isinstance(out, (tuple, list)):
        return tuple(t for o in out for t in flat(o))
    return (out,)


def run_both(a, b, x, hx=None, *, dtype, seed=0):
    """Forward both with the same inputs, compare every output; backward the
    same random cotangents through all of them and compare the gradients of
    the input, the given states and every parameter."""
    def inputs(lib):
        xt = lib.tensor(x.copy(), requires_grad=True)
        if hx is None:
            return xt, None, ()
        hs = tuple(lib.tensor(h.copy(), requires_grad=True) for h in hx)
        return xt, (hs if len(hs) > 1 else hs[0]), hs
    x1, h1, leaves1 = inputs(tracec)
    x2, h2, leaves2 = inputs(torch)
    o1 = flat(a(x1) if h1 is None else a(x1, h1))
    o2 = flat(b(x2) if h2 is None else b(x2, h2))
    t = tol(dtype, 5.0)
    assert len(o1) == len(o2)
    for u, v in zip(o1, o2):
        assert tuple(u.shape) == tuple(v.shape), (u.shape, v.shape)
        close(u, v, **t)
    rng = np.random.default_rng(seed)
    gs = [rng.standard_normal(tuple(v.shape)).astype(dtype) for v in o2]
    sum((u * tracec.tensor(g)).sum() for u, g in zip(o1, gs)).backward()
    sum((v * torch.tensor(g)).sum() for v, g in zip(o2, gs)).backward()
    close(x1.grad, x2.grad, **t)
    for p, q in zip(leaves1, leaves2):
        close(p.grad, q.grad, **t)
    compare_params_grads(a, b, **t)
    return o1, o2


def seq_input(rng, dtype, batch_first=False, batched=True):
    if not batched:
        return rnd(rng, T, IN, dtype=dtype)
    return rnd(rng, N, T, IN, dtype=dtype) if batch_first else rnd(rng, T, N, IN, dtype=dtype)


def states(rng, kind, dtype, kw, batched=True):
    d = 2 if kw.get("bidirectional") else 1
    lead = (kw.get("num_layers", 1) * d,) + ((N,) if batched else ())
    h = rnd(rng, *lead, kw.get("proj_size") or H, dtype=dtype)
    if kind != "LSTM":
        return (h,)
    return h, rnd(rng, *lead, H, dtype=dtype)


CONFIGS = [
    {},
    {"num_layers": 2},
    {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"bias": False},
    {"num_layers": 2, "bias": False, "bidirectional": True},
]
KINDS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(c) or "default")
@pytest.mark.parametrize("kind,extra", KINDS, ids=["rnn", "rnn_relu", "lstm", "gru"])
def test_layer_matches_torch(kind, extra, cfg, dtype):
    rng = np.random.default_rng(1)
    a, b = build(LAYERS[kind], dtype, IN, H, **extra, **cfg)
    x = seq_input(rng, dtype, cfg.get("batch_first", False))
    run_both(a, b, x, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", [{}, {"num_layers": 2, "bidirectional": True},
                                 {"batch_first": True, "bias": False}],
                         ids=["default", "2layers_bidir", "batch_first_nobias"])
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_layer_given_state_matches_torch(kind, cfg, dtype):
    rng = np.random.default_rng(2)
    a, b = build(LAYERS[kind], dtype, IN, H, **cfg)
    x = seq_input(rng, dtype, cfg.get("batch_first", False))
    run_both(a, b, x, states(rng, kind, dtype, cfg), dtype=dtype)


@pytest.mark.parametrize("given_state", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_layer_unbatched_input_matches_torch(kind, batch_first, given_state):
    rng = np.random.default_rng(3)
    cfg = {"num_layers": 2, "bidirectional": True, "batch_first": batch_first}
    a, b = build(LAYERS[kind], np.float64, IN, H, **cfg)
    x = seq_input(rng, np.float64, batched=False)
    hx = states(rng, kind, np.float64, cfg, batched=False) if given_state else None
    o1, _ = run_both(a, b, x, hx, dtype=np.float64)
    assert o1[0].shape == (T, 2 * H)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", [{}, {"num_layers": 2, "bidirectional": True},
                                 {"bias": False, "batch_first": True}],
                         ids=["default", "2layers_bidir", "nobias_batch_first"])
def test_lstm_proj_size_matches_torch(cfg, dtype):
    rng = np.random.default_rng(4)
    a, b = build(LAYERS["LSTM"], dtype, IN, H, proj_size=2, **cfg)
    x = seq_input(rng, dtype, cfg.get("batch_first", False))
    o1, _ = run_both(a, b, x, dtype=dtype)
    d = 2 if cfg.get("bidirectional") else 1
    assert o1[0].shape[-1] == 2 * d and o1[1].shape[-1] == 2 and o1[2].shape[-1] == H
    run_both(a, b, x, states(rng, "LSTM", dtype, dict(cfg, proj_size=2)), dtype=dtype)
    x1 = seq_input(rng, dtype, batched=False)
    run_both(a, b, x1, states(rng, "LSTM", dtype, dict(cfg, proj_size=2), batched=False),
             dtype=dtype)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_dropout_in_eval_mode_is_off_and_matches_torch(kind):
    rng = np.random.default_rng(5)
    a, b = build(LAYERS[kind], np.float64, IN, H, num_layers=3, dropout=0.5)
    a.eval(), b.eval()
    run_both(a, b, seq_input(rng, np.float64), dtype=np.float64)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_dropout_one_in_train_mode_matches_torch(kind):
    """p=1 drops every activation between layers: deterministic, so torch
    is an exact oracle for train-mode dropout's placement."""
    rng = np.random.default_rng(6)
    a, b = build(LAYERS[kind], np.float64, IN, H, num_layers=2, dropout=1.0,
                 bidirectional=True)
    run_both(a, b, seq_input(rng, np.float64), dtype=np.float64)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_dropout_in_train_mode_masks_between_layers(kind):
    """Train-mode dropout is one mask drawn between layer 0 and layer 1 (none
    after the last layer): the two-layer module equals two one-layer modules
    with the same mask, drawn from the same generator state, in between."""
    p = 0.5
    tracec.manual_seed(0)
    two = LAYERS[kind][0](IN, H, num_layers=2, dropout=p)
    l0, l1 = LAYERS[kind][0](IN, H), LAYERS[kind][0](H, H)
    sd = two.state_dict()
    l0.load_state_dict({k: v for k, v in sd.items() if k.endswith("_l0")})
    l1.load_state_dict({k.replace("_l1", "_l0"): v for k, v in sd.items() if k.endswith("_l1")})
    x = tracec.randn(T, N, IN)
    rng = tracec.get_rng_state()
    out, _ = two(x)
    out_again, _ = two(x)
    tracec.set_rng_state(rng)
    mask = F.dropout(tracec.ones(T, N, H), p, True)
    y0, _ = l0(x)
    want, _ = l1(y0 * mask)
    close(out, want, atol=1e-6, rtol=1e-6)
    assert out.shape == (T, N, H)
    assert not np.allclose(npy(out), npy(out_again))  # a fresh mask each call
    kept = (mask.numpy() != 0).mean()
    assert 0.3 < kept < 0.7 and set(np.unique(mask.numpy())) <= {0.0, 1 / (1 - p)}
    two.eval()
    close(two(x)[0], l1(y0)[0], atol=1e-6, rtol=1e-6)


def test_dropout_warning_and_arguments():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1, "
                                         "but got dropout=0.3 and num_layers=1"):
        nn.LSTM(3, 4, dropout=0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.LSTM(3, 4, num_layers=2, dropout=0.3)
    with pytest.raises(ValueError, match=r"dropout should be a number in range \[0, 1\]"):
        nn.GRU(3, 4, dropout=1.5)


# --- cells ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given_state", [False, True])
@pytest.mark.parametrize("kind,extra", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                        ("LSTMCell", {}), ("GRUCell", {})],
                         ids=["rnn", "rnn_relu", "lstm", "gru"])
def test_cell_matches_torch(kind, extra, given_state, batched, bias, dtype):
    rng = np.random.default_rng(7)
    a, b = build(CELLS[kind], dtype, IN, H, bias=bias, **extra)
    lead = (N,) if batched else ()
    x = rnd(rng, *lead, IN, dtype=dtype)
    hx = None
    if given_state:
        hx = tuple(rnd(rng, *lead, H, dtype=dtype) for _ in range(2 if kind == "LSTMCell"
                                                                  else 1))
    o1, _ = run_both(a, b, x, hx, dtype=dtype)
    assert all(o.shape == lead + (H,) for o in o1)


def test_cell_loop_equals_layer():
    """Stepping an LSTMCell over time with the layer's weights gives the layer."""
    tracec.manual_seed(0)
    layer, cell = nn.LSTM(IN, H), nn.LSTMCell(IN, H)
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = tracec.randn(T, N, IN)
    out, (h_n, c_n) = layer(x)
    h = c = tracec.zeros(N, H)
    for t in range(T):
        h, c = cell(x[t], (h, c))
        close(h, out[t], atol=1e-6, rtol=1e-6)
    close(h, h_n[0], atol=1e-6, rtol=1e-6)
    close(c, c_n[0], atol=1e-6, rtol=1e-6)


# --- parameters, state dicts, init, repr -------------------------------------------------------

MODULE_ARGS = [
    ("RNN", (IN, H), {}),
    ("RNN", (IN, H, 2, "relu"), {"bias": False}),
    ("LSTM", (IN, H), {"num_layers": 2, "bidirectional": True}),
    ("LSTM", (IN, H), {"num_layers": 2, "bidirectional": True, "proj_size": 2}),
    ("LSTM", (IN, H), {"bias": False, "proj_size": 3, "batch_first": True, "dropout": 0.25,
                       "num_layers": 2}),
    ("GRU", (IN, H, 3), {"bidirectional": True, "bias": False}),
    ("RNNCell", (IN, H), {}),
    ("RNNCell", (IN, H, False, "relu"), {}),
    ("LSTMCell", (IN, H), {"bias": False}),
    ("GRUCell", (IN, H), {}),
]


@pytest.mark.parametrize("kind,args,kw", MODULE_ARGS)
def test_parameters_state_dict_repr_and_init_match_torch(kind, args, kw):
    tc_cls, th_cls = {**LAYERS, **CELLS}[kind]
    a, b = tc_cls(*args, **kw), th_cls(*args, **kw)
    assert list(a.state_dict()) == list(b.state_dict())
    assert [(n, tuple(p.shape)) for n, p in a.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in b.named_parameters()]
    assert repr(a) == repr(b)
    copy_weights(a, b)  # a torch state dict loads (strict)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        close(p, q, err_msg=n)
    if hasattr(b, "all_weights"):
        assert [[tuple(w.shape) for w in ws] for ws in a.all_weights] == \
            [[tuple(w.shape) for w in ws] for ws in b.all_weights]
        assert a._flat_weights_names == b._flat_weights_names
        a.flatten_parameters()
    bound = 1 / math.sqrt(H)
    fresh = tc_cls(*args, **kw)
    for n, p in fresh.named_parameters():
        v = p.detach().numpy()
        assert v.dtype == np.float32 and np.abs(v).max() <= bound, n
    allv = np.concatenate([p.detach().numpy().ravel() for p in fresh.parameters()])
    assert abs(allv.std() - bound / math.sqrt(3)) < 0.25 * bound  # uniform(-b, b)


def test_device_dtype_kwargs_and_to():
    m = nn.GRU(IN, H, dtype=tracec.float64, device="cpu")
    assert all(p.dtype == tracec.float64 for p in m.parameters())
    m.float()
    out, h = m(tracec.randn(T, N, IN))
    assert out.dtype == tracec.float32 and h.shape == (1, N, H)
    c = nn.LSTMCell(IN, H, dtype=tracec.float64)
    assert c.weight_hh.dtype == tracec.float64


def test_subclass_and_weight_reassignment():
    """Users subclass the layers and swap weights: forward reads the current
    parameters (no stale cache)."""
    class MyRNN(nn.RNN):
        pass
    m = MyRNN(IN, H)
    x = tracec.randn(T, N, IN)
    m.weight_hh_l0 = nn.Parameter(tracec.zeros(H, H))
    out, _ = m(x)
    # with no recurrent weight, step t depends on x[t] only
    out2, _ = m(x[2:3])
    close(out[2], out2[0], atol=1e-6, rtol=1e-6)
    assert m._flat_weights[1] is m.weight_hh_l0


# --- errors (PyTorch's messages) -------------------------------------------------------------------

def torch_error(fn):
    with pytest.raises(Exception) as e:
        fn(torch)
    return type(e.value), str(e.value)


def same_error(fn):
    """``fn(lib)`` raises the same type and message under tracec and torch."""
    kind, msg = torch_error(fn)
    with pytest.raises(kind) as e:
        fn(tracec)
    assert str(e.value) == msg.replace("torch.", "tracec.")


def _mod(lib, name, *args, **kw):
    return getattr(lib.nn, name)(*args, **kw)


ERRORS = {
    "lstm_input_size": lambda L: _mod(L, "LSTM", 3, 4)(L.randn(5, 2, 6)),
    "lstm_h_shape": lambda L: _mod(L, "LSTM", 3, 4, 2)(
        L.randn(5, 2, 3), (L.randn(1, 2, 4), L.randn(2, 2, 4))),
    "lstm_c_shape": lambda L: _mod(L, "LSTM", 3, 4, 2)(
        L.randn(5, 2, 3), (L.randn(2, 2, 4), L.randn(2, 2, 5))),
    "lstm_proj_h_shape": lambda L: _mod(L, "LSTM", 3, 4, proj_size=2)(
        L.randn(5, 2, 3), (L.randn(1, 2, 4), L.randn(1, 2, 4))),
    "lstm_hx_dims": lambda L: _mod(L, "LSTM", 3, 4)(
        L.randn(5, 2, 3), (L.randn(2, 4), L.randn(1, 2, 4))),
    "lstm_unbatched_hx_dims": lambda L: _mod(L, "LSTM", 3, 4)(
        L.randn(5, 3), (L.randn(1, 2, 4), L.randn(1, 2, 4))),
    "lstm_4d": lambda L: _mod(L, "LSTM", 3, 4)(L.randn(5, 2, 3, 1)),
    "gru_h_shape": lambda L: _mod(L, "GRU", 3, 4, 2)(L.randn(5, 2, 3), L.randn(1, 2, 4)),
    "gru_bidir_h_batch": lambda L: _mod(L, "GRU", 3, 4, bidirectional=True, batch_first=True)(
        L.randn(2, 5, 3), L.randn(2, 3, 4)),
    "gru_4d": lambda L: _mod(L, "GRU", 3, 4)(L.randn(1, 5, 2, 3)),
    "rnn_4d": lambda L: _mod(L, "RNN", 3, 4)(L.randn(1, 5, 2, 3)),
    "rnn_h_shape": lambda L: _mod(L, "RNN", 3, 4)(L.randn(5, 2, 3), L.randn(1, 3, 4)),
    "rnn_unbatched_hx_dims": lambda L: _mod(L, "RNN", 3, 4)(L.randn(5, 3), L.randn(1, 1, 4)),
    "rnn_batched_hx_dims": lambda L: _mod(L, "RNN", 3, 4)(L.randn(5, 2, 3), L.randn(2, 4)),
    "rnn_dtype": lambda L: _mod(L, "RNN", 3, 4)(L.randn(5, 2, 3).double()),
    "rnn_nonlinearity": lambda L: _mod(L, "RNN", 3, 4, nonlinearity="sigmoid"),
    "gru_proj_size": lambda L: _mod(L, "GRU", 3, 4, proj_size=2),
    "lstm_proj_too_big": lambda L: _mod(L, "LSTM", 3, 4, proj_size=4),
    "lstm_proj_negative": lambda L: _mod(L, "LSTM", 3, 4, proj_size=-1),
    "hidden_zero": lambda L: _mod(L, "LSTM", 3, 0),
    "layers_zero": lambda L: _mod(L, "LSTM", 3, 4, 0),
    "hidden_float": lambda L: _mod(L, "GRU", 3, 4.0),
    "bias_not_bool": lambda L: _mod(L, "GRU", 3, 4, bias=1),
    "cell_input_size": lambda L: _mod(L, "RNNCell", 3, 4)(L.randn(2, 5)),
    "cell_batch": lambda L: _mod(L, "RNNCell", 3, 4)(L.randn(2, 3), L.randn(3, 4)),
    "cell_hidden_size": lambda L: _mod(L, "GRUCell", 3, 4)(L.randn(2, 3), L.randn(2, 5)),
    "lstmcell_c_size": lambda L: _mod(L, "LSTMCell", 3, 4)(
        L.randn(2, 3), (L.randn(2, 4), L.randn(2, 5))),
    "lstmcell_hx_dims": lambda L: _mod(L, "LSTMCell", 3, 4)(
        L.randn(2, 3), (L.randn(2, 4), L.randn(1, 2, 4))),
    "cell_3d": lambda L: _mod(L, "GRUCell", 3, 4)(L.randn(1, 2, 3)),
    "cell_hx_3d": lambda L: _mod(L, "RNNCell", 3, 4)(L.randn(2, 3), L.randn(1, 2, 4)),
    "cell_unbatched_hx_2d": lambda L: _mod(L, "GRUCell", 3, 4)(L.randn(3), L.randn(2, 4)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    same_error(ERRORS[name])


def test_hidden_shape_error_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 3, 4\), got \[1, 3, 4\]"):
        nn.GRU(IN, H, 2)(tracec.randn(T, 3, IN), tracec.randn(1, 3, H))


# --- a word-language-model training loop, end to end ------------------------------------------

@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU"])
def test_word_language_model_training_matches_torch(rnn_type):
    """PyTorch's examples/word_language_model in small: Embedding -> 2-layer
    RNN -> tied Linear, hidden state repackaged (detached) between batches,
    clip_grad_norm_, manual SGD through ``p.data.add_``; losses and weights
    equal torch's over a few batches."""
    ntok, nhid, bptt, bsz, lr = 13, 6, 3, 2, 2.0

    def setup(lib):
        class RNNModel(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = lib.nn.Embedding(ntok, nhid)
                self.rnn = getattr(lib.nn, rnn_type)(nhid, nhid, 2)
                self.decoder = lib.nn.Linear(nhid, ntok)
                self.decoder.weight = self.encoder.weight

            def forward(self, x, hidden):
                out, hidden = self.rnn(self.encoder(x), hidden)
                return lib.nn.functional.log_softmax(self.decoder(out).view(-1, ntok), 1), hidden
        return RNNModel()

    def repackage(h):
        return h.detach() if not isinstance(h, tuple) else tuple(repackage(v) for v in h)

    def train(lib, model, data):
        z = lib.zeros(2, bsz, nhid)
        hidden = (z, z) if rnn_type == "LSTM" else z
        losses = []
        for i in range(0, data.shape[0] - 1, bptt):
            x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt].reshape(-1)
            model.zero_grad()
            hidden = repackage(hidden)
            out, hidden = model(x, hidden)
            loss = lib.nn.functional.nll_loss(out, y)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        return losses

    torch.manual_seed(0)
    b = setup(torch)
    a = setup(tracec)
    copy_weights(a, b)
    assert a.decoder.weight is a.encoder.weight
    data = np.random.default_rng(0).integers(0, ntok, (10, bsz))
    la = train(tracec, a, tracec.tensor(data))
    lb = train(torch, b, torch.tensor(data))
    np.testing.assert_allclose(la, lb, rtol=1e-5, atol=1e-6)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        close(p, q, atol=1e-5, rtol=1e-5, err_msg=n)
