"""Ordering and sampling: ``sort argsort topk msort multinomial``.

Invariant: the order comes from the ``argsort`` primitive (recorded by the
tracer, lowered for every backend), and values are ``gather``-ed from the
input with those indices, so their gradient flows back to the selected
positions and a compiled function recomputes the order at every call.
``multinomial`` draws its uniforms from tracec's generator (a tensor
state) and is a composite too: with replacement, inverse-CDF by counting;
without, the largest ``log(u) / p`` keys (Efraimidis and Spirakis), which
samples sequentially without replacement in proportion to ``p``.
"""
from __future__ import annotations


import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec import graph, ops, torch_rng
from tracec.functions import _named
from tracec.ops.core import normalize_axis
from tracec.rearrange import cumsum
from tracec.tensor import RECORDERS, Tensor
from tracec.return_types import structseq

__all__ = ["sort", "argsort", "topk", "msort", "multinomial"]

# torch.return_types.sort / topk: namedtuples of (values, indices).
SortResult = structseq("sort", ["values", "indices"])
TopkResult = structseq("topk", ["values", "indices"])


def _order(x, dim, descending, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    d = normalize_axis(dim, x.ndim)
    return d, ops.argsort(x, d if x.ndim else 0, bool(descending))


def _gather(x, idx, d):
    if x.ndim == 0:
        return ops.cast(x, x.dtype)
    return ops.gather(x, idx, d)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """``(values, indices)``; always stable (PyTorch leaves the order of
    equal values unspecified unless ``stable=True``)."""
    d, idx = _order(input, dim, descending, "sort")
    return SortResult(_named(_gather(input, idx, d), "SortBackward0"), idx)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    return _order(input, dim, descending, "argsort")[1]


def msort(input):
    return sort(input, 0).values


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The ``k`` largest (smallest) values along ``dim`` and their indices,
    in sorted order (also for ``sorted=False``, where PyTorch's order is
    unspecified).  Equal values come in PyTorch's CPU kernel's order when
    run eagerly (``_torch_tie_order``); a compiled function keeps the
    argsort primitive's stable order (lowest index first)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"topk(): argument 'input' must be Tensor, not {type(input).__name__}")
    d = normalize_axis(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if _partial_ok(input, k, n):
        # eager, k much smaller than the row: the k + 1 largest (smallest)
        # by partition, sorted among themselves (a full sort of an ImageNet
        # batch's 1000 logits for top-5 accuracy took 40 ms)
        head = _head(np.moveaxis(input._data, d, -1), k + 1, largest)
        idx = Tensor._make(np.ascontiguousarray(np.moveaxis(head[..., :k], -1, d)), dt.int64)
        idx = _torch_tie_order(input, head, idx, k, d, largest, sorted)
        return TopkResult(_named(_gather(input, idx, d), "TopkBackward0"), idx)
    d, order = _order(input, dim, largest, "topk")
    idx = order
    if input.ndim:
        idx = ops.slice_(idx, (0,) * input.ndim, tuple(k if i == d else s
                                                    for i, s in enumerate(input.shape)),
                         (1,) * input.ndim)
        # a fresh tensor as PyTorch's (not a view into the full order: its
        # strides show, e.g. through pred.t().eq(...)[:k].view(-1))
        idx = ops.cast(idx, idx.dtype)
        if not RECORDERS and type(idx._data) is np.ndarray and k:
            idx = _torch_tie_order(input, np.moveaxis(np.asarray(order._data), d, -1), idx, k,
                                   d, largest, sorted)
    return TopkResult(_named(_gather(input, idx, d), "TopkBackward0"), idx)


#: Rows at least this long take the partition path when k + 1 is at most
#: a quarter of them.
_PARTIAL_MIN = 32


def _partial_ok(input, k: int, n: int) -> bool:
    """Whether eager topk may partition instead of sorting: a NumPy float or
    integer array (no NaN, which sorts as the largest value only in the
    argsort primitive) and ``0 < k``, ``4 * (k + 1) <= n``."""
    if RECORDERS or not input.ndim or type(input._data) is not np.ndarray or k <= 0 \
            or n < _PARTIAL_MIN or 4 * (k + 1) > n:
        return False
    a = input._data
    return a.dtype.kind in "iu" or (a.dtype.kind == "f" and not np.isnan(a).any())


def _head(x: np.ndarray, m: int, largest: bool) -> np.ndarray:
    """The first ``m`` columns of the stable argsort of ``x`` along its last
    axis (descending for ``largest``): the ``m`` largest (smallest) by
    ``argpartition``, then ordered by value, equal values lowest index
    first (as the argsort primitive orders them).  Which of several equal
    values at the boundary are taken may differ from the full sort; rows
    where that matters have equal values among the first ``m`` and are
    replaced by ``_torch_tie_order``."""
    if m <= _EXTRACT_MAX:
        head = _head_by_extraction(x, m, largest)
        if head is not None:
            return head
    n = x.shape[-1]
    if largest:
        cand = np.argpartition(x, n - m, axis=-1)[..., n - m:]
        # indices descending, then a stable ascending sort of the values
        # read backwards: values descending, equal ones lowest index first
        cand = np.sort(cand, axis=-1)[..., ::-1]
        o = np.argsort(np.take_along_axis(x, cand, -1), axis=-1, kind="stable")[..., ::-1]
    else:
        cand = np.sort(np.argpartition(x, m - 1, axis=-1)[..., :m], axis=-1)
        o = np.argsort(np.take_along_axis(x, cand, -1), axis=-1, kind="stable")
    return np.take_along_axis(cand, o, -1).astype(np.int64)


#: ``_head`` takes up to this many columns by repeated argmax: each round is
#: one vectorized pass (~0.1 ns per element), where NumPy's introselect
#: (``argpartition``) costs ~15 ns per element (top-5 of 256 rows of 1000
#: logits: 5.5 ms against PyTorch's 0.76; by extraction 0.4 ms).
_EXTRACT_MAX = 16


def _head_by_extraction(x: np.ndarray, m: int, largest: bool):
    """``_head`` by ``m`` rounds of ``argmax`` (``argmin``), each chosen
    element then overwritten with the dtype's lowest (highest) value:
    argmax returns the first of equal values, so the columns come in the
    stable order, values descending (ascending), equal ones lowest index
    first.  ``None`` (use the partition) for other dtypes, or where a
    round's value is that sentinel: it may then be an element already
    taken."""
    if x.dtype.kind == "f" and x.dtype.itemsize >= 4:
        sentinel = -np.inf if largest else np.inf
    elif x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        sentinel = info.min if largest else info.max
    else:
        return None
    work = np.array(x, order="C").reshape(-1, x.shape[-1])
    rows = np.arange(work.shape[0])
    out = np.empty((work.shape[0], m), np.int64)
    pick = work.argmax if largest else work.argmin
    for j in range(m):
        i = pick(axis=-1)
        if (work[rows, i] == sentinel).any():
            return None
        out[:, j] = i
        work[rows, i] = sentinel
    return out.reshape(x.shape[:-1] + (m,))


def _torch_tie_order(input, order, idx, k, d, largest, sorted_):
    """``idx`` (the first ``k`` of the stable order along ``d``, eager; ``order``:
    at least its first ``k + 1`` columns as a NumPy array along the last
    axis) with the rows where equal values decide the result replaced by the indices
    PyTorch's CPU topk returns (``topk_order``: libstdc++'s selection
    replayed).  A row is decided by equal values when one of its first
    ``k`` sorted values equals the next (NaNs count as equal, as in
    PyTorch's comparator; so do 0.0 and -0.0)."""
    x = np.moveaxis(np.asarray(input._data), d, -1)
    n = x.shape[-1]
    if n < 2:
        return idx
    # (compared in float64, exact for every float dtype, bfloat16 included;
    # only the values compared and the rows replayed are converted)
    wide = (lambda a: a) if x.dtype.kind in "iu" else (lambda a: a.astype(np.float64))
    v = wide(np.take_along_axis(x, order[..., :min(k + 1, n)], -1))
    same = v[..., 1:] == v[..., :-1]
    if v.dtype.kind == "f":
        same |= np.isnan(v[..., 1:]) & np.isnan(v[..., :-1])
    rows = np.nonzero(same.any(-1).reshape(-1))[0]
    if not len(rows):
        return idx
    from tracec.topk_order import torch_topk_constant_row, torch_topk_row
    sub = wide(x.reshape(-1, n)[rows])
    out = np.array(np.moveaxis(np.asarray(idx._data), d, -1)).reshape(-1, k)
    constant = sub.max(-1) == sub.min(-1)     # (a zero-initialized gate's rows)
    if sub.dtype.kind == "f":
        constant |= np.isnan(sub).all(-1)
    for r, row, c in zip(rows.tolist(), sub, constant.tolist()):
        out[r] = torch_topk_constant_row(n, k, largest, sorted_) if c else \
            torch_topk_row(row.tolist(), k, largest, sorted_)
    out = np.moveaxis(out.reshape(x.shape[:-1] + (k,)), -1, d)
    return Tensor._make(np.ascontiguousarray(out), idx.dtype)


def multinomial(input, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator=None):
    """Indices drawn from the rows of ``input`` (non-negative weights)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           f"{dt.scalar_type_name(input.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if not RECORDERS:
        _check_distribution(input, num_samples, replacement)
    if (not replacement or num_samples == 1) and \
            (generator or creation.default_generator).eager_mt() is not None:
        # PyTorch's eager algorithm on its stream: q ~ Exp(1) like input,
        # the top num_samples of input / q (also one draw with replacement,
        # the same distribution: ATen takes this fast path for it, so
        # Categorical.sample() draws this way)
        # (q = empty_like(input).exponential_(1): filled in the memory
        # order of input's layout, a transpose's too)
        mt = (generator or creation.default_generator).eager_mt()
        with graph.no_grad():
            e = creation.memory_order_draw(input, lambda n: torch_rng.exponential(
                mt, n, creation.carrier(input.dtype), 1.0))
            q = ops.div(input.detach(), creation.drawn(e, input.shape, input.dtype))
            if num_samples == 1:
                return ops.reshape(ops.argmax(q, q.ndim - 1), tuple(q.shape[:-1]) + (1,))
            return topk(q, num_samples, -1).indices
    with graph.no_grad():
        p = input.detach() if input.ndim == 2 else ops.reshape(input.detach(), (1, n))
        rows = p.shape[0]
        work = dt.float64
        p = ops.cast(p, work)
        if RECORDERS:
            p = _checked_distribution(p, num_samples, replacement)
        if replacement:
            cdf = cumsum(p, 1)
            total = ops.slice_(cdf, (0, n - 1), (rows, n), (1, 1))
            u = ops.mul(creation.rand((rows, num_samples), dtype=work, generator=generator),
                        total)
            # The first category whose cumulative weight exceeds u.
            below = ops.le(ops.reshape(cdf, (rows, 1, n)), ops.reshape(u, (rows, num_samples, 1)))
            idx = ops.minimum(ops.reduce_sum(below, (2,)), n - 1)
        else:
            u = creation.rand((rows, n), dtype=work, generator=generator)
            # Zero weights get -inf keys: drawn last (PyTorch too draws them
            # once the positive ones run out).
            positive = ops.gt(p, 0.0)
            keys = ops.where(positive, ops.div(ops.log(u), ops.where(positive, p, 1.0)),
                             float("-inf"))
            order = ops.argsort(keys, 1, True)
            # (a fresh tensor, as topk's indices)
            idx = ops.cast(ops.slice_(order, (0, 0), (rows, num_samples), (1, 1)), order.dtype)
    return idx if input.ndim == 2 else ops.reshape(idx, (num_samples,))


#: PyTorch's messages: its fast path (one sample, or none replaced) checks
#: every entry at once (_BAD_PROBS); its CPU sampling kernel names an entry
#: not >= 0 (a NaN too), then an infinite one; both refuse a row summing to <= 0
_BAD_PROBS = "probability tensor contains either `inf`, `nan` or element < 0"
_NEGATIVE = "invalid multinomial distribution (encountering probability entry < 0)"
_INFINITE = "invalid multinomial distribution (encountering probability entry = infinity or NaN)"
_ZERO_SUM = "invalid multinomial distribution (sum of probabilities <= 0)"


def _messages(num_samples: int, replacement: bool) -> tuple:
    """(message for an entry < 0 or NaN, for an infinite one) on this path."""
    if not replacement or num_samples == 1:
        return _BAD_PROBS, _BAD_PROBS
    return _NEGATIVE, _INFINITE


def _check_distribution(p: Tensor, num_samples: int = 1, replacement: bool = False) -> None:
    # Eager mode: a Python check of the argument's values.
    negative, infinite = _messages(num_samples, replacement)
    a = p._data.astype(np.float64)
    if not np.all(a >= 0):
        raise RuntimeError(negative)
    if not np.all(np.isfinite(a)):
        raise RuntimeError(infinite)
    rows = a.reshape(-1, a.shape[-1])
    if (rows.sum(axis=1) <= 0).any():
        raise RuntimeError(_ZERO_SUM)


def _checked_distribution(p: Tensor, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """The same checks as ``_check_distribution`` on float64 rows ``p``, as
    recorded ``check`` ops (while tracing: a compiled call checks its own
    probabilities)."""
    negative, infinite = _messages(num_samples, replacement)
    p = ops.check(p, ops.ge(p, 0.0), negative)
    p = ops.check(p, ops.ne(p, float("inf")), infinite)
    total = ops.reshape(ops.reduce_sum(p, (1,)), (p.shape[0], 1))
    return ops.check(p, ops.gt(total, 0.0), _ZERO_SUM)
