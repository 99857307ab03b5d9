"""``embedding_bag``: sums, means or maxima of bags of embedding rows
without materializing the per-index embeddings per bag in Python.

Bags come from ``offsets`` (a tensor, read only through tensor ops, so a
traced step does not depend on its values): a ``[B, M]`` membership mask
compares every position with each bag's [start, end); ``sum`` / ``mean``
are a matmul of the (weighted) mask with the gathered rows, ``max`` a
masked maximum.  Empty bags give zeros, and ``padding_idx`` positions
belong to no bag, as in PyTorch.
"""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import ops
from tracec import shape_ops as S
from tracec.tensor import Tensor

__all__ = ["embedding_bag"]


def _bag_mask(idx: Tensor, offsets: Tensor, include_last_offset: bool,
              to_end: bool = True) -> Tensor:
    """[bags, M]: which input positions each bag holds.  With
    ``include_last_offset`` PyTorch's kernels are of two minds about the
    last bag: its float32 sums stop at the explicit last offset
    (``to_end=False``), while its max, the count a mean divides by and the
    gradient run to the end of the input (``to_end=True``)."""
    m = idx.shape[0]
    off = ops.cast(offsets, dt.int64) if offsets.dtype is not dt.int64 else offsets
    k = off.shape[0]
    nb = k - 1 if include_last_offset else k
    starts = ops.slice_(off, (0,), (nb,), (1,))
    tail = ops.full((1,), m, dt.int64, like=off) if to_end or not include_last_offset \
        else ops.slice_(off, (nb,), (k,), (1,))
    ends = ops.concatenate([ops.slice_(off, (1,), (nb,), (1,)), tail], 0) if nb > 1 else tail
    b = starts.shape[0]
    pos = ops.iota((b, m), dt.int64, 1, like=off)
    return ops.logical_and(ops.ge(pos, ops.reshape(starts, (b, 1))),
                           ops.lt(pos, ops.reshape(ends, (b, 1))))


def embedding_renorm_(weight, input, max_norm: float, norm_type: float = 2.0):
    """PyTorch's ``embedding_renorm_``, without recording gradients: each row
    of ``weight`` that ``input`` picks and whose ``norm_type``-norm exceeds
    ``max_norm`` is scaled in place by ``max_norm / (norm + 1e-7)``."""
    from tracec import graph
    with graph.no_grad():
        # (Tensor.reshape infers the -1: the primitive's shape is recorded as
        # given, and a trace holding -1 fails the IR verifier)
        idx = (input if input.dtype is dt.int64 else ops.cast(input, dt.int64)).reshape(-1)
        n = weight.shape[0]
        picked = ops.gt(creation.zeros(n, dtype=weight.dtype).index_add(
            0, idx, creation.ones(tuple(idx.shape), dtype=weight.dtype)), 0.0)
        norms = weight.norm(p=norm_type, dim=1)
        over = ops.logical_and(picked, ops.gt(norms, float(max_norm)))
        scale = TF.where(over, TF.div(float(max_norm), TF.add(norms, 1e-7)), 1.0)
        weight.mul_(ops.reshape(scale, (n, 1)))
    return weight


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None):
    if not isinstance(input, Tensor) or input.dtype.category != 1:
        raise ValueError("embedding_bag: input has to be an integer tensor")
    if weight.dtype.category == 1:
        raise ValueError("embedding_bag: weight has to be a floating point tensor (the "
                         "arguments are (input, weight), as in PyTorch)")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    # sparse=True: a dense gradient of the same values (as for embedding).
    from tracec.nn.functional import _mark_sparse_grad
    _mark_sparse_grad(weight, sparse)
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) "
                             f"is not None, then it must have the same shape as the input "
                             f"({list(input.shape)})")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences. However, "
                             f"found offsets of type {type(offsets)}")
        b, length = input.shape
        offsets = ops.mul(ops.iota((b,), dt.int64, 0, like=input), length)
        idx = ops.reshape(input, (b * length,))
        include_last_offset = False
        if per_sample_weights is not None:
            per_sample_weights = ops.reshape(per_sample_weights, (b * length,))
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        idx = input
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    idx = idx if idx.dtype is dt.int64 else ops.cast(idx, dt.int64)
    if max_norm is not None:
        embedding_renorm_(weight, idx, max_norm, norm_type)
    mask = _bag_mask(idx, offsets, include_last_offset)               # [B, M]
    # (only PyTorch's fast path, float32 / half weights without a
    # padding_idx, stops the sum there; its other path sums to the end)
    summed = _bag_mask(idx, offsets, include_last_offset, False) if include_last_offset \
        and padding_idx is None and weight.dtype in (dt.float32, dt.float16, dt.bfloat16) \
        else mask
    if padding_idx is not None:
        pi = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
        keep = ops.reshape(ops.ne(idx, pi), (1, idx.shape[0]))
        mask, summed = ops.logical_and(mask, keep), ops.logical_and(summed, keep)
    rows = ops.take(weight, idx, 0)                                     # [M, D]
    if sparse:
        from tracec.graph import mark_sparse_grad_node
        mark_sparse_grad_node(rows)
    if scale_grad_by_freq:
        if sparse and weight.requires_grad:    # PyTorch refuses it (in its backward)
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with "
                               "sparse gradients")
        from tracec.nn.functional import grad_scaled_by_freq
        rows = grad_scaled_by_freq(rows, idx, weight.shape[0])
    maskf = ops.cast(mask, weight.dtype)
    if mode == "max":
        big = ops.where(S.unsqueeze(mask, 2), S.unsqueeze(rows, 0), float("-inf"))
        out = TF.amax(big, 1)
        count = TF.sum(maskf, 1, keepdim=True)
        return TF.where(ops.gt(count, 0.0), out, 0.0)
    if per_sample_weights is not None:
        maskf = TF.mul(maskf, ops.reshape(per_sample_weights, (1, idx.shape[0])))
    out = TF.matmul(maskf, rows)
    if summed is not mask:
        # the value stops at the last offset, the gradient runs to the end
        # (PyTorch's backward takes the bag to the end of the input)
        sumf = ops.cast(summed, weight.dtype)
        if per_sample_weights is not None:
            sumf = TF.mul(sumf, ops.reshape(per_sample_weights, (1, idx.shape[0])))
        out = TF.add(out, TF.sub(TF.matmul(sumf, rows), out).detach())
    if mode == "mean":
        count = TF.sum(ops.cast(mask, weight.dtype), 1, keepdim=True)
        out = TF.div(out, TF.clamp(count, min=1.0))
    return out
