"""``nn.Transformer*`` against PyTorch with copied weights: state-dict keys,
outputs, input gradients and every parameter's gradient for every option,
float32 and float64 (dropout off or eval mode); subclassing as public code
does; PyTorch's eval-mode nested-tensor output (zeros at padded positions)."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tests.nn_helpers import close, compare_params_grads, copy_weights, tol

D, H, FF, L, T, N = 8, 2, 16, 5, 4, 3        # d_model, heads, feed-forward, src, tgt, batch
DTYPES = [np.float32, np.float64]


def _lib_dtype(lib, dtype):
    return lib.float64 if dtype == np.float64 else lib.float32


def _build(make, dtype):
    """``make(lib)`` in both libraries, torch's weights copied into tracec's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        m2 = make(torch).to(_lib_dtype(torch, dtype))
        m1 = make(tracec).to(_lib_dtype(tracec, dtype))
    assert list(m1.state_dict()) == list(m2.state_dict())
    copy_weights(m1, m2)
    return m1, m2


def _run(m1, m2, inputs, masks, dtype, kwargs=None, seed=0):
    """Forward both with the same float inputs (requiring grad) and masks,
    compare the outputs, then all gradients along a random cotangent."""
    kwargs = kwargs or {}
    t1 = [tracec.tensor(a.copy(), requires_grad=True) for a in inputs]
    t2 = [torch.tensor(a.copy(), requires_grad=True) for a in inputs]
    k1 = {k: None if v is None else tracec.tensor(v.copy()) for k, v in masks.items()}
    k2 = {k: None if v is None else torch.tensor(v.copy()) for k, v in masks.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y1 = m1(*t1, **k1, **kwargs)
        y2 = m2(*t2, **k2, **kwargs)
    assert y1.shape == tuple(y2.shape)
    close(y1, y2, **tol(dtype, 10))
    g = np.random.default_rng(seed).standard_normal(tuple(y2.shape)).astype(dtype)
    y1.backward(tracec.tensor(g))
    y2.backward(torch.tensor(g))
    for a, b in zip(t1, t2):
        close(a.grad, b.grad, **tol(dtype, 20))
    compare_params_grads(m1, m2, **tol(dtype, 20))
    return y1, y2


def _ids(case: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in case.items()) or "plain"


def _x(rng, dtype, *shape):
    return rng.standard_normal(shape).astype(dtype)


def _causal(n, dtype):
    return np.triu(np.full((n, n), -np.inf), 1).astype(dtype)


def _padding(rng, n, s):
    p = rng.random((n, s)) < 0.3
    p[:, 0], p[:, -1] = False, True
    return p


def _activation(lib, name):
    if name == "callable":
        return lib.nn.functional.silu
    if name == "module":
        return lib.nn.GELU(approximate="tanh")
    return name


# --- encoder layer -----------------------------------------------------------------------

ENC_LAYER = [
    dict(),
    dict(batch_first=True),
    dict(norm_first=True),
    dict(activation="gelu"),
    dict(activation="callable"),
    dict(activation="module", batch_first=True),
    dict(bias=False),
    dict(layer_norm_eps=1e-3),
    dict(mask="bool"),
    dict(mask="float", kpm=True),
    dict(mask="causal", is_causal=True),
    dict(mask="causal", is_causal=True, kpm=True, norm_first=True),
    dict(kpm=True, batch_first=True),
    dict(unbatched=True, mask="causal"),
    dict(dropout=0.3, eval=True, batch_first=True, kpm=True),
]


def _enc_layer_kw(case, lib):
    kw = {k: case[k] for k in ("batch_first", "norm_first", "bias", "layer_norm_eps")
          if k in case}
    if "activation" in case:
        kw["activation"] = _activation(lib, case["activation"])
    return dict(dim_feedforward=FF, dropout=case.get("dropout", 0.0), **kw)


def _src_and_masks(rng, case, dtype, s=L):
    bf = case.get("batch_first")
    shape = (s, D) if case.get("unbatched") else ((N, s, D) if bf else (s, N, D))
    masks = {}
    kind = case.get("mask")
    if kind == "bool":
        m = rng.random((s, s)) < 0.3
        m[:, 0] = False
        masks["mask"] = m
    elif kind == "float":
        masks["mask"] = _x(rng, dtype, s, s)
    elif kind == "causal":
        masks["mask"] = _causal(s, dtype)
    if case.get("kpm"):
        masks["key_padding_mask"] = _padding(rng, N, s)
    return _x(rng, dtype, *shape), masks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ENC_LAYER, ids=_ids)
def test_encoder_layer(dtype, case):
    rng = np.random.default_rng(0)
    m1, m2 = _build(lambda lib: lib.nn.TransformerEncoderLayer(D, H, **_enc_layer_kw(case, lib)),
                    dtype)
    if case.get("eval"):
        m1.eval()
        m2.eval()
    src, masks = _src_and_masks(rng, case, dtype)
    masks = {("src_" + k): v for k, v in masks.items()}
    kw = {"is_causal": True} if case.get("is_causal") else {}
    _run(m1, m2, [src], masks, dtype, kw)


# --- decoder layer ------------------------------------------------------------------------

DEC_LAYER = [
    dict(),
    dict(batch_first=True, norm_first=True),
    dict(activation="gelu", bias=False),
    dict(tgt_mask="causal", tgt_is_causal=True),
    dict(tgt_mask="causal", memory_mask=True, kpm=True),
    dict(tgt_mask="causal", kpm=True, batch_first=True),
    dict(unbatched=True, tgt_mask="causal"),
]


def _dec_inputs(rng, case, dtype):
    bf, unb = case.get("batch_first"), case.get("unbatched")

    def shape(s):
        return (s, D) if unb else ((N, s, D) if bf else (s, N, D))

    masks = {}
    if case.get("tgt_mask"):
        masks["tgt_mask"] = _causal(T, dtype)
    if case.get("memory_mask"):
        m = rng.random((T, L)) < 0.3
        m[:, 0] = False
        masks["memory_mask"] = m
    if case.get("kpm"):
        masks["tgt_key_padding_mask"] = _padding(rng, N, T)
        masks["memory_key_padding_mask"] = _padding(rng, N, L)
    return [_x(rng, dtype, *shape(T)), _x(rng, dtype, *shape(L))], masks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", DEC_LAYER, ids=_ids)
def test_decoder_layer(dtype, case):
    rng = np.random.default_rng(1)
    m1, m2 = _build(lambda lib: lib.nn.TransformerDecoderLayer(D, H, **_enc_layer_kw(case, lib)),
                    dtype)
    inputs, masks = _dec_inputs(rng, case, dtype)
    kw = {"tgt_is_causal": True} if case.get("tgt_is_causal") else {}
    _run(m1, m2, inputs, masks, dtype, kw)


# --- stacks and the full model ------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [dict(), dict(mask="causal", kpm=True, norm=True),
                                  dict(mask="causal", is_causal=True, batch_first=True),
                                  dict(mask="bool", norm_first=True, norm=True)],
                         ids=_ids)
def test_encoder(dtype, case):
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(D, H, **_enc_layer_kw(case, lib))
        norm = lib.nn.LayerNorm(D) if case.get("norm") else None
        return lib.nn.TransformerEncoder(layer, 2, norm=norm)

    m1, m2 = _build(make, dtype)
    src, masks = _src_and_masks(np.random.default_rng(2), case, dtype)
    masks = {("src_" + k if k == "key_padding_mask" else k): v for k, v in masks.items()}
    kw = {"is_causal": True} if case.get("is_causal") else {}
    _run(m1, m2, [src], masks, dtype, kw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decoder(dtype):
    def make(lib):
        return lib.nn.TransformerDecoder(
            lib.nn.TransformerDecoderLayer(D, H, dim_feedforward=FF, dropout=0.0), 2,
            norm=lib.nn.LayerNorm(D))

    m1, m2 = _build(make, dtype)
    inputs, masks = _dec_inputs(np.random.default_rng(3), dict(tgt_mask=1, kpm=1), dtype)
    _run(m1, m2, inputs, masks, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, True)])
def test_transformer(dtype, batch_first, norm_first):
    def make(lib):
        return lib.nn.Transformer(D, H, 2, 2, FF, dropout=0.0, batch_first=batch_first,
                                  norm_first=norm_first)

    m1, m2 = _build(make, dtype)
    rng = np.random.default_rng(4)
    sh = (lambda s: (N, s, D)) if batch_first else (lambda s: (s, N, D))
    masks = dict(tgt_mask=_causal(T, dtype), src_key_padding_mask=_padding(rng, N, L),
                 memory_key_padding_mask=_padding(rng, N, L))
    _run(m1, m2, [_x(rng, dtype, *sh(L)), _x(rng, dtype, *sh(T))], masks, dtype)


def test_state_dict_keys_match_torch():
    def models(lib):
        enc = lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(D, H, FF), 2)
        return [lib.nn.Transformer(D, H, 1, 1, FF), lib.nn.Transformer(D, H, 1, 1, FF, bias=False),
                lib.nn.Transformer(D, H, custom_encoder=enc, num_decoder_layers=1,
                                   dim_feedforward=FF),
                lib.nn.TransformerDecoderLayer(D, H, FF, activation=lib.nn.ReLU()),
                lib.nn.TransformerEncoderLayer(D, H, FF, activation=lib.nn.GELU())]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, b in zip(models(tracec), models(torch)):
            assert list(a.state_dict()) == list(b.state_dict())
            assert [(k, tuple(v.shape)) for k, v in a.named_parameters()] == \
                [(k, tuple(v.shape)) for k, v in b.named_parameters()]
            assert [k for k, _ in a.named_modules()] == [k for k, _ in b.named_modules()]


def test_transformer_init_and_options():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = nn.Transformer(16, 2, 2, 1, 32)
    layer = m.encoder.layers[0]
    w = layer.linear1.weight.detach().numpy()          # xavier_uniform_: (32, 16)
    assert np.abs(w).max() <= np.sqrt(6 / 48) and np.abs(w).max() > 0.8 * np.sqrt(6 / 48)
    assert m.d_model == 16 and m.nhead == 2 and m.batch_first is False
    assert layer.activation is F.relu and layer.activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(8, 2, activation="gelu").activation_relu_or_gelu == 2
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    # The encoder's layers are deep copies: distinct parameters, equal values.
    a, b = m.encoder.layers
    assert a.linear1.weight is not b.linear1.weight
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        m(tracec.zeros(3, 2, 16), tracec.zeros(3, 4, 16))
    with pytest.raises(RuntimeError, match="feature number of src and tgt must be equal to "
                                           "d_model"):
        m(tracec.zeros(3, 2, 8), tracec.zeros(3, 2, 8))


def test_encoder_nested_tensor_warning_like_torch():
    for lib in (torch, tracec):
        with pytest.warns(UserWarning, match="enable_nested_tensor is True, but "
                                             "self.use_nested_tensor is False because "
                                             "encoder_layer.self_attn.batch_first was not True"):
            lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(D, H), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, batch_first=True), 1)
        nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H), 1, enable_nested_tensor=False)
    assert enc.use_nested_tensor and enc.mask_check


def test_generate_square_subsequent_mask():
    for kw in ({}, {"dtype": "float64"}):
        a = nn.Transformer.generate_square_subsequent_mask(4, **{k: getattr(tracec, v)
                                                                 for k, v in kw.items()})
        b = torch.nn.Transformer.generate_square_subsequent_mask(4, **{k: getattr(torch, v)
                                                                       for k, v in kw.items()})
        assert a.dtype.name == str(b.dtype)[6:]
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("left_aligned,mask_check", [(True, True), (False, True),
                                                     (False, False)])
def test_encoder_eval_padded_outputs_like_torch(left_aligned, mask_check):
    """Eval mode without grad: PyTorch runs the encoder on nested tensors and
    pads back with zeros (when the padding mask is left-aligned, or unchecked)."""
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(D, H, FF, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(D),
                                         mask_check=mask_check).eval()

    m1, m2 = _build(make, np.float32)
    rng = np.random.default_rng(5)
    x = _x(rng, np.float32, N, L, D)
    pad = np.zeros((N, L), bool)
    pad[0, 3:] = pad[1, 4:] = True
    if not left_aligned:
        pad[2, 1] = True
    with tracec.no_grad(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")           # torch: nested tensors are a prototype
        y1 = m1(tracec.tensor(x), src_key_padding_mask=tracec.tensor(pad))
        y2 = m2(torch.tensor(x), src_key_padding_mask=torch.tensor(pad))
    if left_aligned or not mask_check:
        # The zeros were there before the final norm: every padded row is its bias.
        np.testing.assert_allclose(y1.numpy()[pad], np.broadcast_to(
            m1.norm.bias.detach().numpy(), (pad.sum(), D)), atol=1e-6)
    if mask_check:       # torch's result for a non-aligned unchecked mask is undefined
        close(y1, y2, **tol(np.float32, 10))
    # With grad the regular path runs: padded positions are computed.
    y3 = m1(tracec.tensor(x), src_key_padding_mask=tracec.tensor(pad))
    assert np.abs(y3.detach().numpy()[pad] - m1.norm.bias.detach().numpy()).max() > 1e-3


def test_deepcopy_is_independent():
    layer = nn.TransformerEncoderLayer(D, H, FF)
    twin = copy.deepcopy(layer)
    with tracec.no_grad():
        twin.linear1.weight.add_(1.0)
    assert not np.allclose(twin.linear1.weight.detach().numpy(),
                       layer.linear1.weight.detach().numpy())
    assert twin.activation is F.relu and twin.self_attn.batch_first is False


# --- subclassing as public code does -------------------------------------------------------

def _word_language_model(lib):
    """PyTorch examples' word_language_model ``TransformerModel``, as written
    there (written against ``torch``; run with ``lib`` as ``torch``)."""
    import math
    nn_ = lib.nn
    F_ = lib.nn.functional

    class PositionalEncoding(nn_.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn_.Dropout(p=dropout)
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len, dtype=lib.float).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn_.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                             num_encoder_layers=nlayers)
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn_.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn_.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return lib.log(lib.tril(lib.ones(sz, sz))) if hasattr(lib, "tril") else \
                nn_.Transformer.generate_square_subsequent_mask(sz)

        def init_weights(self):
            initrange = 0.1
            nn_.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn_.init.zeros_(self.decoder.bias)
            nn_.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src))
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F_.log_softmax(output, dim=-1)

    return TransformerModel(20, 8, 2, 16, 2, dropout=0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_word_language_model_subclass(dtype):
    m1, m2 = _build(_word_language_model, dtype)
    m1.eval()            # its encoder layers keep nn.Transformer's dropout=0.1
    m2.eval()
    assert "decoder.weight" in m1.state_dict() and not any(
        k.startswith("decoder.layers") for k in m1.state_dict())
    tok = np.random.default_rng(6).integers(0, 20, (L, N))
    y1, y2 = m1(tracec.tensor(tok)), m2(torch.tensor(tok))
    close(y1, y2, **tol(dtype, 10))
    t = np.random.default_rng(7).integers(0, 20, (L * N,))
    l1 = F.nll_loss(y1.view(-1, 20), tracec.tensor(t))
    l2 = torch.nn.functional.nll_loss(y2.view(-1, 20), torch.tensor(t))
    l1.backward()
    l2.backward()
    compare_params_grads(m1, m2, **tol(dtype, 20))
