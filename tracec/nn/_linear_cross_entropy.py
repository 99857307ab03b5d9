"""``F.linear_cross_entropy`` and ``nn.LinearCrossEntropyOptions``
(PyTorch 2.13): the cross entropy of ``linear(input, linear_weight,
linear_bias)``, with PyTorch's argument checks and messages.

Invariant: the result is PyTorch's reference path (``options=None``) for
every ``options``. PyTorch's chunked path (``options`` given) only saves
memory by never holding the whole logits tensor; it computes the same
loss, so tracec accepts and validates the options and computes the
reference (the logits of a CPU-sized head fit in memory, and inside
``tracec.compile`` fusion decides what is materialized).
"""
from __future__ import annotations

import dataclasses
import math
import warnings

from tracec import dtypes as dt
from tracec import shape_ops as S
from tracec.nn._basic import linear
from tracec.nn._loss import cross_entropy

__all__ = ["linear_cross_entropy", "LinearCrossEntropyOptions"]

_ACC_POLICIES = ("accurate", "balanced", "compact", "auto")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """Configuration of PyTorch's chunked ``linear_cross_entropy`` (same
    fields and defaults); tracec validates it and computes the reference
    path (see the module docstring)."""
    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"acc_policy must be one of {_ACC_POLICIES}, got "
                             f"{self.acc_policy!r}")
        if self.batch_chunk_size is not None and (
                not isinstance(self.batch_chunk_size, int) or self.batch_chunk_size < 1):
            raise ValueError(f"batch_chunk_size must be a positive int or None, got "
                             f"{self.batch_chunk_size!r}")
        if self.acc_dtype is not None:
            dt.to_dtype(self.acc_dtype)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,  # noqa: A002
                         reduction: str = "mean", ignore_index=None,
                         label_smoothing: float = 0.0, options=None):
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError("expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    num_batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "expected equal input and linear_weight last dimensions (in_features), "
            f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} "
            f"requires batched input, (N, {in_features}), got unbatched input with shape "
            f"{tuple(input.shape)}")
    logits_shape = (*num_batches, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None and (out_features or reduction not in ("mean", "sum", "none")
                                or label_smoothing != 0.0 or target.dtype is not dt.int64):
        warnings.warn(
            "linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
            "{'mean','sum','none'}, label_smoothing == 0, target.dtype == int64, "
            f"out_features == (). Got reduction={reduction!r}, "
            f"label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
            f"out_features={out_features}, tracing=False, linear_bias.shape="
            f"{tuple(linear_bias.shape) if linear_bias is not None else None}.",
            stacklevel=2)
    if out_features:
        rows = math.prod(out_features, start=num_classes)
        linear_weight = S.reshape(linear_weight, (rows, in_features))
        if linear_bias is not None:
            linear_bias = S.reshape(linear_bias, (rows,))
    logits = S.reshape(linear(input, linear_weight, linear_bias), logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=ignore_index, label_smoothing=label_smoothing)
