"""``Transformer``, ``TransformerEncoder``, ``TransformerDecoder`` and their
layers, with PyTorch's constructor arguments, submodule names (so state-dict
keys are PyTorch's) and forward signatures; subclassable as public code
does (``class TransformerModel(nn.Transformer)``).

Two choices keep a traced call independent of mask *values*:
  * ``is_causal=None`` with a mask: PyTorch compares the mask with the causal
    one to decide whether to pass the causal hint on.  The hint only lets the
    kernel build the causal mask itself, which gives the same values as adding
    the mask, so here the mask is always applied and the hint stays off.
  * PyTorch's inference fast paths compute what the regular path computes,
    except that ``TransformerEncoder`` (eval mode, no grad, batch-first,
    ``src_key_padding_mask``, nested tensors enabled) returns zeros at padded
    positions.  That is reproduced with a ``where`` on the mask, its
    left-alignment check included, instead of a branch.
"""
from __future__ import annotations

import copy
import warnings

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph, ops
from tracec import shape_ops as S
from tracec.nn import functional as F
from tracec.nn import init
from tracec.nn.modules.activation import GELU, ReLU
from tracec.torch_function_switch import public_of
from tracec.nn.modules.attention import MultiheadAttention
from tracec.nn.modules.container import ModuleList
from tracec.nn.modules.dropout import Dropout
from tracec.nn.modules.linear import Linear
from tracec.nn.modules.module import Module
from tracec.nn.modules.normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    """``[sz, sz]``: ``-inf`` above the diagonal, 0 on and below it."""
    d = dt.to_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    rows = S.reshape(creation.arange(sz), (sz, 1))
    cols = S.reshape(creation.arange(sz), (1, sz))
    return S.masked_fill(creation.zeros(sz, sz, dtype=d, device=device), ops.gt(cols, rows),
                         float("-inf"))


def _get_clones(module, N):
    return ModuleList([copy.deepcopy(module) for _ in range(N)])


def _get_activation_fn(activation: str):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _detect_is_causal_mask(mask, is_causal=None, size=None) -> bool:
    """The causal hint to pass on: only an explicit ``is_causal=True``
    (see the module docstring for why a mask is not inspected)."""
    return is_causal is True


def _left_aligned(keep):
    """0-d bool tensor: every row of ``keep`` ([N, S]) is True then False."""
    # Not left-aligned: some position is kept right after a padded one.
    after_pad = ops.logical_and(keep[:, 1:], ops.logical_not(keep[:, :-1]))
    return ops.eq(TF.sum(ops.cast(after_pad, dt.int64)), 0)


class _LayerBase(Module):
    """What the encoder and decoder layers share: the feed-forward block, the
    norms and dropouts (registered in PyTorch's order, so state-dict keys
    match) and the self-attention block."""

    def _feedforward_and_norms(self, n: int, d_model, dim_feedforward, dropout, eps,
                               norm_first, bias, fk) -> None:
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **fk)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **fk)
        self.norm_first = norm_first
        for i in range(1, n + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=eps, bias=bias, **fk))
        for i in range(1, n + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal: bool = False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    #: the dropout after the feed-forward block (the last one).  A class
    #: attribute: an instance has only PyTorch's attributes, so that a layer
    #: pickled by either library runs in the other.
    _ff_dropout = "dropout2"

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, self._ff_dropout)(x)


class TransformerEncoderLayer(_LayerBase):
    """Self-attention and feed-forward blocks with residuals and LayerNorm
    (post-norm, or pre-norm with ``norm_first``)."""

    __constants__ = ["norm_first"]

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        fk = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **fk)
        self._feedforward_and_norms(2, d_model, dim_feedforward, dropout, layer_norm_eps,
                                    norm_first, bias, fk)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        # The default F.relu, captured when this module was imported, is
        # F.relu's implementation: once a Tensor subclass has turned the
        # __torch_function__ protocol on, F.relu is its wrapper (the public one).
        activation = public_of(activation) or activation
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "activation"):
            self.activation = F.relu

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        src_key_padding_mask = F._canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                                 F._none_or_dtype(src_mask), "src_mask",
                                                 src.dtype)
        src_mask = F._canonical_mask(src_mask, "src_mask", None, "", src.dtype,
                                     check_other=False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask,
                                   is_causal=is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask,
                                              is_causal=is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x



class TransformerDecoderLayer(_LayerBase):
    """Self-attention, attention over the encoder's memory and feed-forward
    blocks with residuals and LayerNorm."""

    _ff_dropout = "dropout3"

    __constants__ = ["norm_first"]

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        fk = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **fk)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **fk)
        self._feedforward_and_norms(3, d_model, dim_feedforward, dropout, layer_norm_eps,
                                    norm_first, bias, fk)
        self.activation = (_get_activation_fn(activation) if isinstance(activation, str)
                           else public_of(activation) or activation)

    def __setstate__(self, state):
        state.setdefault("activation", F.relu)
        super().__setstate__(state)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal: bool = False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)


def _why_no_nested(layer) -> str:
    """Why PyTorch's TransformerEncoder does not use nested tensors with
    this layer ("" when it does)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better "
                "inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer``, then ``norm``."""

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_no_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask = F._canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                                 F._none_or_dtype(mask), "mask", src.dtype)
        mask = F._canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        is_causal = _detect_is_causal_mask(mask, is_causal)
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if self._nested_path(src, mask, src_key_padding_mask):
            # PyTorch runs the layers on a nested tensor and pads it back with 0.
            pad = ops.ne(src_key_padding_mask, 0.0)
            zero = ops.zeros((), output.dtype, like=output)
            if getattr(self, "mask_check", True):
                pad = ops.logical_and(pad, _left_aligned(ops.logical_not(pad)))
            output = ops.where(S.unsqueeze(pad, -1), zero, output)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _nested_path(self, src, mask, src_key_padding_mask) -> bool:
        """Whether PyTorch would take its nested-tensor path for this call."""
        first = self.layers[0]
        if (not getattr(self, "use_nested_tensor", False) or first.training or src.ndim != 3
                or src_key_padding_mask is None or mask is not None):
            return False
        sa = first.self_attn
        params = (sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                  first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
                  first.linear1.weight, first.linear1.bias, first.linear2.weight,
                  first.linear2.bias)
        return not (graph.is_grad_enabled()
                    and any(t is not None and t.requires_grad for t in (src,) + params))


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer``, then ``norm``."""

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers: int, norm=None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False):
        output = tgt
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """Encoder-decoder transformer ("Attention Is All You Need")."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        fk = dict(device=device, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            encoder_layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                    activation, layer_norm_eps, batch_first,
                                                    norm_first, bias, **fk)
            encoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
            self.encoder = TransformerEncoder(encoder_layer, num_encoder_layers, encoder_norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                    activation, layer_norm_eps, batch_first,
                                                    norm_first, bias, **fk)
            decoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
            self.decoder = TransformerDecoder(decoder_layer, num_decoder_layers, decoder_norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        is_batched = src.ndim == 3
        if is_batched and src.shape[0 if self.batch_first else 1] != \
                tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A float causal mask: ``-inf`` above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
