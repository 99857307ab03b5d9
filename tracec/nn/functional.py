"""``tracec.nn.functional`` (``F``): PyTorch's functional API.

Everything here is a composite over the primitives and the tensor
functions (``tracec.functions``, ``tracec.shape_ops``), so autograd and
the tracer see only primitives.  Convolution and pooling live in
``_conv``, the losses in ``_loss``, linear maps and dropout in ``_basic``,
attention in ``_attention``; all are re-exported here.

Invariant: random ops (dropout) draw from tracec's generator, whose state
is a tensor, and running statistics are updated in place under ``no_grad``.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph, graph_hooks, ops
from tracec import shape_ops as S
from tracec.wrapper_dispatch import dispatching_operand
from tracec.nn._basic import (_apply, _elu, _hardtanh, _logsigmoid, _tensor, bilinear,  # noqa: F401
                              dropout, dropout1d, dropout2d, half_once, linear)
from tracec.nn._activation import *  # noqa: F401,F403
from tracec.nn._attention import (_canonical_mask, _mha_shape_check,  # noqa: F401
                                  _none_or_dtype, multi_head_attention_forward,
                                  scaled_dot_product_attention)
from tracec.nn._conv import *  # noqa: F401,F403
from tracec.nn._pool_extra import *  # noqa: F401,F403
from tracec.nn._fractional import *  # noqa: F401,F403
from tracec.nn._loss import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: F401
                             cross_entropy, huber_loss, kl_div, l1_loss, mse_loss, nll_loss,
                             smooth_l1_loss)
from tracec.nn._loss_extra import *  # noqa: F401,F403
from tracec.nn._resample import *  # noqa: F401,F403
from tracec.nn._distance import *  # noqa: F401,F403
from tracec.nn._embedding_bag import embedding_bag  # noqa: F401
from tracec.nn._ctc import ctc_loss  # noqa: F401
from tracec.nn._linear_cross_entropy import linear_cross_entropy  # noqa: F401
from tracec.nn._sampling import *  # noqa: F401,F403
from tracec.tensor import RECORDERS, Tensor, eager_direct
from tracec.fused_eager import fused as _fused, nary as _fused_nary
from tracec.nn import _batch_norm_eager as _bn

def _half_fused(key, composite, node_name):
    """``fused_eager.fused``, with half-precision inputs computed in float32
    and rounded once (``half_once``)."""
    return half_once(composite, node_name, _fused(key, composite, node_name))


one_hot = S.one_hot
flatten = S.flatten
unflatten = S.unflatten


# --- activations ----------------------------------------------------------------------------

def relu(input, inplace: bool = False):
    w = dispatching_operand(input)
    if w is not None:
        return w.__tracec_dispatch__(relu, (input, inplace), {})
    return _apply(TF.relu, _tensor(input, "relu"), inplace)


def relu_(input):
    return relu(input, inplace=True)


def relu6(input, inplace: bool = False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _apply(lambda x: _hardtanh(x, min_val, max_val), input, inplace, "HardtanhBackward0")


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    def f(x):
        return ops.where(ops.gt(x, 0), x, TF.mul(x, negative_slope))
    return _apply(_half_fused(("leaky_relu", negative_slope), f, "LeakyReluBackward0"),
                  input, inplace, "LeakyReluBackward1", saves_result=True)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    return _apply(_half_fused(("elu", alpha), lambda x: _elu(x, alpha), "EluBackward0"),
                  input, inplace, "EluBackward1", saves_result=True)


def gelu(input, approximate: str = "none"):
    w = dispatching_operand(input)
    if w is not None:
        return w.__tracec_dispatch__(gelu, (input,), {"approximate": approximate})
    return TF.gelu(_tensor(input, "gelu"), approximate=approximate)


def silu(input, inplace: bool = False):
    w = dispatching_operand(input)
    if w is not None:
        return w.__tracec_dispatch__(silu, (input, inplace), {})
    return _apply(TF.silu, _tensor(input, "silu"), inplace)


def mish(input, inplace: bool = False):
    return _apply(_half_fused(("mish",), _mish, "MishBackward0"), input, inplace)


def _mish(x):
    return TF.mul(x, TF.tanh(_softplus(x, 1.0, 20.0)))


def sigmoid(input):
    return TF.sigmoid(input)


def tanh(input):
    return TF.tanh(input)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """PyTorch's formula: ``x`` where ``beta * x > threshold``, else
    ``log1p(exp(beta * x)) / beta`` (its gradient is sigmoid(beta * x): 0.5
    at 0); exp sees only arguments up to the threshold."""
    return _half_fused(("softplus", beta, threshold),
                  lambda x: _softplus(x, beta, threshold), "SoftplusBackward0")(input)


def _softplus(input, beta, threshold):
    z = TF.mul(input, beta) if beta != 1 else input
    above = ops.gt(z, threshold)
    soft = TF.log1p(TF.exp(ops.where(above, 0.0, z)))
    if beta != 1:
        soft = TF.div(soft, beta)
    return ops.where(above, input, soft)


def logsigmoid(input):
    return _half_fused(("logsigmoid",), _logsigmoid, "LogSigmoidBackward0")(
        _tensor(input, "log_sigmoid"))


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
    """PyTorch's ``input / input.norm(p, dim, keepdim=True).clamp_min(eps)``:
    a zero row gets a zero gradient (the norm's gradient at 0 is 0), not NaN."""
    from tracec import linalg
    norm = linalg.vector_norm(_tensor(input, "normalize"), p, dim, keepdim=True)
    return TF.div(input, TF.clamp(norm, min=eps))


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """PyTorch's ``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps), dim)``, the
    clamp applied without a gradient of its own (in place under no_grad in
    PyTorch): the gradient flows through each norm as if unclamped."""
    from tracec import linalg

    def unit(x):
        n = linalg.vector_norm(x, 2, dim, keepdim=True)
        clamped = TF.add(n, ops.stop_gradient(TF.sub(TF.clamp(n, min=eps), n)))
        return TF.div(x, clamped)
    x1, x2 = _tensor(x1, "cosine_similarity"), _tensor(x2, "cosine_similarity")
    if tuple(x1.shape) != tuple(x2.shape):
        # the norms are over the broadcast operands, as in PyTorch; shapes
        # that do not broadcast fail with its elementwise sentence ("The size
        # of tensor a (3) must match ..."), not broadcast_tensors' own
        from tracec.ops.core import broadcast_shapes
        from tracec.shape_extra import broadcast_tensors
        broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
        x1, x2 = broadcast_tensors(x1, x2)
    return TF.sum(TF.mul(unit(x1), unit(x2)), dim)


# --- normalization ---------------------------------------------------------------------------

def _channel_shape(x: Tensor) -> tuple:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _in_float32(fn):
    """PyTorch's normalization kernels take a bfloat16 / float16 input
    through float32 (statistics, running-stat updates, affine) and round the
    output once to the input's dtype, whatever the parameters' dtype: a
    bf16 activation with float32 weights (CPU autocast) stays bf16."""
    @functools.wraps(fn)
    def wrapper(input, *args, **kwargs):
        if isinstance(input, Tensor) and input.dtype in (dt.bfloat16, dt.float16):
            return ops.cast(fn(ops.cast(input, dt.float32), *args, **kwargs), input.dtype)
        return fn(input, *args, **kwargs)
    return wrapper


def _check_norm_dtypes(name: str, kernel: str, x, params) -> None:
    """PyTorch's CPU dtype checks of batch_norm / layer_norm: an integer
    input has no kernel (batch_norm's refusal comes first; layer_norm's only
    without parameters); parameters of another dtype than the input are
    allowed only as float32 beside a bfloat16 / float16 input ("mixed
    type"), else refused, not promoted (a float64 batch into a float32
    BatchNorm2d fails there).  ``x`` is what ``_in_float32`` passes on: a
    half input arrives as float32, so half parameters beside a float32 ``x``
    are let through (as beside their own half input; PyTorch's refusal of
    bfloat16 parameters beside a float32 or float16 input is not made)."""
    params = [p for p in params if p is not None]
    if not (x.dtype.is_floating_point or x.dtype.is_complex) and (
            name == "batch_norm" or not params):
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{dt.scalar_type_name(x.dtype)}'")
    odd = [p for p in params if p.dtype is not x.dtype]
    if odd and not (x.dtype is dt.float32 and all(p.dtype in (dt.bfloat16, dt.float16)
                                                  for p in odd)):
        if any(p.dtype is not dt.float32 for p in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if x.dtype not in (dt.bfloat16, dt.float16):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Batch normalization over every axis but 1.  In training mode the batch
    statistics normalize and the running ones (if given) are updated in
    place: ``r = (1 - momentum) * r + momentum * stat``, with the unbiased
    variance, as in PyTorch.  A channels-last input gives a channels-last
    result.  A bfloat16 / float16 input is computed in float32 (``_in_float32``);
    in training without float32 parameters its batch mean and inverse
    standard deviation are rounded to its dtype first (PyTorch's kernel
    keeps them in the input's dtype)."""
    stats = _half_stats(input, training, (weight, bias, running_mean, running_var))
    return _in_float32(_batch_norm_kept)(input, running_mean, running_var, weight, bias,
                                         training, momentum, eps, stats)


def _half_stats(input, training, params):
    """The dtype PyTorch's CPU batch norm keeps a bfloat16 / float16 input's
    batch statistics in: the input's, unless a parameter or running
    statistic is float32 ("mixed type": float32 statistics); None when they
    are not rounded (float32 or float64 input, no batch statistics)."""
    half = input.dtype if isinstance(input, Tensor) and input.dtype in (dt.bfloat16,
                                                                          dt.float16) else None
    if not training or half is None or any(p is not None and p.dtype is not half
                                           for p in params):
        return None
    return half


def _batch_norm_kept(input, running_mean, running_var, weight, bias, training, momentum, eps,
                     stats):
    from tracec.tensor_meta import keep_memory_format
    y = _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps,
                    stats)
    return keep_memory_format(y, input) if isinstance(input, Tensor) and y is not input else y


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps,
                stats=None):
    x = _tensor(input, "batch_norm")
    if x.ndim < 2:         # PyTorch's: an empty input passes through, else no channel dim 1
        if x.numel() == 0:
            return S.clone(x)
        raise IndexError("tuple index out of range" if x.ndim == 0 else
                         "Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    c = x.shape[1]
    if type(c) is int:      # (a symbolic channel count is checked by the ops)
        for name, t in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
            if t is not None and t.numel() != c:
                raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    _check_norm_dtypes("batch_norm", "batch_norm", x,
                       (weight, bias, running_mean, running_var))
    shape = _channel_shape(x)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        n = x.numel() // x.shape[1] if x.shape[1] else 0
        if n == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {x.shape}")
        if n == 0:        # as PyTorch: an empty batch passes through, statistics untouched
            return _affine_channels(TF.mul(x, 1.0), weight, bias, shape)
        # (PyTorch's one native op saves for backward after it has updated
        # the running statistics: saved-tensor hooks see that order here,
        # so a checkpoint's recomputation, stopping at its last pack, makes
        # the update as PyTorch's does)
        with graph_hooks.packs_deferred():
            if stats is not None:
                y, mean, var = _bn.normalize_prims(x, axes, shape, eps, stats)
            elif eager_direct(x) and _bn.eager_ok(x, weight, bias, eps):
                # the same value in NumPy, the closed-form gradient (and its
                # affine inside): _batch_norm_eager
                y, mean, var = _bn.apply_train(x, weight, bias, axes, shape, eps)
                weight = bias = None
            else:
                y, mean, var = _bn.normalize_prims(x, axes, shape, eps)
            with graph.no_grad():
                # momentum may be a 0-d tensor (BatchNorm's cumulative average).
                if running_mean is not None:
                    running_mean.copy_(TF.add(TF.mul(running_mean, 1.0 - momentum),
                                              TF.mul(mean.detach(), momentum)))
                if running_var is not None:
                    # n / (n - 1) as two operations, not a Python float: n may be
                    # a symbolic size (a batch dimension), which must not
                    # specialize the trace.
                    unbiased = TF.div(TF.mul(var.detach(), n), n - 1)
                    running_var.copy_(TF.add(TF.mul(running_var, 1.0 - momentum),
                                             TF.mul(unbiased, momentum)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                               "evaluation mode")
        y = TF.mul(TF.sub(x, ops.reshape(running_mean, shape)),
                   ops.reshape(TF.rsqrt(TF.add(running_var, eps)), shape))
    return _affine_channels(y, weight, bias, shape)


def _affine_channels(y, weight, bias, shape):
    if weight is not None:
        y = TF.mul(y, ops.reshape(weight, shape))
    if bias is not None:
        y = TF.add(y, ops.reshape(bias, shape))
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each (sample, channel) over its spatial axes.  With
    ``use_input_stats`` and running buffers, these are updated in place
    with the batch average of the per-instance mean and unbiased variance
    (PyTorch's batch norm over the (1, N*C, ...) view); without
    ``use_input_stats`` the running statistics normalize.  Half inputs as
    ``batch_norm``'s."""
    stats = _half_stats(input, use_input_stats, (weight, bias, running_mean, running_var))
    return _in_float32(_instance_norm)(input, running_mean, running_var, weight, bias,
                                       use_input_stats, momentum, eps, stats)


def _instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum,
                   eps, stats):
    x = _tensor(input, "instance_norm")
    if x.ndim < 3:
        raise ValueError(f"instance_norm: expected at least 3D input (got {x.ndim}D input)")
    x = TF._contiguous_input(x)     # (PyTorch's reads input.contiguous(): a row-major result)
    shape = _channel_shape(x)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when "
                               "use_input_stats is false")
        y = TF.mul(TF.sub(x, ops.reshape(running_mean, shape)),
                   ops.reshape(TF.rsqrt(TF.add(running_var, eps)), shape))
    else:
        axes = tuple(range(2, x.ndim))
        n = x.numel() // (x.shape[0] * x.shape[1]) if x.shape[0] * x.shape[1] else 0
        if n <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {x.shape}")
        mean = TF.mean(x, axes, keepdim=True)
        d = TF.sub(x, mean)
        var = TF.mean(TF.mul(d, d), axes, keepdim=True)
        with graph.no_grad():
            if running_mean is not None:
                m = TF.mean(ops.reshape(mean.detach(), tuple(x.shape[:2])), 0)
                running_mean.copy_(TF.add(TF.mul(running_mean, 1.0 - momentum),
                                          TF.mul(m, momentum)))
            if running_var is not None:
                v = TF.mean(ops.reshape(var.detach(), tuple(x.shape[:2])), 0)
                running_var.copy_(TF.add(TF.mul(running_var, 1.0 - momentum),
                                         TF.mul(v, momentum * (n / (n - 1)))))
        invstd = TF.rsqrt(TF.add(var, eps))
        if stats is not None:
            d, invstd = TF.sub(x, TF._rounded_to(mean, stats)), TF._rounded_to(invstd, stats)
        y = TF.mul(d, invstd)
    if weight is not None:
        y = TF.mul(y, ops.reshape(weight, shape))
    if bias is not None:
        y = TF.add(y, ops.reshape(bias, shape))
    return y


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0):
    """``x / (k + alpha * mean of x**2 over ``size`` neighbouring channels)
    ** beta`` (PyTorch's padding and averaging)."""
    x = _tensor(input, "local_response_norm")
    nd = x.ndim
    if nd < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          "
                         f"input (got {nd} dimensions)")
    if x.numel() == 0:
        return x
    div = TF.mul(x, x)
    if nd == 3:
        div = S.unsqueeze(div, 1)
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = S.squeeze(avg_pool2d(div, (size, 1), stride=1), 1)
    else:
        sizes = tuple(x.shape)
        div = ops.reshape(div, (sizes[0], 1, sizes[1], sizes[2], x.numel() // (
            sizes[0] * sizes[1] * sizes[2]) if sizes[2] else 0))
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = ops.reshape(avg_pool3d(div, (size, 1, 1), stride=1), sizes)
    div = TF.pow(TF.add(TF.mul(div, alpha), k), beta)
    return TF.div(x, div)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Layer normalization over the trailing ``normalized_shape``; a
    bfloat16 / float16 input is computed in float32 and rounded once, its
    gradient as PyTorch's backward makes it (``_half_layer_norm_vjp``)."""
    w = dispatching_operand(input)
    if w is not None:
        return w.__tracec_dispatch__(layer_norm, (input, normalized_shape, weight, bias, eps), {})
    if isinstance(input, Tensor) and input.dtype in (dt.bfloat16, dt.float16) and \
            input.requires_grad and graph.is_grad_enabled():
        y = _layer_norm(ops.stop_gradient(input), normalized_shape, weight, bias, eps)
        k = 1 if isinstance(normalized_shape, int) else len(tuple(normalized_shape))
        stats = None if any(p is not None and p.dtype is not input.dtype
                            for p in (weight, bias)) else input.dtype
        return _half_layer_norm_vjp(y, TF._contiguous_input(input), k, weight, eps, stats)
    return _layer_norm(input, normalized_shape, weight, bias, eps)


@_in_float32
def _layer_norm(input, normalized_shape, weight, bias, eps):
    x = _tensor(input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != ns:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*, {', '.join(map(str, ns))}], but got input of size"
                           f"{list(x.shape)}")
    _check_norm_dtypes("layer_norm", "LayerNormKernelImpl", x, (weight, bias))
    x = TF._contiguous_input(x)
    if k == 1:
        # Over one dimension (LayerNorm(d_model)), large: native kernels.
        wb = tuple(t for t in (weight, bias) if t is not None)
        y = _fused_nary((x, *wb), ((-1, ns[0]),) + ((ns[0],),) * len(wb),
                        ("layer_norm", eps, weight is not None, bias is not None),
                        _layer_norm_composite(1, eps, weight is not None, bias is not None),
                        "NativeLayerNormBackward0")
        if y is not None:
            return y
    return _layer_norm_math(x, k, weight, bias, eps)


def _half_layer_norm_vjp(y, x, k, weight, eps, stats):
    """``y``, the bfloat16 / float16 layer_norm of ``x`` (computed with ``x``
    detached; the parameters' gradients its own), with the input gradient
    PyTorch's CPU backward gives: ``rstd * (u - mean(u) - xhat * mean(u *
    xhat))``, ``u = g * weight``, in float32, rounded once, from the saved
    mean and rstd (kept in ``stats``, the input's dtype, unless a parameter
    is float32).  The added zero term is the linear map whose transpose is
    that formula."""
    axes = tuple(range(x.ndim - k, x.ndim))
    f = ops.cast(x, dt.float32)
    fs = ops.stop_gradient(f)
    mean = TF.mean(fs, axes, keepdim=True)
    c = TF.sub(fs, mean)
    rstd = TF.rsqrt(TF.add(TF.mean(TF.mul(c, c), axes, keepdim=True), eps))
    if stats is not None:
        mean, rstd = (ops.cast(ops.cast(t, stats), dt.float32) for t in (mean, rstd))
    xhat = TF.mul(TF.sub(fs, mean), rstd)
    v = TF.mul(TF.sub(f, fs), rstd)               # 0, with x's gradient
    pv = TF.sub(TF.sub(v, TF.mean(v, axes, keepdim=True)),
                TF.mul(xhat, TF.mean(TF.mul(v, xhat), axes, keepdim=True)))
    if weight is not None:
        pv = TF.mul(pv, ops.stop_gradient(ops.cast(weight, dt.float32)))
    return ops.cast(TF.add(ops.cast(y, dt.float32), pv), y.dtype)


def _layer_norm_math(x, k, weight, bias, eps):
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


def _layer_norm_composite(k, eps, has_weight, has_bias):
    """``_layer_norm_math`` of ``(x, [weight], [bias])``, the form the
    native kernels compile."""
    def f(x, *wb):
        return _layer_norm_math(x, k, wb[0] if has_weight else None,
                                wb[-1] if has_bias else None, eps)
    return f


@_in_float32
def rms_norm(input, normalized_shape, weight=None, eps=None):
    x = TF._contiguous_input(_tensor(input, "rms_norm"))
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    y = TF.mul(x, TF.rsqrt(TF.add(TF.mean(TF.mul(x, x), axes, keepdim=True), eps)))
    return y if weight is None else TF.mul(y, weight)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Group normalization; a bfloat16 / float16 input is computed in
    float32 and rounded once, its input gradient as PyTorch's backward makes
    it: layer_norm's over each group (``_half_layer_norm_vjp``)."""
    if isinstance(input, Tensor) and input.dtype in (dt.bfloat16, dt.float16) and \
            input.requires_grad and graph.is_grad_enabled() and input.ndim >= 2:
        y = _group_norm(ops.stop_gradient(input), num_groups, weight, bias, eps)
        stats = None if any(p is not None and p.dtype is not input.dtype
                            for p in (weight, bias)) else input.dtype
        n, c = input.shape[:2]
        shape = (n, num_groups, -1)
        gamma = None
        if weight is not None:      # per channel, over each group's (C / G) * HW elements
            sp = int(np.prod(input.shape[2:]))
            gamma = S.reshape(S.expand(S.reshape(weight, (num_groups, c // num_groups, 1)),
                                       num_groups, c // num_groups, sp), (num_groups, -1))
        out = _half_layer_norm_vjp(S.reshape(y, shape), S.reshape(input, shape), 1, gamma, eps,
                                   stats)
        return S.reshape(out, tuple(input.shape))
    return _group_norm(input, num_groups, weight, bias, eps)


@_in_float32
def _group_norm(input, num_groups, weight, bias, eps):
    x = _tensor(input, "group_norm")
    if x.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {x.ndim}")
    n, c = x.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(x.shape)} and "
                           f"num_groups={num_groups}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            # (PyTorch's bias message shows the weight's shape, when there is one)
            shown = weight if weight is not None else t
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of "
                               f"channels in input, but got {what} of shape "
                               f"{list(shown.shape)} and input of shape {list(x.shape)}")
    kern = _bn.group_norm_kernels(x, num_groups, weight, bias, eps)
    if kern is not None:
        return _bn.GroupNormEager.apply(x, weight, bias, (num_groups, eps, kern))
    return _bn.group_norm_prims(x, num_groups, weight, bias, eps)


# --- embedding --------------------------------------------------------------------------------

def grad_scaled_by_freq(rows, idx, num_embeddings):
    """``rows`` (``weight`` rows picked by ``idx``, ``[*idx.shape, D]``)
    unchanged, with the gradient each row sends back divided by how often
    its index occurs in ``idx`` (``scale_grad_by_freq``): ``r + (r - r') * s``
    with ``r'`` detached is exactly ``r`` forward and has gradient ``s``."""
    flat = S.reshape(idx, (-1,))
    ones = ops.full(tuple(flat.shape), 1.0, rows.dtype, like=rows)
    counts = ops.index_add(ops.full((num_embeddings,), 0.0, rows.dtype, like=rows), flat, ones, 0)
    scale = ops.reshape(ops.div(1.0, ops.take(counts, idx, 0)), tuple(idx.shape) + (1,))
    fixed = rows.detach()
    return ops.add(fixed, ops.mul(ops.sub(rows, fixed), scale))


def _mark_sparse_grad(weight, sparse) -> None:
    """Marks a weight whose gradient PyTorch makes sparse (``sparse=True``):
    tracec's is dense, and ``optim.SparseAdam`` accepts it by this mark."""
    if sparse and not getattr(weight, "_tracec_sparse_grad", False):
        weight._tracec_sparse_grad = True


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` picked by ``input`` (``take`` on axis 0); the
    ``padding_idx`` row gets no gradient, as in PyTorch."""
    if not isinstance(input, Tensor) or input.dtype.category != 1:
        got = input.type() if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {got} instead "
                           "(while checking arguments for embedding)")
    # sparse=True: the gradient is dense (API.md: a sparse tensor may be dense),
    # with the same values as PyTorch's sparse one; optim.SparseAdam takes it.
    _mark_sparse_grad(weight, sparse)
    idx = input if input.dtype is dt.int64 else ops.cast(input, dt.int64)
    if RECORDERS and idx.numel():
        # recorded, so that a compiled call checks its own ids (its take
        # would count a negative one from the end)
        from tracec.ops.elementwise import INDEX_ERROR
        ok = ops.logical_and(ops.ge(idx, 0), ops.lt(idx, weight.shape[0]))
        idx = ops.check(idx, ok, INDEX_ERROR + "index out of range in self")
    a = idx._data
    if type(a) is np.ndarray and a.size and (a.min() < 0 or a.max() >= weight.shape[0]):
        # (a negative index is no row from the end here, as it is for take)
        raise IndexError("index out of range in self")
    if max_norm is not None:    # rows renormalized in place first, as in PyTorch
        from tracec.nn._embedding_bag import embedding_renorm_
        embedding_renorm_(weight, idx, max_norm, norm_type)
    out = ops.take(weight, idx, 0)
    if sparse:
        from tracec.graph import mark_sparse_grad_node
        mark_sparse_grad_node(out)
    if scale_grad_by_freq:
        if sparse and weight.requires_grad:    # PyTorch refuses it (in its backward)
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with "
                               "sparse gradients")
        out = grad_scaled_by_freq(out, idx, weight.shape[0])
    if padding_idx is not None:
        pi = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        keep = ops.reshape(ops.ne(idx, pi), tuple(idx.shape) + (1,))
        out = ops.where(keep, out, out.detach())
    return out


from tracec.nn import _grad_fn_names  # noqa: E402
_grad_fn_names.install(globals())  # PyTorch's grad_fn names for composed functionals
