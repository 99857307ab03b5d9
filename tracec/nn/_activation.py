"""The rest of PyTorch's functional activations (``threshold``, ``prelu``,
``selu``, ``celu``, ``glu``, the hard and soft shrinks, ``hardswish``,
``hardsigmoid``, ``rrelu``, ``gumbel_softmax``), the in-place ``*_`` forms,
and the self-normalizing dropouts (``alpha_dropout``,
``feature_alpha_dropout``) plus ``dropout3d``.  ``functional`` re-exports
them.

Invariants: each is a composite of primitives whose ``where`` branches are
chosen so the gradient at the kinks is PyTorch's (e.g. ``hardswish`` at
-3 and 3); random draws come from tracec's generator.
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec.ops.elementwise import quiet_fp
from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import fused_eager
from tracec import graph, ops, torch_rng
from tracec import shape_ops as S
from tracec.autograd import Function
from tracec.ops.elementwise import _where_impl
from tracec.nn._basic import (_apply, _check_p, _elu, _feature_dropout, _hardtanh, _tensor,
                              half_once)
from tracec.tensor import Tensor, eager_direct, weak_scalar

__all__ = ["threshold", "threshold_", "prelu", "selu", "selu_", "celu", "celu_", "glu",
           "hardshrink", "softshrink", "softsign", "tanhshrink", "hardswish", "hardsigmoid",
           "rrelu", "rrelu_", "elu_", "leaky_relu_", "hardtanh_", "gumbel_softmax",
           "alpha_dropout", "feature_alpha_dropout", "dropout3d"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def threshold(input, threshold: float, value: float, inplace: bool = False):
    """``x <= threshold ? value : x``, as PyTorch: NaN goes through, with its gradient."""
    return _apply(lambda x: TF.where(ops.le(x, threshold), value, x),
                  _tensor(input, "threshold"), inplace, "ThresholdBackward1")


def threshold_(input, threshold_: float, value: float):
    return threshold(input, threshold_, value, inplace=True)


def prelu(input, weight):
    """``max(0, x) + weight * min(0, x)``, one slope per channel (dim 1) or
    one shared slope.  PyTorch's checks, in its order: one dtype; more than
    one slope needs an input of 1 or more dims whose channel count (dim 1;
    1 for a 1-D input) is the slope count; the slopes are 0-d or 1-D."""
    x = _tensor(input, "prelu")
    if isinstance(weight, Tensor) and weight.dtype is not x.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {dt.scalar_type_name(x.dtype)} "
                           f"and {dt.scalar_type_name(weight.dtype)}")
    n = weight.numel()
    if n != 1:
        if x.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        ch = x.shape[1] if x.ndim >= 2 else 1
        if n != ch:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {ch}.")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    if n != 1:
        w = ops.reshape(weight, (n,) + (1,) * (x.ndim - 2))
    else:
        w = ops.reshape(weight, ())
    return TF.where(ops.gt(x, 0), x, TF.mul(w, x))


def selu(input, inplace: bool = False):
    def f(x):
        return _elu(x, _SELU_SCALE * _SELU_ALPHA, _SELU_SCALE)
    return _apply(half_once(f, "EluBackward0", f), _tensor(input, "selu"), inplace,
                  "EluBackward1", saves_result=True)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    def f(x):
        return _elu(x, alpha, 1.0, 1 / alpha)
    # (a half input through float32, rounded once, as PyTorch's elu kernel:
    # each step rounded had 5-8% of values one unit off)
    return _apply(half_once(f, "CeluBackward0", f), _tensor(input, "celu"), inplace,
                  "CeluBackward1", saves_result=True)


def celu_(input, alpha: float = 1.0):
    return celu(input, alpha, inplace=True)


def elu_(input, alpha: float = 1.0):
    return _apply(lambda x: _elu(x, alpha), _tensor(input, "elu_"), True, "EluBackward1",
                  saves_result=True)


def leaky_relu_(input, negative_slope: float = 0.01):
    return _apply(lambda x: TF.where(ops.gt(x, 0), x, TF.mul(x, negative_slope)),
                  _tensor(input, "leaky_relu_"), True, "LeakyReluBackward1", saves_result=True)


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    return _apply(lambda x: _hardtanh(x, min_val, max_val), _tensor(input, "hardtanh_"), True,
                  "HardtanhBackward0")


def glu(input, dim: int = -1):
    """``a * sigmoid(b)`` for the two halves ``a, b`` of ``dim``."""
    x = _tensor(input, "glu")
    if x.dtype in (dt.bfloat16, dt.float16):     # through float32, rounded once (half_once)
        return half_once(lambda t: glu(t, dim), "GluBackward0", None)(x)
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % x.ndim
    if x.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size "
                           f"{x.shape[d]}")
    a, b = S.chunk(x, 2, d)
    return TF.mul(a, TF.sigmoid(b))


def hardshrink(input, lambd: float = 0.5):
    x = _tensor(input, "hardshrink")
    # PyTorch: (-lambd <= x <= lambd) ? 0 : x, so NaN goes through
    return TF.where(ops.logical_and(ops.ge(x, -lambd), ops.le(x, lambd)), 0.0, x)


def softshrink(input, lambd: float = 0.5):
    x = _tensor(input, "softshrink")
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    # PyTorch: x * 0 inside [-lambd, lambd] (a zero with x's sign, no
    # gradient); outside, NaN included, x -+ lambd with the gradient
    inside = ops.logical_and(ops.ge(x, -lambd), ops.le(x, lambd))
    return TF.where(inside, TF.mul(ops.stop_gradient(x), 0.0),
                    TF.where(ops.gt(x, lambd), TF.sub(x, lambd), TF.add(x, lambd)))


def softsign(input):
    return TF.div(input, TF.add(TF.abs(input), 1.0))


def tanhshrink(input):
    return TF.sub(input, TF.tanh(input))


def hardswish(input, inplace: bool = False):
    """PyTorch's ``x * min(max(x + 3, 0), 6) / 6`` (-0.0 below -3, NaN at
    -inf), with its backward's branches: 0 for x <= -3, x/3 + 1/2 strictly
    inside (-3, 3), 1 from 3 on and at NaN."""
    def f(x):
        y = fused_eager.unary(x, ("hardswish",), _hardswish_prims, "HardswishBackward0")
        if y is not None:
            return y
        if x.dtype in (dt.float32, dt.float64) and x.ndim and eager_direct(x):
            return _HardswishEager.apply(x)
        return _hardswish_prims(x)
    return _apply(half_once(_hardswish_prims, "HardswishBackward0", f),
                  _tensor(input, "hardswish"), inplace)


def _hardswish_prims(x):
    low = ops.le(x, -3.0)
    mid = ops.logical_and(ops.gt(x, -3.0), ops.lt(x, 3.0))
    below = TF.div(ops.stop_gradient(TF.mul(x, 0.0)), 6.0)
    xm = TF.where(mid, x, 0.0)   # the inner branch's gradient stays finite elsewhere
    inner = TF.div(TF.mul(xm, TF.add(xm, 3.0)), 6.0)
    above = TF.div(TF.mul(x, 6.0), 6.0)
    return TF.where(low, below, TF.where(mid, inner, above))


class _HardswishEager(Function):
    """``_hardswish_prims`` in NumPy: the primitives' impls in its order
    (the same value), and its VJPs in the order the tape runs them (the
    same gradient bits), without its ~25 binds and nodes a call (MobileNetV3
    applies it after most convolutions).  Double backward differentiates
    the primitives."""

    node_name = "HardswishBackward0"

    @staticmethod
    def forward(ctx, x):
        a = x._data
        d = x.dtype
        three, six, zero = (weak_scalar(v, d) for v in (3.0, 6.0, 0.0))
        with quiet_fp():
            low = np.less_equal(a, -three)
            mid = np.logical_and(np.greater(a, -three), np.less(a, three))
            below = np.true_divide(np.multiply(a, zero), six)
            xm = _where_impl(mid, a, zero)
            inner = np.true_divide(np.multiply(xm, np.add(xm, three)), six)
            above = np.true_divide(np.multiply(a, six), six)
            y = _where_impl(low, below, _where_impl(mid, inner, above))
        ctx.x, ctx.low, ctx.mid, ctx.xm = x, low, mid, xm
        return Tensor._make(y, d)

    @staticmethod
    def backward(ctx, g):
        x = ctx.x
        if graph.is_grad_enabled():
            from tracec.autograd import grad as _grad
            with graph.enable_grad():
                y = _hardswish_prims(x)
            return _grad(y, (x,), g, create_graph=True)[0]
        gd, mid, xm = g._data, ctx.mid, ctx.xm
        d = x.dtype
        three, six, zero = (weak_scalar(v, d) for v in (3.0, 6.0, 0.0))
        with quiet_fp():
            g2 = _where_impl(ctx.low, zero, gd)           # where(low, below, .)
            g_inner = _where_impl(mid, g2, zero)          # where(mid, inner, above)
            g_above = _where_impl(mid, zero, g2)
            g_prod = np.true_divide(g_inner, six)         # inner = xm * (xm + 3) / 6
            g_xm = np.multiply(g_prod, np.add(xm, three))
            g_xm += np.multiply(g_prod, xm)
            gx = np.multiply(np.true_divide(g_above, six), six)   # above = x * 6 / 6
            gx += _where_impl(mid, g_xm, zero)            # xm = where(mid, x, 0)
        return Tensor._make(gx, d)


def hardsigmoid(input, inplace: bool = False):
    def f(x):
        y = fused_eager.unary(x, ("hardsigmoid",), _hardsigmoid_prims, "HardsigmoidBackward0")
        if y is not None:
            return y
        if x.dtype in (dt.float32, dt.float64) and x.ndim and eager_direct(x):
            return _HardsigmoidEager.apply(x)
        return _hardsigmoid_prims(x)
    return _apply(half_once(_hardsigmoid_prims, "HardsigmoidBackward0", f),
                  _tensor(input, "hardsigmoid"), inplace)


def _hardsigmoid_prims(x):
    # Slope 1/6 strictly inside (-3, 3), 0 elsewhere (PyTorch's backward).
    inside = ops.logical_and(ops.gt(x, -3.0), ops.lt(x, 3.0))
    # outside: 0 or 1, and NaN as itself (PyTorch's value; no gradient there)
    edge = TF.where(ops.ne(x, x), ops.stop_gradient(x), ops.cast(ops.ge(x, 3.0), x.dtype))
    return TF.where(inside, TF.add(TF.div(x, 6.0), 0.5), edge)


class _HardsigmoidEager(Function):
    """``_hardsigmoid_prims`` in NumPy (the primitives' impls in its order:
    the same value) with its gradient ``where(inside, g, 0) / 6``, the
    only path the tape's VJPs give (the same bits), for its 11 binds a call
    (MobileNetV3's squeeze-excitation gates).  Double backward
    differentiates the primitives."""

    node_name = "HardsigmoidBackward0"

    @staticmethod
    def forward(ctx, x):
        a = x._data
        d = x.dtype
        three, six, half = (weak_scalar(v, d) for v in (3.0, 6.0, 0.5))
        with quiet_fp():
            inside = np.logical_and(np.greater(a, -three), np.less(a, three))
            edge = _where_impl(np.not_equal(a, a), a,
                               np.greater_equal(a, three).astype(a.dtype))
            y = _where_impl(inside, np.add(np.true_divide(a, six), half), edge)
        ctx.x, ctx.inside = x, inside
        return Tensor._make(y, d)

    @staticmethod
    def backward(ctx, g):
        x = ctx.x
        if graph.is_grad_enabled():
            from tracec.autograd import grad as _grad
            with graph.enable_grad():
                y = _hardsigmoid_prims(x)
            return _grad(y, (x,), g, create_graph=True)[0]
        d = x.dtype
        with quiet_fp():
            gx = np.true_divide(_where_impl(ctx.inside, g._data, weak_scalar(0.0, d)),
                                weak_scalar(6.0, d))
        return Tensor._make(gx, d)


def _rrelu_named(y):
    """rrelu's result as PyTorch names its node (RreluWithNoiseBackward0
    out of place; the in-place name is ``_apply``'s)."""
    node = getattr(y, "_node", None)
    if node is not None and getattr(node, "_name", None) is None:
        TF._named(y, "RreluWithNoiseBackward0")
    return y


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per
    element in training, and is (lower + upper) / 2 otherwise."""
    x = _tensor(input, "rrelu")
    if not training:
        slope = (lower + upper) / 2
        # x <= 0 takes the slope (0 included), as PyTorch's leaky_relu / rrelu
        return _rrelu_named(_apply(lambda v: TF.where(ops.gt(v, 0), v, TF.mul(v, slope)), x,
                                   inplace, "RreluWithNoiseBackward1", saves_result=True))
    mt = creation.default_generator.eager_mt()
    if mt is not None and type(x._data) is np.ndarray:
        # PyTorch's draws: one float64 uniform in [lower, upper) per element
        # <= 0 of the contiguous input (row-major), none for the others
        # (lower and upper first in the opmath type: float32 for float32)
        neg = np.asarray(x._data) <= 0
        op = np.float32 if x.dtype.itemsize <= 4 else np.float64
        slopes = np.ones(neg.shape, op)
        slopes[neg] = torch_rng.uniform(mt, int(neg.sum()), np.float64, float(op(lower)),
                                        float(op(upper)), fused=False)
        a = creation.drawn(slopes, tuple(x.shape), x.dtype)
    else:
        u = creation.rand(tuple(x.shape), dtype=x.dtype)
        a = TF.add(TF.mul(u, upper - lower), lower)
    return _rrelu_named(_apply(lambda v: TF.where(ops.gt(v, 0), v, TF.mul(v, a)), x, inplace,
                               "RreluWithNoiseBackward1", saves_result=True))


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False):
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1):
    """``softmax((logits + g) / tau)`` with Gumbel(0, 1) noise ``g``; with
    ``hard`` the one-hot of the argmax, carrying the soft sample's gradient
    (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    x = _tensor(logits, "gumbel_softmax")
    # PyTorch's noise, -log(Exp(1)): eagerly its stream (exponential_)
    with graph.no_grad():
        gumbels = TF.neg(TF.log(creation.empty(tuple(x.shape), dtype=x.dtype).exponential_()))
    y_soft = TF.softmax(TF.div(TF.add(x, gumbels), tau), dim)
    if not hard:
        return y_soft
    d = dim % x.ndim
    idx = ops.argmax(y_soft, d)
    pos = ops.iota(tuple(x.shape), dt.int64, d, like=x)
    y_hard = ops.cast(ops.eq(pos, ops.reshape(idx, tuple(1 if i == d else s for i, s in
                                                         enumerate(x.shape)))), x.dtype)
    return TF.add(TF.sub(y_hard, y_soft.detach()), y_soft)


# --- self-normalizing dropout -------------------------------------------------------------

_ALPHA_PRIME = 1.7580993408473766  # SELU's -scale * alpha, negated


def _alpha_dropout(x: Tensor, p: float, training: bool, inplace: bool, feature: bool):
    _check_p(p)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return _apply(lambda v: TF.mul(v, 0.0), x, inplace)
    shape = tuple(x.shape)
    if feature:
        if x.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        shape = shape[:2] + (1,) * (x.ndim - 2)
    mt = creation.default_generator.eager_mt()
    if mt is not None and all(isinstance(k, int) for k in shape):
        # PyTorch's noise: empty_like(x) (x's memory order) or, for the
        # feature variant, empty(shape), .bernoulli_(1 - p): float64 uniforms
        def draw(n):
            return torch_rng.bernoulli_scalar(mt, n, 1.0 - p)
        hit = draw(int(np.prod(shape))) if feature else creation.memory_order_draw(x, draw)
        keep = creation.drawn(hit.astype(np.float32), shape, x.dtype)
    else:
        keep = ops.cast(ops.lt(creation.rand(shape, dtype=x.dtype), 1.0 - p), x.dtype)
    # PyTorch's affine correction (zero mean, unit variance for SELU
    # activations), in its rounding order: y = x * (a * keep) + b.
    a = 1.0 / ((_ALPHA_PRIME ** 2 * p + 1) * (1 - p)) ** 0.5
    b = TF.add(TF.mul(TF.sub(keep, 1.0), _ALPHA_PRIME * a), _ALPHA_PRIME * a * p)
    noise = TF.mul(keep, a)
    return _apply(lambda v: TF.add(TF.mul(v, noise), b), x, inplace)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    return _alpha_dropout(_tensor(input, "alpha_dropout"), p, training, inplace, False)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False,
                          inplace: bool = False):
    return _alpha_dropout(_tensor(input, "feature_alpha_dropout"), p, training, inplace, True)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of a (N, C, D, H, W) or unbatched (C, D, H, W) input."""
    _check_p(p)
    nd = _tensor(input, "dropout3d").ndim
    if nd not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {nd}-D input to dropout3d, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout3d exists to provide "
            "channel-wise dropout on inputs with 3 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 4D or 5D inputs).", stacklevel=2)
    if nd < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _feature_dropout(input, p, training, inplace, nd != 4)
