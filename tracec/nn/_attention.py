"""Attention, functional: ``scaled_dot_product_attention`` and
``multi_head_attention_forward`` with the mask helpers PyTorch's modules call
(``_canonical_mask``, ``_none_or_dtype``, ``_mha_shape_check``).  Re-exported
by ``functional``.

Everything is a composite over tensor ops, so autograd and ``tracec.compile``
see only primitives.  The arithmetic follows PyTorch's reference code path
(``torch/nn/functional.py`` and the math backend of
``scaled_dot_product_attention``), so results agree to rounding:

* SDPA's softmax is PyTorch's ``_safe_softmax``: a row whose every score is
  ``-inf`` (fully masked) gives zeros, not NaN; MultiheadAttention with
  ``need_weights=True`` uses the plain softmax (NaN there), as PyTorch does.
* Masks never steer Python control flow by their values, so a traced call
  depends only on their shapes and dtypes.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from tracec import aten_vec, autocast_mode
from tracec import dtypes as dt
from tracec import sdp_flags
from tracec import functions as TF
from tracec import ops
from tracec import shape_ops as S
from tracec.nn._basic import dropout, linear
from tracec.tensor_meta import _c_type
from tracec.nn._conv import pad
from tracec.tensor import Tensor, eager_direct
from tracec.wrapper_dispatch import dispatching_operand
from tracec import aten_report

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _safe_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last axis; rows that are all ``-inf`` give 0 (and
    no NaN reaches the backward: those rows are softmaxed as zeros)."""
    if eager_direct(scores) and not scores.requires_grad and \
            type(scores._data) is np.ndarray and not np.isneginf(scores._data).all(-1).any():
        # (eagerly, with no gradient and no row all -inf: the two wheres
        # select the softmax everywhere; ~75 of ~300 us of a small SDPA)
        return TF.softmax(scores, -1)
    dead = ops.eq(TF.amax(scores.detach(), -1, keepdim=True), _NEG_INF)
    live = ops.where(dead, ops.zeros((), scores.dtype, like=scores), scores)
    return ops.where(dead, ops.zeros((), scores.dtype, like=scores), TF.softmax(live, -1))


def _repeat_heads(x: Tensor, heads: int, name: str) -> Tensor:
    """``x.repeat_interleave(heads // x.size(-3), -3)`` for grouped-query
    attention."""
    h = x.shape[-3]
    if heads % h:
        raise RuntimeError("Number of heads in key and value must divide the number of heads "
                           f"in query (got {name} with {h} heads for {heads} query heads)")
    if h == heads:
        return x
    shape = tuple(x.shape)
    x = S.expand(S.unsqueeze(x, -3), shape[:-3] + (h, heads // h) + shape[-2:])
    return S.reshape(x, shape[:-3] + (heads,) + shape[-2:])


def _cpu_flash(query, key, value, attn_mask, dropout_p) -> bool:
    """Whether PyTorch's CPU flash kernel takes the call: 4-D inputs, no
    dropout, a 2-D or 4-D mask, the kernel enabled.  It alone accepts an
    explicit mask with ``is_causal`` (and applies both); the math kernel
    refuses the pair."""
    return (query.ndim == key.ndim == value.ndim == 4 and dropout_p == 0.0
            and (attn_mask is None or attn_mask.ndim in (2, 4))
            and sdp_flags.flash_sdp_enabled())


def _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be "
                            f"Tensor, not {type(t).__name__}")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_c_type(query.dtype)} key.dtype: "
                           f"{_c_type(key.dtype)} and value.dtype: {_c_type(value.dtype)} "
                           "instead.")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.ndim} key.dim: {key.ndim} and "
                           f"value.dim: {value.ndim} instead.")
    if attn_mask is not None:
        if attn_mask.dtype not in (dt.bool_, dt.float32, query.dtype):
            raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query "
                               f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and  "
                               f"query.dtype: {query.dtype} instead.")
        if is_causal and not _cpu_flash(query, key, value, attn_mask, dropout_p):
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not "
                               "be set when is_causal=True")
    if dropout_p < 0.0 or dropout_p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def _check_batch_dims(query, key) -> None:
    """PyTorch's broadcasting error for query and key batch (and head)
    dimensions that differ and are not 1 (heads that differ without
    ``enable_gqa``)."""
    qb, kb = tuple(query.shape[:-2]), tuple(key.shape[:-2])
    n = max(len(qb), len(kb))
    qb, kb = (1,) * (n - len(qb)) + qb, (1,) * (n - len(kb)) + kb
    for i, (a, b) in enumerate(zip(qb, kb)):
        if a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b "
                               f"({b}) at non-singleton dimension {i}")


@aten_report.reports(lambda out, mask, q, kt: [aten_report.AtenCall(
    "baddbmm", (tuple(q.shape), tuple(kt.shape)), (q.requires_grad, kt.requires_grad))])
def _masked_scores(mask, q, kt):
    """Multi-head attention's masked scores, ``torch.baddbmm(attn_mask, q, k^T)``."""
    return TF.add(mask, TF.matmul(q, kt))


def _sdpa_calls(out, query, key, value, attn_mask=None, dropout_p: float = 0.0, *args, **kwargs):
    """What PyTorch's CPU attention dispatches to: its flash kernel (which
    has no flop formula: nothing counted), or the math kernel's two
    matmuls, ``q @ k^T`` and ``attn @ v``."""
    if not isinstance(query, Tensor) or _cpu_flash(query, key, value, attn_mask, dropout_p):
        return []
    rq, rk, rv = query.requires_grad, key.requires_grad, value.requires_grad
    kt = tuple(key.shape[:-2]) + (key.shape[-1], key.shape[-2])
    scores = tuple(out.shape[:-1]) + (key.shape[-2],)
    return (aten_report.matmul_calls(tuple(query.shape), kt, rq, rk)
            + aten_report.matmul_calls(scores, tuple(value.shape), rq or rk, rv))


@aten_report.reports(_sdpa_calls)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False):
    """``softmax(q k^T * scale + bias) v`` over the last two axes.  A bool
    ``attn_mask`` says where to attend (True); a float one is added; the
    causal mask is lower-triangular aligned to the top-left corner."""
    w = dispatching_operand(query, key, value, attn_mask)
    if w is not None:
        return w.__tracec_dispatch__(scaled_dot_product_attention, (query, key, value, attn_mask),
                                  {"dropout_p": dropout_p, "is_causal": is_causal,
                                   "scale": scale, "enable_gqa": enable_gqa})
    if autocast_mode.ACTIVE:
        # on PyTorch's lower-precision list: every floating argument, a
        # float mask included, is cast before the kernel (and its checks)
        query, key, value, attn_mask = autocast_mode.lower_precision(query, key, value, attn_mask)
    _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal)
    if not sdp_flags.runnable():     # sdpa_kernel / enable_math_sdp left no kernel
        raise RuntimeError(sdp_flags.NO_KERNEL)
    if enable_gqa and query.ndim >= 3:
        key = _repeat_heads(key, query.shape[-3], "key")
        value = _repeat_heads(value, query.shape[-3], "value")
    _check_batch_dims(query, key)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    flash = _cpu_flash(query, key, value, attn_mask, dropout_p) and \
        all(t.stride(-1) == 1 for t in (query, key, value))
    if not flash and not sdp_flags.math_sdp_enabled():
        # (sdpa_kernel(SDPBackend.FLASH_ATTENTION) on a call the CPU flash
        # kernel does not take: dropout, 3-D or 5-D inputs, a 3-D mask, a
        # last dim that is not contiguous)
        raise RuntimeError("No available kernel.  Aborting execution.")
    if flash:
        return _query_layout(_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale),
                             query)
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale)


def _query_layout(out: Tensor, query: Tensor) -> Tensor:
    """``out`` laid out in memory as ``query`` is, as PyTorch's CPU flash
    kernel allocates its output: a query that is a ``(B, L, H, E)`` buffer
    seen as ``(B, H, L, E)`` (a projection ``view``-ed into heads and
    ``transpose(1, 2)``-ed) gives an output whose ``transpose(1, 2)`` is
    contiguous, so ``.transpose(1, 2).view(B, L, H * E)`` works (the math
    kernel's output is contiguous)."""
    strides = query.stride()
    order = sorted(range(4), key=lambda d: -strides[d])
    if order == [0, 1, 2, 3]:
        return out
    inverse = [order.index(d) for d in range(4)]
    return out.permute(*order).contiguous().permute(*inverse)


def _sdpa(query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale: float):
    """The kernel PyTorch's CPU dispatch picks, contiguous result."""
    if query.dtype in (dt.bfloat16, dt.float16) and query.device.type == "cpu":
        if _cpu_flash(query, key, value, attn_mask, dropout_p):
            return _flash_reduced(query, key, value, attn_mask, is_causal, scale)
        # PyTorch's math kernel computes a reduced type in float32 on the
        # CPU and rounds the result once (the casts' VJPs do the same for
        # the gradients); no autocast region may cast it back down
        half = query.dtype
        query, key, value = (ops.cast(t, dt.float32) for t in (query, key, value))
        if attn_mask is not None and attn_mask.dtype is half:
            attn_mask = ops.cast(attn_mask, dt.float32)
        with autocast_mode.autocast("cpu", enabled=False):
            return ops.cast(_math(query, key, value, attn_mask, dropout_p, is_causal, scale),
                            half)
    return _math(query, key, value, attn_mask, dropout_p, is_causal, scale)


def _math(query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale: float):
    """PyTorch's math kernel: ``softmax(q k^T * scale + mask) v``, the
    softmax safe for fully masked rows, dropout on the weights."""
    scores = _masked(TF.mul(TF.matmul(query, S.transpose(key, -2, -1)), scale), attn_mask,
                     is_causal)
    attn = _safe_softmax(scores)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return TF.matmul(attn, value)


def _masked(scores: Tensor, attn_mask, is_causal: bool) -> Tensor:
    """``scores`` ``-inf`` above the causal diagonal (aligned to the top
    left) and where a bool mask is False, plus a float mask."""
    if is_causal:
        L, Sk = scores.shape[-2], scores.shape[-1]
        rows = ops.iota((L, Sk), dt.int64, 0, like=scores)
        cols = ops.iota((L, Sk), dt.int64, 1, like=scores)
        scores = ops.where(ops.ge(rows, cols), scores, _NEG_INF)
    if attn_mask is not None:
        if attn_mask.dtype is dt.bool_:
            scores = TF.where(attn_mask, scores, _NEG_INF)
        else:
            scores = TF.add(scores, attn_mask)
    return scores


#: PyTorch's CPU flash kernel's key block (its query block, 32 / 64 / 256 by
#: the query length, matters only to the backward's accumulations)
_KV_SPLIT = 512


def _q_split(length: int) -> int:
    return 256 if length >= 768 else 64 if length >= 192 else 32


def _round(x: Tensor, half) -> Tensor:
    """float32 ``x`` rounded to ``half`` and back (a kernel's reduced buffer)."""
    return ops.cast(ops.cast(x, half), dt.float32)


def _flash_scores(q, k, attn_mask, is_causal: bool, scale: float) -> Tensor:
    """``scale * q k^T`` (+ the mask, ``-inf`` above the causal diagonal) in
    float32, from float32 ``q``, ``k``: the scores both flash passes use."""
    if attn_mask is not None and attn_mask.dtype is not dt.bool_:
        attn_mask = ops.cast(attn_mask, dt.float32)
    # (the primitive: TF.matmul would cast float32 operands back down in an
    # autocast region)
    return _masked(TF.mul(ops.matmul(q, S.transpose(k, -2, -1)), scale), attn_mask, is_causal)


def _flash_forward(scores, v, half):
    """PyTorch's CPU flash forward over float32 ``scores`` and ``v``:
    key blocks of 512 with the online softmax (running max and sum in
    float32, ``exp(s - max)`` rounded to ``half`` before its product with
    ``v``, the float32 accumulator rescaled per block), then ``* (1 / sum)``
    rounded once.  Fully masked rows give zeros.  Returns ``(out, lse)``,
    ``lse = max + log(sum)`` per row (what the backward normalizes by)."""
    Sk = scores.shape[-1]
    ninf = ops.full(tuple(scores.shape[:-1]) + (1,), _NEG_INF, dt.float32, like=scores)
    zero = ops.zeros((), dt.float32, like=scores)
    one = ops.full((), 1.0, dt.float32, like=scores)
    top, total, dst = ninf, ops.zeros(tuple(ninf.shape), dt.float32, like=scores), None
    for n in range(0, Sk, _KV_SPLIT):
        blk = scores[..., n:n + _KV_SPLIT]
        new = TF.maximum(top, TF.amax(blk.detach(), -1, keepdim=True))
        alive = ops.ne(new, _NEG_INF)
        base = ops.where(alive, new, zero)
        e = ops.exp(ops.sub(blk, base))                   # 0 on a dead row
        rescale = ops.exp(ops.sub(top, base))             # exp(max[row] - max)
        total = ops.where(alive, TF.add(TF.sum(e, -1, keepdim=True), TF.mul(rescale, total)),
                          total)
        top = ops.where(alive, new, top)
        # the rounded weights, with e's own gradient: rounding's cast pair
        # would round the gradient too, which the sum's path does not
        # (their exact cancellation, a one-key row's zero, would be lost);
        # e + (round(e) - e) is round(e) exactly (Sterbenz)
        p = TF.add(e, ops.stop_gradient(TF.sub(_round(e, half), e)))
        pv = ops.matmul(p, v[..., n:n + _KV_SPLIT, :])
        dst = pv if dst is None else TF.add(ops.where(alive, TF.mul(dst, rescale), dst), pv)
    top = ops.where(ops.eq(top, _NEG_INF), zero, top)
    total = ops.where(ops.eq(total, 0.0), one, total)
    out = ops.cast(TF.mul(dst, TF.div(1.0, total)), half)
    return out, TF.add(top, TF.log(total))


def _flash_backward(scores, lse, q, k, v, out, grad_out, scale: float, is_causal: bool, half):
    """PyTorch's CPU flash backward: ``attn = exp(scores - lse)``,
    ``dsum = rowsum(grad_out * out)``, ``grad_attn = attn * (grad_out v^T
    - dsum)`` in float32; ``attn`` and ``grad_attn`` rounded to ``half``
    for the products ``grad_v += attn^T grad_out``, ``grad_q += scale *
    grad_attn k``, ``grad_k += scale * grad_attn^T q``, each accumulated
    into the ``half`` gradients block by block (query blocks of 32 / 64 /
    256, key blocks of 512; causal: a query block stops at its diagonal),
    so rounded once per block, as the kernel's gemms write them."""
    L, Sk = q.shape[-2], k.shape[-2]
    go = ops.cast(grad_out, dt.float32)
    dsum = TF.sum(TF.mul(go, ops.cast(out, dt.float32)), -1, keepdim=True)
    attn = ops.exp(ops.sub(scores, lse))                  # 0 where masked
    grad_attn = TF.mul(attn, ops.sub(ops.matmul(go, S.transpose(v, -2, -1)), dsum))
    attn_r, grad_attn_r = _round(attn, half), _round(grad_attn, half)
    qs = _q_split(L)
    gq, gk, gv = {}, {}, {}

    def acc(blocks, key, value):
        prev = blocks.get(key)
        blocks[key] = _round(value if prev is None else TF.add(prev, value), half)

    for m in range(0, L, qs):
        rows = slice(m, m + qs)
        num_keys = min(m + qs, Sk) if is_causal else Sk
        for n in range(0, num_keys, _KV_SPLIT):
            cols = slice(n, n + _KV_SPLIT)
            a_r, g_r = attn_r[..., rows, cols], grad_attn_r[..., rows, cols]
            acc(gv, n, ops.matmul(S.transpose(a_r, -2, -1), go[..., rows, :]))
            acc(gq, m, TF.mul(ops.matmul(g_r, k[..., cols, :]), scale))
            acc(gk, n, TF.mul(ops.matmul(S.transpose(g_r, -2, -1), q[..., rows, :]), scale))

    def gather(blocks, starts, length, like):
        parts = []
        for s0 in starts:
            width = min(s0 + (qs if blocks is gq else _KV_SPLIT), length) - s0
            part = blocks.get(s0)
            parts.append(part if part is not None else ops.zeros(
                tuple(like.shape[:-2]) + (width, like.shape[-1]), dt.float32, like=like))
        return ops.cast(S.cat(parts, -2) if len(parts) > 1 else parts[0], half)

    return (gather(gq, range(0, L, qs), L, q), gather(gk, range(0, Sk, _KV_SPLIT), Sk, k),
            gather(gv, range(0, Sk, _KV_SPLIT), Sk, v))


def _round_np(x: np.ndarray, half) -> np.ndarray:
    return (dt.round_bfloat16(x) if half is dt.bfloat16
            else x.astype(np.float16).astype(np.float32))


def _flash_forward_np(scores: np.ndarray, v: np.ndarray, half):
    """``_flash_forward`` in NumPy with the kernel's own exponential and
    row sums (``aten_vec``): ``exp(s - max)`` is ATen's ``fexp_u20`` on
    each row's whole vectors (off by ~1e-4 in float32, which the sum, and
    so every output, carries).  Returns float32 arrays ``(out, lse)``,
    ``out`` not yet rounded."""
    Sk = scores.shape[-1]
    lead = scores.shape[:-1] + (1,)
    top = np.full(lead, -np.inf, np.float32)
    total = np.zeros(lead, np.float32)
    dst = None
    with np.errstate(invalid="ignore", over="ignore"):
        for n in range(0, Sk, _KV_SPLIT):
            blk = scores[..., n:n + _KV_SPLIT]
            new = np.maximum(top, blk.max(-1, keepdims=True))
            alive = new != -np.inf
            base = np.where(alive, new, np.float32(0))
            e = aten_vec.exp_rows(blk - base)              # 0 on a dead row
            rescale = np.exp(top - base)
            total = np.where(alive, aten_vec.row_sum(e) + rescale * total, total)
            top = np.where(alive, new, top)
            pv = np.matmul(_round_np(e, half), v[..., n:n + _KV_SPLIT, :])
            dst = pv if dst is None else np.where(alive, dst * rescale, dst) + pv
        top = np.where(top == -np.inf, np.float32(0), top)
        total = np.where(total == 0, np.float32(1), total)
        out = dst * (np.float32(1) / total)
        return out.astype(np.float32), (top + np.log(total)).astype(np.float32)


_FLASH_FUNCTION = []


def _flash_function():
    """The eager autograd Function of the reduced-precision flash path
    (made on first use: ``autograd`` imports this layer's modules)."""
    if _FLASH_FUNCTION:
        return _FLASH_FUNCTION[0]
    from tracec.autograd import Function

    class _FlashReduced(Function):
        node_name = "ScaledDotProductFlashAttentionForCpuBackward0"

        @staticmethod
        def forward(ctx, query, key, value, attn_mask, is_causal, scale):
            half = query.dtype
            q, k, v = (ops.cast(t, dt.float32) for t in (query, key, value))
            scores = _flash_scores(q, k, attn_mask, is_causal, scale)
            out, lse = _flash_forward_np(scores._data, v._data, half)
            out = ops.cast(Tensor._make(out, dt.float32), half)
            ctx.save_for_backward(query, key, value, out)
            ctx.scores, ctx.lse = scores, Tensor._make(lse, dt.float32)
            ctx.is_causal, ctx.scale = is_causal, scale
            return out

        @staticmethod
        def backward(ctx, grad_out):
            query, key, value, out = ctx.saved_tensors
            q, k, v = (ops.cast(t, dt.float32) for t in (query, key, value))
            grads = _flash_backward(ctx.scores, ctx.lse, q, k, v, out, grad_out, ctx.scale,
                                    ctx.is_causal, query.dtype)
            return grads + (None, None, None)

    _FLASH_FUNCTION.append(_FlashReduced)
    return _FlashReduced


def _flash_reduced(query, key, value, attn_mask, is_causal: bool, scale: float) -> Tensor:
    """SDPA on bfloat16 / float16 inputs as PyTorch's CPU flash kernel
    computes it (``_flash_forward``; rounding every step to the input type
    instead, as the math path does, moves about a tenth of the outputs by
    an ulp), with its backward (``_flash_backward``) when run eagerly.  A
    traced call records the forward's primitives, and the autodiff pass
    differentiates them (float32-level differences from the kernel's
    gradients)."""
    if eager_direct(query) and (attn_mask is None or not attn_mask.requires_grad):
        return _flash_function().apply(query, key, value, attn_mask, is_causal, scale)
    q, k, v = (ops.cast(t, dt.float32) for t in (query, key, value))
    return _flash_forward(_flash_scores(q, k, attn_mask, is_causal, scale), v, query.dtype)[0]


# --- masks -----------------------------------------------------------------------------------

def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name: str, other_type, other_name: str, target_type,
                    check_other: bool = True):
    """A bool mask (True = masked) becomes a float one (``-inf`` where
    masked, 0 elsewhere) of ``target_type``; a float mask is returned as is."""
    if mask is None:
        return None
    if mask.dtype is not dt.bool_ and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", stacklevel=2)
    if mask.dtype is dt.bool_:
        zero = ops.zeros(tuple(mask.shape), dt.to_dtype(target_type), like=mask)
        mask = ops.where(mask, _NEG_INF, zero)
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """PyTorch's input-rank checks; returns whether the input is batched."""
    if query.ndim not in (2, 3):
        raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    d = query.ndim
    what = "batched (3-D)" if d == 3 else "unbatched (2-D)"
    if key.ndim != d or value.ndim != d:
        raise AssertionError(f"For {what} `query`, expected `key` and `value` to be {d}-D but "
                             f"found {key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != d - 1:
        raise AssertionError(f"For {what} `query`, expected `key_padding_mask` to be `None` or "
                             f"{d - 1}-D but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For {what} `query`, expected `attn_mask` to be `None`, 2-D "
                                 f"or 3-D but found {attn_mask.ndim}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if d == 2 and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                 f"{tuple(attn_mask.shape)}")
    return d == 3


# --- multi-head attention --------------------------------------------------------------------

def _in_projection_packed(q, k, v, w, b=None):
    """q, k, v projected by the rows of the packed ``[3E, E]`` weight; one
    matmul for self-attention (``q is k is v``), two for ``k is v``."""
    if q is k and k is v:
        return S.chunk(linear(q, w, b), 3, -1)
    E = q.shape[-1]
    w_q, w_kv = S.split(w, [E, 2 * E])
    b_q, b_kv = (None, None) if b is None else S.split(b, [E, 2 * E])
    if k is v:
        return (linear(q, w_q, b_q),) + tuple(S.chunk(linear(k, w_kv, b_kv), 2, -1))
    w_k, w_v = S.chunk(w_kv, 2)
    b_k, b_v = (None, None) if b is None else S.chunk(b_kv, 2)
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    Eq, Ek, Ev = q.shape[-1], k.shape[-1], v.shape[-1]
    for name, w, shape in (("query", w_q, (Eq, Eq)), ("key", w_k, (Eq, Ek)),
                           ("value", w_v, (Eq, Ev))):
        if tuple(w.shape) != shape:
            raise AssertionError(f"expecting {name} weights shape of {shape}, but got "
                                 f"{tuple(w.shape)}")
    for name, b in (("query", b_q), ("key", b_k), ("value", b_v)):
        if b is not None and tuple(b.shape) != (Eq,):
            raise AssertionError(f"expecting {name} bias shape of {(Eq,)}, but got "
                                 f"{tuple(b.shape)}")
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _check_attn_mask(attn_mask, tgt_len: int, src_len: int, bsz: int, num_heads: int):
    """The mask as ``[1 or bsz*heads, tgt, src]``, or PyTorch's error
    naming the given and the expected shape."""
    shape = tuple(attn_mask.shape)
    if attn_mask.ndim == 2:
        if shape != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {shape}, but should be "
                               f"{(tgt_len, src_len)}.")
        return S.unsqueeze(attn_mask, 0)
    if attn_mask.ndim == 3:
        if shape != (bsz * num_heads, tgt_len, src_len):
            raise RuntimeError(f"The shape of the 3D attn_mask is {shape}, but should be "
                               f"{(bsz * num_heads, tgt_len, src_len)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")


def _heads(x, length: int, bsz: int, num_heads: int, head_dim: int):
    """``[len, bsz, E]`` -> ``[bsz * heads, len, head_dim]``."""
    return S.transpose(S.reshape(x, (length, bsz * num_heads, head_dim)), 0, 1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v,
                                 add_zero_attn: bool, dropout_p: float, out_proj_weight,
                                 out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None,
                                 use_separate_proj_weight: bool = False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True,
                                 is_causal: bool = False):
    """PyTorch's ``F.multi_head_attention_forward`` (sequence-first inputs
    ``[L, N, E]`` or unbatched ``[L, E]``); returns ``(output, weights)``
    with ``weights`` None unless ``need_weights``."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = (S.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = S.unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        # The causal hint stands in for the mask: SDPA builds it itself.
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not "
                                 f"match value's {tuple(value.shape[:2])}")
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, "
                                 "k_proj_weight or v_proj_weight is None")
        b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else S.chunk(in_proj_bias, 3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight,
                                 v_proj_weight, b_q, b_k, b_v)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                                 f"{tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        attn_mask = _check_attn_mask(attn_mask, tgt_len, src_len, bsz, num_heads)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = S.cat([k, S.expand(bias_k, (1, bsz, embed_dim))])
        v = S.cat([v, S.expand(bias_v, (1, bsz, embed_dim))])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None
                             else "bias_v is set but bias_k is None")
    q = _heads(q, tgt_len, bsz, num_heads, head_dim)
    k = _heads(k, k.shape[0], bsz, num_heads, head_dim) if static_k is None else static_k
    v = _heads(v, v.shape[0], bsz, num_heads, head_dim) if static_v is None else static_v
    for name, s in (("static_k", static_k), ("static_v", static_v)):
        if s is not None and (s.shape[0] != bsz * num_heads or s.shape[2] != head_dim):
            raise AssertionError(f"expecting {name} of shape ({bsz * num_heads}, *, "
                                 f"{head_dim}), but got {tuple(s.shape)}")
    if add_zero_attn:
        zeros = ops.zeros((bsz * num_heads, 1, head_dim), k.dtype, like=k)
        k = S.cat([k, zeros], 1)
        v = S.cat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        for i, n in enumerate((bsz, src_len)):
            if key_padding_mask.shape[i] != n:
                raise AssertionError(f"Expected key_padded_mask.shape[{i}] to be {n}, but got "
                                     f"{key_padding_mask.shape[i]}")
        kpm = S.expand(S.reshape(key_padding_mask, (bsz, 1, 1, src_len)),
                       (bsz, num_heads, 1, src_len))
        kpm = S.reshape(kpm, (bsz * num_heads, 1, src_len))
        attn_mask = kpm if attn_mask is None else TF.add(attn_mask, kpm)
    if not training:
        dropout_p = 0.0
    if need_weights:
        q_scaled = TF.mul(q, math.sqrt(1.0 / float(head_dim)))
        if attn_mask is not None:
            weights = _masked_scores(attn_mask, q_scaled, S.transpose(k, -2, -1))
        else:
            weights = TF.matmul(q_scaled, S.transpose(k, -2, -1))
        weights = TF.softmax(weights, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = S.reshape(S.transpose(TF.matmul(weights, v), 0, 1), (tgt_len * bsz, embed_dim))
        out = linear(out, out_proj_weight, out_proj_bias)
        out = S.reshape(out, (tgt_len, bsz, out.shape[1]))
        weights = S.reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = TF.mean(weights, 1)
        if not is_batched:
            out, weights = S.squeeze(out, 1), S.squeeze(weights, 0)
        return out, weights
    if attn_mask is not None:
        attn_mask = (S.unsqueeze(attn_mask, 0) if attn_mask.shape[0] == 1
                     else S.reshape(attn_mask, (bsz, num_heads, -1, src_len)))
    q = S.reshape(q, (bsz, num_heads, tgt_len, head_dim))
    k = S.reshape(k, (bsz, num_heads, src_len, head_dim))
    v = S.reshape(v, (bsz, num_heads, src_len, head_dim))
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = S.reshape(S.permute(out, 2, 0, 1, 3), (bsz * tgt_len, embed_dim))
    # out_proj's width may differ from embed_dim (CLIP's attention pool)
    out = linear(out, out_proj_weight, out_proj_bias)
    out = S.reshape(out, (tgt_len, bsz, out.shape[1]))
    if not is_batched:
        out = S.squeeze(out, 1)
    return out, None
