"""Batch normalization in training mode: the primitives' composite (one
definition, traced and differentiated as primitives) and its eager NumPy
form for float32 / float64 (``BatchNormTrainEager``).

Invariant: the eager forward applies the primitives' impls in the
composite's order, and its backward computes the composite's VJPs in the
order the tape runs them (the same products, sums and accumulations), so
value, batch statistics and gradients are the composite's bits (but for
the sign of a zero mean-gradient, ``-sum(g)`` for ``sum(-g)``, and the
order of the input's gradient sum when the input has other consumers):
what the eager path saves is the thirty-odd binds, nodes and temporaries.
Double backward (``create_graph``) differentiates the composite.

With ``TRACEC_NATIVE_BATCH_NORM=1`` (``NATIVE_BATCH_NORM``), inputs of
``NATIVE_MIN`` elements and more (C-contiguous, rank >= 3) take the
backend's native kernels instead (``NATIVE``, registered by the
package; ``_native_forward`` / ``_native_backward``: three passes forward,
two backward, in place of the composite's dozen): values and gradients
within float rounding of the composite's, not its bits.
"""
from __future__ import annotations

import math
import os

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import fused_eager, graph, ops
from tracec.autograd import Function
from tracec.ops import elementwise as ew
from tracec.ops import reduce as red
from tracec.tensor import Tensor, weak_scalar


def normalize_prims(x: Tensor, axes: tuple, shape: tuple, eps: float, stats=None):
    """``((x - mean) * rsqrt(var + eps), mean, var)`` with the batch
    statistics over ``axes`` (biased variance) as primitives; ``shape`` is
    the per-channel broadcast shape.  ``stats``: a half dtype the mean and
    the inverse standard deviation are rounded to before normalizing (their
    gradients unrounded)."""
    mean = TF.mean(x, axes)
    d = TF.sub(x, ops.reshape(mean, shape))
    var = TF.mean(TF.mul(d, d), axes)
    invstd = TF.rsqrt(TF.add(var, eps))
    if stats is not None:
        d = TF.sub(x, ops.reshape(TF._rounded_to(mean, stats), shape))
        invstd = TF._rounded_to(invstd, stats)
    return TF.mul(d, ops.reshape(invstd, shape)), mean, var


def _affine_prims(y, weight, bias, shape):
    if weight is not None:
        y = TF.mul(y, ops.reshape(weight, shape))
    if bias is not None:
        y = TF.add(y, ops.reshape(bias, shape))
    return y


class BatchNormTrainEager(Function):
    """``normalize_prims`` then the affine ``* w + b`` in NumPy; returns the
    output (its node this Function's) and appends the batch mean and
    variance (NumPy, ``[C]``) to the list ``params[3]`` for the caller's
    running statistics (see ``apply_train``)."""

    node_name = "NativeBatchNormBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias, params):
        axes, shape, eps, stats = params
        xd = x._data
        d_ = x.dtype
        n = xd.size // xd.shape[1]
        count = weak_scalar(float(n), d_)
        ctx.native = kern = _native(xd)
        if kern is not None:
            return _native_forward(ctx, kern, x, weight, bias, params, count)
        with np.errstate(all="ignore"):
            mean = ew.div_p.impl(red.reduce_sum_p.impl(xd, axes=axes), count)
            dev = ew.sub_p.impl(xd, mean.reshape(shape))
            sq = ew.mul_p.impl(dev, dev)
            var = ew.div_p.impl(red.reduce_sum_p.impl(sq, axes=axes), count)
            rs = ew.rsqrt_p.impl(ew.add_p.impl(var, weak_scalar(eps, d_)))
            xhat = np.multiply(dev, rs.reshape(shape))
            y = xhat if weight is None else np.multiply(xhat, weight._data.reshape(shape),
                                                        out=sq)
            if bias is not None:
                np.add(y, bias._data.reshape(shape), out=y)
        stats.extend((mean, var))
        ctx.save_for_backward(x, weight)      # (as PyTorch's: saved-tensor hooks see them)
        ctx.bias = bias
        ctx.params = (axes, shape, eps, count)
        # what the composite's products keep: d and rsqrt (x - mean times
        # its rsqrt), the normalized value (its product with the weight)
        ctx.dev, ctx.rs = dev, rs
        ctx.xhat = xhat if weight is not None and ctx.needs_input_grad[1] else None
        return Tensor._make(y, d_)

    @staticmethod
    def backward(ctx, g):
        (x, weight), bias = ctx.saved_tensors, ctx.bias
        axes, shape, eps, count = ctx.params
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if graph.is_grad_enabled():
            # create_graph: the composite's gradient, itself differentiable
            from tracec.autograd import grad as _grad
            wrt = [t for t, nd in ((x, need_x), (weight, need_w), (bias, need_b)) if nd]
            with graph.enable_grad():
                y = _affine_prims(normalize_prims(x, axes, shape, eps)[0], weight, bias,
                                  shape)
            it = iter(_grad(y, wrt, g, create_graph=True, allow_unused=True))
            return tuple(next(it) if nd else None for nd in (need_x, need_w, need_b)) + (None,)
        gd, dev, rs = g._data, ctx.dev, ctx.rs
        d_ = x.dtype
        if ctx.native is not None:
            return _native_backward(ctx.native, gd, dev, rs, weight, bias, count, need_x,
                                    need_w, need_b, d_)

        def total(a):            # reduce_sum's impl over the batch and spatial axes
            return red.reduce_sum_p.impl(a, axes=axes)

        gx = gw = gb = None
        with np.errstate(all="ignore"):
            # y = xhat * w + b: add's and mul's VJPs
            if need_b:
                gb = Tensor._make(total(gd), bias.dtype)
            if need_w:
                gw = Tensor._make(total(np.multiply(gd, ctx.xhat)), weight.dtype)
            if need_x:
                gy0 = gd if weight is None else np.multiply(gd, weight._data.reshape(shape))
                # xhat = dev * rs: both operands' gradients
                acc = np.multiply(gy0, rs.reshape(shape))
                grs = total(np.multiply(gy0, dev))
                # rs = rsqrt(var + eps): g * (rs ** 3 * -0.5); var = sum(dev * dev) / n
                gs2 = np.true_divide(
                    np.multiply(grs, np.multiply(np.power(rs, weak_scalar(3.0, d_)),
                                                 weak_scalar(-0.5, d_))), count)
                c = np.multiply(np.broadcast_to(gs2.reshape(shape), gd.shape), dev)
                acc += c                  # the tape's order: the product's first
                acc += c                  # gradient, then dev * dev's two
                # dev = x - mean, mean = sum(x) / n
                gmean = np.true_divide(np.negative(total(acc)), count)
                acc += gmean.reshape(shape)
                gx = Tensor._make(acc, d_)
        return gx, gw, gb, None


# --- native backward -----------------------------------------------------------------

#: The native kernels (``fused_eager.NativeSet``; the package registers the
#: backend's ``batch_norm_kernels.load``).
NATIVE = fused_eager.NativeSet("batch norm", 1 << 20)
#: Elements from which the backward runs natively: below, NumPy's passes
#: cost little, and the composite's bits are kept.
NATIVE_MIN = 1 << 14


#: Whether batch norm itself takes the native kernels (group norm does
#: whenever ``NATIVE`` answers): off unless ``TRACEC_NATIVE_BATCH_NORM=1``.
#: Its values are within rounding of the composite's, more accurate
#: against float64 than the composite's float32 passes, but not its bits,
#: and eager batch norm has kept the composite's bits so that eager and
#: compiled steps agree: with the kernels, PointNet's three Adam steps
#: (tests/programs/models4/pointnet.py) end 5e-4 apart eager against
#: compiled (a max over 2,500 points picks other points), over its 1e-4
#: check.  (MobileNetV2's step: batch norm 41 -> 14 ms with them.)
NATIVE_BATCH_NORM = os.environ.get("TRACEC_NATIVE_BATCH_NORM", "0") == "1"


def _native(x: np.ndarray):
    """The native kernels for a forward (and its backward) at ``x``, or None."""
    if (not NATIVE_BATCH_NORM or type(x) is not np.ndarray or x.ndim < 3 or x.size < NATIVE_MIN
            or x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous):
        return None
    return NATIVE.get(x.size)


def _native_forward(ctx, kern, x, weight, bias, params, count):
    """``BatchNormTrainEager.forward`` by the native kernels: the channel
    sums (the mean), ``dev = x - mean`` with its sum of squares (the biased
    variance), then ``y = dev * (rs * w) + b`` in one pass.  Values within
    float rounding of the NumPy path's (``(dev * rs) * w``), not its bits."""
    axes, shape, eps, stats = params
    xd = x._data
    n, c = xd.shape[:2]
    x3 = xd.reshape(n, c, -1)
    with np.errstate(all="ignore"):
        mean = ew.div_p.impl(kern.sums(x3, x3)[0], count)
        dev, ssq = kern.center(x3, mean)
        var = ew.div_p.impl(ssq, count)
        rs = ew.rsqrt_p.impl(ew.add_p.impl(var, weak_scalar(eps, x.dtype)))
        coef = np.zeros((3, c), xd.dtype)
        coef[0] = rs if weight is None else rs * weight._data
        if bias is not None:
            coef[2] = bias._data
        y = kern.apply(dev, dev, coef).reshape(xd.shape)
    stats.extend((mean, var))
    ctx.save_for_backward(x, weight)
    ctx.bias = bias
    ctx.params = (axes, shape, eps, count)
    ctx.dev, ctx.rs, ctx.xhat = dev.reshape(xd.shape), rs, None
    return Tensor._make(y, x.dtype)


def _native_backward(kern, gd, dev, rs, weight, bias, count, need_x, need_w, need_b, dtype):
    """The composite's gradients from three channel sums and one pass
    (``batch_norm_kernels``): ``gx = g * w * rs + dev * 2 * gs2 + gmean``
    with ``gs2 = w * sum(g * dev) * rs ** 3 * -0.5 / n`` (the variance's
    gradient) and ``gmean = -(w * rs * sum(g) + 2 * gs2 * sum(dev)) / n``
    (the mean's); ``gw = rs * sum(g * dev)``, ``gb = sum(g)``.  Values
    within float rounding of the NumPy path's, not its bits."""
    n, c = dev.shape[:2]
    g3 = np.ascontiguousarray(gd).reshape(n, c, -1)
    d3 = dev.reshape(n, c, -1)
    d_ = dev.dtype.type
    with np.errstate(all="ignore"):
        sg, sgd, sd = kern.sums(g3, d3)
        w = weight._data if weight is not None else d_(1)
        gs2 = w * sgd * (rs * rs * rs * d_(-0.5)) / count
        a = w * rs
        coef = np.empty((3, c), dev.dtype)
        coef[0] = a
        coef[1] = gs2 + gs2
        coef[2] = -(a * sg + (gs2 + gs2) * sd) / count
        gx = Tensor._make(kern.apply(g3, d3, coef).reshape(dev.shape), dtype) if need_x \
            else None
        gw = Tensor._make(rs * sgd, weight.dtype) if need_w else None
        gb = Tensor._make(sg, bias.dtype) if need_b else None
    return gx, gw, gb, None


def apply_train(x: Tensor, weight, bias, axes: tuple, shape: tuple, eps: float):
    """``(y, mean, var)`` of the training-mode normalization and affine,
    eagerly: ``mean`` and ``var`` tensors without gradient."""
    stats: list = []
    y = BatchNormTrainEager.apply(x, weight, bias, (axes, shape, eps, stats))
    mean, var = (Tensor._make(np.asarray(v), x.dtype) for v in stats)
    return y, mean, var


def eager_ok(x: Tensor, weight, bias, eps) -> bool:
    """May ``apply_train`` run (the caller checked ``eager_direct(x)``)?"""
    from tracec.tensor import eager_direct
    return (x.dtype in (dt.float32, dt.float64) and isinstance(eps, (int, float))
            and all(p is None or (isinstance(p, Tensor) and p.dtype is x.dtype
                                  and tuple(p.shape) == (x.shape[1],) and eager_direct(p))
                    for p in (weight, bias)))


# --- group norm ------------------------------------------------------------------------

def group_norm_prims(x: Tensor, groups: int, weight, bias, eps: float) -> Tensor:
    """Group normalization as primitives (``F.group_norm``'s composite):
    the statistics over each image's group of ``C / groups`` channels and
    the spatial axes, then the per-channel affine."""
    n, c = x.shape[:2]
    # the group size from the shape, not numel // n, so an empty batch (n == 0) works
    g = ops.reshape(x, (n, groups, (c // groups) * math.prod(x.shape[2:])))
    mean = TF.mean(g, 2, keepdim=True)
    d = TF.sub(g, mean)
    var = TF.mean(TF.mul(d, d), 2, keepdim=True)
    y = ops.reshape(TF.mul(d, TF.rsqrt(TF.add(var, eps))), tuple(x.shape))
    return _affine_prims(y, weight, bias, (1, c) + (1,) * (x.ndim - 2))


def group_norm_kernels(x: Tensor, groups: int, weight, bias, eps):
    """The native kernels for ``GroupNormEager`` on these operands, or None
    (the caller runs the composite): float32/float64 C-contiguous ``x`` of
    rank >= 3 and ``NATIVE_MIN`` elements, weight and bias of its dtype."""
    from tracec.tensor import eager_direct
    xd = x._data
    if (x.dtype not in (dt.float32, dt.float64) or type(xd) is not np.ndarray or xd.ndim < 3
            or xd.size < NATIVE_MIN or not xd.flags.c_contiguous
            or not isinstance(eps, (int, float)) or not eager_direct(x)
            or not all(p is None or (isinstance(p, Tensor) and p.dtype is x.dtype and p.ndim == 1
                                     and eager_direct(p) and type(p._data) is np.ndarray)
                       for p in (weight, bias))):
        return None
    return NATIVE.get(xd.size)


class GroupNormEager(Function):
    """``group_norm_prims`` by the native batch-norm kernels: ``x`` viewed
    as ``[1, N * groups, C / groups * L]`` is a batch norm's input with one
    "channel" per image and group (the statistics), and as ``[1, N * C,
    L]`` one whose per-"channel" coefficients are per image and channel
    (the affine, the gradient's pass).  Values and gradients within float
    rounding of the composite's; double backward differentiates it."""

    node_name = "NativeGroupNormBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias, params):
        groups, eps, kern = params
        xd = x._data
        n, c = xd.shape[:2]
        cg, length = c // groups, xd.size // (n * c)
        count = weak_scalar(float(cg * length), x.dtype)
        xg = xd.reshape(1, n * groups, cg * length)
        with np.errstate(all="ignore"):
            mean = ew.div_p.impl(kern.sums(xg, xg)[0], count)
            dev, ssq = kern.center(xg, mean)
            rs = ew.rsqrt_p.impl(ew.add_p.impl(ew.div_p.impl(ssq, count),
                                               weak_scalar(eps, x.dtype)))
            rsc = np.repeat(rs.reshape(n, groups), cg, axis=1)            # [n, c]
            coef = np.zeros((3, n * c), xd.dtype)
            coef[0] = (rsc if weight is None else rsc * weight._data).reshape(-1)
            if bias is not None:
                coef[2] = np.tile(bias._data, n)
            dc = dev.reshape(1, n * c, length)
            y = kern.apply(dc, dc, coef).reshape(xd.shape)
        ctx.save_for_backward(x, weight)      # (as PyTorch's: saved-tensor hooks see them)
        ctx.bias = bias
        ctx.params, ctx.dev, ctx.rs, ctx.count = params, dc, rs, count
        return Tensor._make(y, x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x, weight), bias = ctx.saved_tensors, ctx.bias
        groups, eps, kern = ctx.params
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if graph.is_grad_enabled():
            from tracec.autograd import grad as _grad
            wrt = [t for t, nd in ((x, need_x), (weight, need_w), (bias, need_b)) if nd]
            with graph.enable_grad():
                y = group_norm_prims(x, groups, weight, bias, eps)
            it = iter(_grad(y, wrt, g, create_graph=True, allow_unused=True))
            return tuple(next(it) if nd else None for nd in (need_x, need_w, need_b)) + (None,)
        dc, count = ctx.dev, ctx.count
        n, c = x.shape[:2]
        cg = c // groups
        g3 = np.ascontiguousarray(g._data).reshape(dc.shape)
        gx = gw = gb = None
        with np.errstate(all="ignore"):
            sg, sgd, sd = (s.reshape(n, c) for s in kern.sums(g3, dc))     # per image, channel
            rs = ctx.rs.reshape(n, groups)
            if need_x:
                w = weight._data if weight is not None else np.ones(c, g3.dtype)

                def per_group(a):
                    return np.add.reduce(a.reshape(n, groups, cg), axis=2)
                gs2 = per_group(w * sgd) * (rs * rs * rs * g3.dtype.type(-0.5)) / count
                gmean = -(rs * per_group(w * sg) + (gs2 + gs2) * per_group(sd)) / count
                coef = np.empty((3, n, c), g3.dtype)
                coef[0] = w * np.repeat(rs, cg, axis=1)
                coef[1] = np.repeat(gs2 + gs2, cg, axis=1)
                coef[2] = np.repeat(gmean, cg, axis=1)
                gx = Tensor._make(kern.apply(g3, dc, coef.reshape(3, n * c))
                                  .reshape(x.shape), x.dtype)
            if need_w:
                gw = Tensor._make(np.add.reduce(np.repeat(rs, cg, axis=1) * sgd, axis=0),
                                  weight.dtype)
            if need_b:
                gb = Tensor._make(np.add.reduce(sg, axis=0), bias.dtype)
        return gx, gw, gb, None
