"""``MultiheadAttention`` (PyTorch keeps it in ``activation.py``, which
re-exports it from here); its output projection is a
``NonDynamicallyQuantizableLinear`` (``linear.py``, where PyTorch has it).

Parameters, names, shapes and init are PyTorch's: a packed
``in_proj_weight [3E, E]`` (or ``q/k/v_proj_weight`` when ``kdim`` / ``vdim``
differ from ``embed_dim``) with xavier_uniform_, zero ``in_proj_bias`` and
``out_proj.bias``, xavier_normal_ ``bias_k`` / ``bias_v``.  PyTorch's
inference fast path computes the same values as the path written here, so
there is only this one.
"""
from __future__ import annotations

from tracec.nn import functional as F
from tracec.nn import init
from tracec.nn.modules.linear import NonDynamicallyQuantizableLinear, _empty
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter
from tracec import shape_ops as S

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class MultiheadAttention(Module):
    __constants__ = ["batch_first"]

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")

        def param(*shape):
            return Parameter(_empty(shape, device, dtype))

        if not self._qkv_same_embed_dim:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = param(1, 1, embed_dim)
            self.bias_v = param(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def __setstate__(self, state):
        state.setdefault("_qkv_same_embed_dim", True)
        super().__setstate__(state)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        is_batched = query.ndim == 3
        key_padding_mask = F._canonical_mask(key_padding_mask, "key_padding_mask",
                                             F._none_or_dtype(attn_mask), "attn_mask",
                                             query.dtype)
        attn_mask = F._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                      check_other=False)
        if self.batch_first and is_batched:
            # Keep the identities (q is k is v) the packed projection looks at.
            if key is value:
                if query is key:
                    query = key = value = S.transpose(query, 1, 0)
                else:
                    query, key = (S.transpose(x, 1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (S.transpose(x, 1, 0) for x in (query, key, value))
        separate = {} if self._qkv_same_embed_dim else dict(
            use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            average_attn_weights=average_attn_weights, is_causal=is_causal, **separate)
        if self.batch_first and is_batched:
            out = S.transpose(out, 1, 0)
        return out, weights

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """PyTorch's helper: one ``[N, heads, L, L]`` mask from the two and
        its type (0 attn, 1 key padding, 2 both; None without masks)."""
        mask_type = merged = None
        if key_padding_mask is not None:
            mask_type, merged = 1, key_padding_mask
        if attn_mask is not None:
            batch_size, seq_len, _ = query.shape
            mask_type = 2
            if attn_mask.ndim == 3:
                merged = S.reshape(attn_mask, (batch_size, -1, seq_len, seq_len))
            else:
                merged = S.expand(S.reshape(attn_mask, (1, 1, seq_len, seq_len)),
                                  (batch_size, self.num_heads, seq_len, seq_len))
            if key_padding_mask is not None:
                merged = merged + S.expand(S.reshape(key_padding_mask,
                                                     (batch_size, 1, 1, seq_len)),
                                           (batch_size, self.num_heads, seq_len, seq_len))
        return merged, mask_type
