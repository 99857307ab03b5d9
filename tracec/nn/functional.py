"""``tracec.nn.functional`` (``F``): PyTorch's functional API.

Everything here is a composite over the primitives and the tensor
functions (``tracec.functions``, ``tracec.shape_ops``), so autograd and
the tracer see only primitives.  Convolution and pooling live in
``_conv``, the losses in ``_loss``; both are re-exported here.

Invariant: random ops (dropout) draw from tracec's generator, whose state
is a tensor, and running statistics are updated in place under ``no_grad``.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph, ops
from tracec import shape_ops as S
from tracec.nn._conv import (adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d,  # noqa: F401
                             avg_pool2d, conv1d, conv2d, conv_transpose1d, conv_transpose2d,
                             max_pool1d, max_pool2d, pad)
from tracec.nn._loss import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: F401
                             cross_entropy, huber_loss, kl_div, l1_loss, mse_loss, nll_loss,
                             smooth_l1_loss)
from tracec.nn._resample import (interpolate, pixel_shuffle, pixel_unshuffle,  # noqa: F401
                                 upsample, upsample_bilinear, upsample_nearest)
from tracec.tensor import Tensor

one_hot = S.one_hot
flatten = S.flatten
unflatten = S.unflatten


def _tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


# --- linear ------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    _tensor(input, "linear")
    y = TF.matmul(input, S.t(weight) if weight.ndim == 2 else weight)
    if bias is not None:
        y = TF.add(y, bias)
    return y


def bilinear(input1, input2, weight, bias=None):
    # y[n, o] = sum_ij x1[n, i] W[o, i, j] x2[n, j]
    t = TF.matmul(S.unsqueeze(S.unsqueeze(input1, -2), -3), weight)      # [..., O, 1, J]
    y = S.squeeze(TF.matmul(t, S.unsqueeze(S.unsqueeze(input2, -2), -1)), (-1, -2))
    return y if bias is None else TF.add(y, bias)


# --- activations ----------------------------------------------------------------------------

def _apply(fn, x: Tensor, inplace: bool) -> Tensor:
    """``fn(x)``, or written into ``x`` for ``inplace=True``.  In place, the
    math reads a copy when autograd records it, so the values its backward
    saved are not the ones overwritten (PyTorch's in-place activations
    backpropagate the same way)."""
    if not inplace:
        return fn(x)
    src = x
    if graph.is_grad_enabled() and x.requires_grad:
        # A copy whose node saves nothing.  (S.clone would do, but the cast
        # primitive saves its operand, which copy_ then bumps.)
        src = ops.add(x, 0.0)
    return x.copy_(fn(src))


def relu(input, inplace: bool = False):
    return _apply(TF.relu, _tensor(input, "relu"), inplace)


def relu_(input):
    return relu(input, inplace=True)


def relu6(input, inplace: bool = False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    return _apply(lambda x: TF.clamp(x, min_val, max_val), input, inplace)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    return _apply(lambda x: ops.where(ops.gt(x, 0), x, TF.mul(x, negative_slope)), input,
                  inplace)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    return _apply(lambda x: ops.where(ops.gt(x, 0), x, TF.mul(TF.expm1(x), alpha)), input,
                  inplace)


def gelu(input, approximate: str = "none"):
    return TF.gelu(_tensor(input, "gelu"), approximate=approximate)


def silu(input, inplace: bool = False):
    return _apply(TF.silu, _tensor(input, "silu"), inplace)


def mish(input, inplace: bool = False):
    return _apply(lambda x: TF.mul(x, TF.tanh(softplus(x))), input, inplace)


def sigmoid(input):
    return TF.sigmoid(input)


def tanh(input):
    return TF.tanh(input)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    z = TF.mul(input, beta) if beta != 1 else input
    # relu(z) + log1p(exp(-|z|)): finite for every z.
    soft = TF.add(TF.relu(z), TF.log1p(TF.exp(TF.neg(TF.abs(z)))))
    if beta != 1:
        soft = TF.div(soft, beta)
    return ops.where(ops.gt(z, threshold), input, soft)


def logsigmoid(input):
    return TF.neg(softplus(TF.neg(input)))


def _softmax_dim(ndim: int, name: str) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim, "softmax")
    return TF.softmax(input, dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim, "softmin")
    return TF.softmax(TF.neg(input), dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim, "log_softmax")
    return TF.log_softmax(input, dim, dtype=dtype)


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    if p == 2:
        norm = TF.sqrt(TF.sum(TF.mul(input, input), dim, keepdim=True))
    elif p == 1:
        norm = TF.sum(TF.abs(input), dim, keepdim=True)
    elif p == math.inf:
        norm = TF.amax(TF.abs(input), dim, keepdim=True)
    else:
        norm = TF.pow(TF.sum(TF.pow(TF.abs(input), p), dim, keepdim=True), 1.0 / p)
    return TF.div(input, TF.clamp(norm, min=eps))


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    w12 = TF.sum(TF.mul(x1, x2), dim)
    n1 = TF.sum(TF.mul(x1, x1), dim)
    n2 = TF.sum(TF.mul(x2, x2), dim)
    return TF.div(w12, TF.sqrt(TF.clamp(TF.mul(n1, n2), min=eps * eps)))


# --- dropout ---------------------------------------------------------------------------------

def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape, p: float, x: Tensor) -> Tensor:
    """Scale 1/(1-p) where kept (probability 1-p), else 0; drawn with
    ``tracec.rand`` so the generator state is a tensor."""
    work = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    u = creation.rand(tuple(shape), dtype=work)
    return ops.mul(ops.cast(ops.lt(u, 1.0 - p), work), 1.0 / (1.0 - p))


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _tensor(input, "dropout")
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _apply(lambda x: TF.mul(x, 0.0), input, inplace)
    mask = _keep_mask(input.shape, p, input)
    return _apply(lambda x: TF.mul(x, mask), input, inplace)


def _feature_dropout(input, p, training, inplace, batched):
    """Zero whole channels: one draw per (sample, channel); ``batched``
    says whether dimension 0 is the batch (else the channels)."""
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _apply(lambda x: TF.mul(x, 0.0), input, inplace)
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    mask = _keep_mask(shape, p, input)
    return _apply(lambda x: TF.mul(x, mask), input, inplace)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. "
            "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
            "spatial dimension, a channel dimension, and an optional batch dimension "
            "(i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    # PyTorch 2.13's behaviour, warnings included: other ranks are deprecated
    # but run (dimension 0 as batch, 1 as channel), and a 3-D input is taken
    # as (N, C, L), not as an unbatched (C, H, W).
    _check_p(p)
    nd = input.ndim
    if nd not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {nd}-D input to dropout2d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that dropout2d "
            "exists to provide channel-wise dropout on inputs with 2 spatial dimensions, "
            "a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2)
    if nd == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
    if nd < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _feature_dropout(input, p, training, inplace, True)


# --- normalization ---------------------------------------------------------------------------

def _channel_shape(x: Tensor) -> tuple:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Batch normalization over every axis but 1.  In training mode the batch
    statistics normalize and the running ones (if given) are updated in
    place: ``r = (1 - momentum) * r + momentum * stat``, with the unbiased
    variance, as in PyTorch."""
    x = _tensor(input, "batch_norm")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {x.ndim}D input)")
    shape = _channel_shape(x)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        n = x.numel() // x.shape[1] if x.shape[1] else 0
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)}")
        mean = TF.mean(x, axes)
        d = TF.sub(x, ops.reshape(mean, shape))
        var = TF.mean(TF.mul(d, d), axes)
        with graph.no_grad():
            # momentum may be a 0-d tensor (BatchNorm's cumulative average).
            if running_mean is not None:
                running_mean.copy_(TF.add(TF.mul(running_mean, 1.0 - momentum),
                                          TF.mul(mean.detach(), momentum)))
            if running_var is not None:
                running_var.copy_(TF.add(TF.mul(running_var, 1.0 - momentum),
                                         TF.mul(var.detach(), momentum * (n / (n - 1)))))
        y = TF.mul(d, ops.reshape(TF.rsqrt(TF.add(var, eps)), shape))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                               "evaluation mode")
        y = TF.mul(TF.sub(x, ops.reshape(running_mean, shape)),
                   ops.reshape(TF.rsqrt(TF.add(running_var, eps)), shape))
    if weight is not None:
        y = TF.mul(y, ops.reshape(weight, shape))
    if bias is not None:
        y = TF.add(y, ops.reshape(bias, shape))
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    if running_mean is not None or not use_input_stats:
        raise NotImplementedError("instance_norm with running statistics is not supported")
    x = _tensor(input, "instance_norm")
    axes = tuple(range(2, x.ndim))
    mean = TF.mean(x, axes, keepdim=True)
    d = TF.sub(x, mean)
    y = TF.mul(d, TF.rsqrt(TF.add(TF.mean(TF.mul(d, d), axes, keepdim=True), eps)))
    shape = _channel_shape(x)
    if weight is not None:
        y = TF.mul(y, ops.reshape(weight, shape))
    if bias is not None:
        y = TF.add(y, ops.reshape(bias, shape))
    return y


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    x = _tensor(input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != ns:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*, {', '.join(map(str, ns))}], but got input of size"
                           f"{list(x.shape)}")
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = TF.mean(x, axes, keepdim=True)
    d = TF.sub(x, mean)
    var = TF.mean(TF.mul(d, d), axes, keepdim=True)
    y = TF.mul(d, TF.rsqrt(TF.add(var, eps)))
    if weight is not None:
        y = TF.mul(y, weight)
    if bias is not None:
        y = TF.add(y, bias)
    return y


def rms_norm(input, normalized_shape, weight=None, eps=None):
    x = _tensor(input, "rms_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    y = TF.mul(x, TF.rsqrt(TF.add(TF.mean(TF.mul(x, x), axes, keepdim=True), eps)))
    return y if weight is None else TF.mul(y, weight)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    x = _tensor(input, "group_norm")
    n, c = x.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(x.shape)} and "
                           f"num_groups={num_groups}")
    g = ops.reshape(x, (n, num_groups, x.numel() // (n * num_groups)))
    mean = TF.mean(g, 2, keepdim=True)
    d = TF.sub(g, mean)
    var = TF.mean(TF.mul(d, d), 2, keepdim=True)
    y = ops.reshape(TF.mul(d, TF.rsqrt(TF.add(var, eps))), tuple(x.shape))
    shape = _channel_shape(x)
    if weight is not None:
        y = TF.mul(y, ops.reshape(weight, shape))
    if bias is not None:
        y = TF.add(y, ops.reshape(bias, shape))
    return y


# --- embedding --------------------------------------------------------------------------------

def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` picked by ``input`` (``take`` on axis 0); the
    ``padding_idx`` row gets no gradient, as in PyTorch."""
    if not isinstance(input, Tensor) or input.dtype.category != 1:
        got = input.dtype if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {got} instead "
                           "(while checking arguments for embedding)")
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...) is not supported by tracec")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not supported")
    idx = input if input.dtype is dt.int64 else ops.cast(input, dt.int64)
    out = ops.take(weight, idx, 0)
    if padding_idx is not None:
        pi = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        keep = ops.reshape(ops.ne(idx, pi), tuple(idx.shape) + (1,))
        out = ops.where(keep, out, out.detach())
    return out


# --- attention ---------------------------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False):
    L, Sk = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = TF.mul(TF.matmul(query, S.transpose(key, -2, -1)), scale)
    if is_causal:
        rows = ops.reshape(ops.iota((L,), dt.int64, 0, like=query), (L, 1))
        cols = ops.reshape(ops.iota((Sk,), dt.int64, 0, like=query), (1, Sk))
        scores = ops.where(ops.ge(rows, cols), scores, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype is dt.bool_:
            scores = ops.where(attn_mask, scores, -math.inf)
        else:
            scores = TF.add(scores, attn_mask)
    attn = TF.softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return TF.matmul(attn, value)
