"""The margin, embedding and likelihood losses of PyTorch's functional API
(``margin_ranking_loss``, ``hinge_embedding_loss``, ``soft_margin_loss``,
``cosine_embedding_loss``, ``triplet_margin_loss``,
``triplet_margin_with_distance_loss``, ``multilabel_soft_margin_loss``,
``multilabel_margin_loss``, ``multi_margin_loss``, ``poisson_nll_loss``,
``gaussian_nll_loss``), each PyTorch's formula over the primitives.

Invariant: as in ``_loss``, ``reduction`` is 'none' | 'mean' | 'sum' with the
legacy flags mapped onto it; class-index targets are read only through
tensor ops (masks against an iota), never as Python values.
"""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph
from tracec import ops
from tracec.nn._basic import _logsigmoid
from tracec.nn._distance import pairwise_distance
from tracec.nn._loss import _check_tensor, _reduce, _reduction
from tracec.ops.elementwise import VALUE_ERROR
from tracec.tensor import RECORDERS, Tensor

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
           "multilabel_soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss"]


def margin_ranking_loss(input1, input2, target, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean"):
    """``max(0, -target * (input1 - input2) + margin)``."""
    reduction = _reduction(reduction, size_average, reduce)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: torch.Size({list(input1.shape)}), "
                           f"input2: torch.Size({list(input2.shape)}), target: "
                           f"torch.Size({list(target.shape)}) ")
    loss = TF.clamp(TF.add(TF.mul(TF.neg(target), TF.sub(input1, input2)), margin), min=0.0)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``x`` where target is 1, ``max(0, margin - x)`` where it is -1 (both
    terms for any other value, as PyTorch computes them)."""
    reduction = _reduction(reduction, size_average, reduce)
    margin_clamp = TF.clamp(TF.sub(margin, input), min=0.0)
    out_margin = TF.where(ops.ne(target, 1), margin_clamp, 0.0)
    out_self = TF.where(ops.ne(target, -1), input, 0.0)
    return _reduce(TF.add(out_margin, out_self), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """``log(1 + exp(-target * input))``."""
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the "
                         f"input size ({input.shape}) is deprecated. Please ensure they "
                         "have the same size.")
    if isinstance(target, Tensor) and target.requires_grad and graph.is_grad_enabled():
        # (PyTorch's kernel has no derivative for the target)
        raise RuntimeError("The function 'soft_margin_loss' is not differentiable with respect "
                           "to argument 'target'. This input cannot have requires_grad True.")
    return _reduce(TF.log1p(TF.exp(TF.mul(TF.neg(target), input))), reduction)


def cosine_embedding_loss(input1, input2, target, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean"):
    """``1 - cos`` where target is 1, ``max(0, cos - margin)`` where -1."""
    reduction = _reduction(reduction, size_average, reduce)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss: expected 1D or 2D inputs of the same "
                           f"shape, got {list(input1.shape)} and {list(input2.shape)}")
    d = 1 if input1.ndim == 2 else 0
    eps = 1e-12
    prod = TF.sum(TF.mul(input1, input2), d)
    m1 = TF.add(TF.sum(TF.mul(input1, input1), d), eps)
    m2 = TF.add(TF.sum(TF.mul(input2, input2), d), eps)
    cos = TF.div(prod, TF.sqrt(TF.mul(m1, m2)))
    pos = TF.where(ops.eq(target, 1), TF.sub(1.0, cos), 0.0)
    neg = TF.where(ops.eq(target, -1), TF.clamp(TF.sub(cos, margin), min=0.0), 0.0)
    return _reduce(TF.add(pos, neg), reduction)


def _triplet(d_pos, d_neg, d_swap, margin, reduction):
    if d_swap is not None:
        d_neg = TF.minimum(d_neg, d_swap)
    return _reduce(TF.clamp(TF.sub(TF.add(d_pos, margin), d_neg), min=0.0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean"):
    reduction = _reduction(reduction, size_average, reduce)
    nd = anchor.ndim
    if not (nd == positive.ndim == negative.ndim) or nd not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions (1 or 2), but got: anchor "
                           f"{anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    if margin <= 0:
        raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                         f"{margin} instead")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    d_swap = pairwise_distance(positive, negative, p, eps) if swap else None
    return _triplet(d_pos, d_neg, d_swap, margin, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean"):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than "
                         f"0, got {margin} instead")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    d_swap = dist(positive, negative) if swap else None
    return _triplet(d_pos, d_neg, d_swap, margin, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    reduction = _reduction(reduction, size_average, reduce)
    loss = TF.neg(TF.add(TF.mul(target, _logsigmoid(input)),
                         TF.mul(TF.sub(1.0, target), _logsigmoid(TF.neg(input)))))
    if weight is not None:
        loss = TF.mul(loss, weight)
    c = input.ndim - 1
    loss = TF.div(TF.sum(loss, c), float(input.shape[c]))
    return _reduce(loss, reduction)


def _classes(input: Tensor, target: Tensor, name: str):
    """(input as [N, C], target as [N] or [N, C], whether unbatched)."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{name}: Expected non-empty vector or matrix with optional 0-dim "
                           f"batch size, but got: {list(input.shape)}")
    if input.ndim == 1:
        return ops.reshape(input, (1,) + tuple(input.shape)), \
            ops.reshape(target, (1,) + tuple(target.shape)), True
    return input, target, False


def multilabel_margin_loss(input, target, size_average=None, reduce=None,
                           reduction: str = "mean"):
    """Per sample: ``sum over target classes j (listed until the first -1)
    and non-target classes i of max(0, 1 - (x[j] - x[i])) / C``."""
    reduction = _reduction(reduction, size_average, reduce)
    if input.ndim == 0 and target.ndim == 0:    # PyTorch reads both as one class
        input, target = ops.reshape(input, (1,)), ops.reshape(target, (1,))
    x, t, unbatched = _classes(input, target, "multilabel_margin_loss")
    if tuple(t.shape) != tuple(x.shape):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size: "
                           f"{list(target.shape)} for input of size: {list(input.shape)}")
    n, c = x.shape
    t = t if t.dtype is dt.int64 else ops.cast(t, dt.int64)
    # valid[n, k]: no -1 at positions <= k (a triangular count of the -1s).
    stop = ops.cast(ops.eq(t, -1), x.dtype)
    upto = Tensor._make(np.triu(np.ones((c, c), x.dtype.np)), x.dtype)
    valid = ops.eq(TF.matmul(stop, upto), 0.0)
    cls = ops.iota((1, 1, c), dt.int64, 2, like=t)
    hit = ops.logical_and(ops.eq(ops.reshape(t, (n, c, 1)), cls), ops.reshape(valid, (n, c, 1)))
    count = TF.sum(ops.cast(hit, x.dtype), 1)                   # [N, C]: times listed
    other = ops.cast(ops.eq(count, 0.0), x.dtype)                # not a target class
    # z[n, j, i] = 1 - x[n, j] + x[n, i]
    z = TF.add(TF.sub(1.0, ops.reshape(x, (n, c, 1))), ops.reshape(x, (n, 1, c)))
    pair = TF.mul(ops.reshape(count, (n, c, 1)), ops.reshape(other, (n, 1, c)))
    # relu: gradient 0 where z == 0 (PyTorch's kernel counts z > 0 only)
    loss = TF.div(TF.sum(TF.mul(TF.relu(z), pair), (1, 2)), float(c))
    if unbatched:
        loss = ops.reshape(loss, ())
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      size_average=None, reduce=None, reduction: str = "mean"):
    """Per sample: ``sum over i != y of w[y] * max(0, margin - x[y] + x[i])**p / C``."""
    reduction = _reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if input.ndim == 0:     # PyTorch reads a 0-d input as one class
        input = ops.reshape(input, (1,))
    one = input.ndim == 1 and tuple(target.shape) == (1,)   # one sample's target as [1]
    if one:
        target = ops.reshape(target, ())
    x, t, unbatched = _classes(input, target, "multi_margin_loss")
    unbatched = unbatched and not one       # (the loss then has the target's shape, [1])
    n, c = x.shape
    if tuple(t.shape) != (n,):
        raise RuntimeError(f"inconsistent target size, expected {n} but got "
                           f"{list(target.shape)}")
    t = t if t.dtype is dt.int64 else ops.cast(t, dt.int64)
    xt = ops.gather(x, ops.reshape(t, (n, 1)), 1)                  # [N, 1]
    z = TF.add(TF.sub(margin, xt), x)
    h = TF.relu(z)      # gradient 0 where z == 0 (PyTorch's kernel counts z > 0 only)
    if p == 2:
        h = TF.mul(h, h)
    if weight is not None:
        h = TF.mul(h, ops.reshape(ops.take(weight, t, 0), (n, 1)))
    not_y = ops.ne(ops.iota((n, c), dt.int64, 1, like=t), ops.reshape(t, (n, 1)))
    loss = TF.div(TF.sum(TF.where(not_y, h, 0.0), 1), float(c))
    if unbatched:
        loss = ops.reshape(loss, ())
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean"):
    reduction = _reduction(reduction, size_average, reduce)
    if log_input:
        loss = TF.sub(TF.exp(input), TF.mul(target, input))
    else:
        loss = TF.sub(input, TF.mul(target, TF.log(TF.add(input, eps))))
    if full:
        safe = TF.where(ops.gt(target, 1.0), target, 2.0)   # log of the masked-out ones unused
        stirling = TF.add(TF.sub(TF.mul(safe, TF.log(safe)), safe),
                          TF.mul(TF.log(TF.mul(safe, 2 * math.pi)), 0.5))
        loss = TF.add(loss, TF.where(ops.le(target, 1.0), 0.0, stirling))
    return _reduce(loss, reduction)


_NEGATIVE_VAR = "var has negative entry/entries"


def _nonnegative(var: Tensor) -> Tensor:
    """``var``, checked to have no negative entry (NaN passes, as in
    PyTorch's ``torch.any(var < 0)``): in Python in eager mode, by a
    recorded check while tracing, so that a compiled call checks its own
    variances (a ValueError either way, as PyTorch's)."""
    if RECORDERS:
        return ops.check(var, ops.logical_not(ops.lt(var, 0)), VALUE_ERROR + _NEGATIVE_VAR)
    if (var._data < 0).any():
        raise ValueError(_NEGATIVE_VAR)
    return var


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean"):
    """``0.5 * (log(max(var, eps)) + (input - target)**2 / max(var, eps))``
    (+ ``0.5 * log(2 pi)`` with ``full``); the clamp passes the gradient
    through unchanged, as PyTorch's in-place clamp under ``no_grad`` does."""
    _check_tensor(input, "gaussian_nll_loss", "input")
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError(_NEGATIVE_VAR)
        var = ops.full(tuple(input.shape), float(var), input.dtype, like=input)
    else:
        var = _nonnegative(var)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = ops.reshape(var, tuple(var.shape) + (1,))
        elif not (input.ndim == var.ndim and sum(  # one mismatched dim, of size 1 in var
                v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = TF.add(var, TF.sub(TF.clamp(var, min=eps), var).detach())
    d = TF.sub(input, target)
    loss = TF.mul(TF.add(TF.log(var), TF.div(TF.mul(d, d), var)), 0.5)
    if full:
        loss = TF.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)
