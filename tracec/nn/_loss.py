"""Loss functions (``tracec.nn.functional``'s losses), PyTorch's formulas
written over the primitives.

Invariant: ``reduction`` is one of 'none' | 'mean' | 'sum' (the legacy
``size_average`` / ``reduce`` flags map onto it as in PyTorch); class-index
targets are integer tensors, probability targets float tensors of the
input's shape.  Ignored targets contribute neither loss nor weight.
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import ops
from tracec.math_extra import xlogy
from tracec.nn._cascade_sum import cascade_sum, exact_value
from tracec.graph import edge_of, is_grad_enabled as graph_enabled
from tracec.node_views import TorchName
from tracec.tensor import RECORDERS, Tensor

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss",
           "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "kl_div"]


def _legacy_reduction(size_average, reduce) -> str:
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{ret}' instead.", stacklevel=3)
    return ret


def _reduction(reduction, size_average=None, reduce=None) -> str:
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return TF.mean(loss)
    if reduction == "sum":
        return TF.sum(loss)
    return loss


def _check_tensor(x, name, arg):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _pointwise(name, fn):
    def loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
        _check_tensor(input, name, "input")
        _check_tensor(target, name, "target")
        if tuple(target.shape) != tuple(input.shape):
            warnings.warn(f"Using a target size ({target.shape}) that is different to "
                          f"the input size ({input.shape}). This will likely lead to "
                          "incorrect results due to broadcasting. Please ensure they have the "
                          "same size.", stacklevel=TF.user_stacklevel())  # past tracec's wrappers
        reduction = _reduction(reduction, size_average, reduce)
        out = fn(input, target)
        if weight is None:
            return _reduce(out, reduction)
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        out = TF.mul(out, weight)
        if reduction == "mean":
            return TF.div(TF.sum(out), TF.sum(weight))
        return _reduce(out, reduction)
    loss.__name__ = name
    return loss


mse_loss = _pointwise("mse_loss", lambda x, t: TF.square(TF.sub(x, t)))
l1_loss = _pointwise("l1_loss", lambda x, t: TF.abs(TF.sub(x, t)))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
                   beta: float = 1.0):
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = TF.abs(TF.sub(input, target))
    if beta == 0:
        return _reduce(d, reduction)
    loss = TF.where(TF.lt(d, beta), TF.div(TF.mul(TF.mul(d, d), 0.5), beta),
                    TF.sub(d, 0.5 * beta))
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta: float = 1.0, weight=None):
    reduction = _reduction(reduction)
    d = TF.abs(TF.sub(input, target))
    loss = TF.where(TF.lt(d, delta), TF.mul(TF.mul(d, d), 0.5),
                    TF.mul(TF.sub(d, 0.5 * delta), delta))
    if weight is not None:
        loss = TF.mul(loss, weight)
    return _reduce(loss, reduction)


# --- classification ------------------------------------------------------------------------

def _class_targets(input: Tensor, target: Tensor, name: str):
    """(input as [N, C, ...], target as [N, ...], unbatched?) with checks.

    In PyTorch's order and words: nll_loss_nd's batch-size check, then the
    shape checks of the kernel the input's rank picks (nll_loss for 1-D /
    2-D input, nll_loss2d for 4-D, a target of the input's spatial size for
    3-D and 5-D or more), then the kernel's target dtype check; a shape
    slip is named before a float target is.  A 1-D input takes a 0-D target
    or a 1-D target of one element (both unbatched)."""
    if input.ndim < 1:
        raise ValueError(f"{name}: input tensor should be 1D or more, got 0D")
    n, t = input.ndim, target.ndim
    if n != 1 and (target.shape[0] if t else 0) != input.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if t else 0}).")
    if n <= 2 and t > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if n == 4 and t != 3:
        raise RuntimeError("only batches of spatial targets supported (3D tensors) but got "
                           f"targets of dimension: {t}")
    if n == 3 or n > 4:
        if tuple(target.shape[1:]) != tuple(input.shape[2:]):
            raise RuntimeError(f"Expected target size "
                               f"{[input.shape[0]] + list(input.shape[2:])}, got "
                               f"{list(target.shape)}")
    if target.dtype not in (dt.int64, dt.uint8):     # PyTorch's nll_loss takes these two
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           f"{dt.scalar_type_name(target.dtype)}")
    if n == 1 and t == 1 and target.shape[0] != 1:
        raise ValueError("For 1D input, 1D target must have size 1, but got target size: "
                         f"{target.shape[0]}")
    if n == 4 and tuple(target.shape[1:]) != tuple(input.shape[2:]):
        # (PyTorch's words, its unclosed parenthesis included)
        raise RuntimeError(f"size mismatch (got input: {list(input.shape)} , target: "
                           f"{list(target.shape)}")
    if target.dtype is not dt.int64:
        target = ops.cast(target, dt.int64)
    if n == 1:
        return ops.reshape(input, (1,) + tuple(input.shape)), ops.reshape(target, (1,)), True
    return input, target, False


def _nll(input: Tensor, target: Tensor, weight, ignore_index: int):
    """Per-element losses and weights (0 where ignored), shaped like target."""
    ignored = ops.eq(target, ignore_index)
    safe = ops.where(ignored, 0, target)
    # A negative class would wrap around in gather, and one past the end
    # would fail there with gather's message: PyTorch's IndexError (naming
    # the first bad target) in eager mode, a recorded check while tracing
    # (so that a compiled call checks its own targets).
    n_classes = input.shape[1]
    if RECORDERS:
        safe = ops.check(safe, ops.ge(safe, 0), "Target is out of bounds (negative).")
    elif (v := target._data).size and (
            bad := v[((v < 0) | (v >= n_classes)) & (v != ignore_index)]).size:
        raise IndexError(f"Target {bad.flat[0]} is out of bounds.")
    idx = ops.reshape(safe, (target.shape[0], 1) + tuple(target.shape[1:]))
    picked = ops.reshape(ops.gather(input, idx, 1), tuple(target.shape))
    if weight is not None:
        if weight.ndim != 1 or weight.shape[0] != input.shape[1]:
            raise RuntimeError(f"weight tensor should be defined either for all "
                               f"{input.shape[1]} classes or no classes but got weight tensor "
                               f"of shape: {list(weight.shape)}")
        w = ops.take(_as(weight, input.dtype), safe, 0)
        w = ops.where(ignored, 0.0, w)
    else:
        w = ops.cast(ops.logical_not(ignored), input.dtype)
    # (an ignored target's loss is +0.0, as PyTorch writes it; -(x * 0) is -0.0)
    return ops.where(ignored, 0.0, ops.neg(ops.mul(picked, w))), w


def _sums(loss: Tensor, w: Tensor, target: Tensor, ignore_index: int, weighted: bool):
    """``(sum(loss), sum(w))`` of a reduced nll: for float16 / bfloat16
    input in eager mode with the values of PyTorch's kernel (its cascade
    sum in the half dtype, ``_cascade_sum``); the weight count unweighted
    (the float32 sum of ones rounded once is PyTorch's cast count)."""
    total, wsum = TF.sum(loss), TF.sum(w)
    if loss.dtype not in (dt.float16, dt.bfloat16) or RECORDERS or \
            type(loss._data) is not np.ndarray or type(target._data) is not np.ndarray:
        return total, wsum
    keep = target._data.reshape(-1) != ignore_index
    idx = np.flatnonzero(keep)
    total = exact_value(total, cascade_sum(loss._data.reshape(-1)[keep], idx, loss.dtype))
    if weighted:
        wsum = exact_value(wsum, cascade_sum(w._data.reshape(-1)[keep], idx, loss.dtype))
    return total, wsum


def _as(t: Tensor, d: dt.DType) -> Tensor:
    return t if t.dtype is d else ops.cast(t, d)


def _weighted_mean(total: Tensor, wsum: Tensor) -> Tensor:
    """``total / wsum``.  Where every target is ignored (``wsum == 0``) the
    value is NaN, as PyTorch's, and the gradient 0, as PyTorch's backward
    gives (0 / 0 would send NaN into every parameter: a batch of padding)."""
    empty = ops.eq(wsum, 0.0)
    return ops.where(empty, float("nan"), ops.div(total, ops.where(empty, 1.0, wsum)))


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    _check_tensor(input, "nll_loss", "input")
    _check_tensor(target, "nll_loss", "target")
    reduction = _reduction(reduction, size_average, reduce)
    x, t, unbatched = _class_targets(input, target, "nll_loss")
    loss, w = _nll(x, t, weight, ignore_index)
    if reduction == "none":
        return ops.reshape(loss, ()) if unbatched else loss
    total, wsum = _sums(loss, w, t, ignore_index, weight is not None)
    if reduction == "sum":
        return total
    return _weighted_mean(total, wsum)


def _class_weight_shape(input: Tensor, weight: Tensor) -> Tensor:
    if input.ndim <= 1:
        return weight
    return ops.reshape(_as(weight, input.dtype),
                       (1, weight.shape[0]) + (1,) * (input.ndim - 2))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    _check_tensor(input, "cross_entropy", "input")
    _check_tensor(target, "cross_entropy", "target")
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = TF.log_softmax(input, class_dim)
    if tuple(target.shape) == tuple(input.shape):
        # Class probabilities.
        if not target.dtype.is_floating_point:
            raise RuntimeError(f"Expected floating point type for target with class "
                               f"probabilities, got {dt.scalar_type_name(target.dtype)}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        t = _as(target, logp.dtype)
        if label_smoothing > 0:
            t = TF.add(TF.mul(t, 1 - label_smoothing), label_smoothing / n_classes)
        prod = TF.mul(logp, t)
        if weight is not None:
            prod = TF.mul(prod, _class_weight_shape(input, weight))
        if reduction == "none":
            return TF.neg(TF.sum(prod, class_dim))
        total = TF.neg(TF.sum(prod))
        if reduction == "sum":
            return total
        # (PyTorch divides by a C++ number: DivBackward1, div.Scalar's node)
        return _as_node(TF.div(total, float(input.numel() // n_classes) if input.numel()
                               else 0.0), "DivBackward1", total)
    x, t, unbatched = _class_targets(logp, target, "cross_entropy")
    loss, w = _nll(x, t, weight, ignore_index)
    if label_smoothing > 0:
        # PyTorch's graph: (1 - eps) * nll_loss(logp) + eps / C * (its
        # smoothing term: -logp.sum(1), masked_fill_ where ignored, reduced)
        lp = TF.mul(x, _class_weight_shape(x, weight)) if weight is not None else x
        neg = TF.neg(TF.sum(lp, 1))
        smooth = _as_node(ops.where(ops.eq(t, ignore_index), 0.0, neg), "MaskedFillBackward0", neg)
        eps = label_smoothing
        if reduction == "none":
            out = TF.add(_scaled(_as_node(loss, "NllLossBackward0", logp), 1 - eps),
                         _scaled(smooth, eps / n_classes))
            return ops.reshape(out, ()) if unbatched else out
        total, nll_wsum = _sums(loss, w, t, ignore_index, weight is not None)
        if reduction == "sum":
            return TF.add(_scaled(_as_node(total, "NllLossBackward0", logp), 1 - eps),
                          _scaled(TF.sum(smooth), eps / n_classes))
        # (PyTorch divides the smoothing term by a plain sum of the weights,
        # the nll term by its kernel's total weight)
        ssum = TF.sum(smooth)
        nll = _as_node(_weighted_mean(total, nll_wsum), "NllLossBackward0", logp)
        return TF.add(_scaled(nll, 1 - eps),
                      _scaled(_as_node(_weighted_mean(ssum, TF.sum(w)), "DivBackward0", ssum,
                                       None), eps / n_classes))
    if reduction == "none":
        out = ops.reshape(loss, ()) if unbatched else loss
    else:
        total, wsum = _sums(loss, w, t, ignore_index, weight is not None)
        out = total if reduction == "sum" else _weighted_mean(total, wsum)
    return _after_log_softmax(out, logp, input, target, reduction)


def _as_node(out, name, *inputs):
    """``out``'s last node shown as PyTorch's node ``name`` of ``inputs``
    (tensors or None: its ``next_functions``), where tracec's composite
    ends in another primitive; values and gradients unchanged."""
    if out._node is not None:
        torch_name = out._node._name = TorchName(name)
        torch_name.edges = tuple(None if t is None else edge_of(t) for t in inputs)
    return out


def _scaled(x, number):
    """``x * number`` as PyTorch's C++ ``Tensor * double``: MulBackward1."""
    return _as_node(TF.mul(x, number), "MulBackward1", x)


def _after_log_softmax(out, logp, input, target, reduction):
    """PyTorch's cross_entropy is log_softmax, then nll_loss: its
    ``grad_fn`` (NllLossBackward0 / NllLoss2DBackward0, named by
    ``_grad_fn_names``) lists the LogSoftmaxBackward0 node as its one
    ``next_functions`` entry (tracec's last node is its nll's final step)."""
    from tracec.nn._grad_fn_names import _nll_name
    if out._node is not None and logp._node is not None and \
            _nll_name(input, target, reduction=reduction) is not None:
        name = out._node._name = TorchName(out._node._name or "")
        name.edges = (edge_of(logp),)
    return out


# --- binary ---------------------------------------------------------------------------------

def _clamped_log(x: Tensor) -> Tensor:
    """log(x) clamped below at -100 (PyTorch's BCE), finite gradient at 0."""
    pos = ops.gt(x, 0.0)
    safe = ops.where(pos, x, 1.0)
    return ops.where(pos, TF.clamp(ops.log(safe), min=-100.0), -100.0)


def _probabilities(v: Tensor, what: str) -> Tensor:
    """``v``, checked to lie in [0, 1] (NaN refused, as PyTorch does): in
    Python in eager mode, by a recorded check while tracing (so that a
    compiled call checks its own arguments)."""
    message = f"all elements of {what} should be between 0 and 1"
    if RECORDERS:
        return ops.check(v, ops.logical_and(ops.ge(v, 0), ops.le(v, 1)), message)
    a = v._data
    if a.size and not ((a >= 0) & (a <= 1)).all():
        raise RuntimeError(message)
    return v


#: PyTorch's EPSILON of the binary_cross_entropy backward: a C++ float 1e-12
_BCE_EPS = 9.999999960041972e-13


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    _check_tensor(input, "binary_cross_entropy", "input")
    _check_tensor(target, "binary_cross_entropy", "target")
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the "
                         f"input size ({input.shape}) is deprecated. Please ensure they "
                         "have the same size.")
    if target.dtype is not input.dtype:     # (PyTorch's kernel: one dtype, input's)
        raise RuntimeError(f"Found dtype {dt.scalar_type_name(target.dtype)} but expected "
                           f"{dt.scalar_type_name(input.dtype)}")
    input, target = [_probabilities(v, what) for what, v in (("input", input),
                                                              ("target", target))]
    t = _as(target, input.dtype)
    w = None if weight is None else _as(weight, input.dtype)  # the result keeps input's dtype

    def value(x):
        v = TF.neg(TF.add(TF.mul(t, _clamped_log(x)),
                          TF.mul(TF.sub(1.0, t), _clamped_log(TF.sub(1.0, x)))))
        return v if w is None else TF.mul(v, w)
    if not input.requires_grad:
        return _reduce(value(input), reduction)
    # PyTorch's gradient for input: (x - t) / max(x (1 - x), 1e-12) (times the
    # weight), smaller than the exact log's near a saturated 0 or 1 (a GAN's
    # discriminator early on).  The value (and the target's and the weight's
    # gradients) from the formula on a detached input; the input's gradient
    # rides on x - x.detach(), which is exactly 0.
    x0 = input.detach()
    slope = TF.div(TF.sub(x0, t), TF.clamp(TF.mul(TF.sub(1.0, x0), x0), min=_BCE_EPS))
    if w is not None:
        slope = TF.mul(slope, w)
    loss = TF.add(value(x0), TF.mul(TF.sub(input, x0), slope.detach()))
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction: str = "mean", pos_weight=None):
    _check_tensor(input, "binary_cross_entropy_with_logits", "input")
    _check_tensor(target, "binary_cross_entropy_with_logits", "target")
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size (torch.Size({list(target.shape)})) must be the same as "
                         f"input size (torch.Size({list(input.shape)}))")
    # PyTorch's composition, whose in-place steps decide the dtypes:
    # log_sigmoid(input) (input's dtype) .mul_(pos_weight term); then
    # (1 - target).mul_(input).sub_(...) and .mul_(weight), in target's
    # dtype: a float64 target gives a float64 loss, an integer or bool
    # target is refused by those in-place steps.
    T = target.dtype
    if T is dt.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if not (T.is_floating_point or T.category == 3):
        raise RuntimeError(f"result type {dt.scalar_type_name(TF.result_type(target, input))} "
                           f"can't be cast to the desired output type {dt.scalar_type_name(T)}")
    half = input.dtype in (dt.float16, dt.bfloat16)
    # (every float input: the gradient as PyTorch's backward rounds it, not
    # the softplus composition's, a few ulps off: Adam amplifies that where
    # the gradient cancels to zero, as a relativistic GAN's bias does)
    if input.dtype.is_floating_point and T is input.dtype and input.requires_grad and \
            graph_enabled() and all(
            p is None or p.dtype is T for p in (weight, pos_weight)):
        y = binary_cross_entropy_with_logits(ops.stop_gradient(input), target, weight,
                                             reduction=reduction, pos_weight=pos_weight)
        return _bce_logits_vjp(y, input, target, weight, pos_weight, reduction)
    # softplus(-x) = -log_sigmoid(x) = m + log(exp(-m) + exp(-x - m)) with
    # m = max(-x, 0): stable; a half input's as PyTorch's log_sigmoid
    # kernel makes it, in float32 rounded once
    x = ops.cast(input, dt.float32) if half else input
    m = TF.clamp(TF.neg(x), min=0.0)
    sp = TF.add(m, TF.log(TF.add(TF.exp(TF.neg(m)), TF.exp(TF.sub(TF.neg(x), m)))))
    sp = ops.cast(sp, input.dtype) if half else sp
    if pos_weight is not None:
        lw = TF.add(TF.mul(TF.sub(pos_weight, 1.0), target), 1.0)
        sp = _as(TF.mul(lw, sp), input.dtype)
    loss = _as(TF.add(_as(TF.mul(TF.sub(1.0, target), input), T), sp), T)
    if weight is not None:
        loss = _as(TF.mul(loss, weight), T)
    return _reduce(loss, reduction)


def _bce_logits_vjp(y, x, target, weight, pos_weight, reduction):
    """``y``, the binary_cross_entropy_with_logits of ``x`` computed with
    ``x`` detached, with the input gradient of PyTorch's backward as its ops
    (half ones too) round it: ``((sigmoid(x) - t) * g) * weight / numel`` (with
    ``pos_weight``: ``((p t + 1 - t) sigmoid(x) - p t)`` first).  The added
    zero term ``k * (w * ((x - x) / n))``, summed, is the linear map whose
    transpose that is."""
    xs = ops.stop_gradient(x)
    s = TF.sigmoid(xs)
    t = ops.stop_gradient(target)
    if pos_weight is not None:
        tp = TF.mul(ops.stop_gradient(pos_weight), t)
        k = TF.sub(TF.mul(TF.sub(TF.add(tp, 1.0), t), s), tp)
    else:
        k = TF.sub(s, t)
    d = TF.sub(x, xs)
    if reduction == "mean":
        d = TF.div(d, x.numel())
    if weight is not None:
        d = TF.mul(ops.stop_gradient(weight), d)
    d = TF.mul(k, d)
    return TF.add(y, TF.sum(d) if reduction != "none" else d)


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False):
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=3)
    if log_target:
        loss = TF.mul(TF.exp(target), TF.sub(target, input))
    else:
        # xlogy(t, t) - t * input as PyTorch composes it: 0 * log 0 = 0, a
        # negative target gives NaN (t * log t), not a finite loss, and a
        # zero target's gradient is NaN (xlogy's t / t)
        loss = TF.sub(xlogy(target, target), TF.mul(target, input))
    if reduction == "batchmean":
        # The batch size as it is (a symbolic size stays symbolic).
        return TF.div(TF.sum(loss), input.shape[0]) if input.ndim else TF.sum(loss)
    return _reduce(loss, reduction)


def _fp32_under_autocast():
    # PyTorch's CPU autocast computes these losses in float32.
    from tracec.autocast_mode import fp32_inputs
    g = globals()
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss",
                 "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                 "kl_div"):
        g[name] = fp32_inputs(g[name])


_fp32_under_autocast()
