"""PyTorch's ATen-level normalization, dropout and convolution entry points
that code calls directly (decompositions, fused-module rewrites, weight
norm copied from PyTorch's sources): ``torch.native_layer_norm``,
``native_batch_norm``, ``native_group_norm``, ``native_dropout``,
``convolution`` and ``norm_except_dim``.

Each returns what ``F``'s function returns, plus the statistics PyTorch's
kernel saves for its backward (mean and reciprocal standard deviation, or
dropout's keep mask), which are not differentiable, as in PyTorch.  The
normalized output is ``F``'s own (one definition of the math); the
statistics are computed from the detached input, in float32 for half
precision (PyTorch's accumulation type) and returned in the input's dtype."""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec.autograd import Function, no_grad
from tracec.nn import functional as F
from tracec.nn._basic import _keep_mask

__all__ = ["native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
           "convolution", "norm_except_dim"]


def _mean_rstd(x, axes, eps):
    """Mean and 1/sqrt(biased var + eps) of ``x`` over ``axes`` (kept)."""
    with no_grad():
        work = x.detach()
        if work.dtype in (dt.float16, dt.bfloat16):
            work = work.float()
        mean = work.mean(axes, keepdim=True)
        rstd = (work.var(axes, unbiased=False, keepdim=True) + eps).rsqrt()
        return mean.to(x.dtype), rstd.to(x.dtype)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """``(out, mean, rstd)``; ``mean`` and ``rstd`` have the input's leading
    dims and size 1 in the normalized ones."""
    out = F.layer_norm(input, list(normalized_shape), weight, bias, eps)
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    return (out, *_mean_rstd(input, axes, eps))


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``(out, save_mean, save_invstd)``: the batch's per-channel mean and
    inverse std when training (the running statistics updated in place,
    as ``F.batch_norm`` does), empty tensors in evaluation."""
    if not training and (running_mean is None or running_var is None):
        # (PyTorch 2.13's CPU kernel crashes the process here)
        raise RuntimeError("native_batch_norm: running_mean and running_var must be defined "
                           "in evaluation mode")
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        empty = creation.empty(0, dtype=input.dtype)
        return out, empty, creation.empty(0, dtype=input.dtype)
    axes = (0,) + tuple(range(2, input.ndim))
    mean, rstd = _mean_rstd(input, axes, eps)
    return out, mean.reshape(-1), rstd.reshape(-1)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """``(out, mean, rstd)`` with ``mean`` and ``rstd`` of shape ``(N, group)``."""
    out = F.group_norm(input, group, weight, bias, eps)
    mean, rstd = _mean_rstd(input.reshape(N, group, -1), (2,), eps)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


class _DropoutMaskGrad(Function):
    """``x * scale`` whose gradient is ``g * (scale != 0)``, unscaled:
    PyTorch's ``native_dropout`` backward for ``train=None``."""

    node_name = "NativeDropoutBackward0"

    @staticmethod
    def forward(ctx, x, scale):
        ctx.keep = scale != 0
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.keep.to(g.dtype), None


def native_dropout(input, p, train):
    """``(out, mask)``: ``mask`` is True where an element was kept.  Draws
    as ``F.dropout`` does (the same generator calls as PyTorch's, also for
    ``p == 0`` and ``p == 1``).  ``train=None`` drops as training does but,
    as in PyTorch, its gradient is the mask alone, not scaled by 1/(1-p)."""
    if train is False:
        return input * 1, creation.ones(tuple(input.shape), dtype=dt.bool_)
    scale = _keep_mask(tuple(input.shape), p, input)
    out = _DropoutMaskGrad.apply(input, scale) if train is None else input * scale
    return out, (scale != 0)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """``torch.convolution``: ``F.conv{1,2,3}d`` or ``F.conv_transpose{1,2,3}d``
    by the weight's rank and ``transposed``."""
    nd = weight.ndim - 2
    if nd not in (1, 2, 3):
        raise RuntimeError(f"Expected 3D, 4D or 5D weight for convolution, but got weight of "
                           f"size {list(weight.shape)}")
    if transposed:
        fn = getattr(F, f"conv_transpose{nd}d")
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{nd}d")(input, weight, bias, stride, padding, dilation, groups)


def norm_except_dim(v, pow=2, dim=0):  # noqa: A002 - PyTorch's name
    """The ``pow``-norm of ``v`` over every dim but ``dim``, kept as size-1
    dims (``dim=-1``: over all of ``v``, a 0-d result), as weight norm uses."""
    if dim == -1:
        return v.norm(pow)
    dims = tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    return v.norm(pow, dim=dims, keepdim=True)
