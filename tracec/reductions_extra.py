"""More of PyTorch's reductions: ``prod median nanmedian mode
kthvalue quantile nanquantile nansum nanmean std_mean var_mean aminmax
cummax cummin logcumsumexp count_nonzero cov corrcoef`` (histograms:
``binning``; differences and integrals: ``differences``).

Invariant: all are composites of primitives (order statistics come from the
``argsort`` primitive and ``gather``, so their gradient flows to the selected
elements, as PyTorch's does).  ``prod`` multiplies pairs
in log2(n) rounds, so its gradient is exact also at zeros.  Results with
several parts are PyTorch's named tuples (``values, indices`` ...).
"""
from __future__ import annotations


import numpy as np

from tracec import dtypes as dt
from tracec import functions as F
from tracec import ops
from tracec.functions import _keep, _named, tensor_arg
from tracec.graph import saves_operands
from tracec.math_extra import _const, _floor, _rint
from tracec.ops.core import normalize_axis
from tracec.rearrange import _scan, _scan_limit, _slice
from tracec.symbolic import Sym
from tracec import shape_ops as S
from tracec.quickselect import kth_index
from tracec.tensor import RECORDERS, Tensor
from tracec.return_types import structseq

__all__ = ["prod", "nansum", "nanmean", "std_mean", "var_mean", "aminmax", "median",
           "nanmedian", "mode", "kthvalue", "quantile", "nanquantile", "cummax", "cummin",
           "logcumsumexp", "count_nonzero", "cov", "corrcoef"]

MedianResult = structseq("median", ["values", "indices"])
NanmedianResult = structseq("nanmedian", ["values", "indices"])
ModeResult = structseq("mode", ["values", "indices"])
KthvalueResult = structseq("kthvalue", ["values", "indices"])
AminmaxResult = structseq("aminmax", ["min", "max"])
CummaxResult = structseq("cummax", ["values", "indices"])
CumminResult = structseq("cummin", ["values", "indices"])


def _every_other(x, d, first, n):
    """Elements first, first + 2, ... < n along d."""
    return ops.slice_(x, tuple(first if i == d else 0 for i in range(x.ndim)),
                      tuple(n if i == d else s for i, s in enumerate(x.shape)),
                      tuple(2 if i == d else 1 for i in range(x.ndim)))


# --- prod -----------------------------------------------------------------------------

def _prod_axis(x, d):
    n = x.shape[d]
    if n == 0:       # 1 + an empty sum: the ones keep x's history (a zero gradient), as PyTorch's
        return F.add(F.sum(x, d, dtype=x.dtype), 1)
    while n > 1:
        if n % 2:
            x = ops.pad(x, (0,) * x.ndim, tuple(1 if i == d else 0 for i in range(x.ndim)),
                        (0,) * x.ndim, 1)
            n += 1
        x = ops.mul(_every_other(x, d, 0, n), _every_other(x, d, 1, n))
        n //= 2
    return ops.reshape(x, tuple(s for i, s in enumerate(x.shape) if i != d))


def prod(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    x = tensor_arg(input, "prod")
    if dtype is not None:
        x = ops.cast(x, dt.to_dtype(dtype)) if dt.to_dtype(dtype) is not x.dtype else x
    elif not (x.dtype.is_floating_point or x.dtype.is_complex) and x.dtype is not dt.int64:
        x = ops.cast(x, dt.int64)
    if dim is None:
        y = _prod_axis(ops.reshape(x, (x.numel(),)), 0)
        return _named(y, "ProdBackward0")
    d = normalize_axis(dim, x.ndim)
    if x.ndim == 0:
        return _named(ops.cast(x, x.dtype), "ProdBackward1")
    y = _prod_axis(x, d)
    if x.dtype in (dt.float16, dt.bfloat16) and 1 < x.shape[d] <= _SEQ_PROD_MAX:
        y = _sequential_value(y, x, d)
    return _named(_keep(x, y, (d,), keepdim), "ProdBackward1")


#: the longest half-precision row whose product is taken element by element
_SEQ_PROD_MAX = 256


def _sequential_value(y, x, d):
    """``y`` (the product along ``d``) with the value PyTorch's CPU kernel
    gives a bfloat16 / float16 row: the running product rounded at each
    element (tracec's pairwise tree rounds differently: over half the rows
    one unit off); the tree's gradient, plus the exact step between the two
    values as a constant (none where they agree: infinities, -0.0)."""
    xs = ops.stop_gradient(x)
    acc = ops.reshape(_slice(xs, d, 0, 1), tuple(y.shape))
    for j in range(1, x.shape[d]):
        acc = ops.mul(acc, ops.reshape(_slice(xs, d, j, j + 1), tuple(y.shape)))
    same = ops.eq(acc, y)
    return ops.where(same, y, ops.add(y, ops.stop_gradient(ops.where(same, 0.0, ops.sub(acc, y)))))


# --- nan-aware, moments, extremes --------------------------------------------------------

def _not_nan(x):
    return ops.eq(x, x)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    x = tensor_arg(input, "nansum")
    if x.dtype.is_floating_point:
        x = ops.where(_not_nan(x), x, 0.0)
    return _named(F.sum(x, dim, keepdim, dtype=dtype), "NansumBackward0")


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    x = tensor_arg(input, "nanmean")
    if not x.dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype "
                           f"but got {dt.scalar_type_name(x.dtype)}")
    n = F.sum(_not_nan(x), dim, keepdim)
    return ops.div(nansum(x, dim, keepdim, dtype=dtype), ops.cast(n, x.dtype if dtype is None
                                                                  else dt.to_dtype(dtype)))


def _moments(name, x, dim, unbiased, keepdim, correction):
    x = tensor_arg(x, name)
    if isinstance(dim, bool) and unbiased is None:
        dim, unbiased = None, dim
    var = F._var(x, dim, unbiased, keepdim, correction, name)
    return var, F.mean(x, dim, keepdim)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    v, m = _moments("var_mean", input, dim, unbiased, keepdim, correction)
    saves_operands(v, m)        # (PyTorch's VarMeanBackward0 saves its input)
    return v, m


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    v, m = _moments("std_mean", input, dim, unbiased, keepdim, correction)
    s = _named(F._safe_root(v, 2), "StdBackward0")   # gradient 0 where std is 0
    saves_operands(s, m)        # (PyTorch's StdMeanBackward0 saves its input and result)
    return s, m


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    x = tensor_arg(input, "aminmax")
    if x.numel() == 0:      # (PyTorch's own words, not amin's)
        if dim is None:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        d = normalize_axis(dim, max(x.ndim, 1))
        if x.ndim and x.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    return AminmaxResult(F.amin(x, dim, keepdim), F.amax(x, dim, keepdim))


def count_nonzero(input, dim=None):  # noqa: A002
    x = tensor_arg(input, "count_nonzero")
    return F.sum(ops.ne(x, 0), dim)


# --- order statistics ----------------------------------------------------------------------

def _sorted(x, d):
    """(sorted values, their indices in x) along d; NaN sorts last."""
    idx = ops.argsort(x, d, False)
    return ops.gather(x, idx, d), idx


def _pick(x, d, pos, keepdim):
    """Values and indices of x at sorted position ``pos`` (kept dim d)."""
    s, idx = _sorted(x, d)
    i = ops.gather(idx, pos, d)
    v = ops.gather(x, i, d)
    if not keepdim:
        shape = tuple(n for j, n in enumerate(x.shape) if j != d)
        v, i = ops.reshape(v, shape), ops.reshape(i, shape)
    return v, i


def _count_valid(x, d):
    return ops.reshape(ops.reduce_sum(ops.cast(_not_nan(x), dt.int64), (d,)),
                       tuple(1 if j == d else n for j, n in enumerate(x.shape)))


def _median(name, result, x, dim, keepdim, ignore_nan):
    x = tensor_arg(x, name)
    full = dim is None
    if full:
        x, d = ops.reshape(x, (x.numel(),)), 0
    elif x.ndim == 0:
        return result(ops.cast(x, x.dtype), ops.full((), 0, dt.int64, like=x))
    else:
        d = normalize_axis(dim, x.ndim)
    n = x.shape[d]
    if n == 0 and full:
        return _empty_median(x, name)
    if n == 0:      # (nanmedian's message says median too, as PyTorch's)
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    if x.dtype is dt.bool_:
        # (nanmedian's says median too, as PyTorch's)
        raise NotImplementedError(f"\"median_{'cpu' if full else 'out'}\" not implemented for "
                                  "'Bool'")
    keep = tuple(1 if j == d else s for j, s in enumerate(x.shape))
    if x.dtype.is_floating_point:
        valid = _count_valid(x, d)
        mid = ops.div(ops.sub(valid, 1), 2)
        # A row with NaN: median is NaN at the first NaN; nanmedian skips
        # NaNs (and takes the middle one of an all-NaN row, as PyTorch).
        if ignore_nan:
            pos = ops.where(ops.eq(valid, 0), (n - 1) // 2, mid)
        else:
            pos = ops.where(ops.lt(valid, n), valid, mid)
    else:
        pos = ops.full(keep, (n - 1) // 2, dt.int64, like=x)
    v, i = _pick(x, d, pos, keepdim and not full)
    if full:
        return _named(_even_share(x, ops.reshape(v, ())), name.capitalize() + "Backward0")
    return result(_named(v, name.capitalize() + "Backward1"), i)


def _empty_median(x, name):
    """PyTorch's median / nanmedian of no elements: NaN for a float tensor
    (in the graph, with an empty gradient), the smallest value for an
    integer one, True for bool."""
    if x.dtype.is_floating_point:
        v = ops.add(ops.mul(ops.reduce_sum(x, (0,)), 0.0), float("nan"))
        return _named(v, name.capitalize() + "Backward0")
    fill = True if x.dtype is dt.bool_ else int(np.iinfo(x.dtype.np).min)
    return ops.full((), fill, x.dtype, like=x)


def _even_share(x, v):
    """``v`` (an element of ``x``) with its gradient shared evenly by every
    element equal to it (NaN counting as equal to NaN), as PyTorch's full
    ``median`` does."""
    if not x.requires_grad:
        return v
    vd = v.detach()
    mask = ops.logical_or(ops.eq(x.detach(), vd),
                          ops.logical_and(ops.ne(x.detach(), x.detach()), ops.ne(vd, vd)))
    # Infinite elements are left out of the sum that carries the gradient:
    # s - s.detach() must be 0, and inf - inf is NaN (median of -inf values).
    finite = ops.ne(ops.abs_(x.detach()), float("inf"))   # (NaN stays: the median is NaN)
    s = ops.reduce_sum(ops.where(ops.logical_and(mask, finite), x, 0.0), (0,))
    count = ops.reduce_sum(ops.cast(mask, x.dtype), (0,))
    return ops.add(vd, ops.div(ops.sub(s, s.detach()), count))


def median(input, dim=None, keepdim=False):  # noqa: A002
    return _median("median", MedianResult, input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    return _median("nanmedian", NanmedianResult, input, dim, keepdim, True)


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    x = tensor_arg(input, "kthvalue")
    if x.dtype is dt.bool_:
        raise NotImplementedError("\"kthvalue_cpu\" not implemented for 'Bool'")
    d = normalize_axis(dim, x.ndim)
    n = x.shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if x.ndim == 0:
        return KthvalueResult(ops.cast(x, x.dtype), ops.full((), 0, dt.int64, like=x))
    keep = tuple(1 if j == d else s for j, s in enumerate(x.shape))
    _, idx = _sorted(x, d)
    i = _tie_indices(x, d, k - 1, ops.gather(idx, ops.full(keep, k - 1, dt.int64, like=x), d))
    v = ops.gather(x, i, d)
    if not keepdim:
        shape = tuple(n for j, n in enumerate(x.shape) if j != d)
        v, i = ops.reshape(v, shape), ops.reshape(i, shape)
    return KthvalueResult(_named(v, "KthvalueBackward0"), i)


def _tie_indices(x, d, k, i):
    """``i`` (the stable order's index of the k-th smallest, kept dim
    ``d``) with PyTorch's index where the row holds that value more than
    once: its quickselect's (``tracec.quickselect``), in eager mode."""
    if RECORDERS or type(x._data) is not np.ndarray:
        return i
    a = np.moveaxis(x._data, d, -1)
    at = np.moveaxis(i._data, d, -1)
    rows, n = a.reshape(-1, a.shape[-1]), a.shape[-1]
    out = at.reshape(-1, 1).copy()
    val = np.take_along_axis(rows, out, -1)
    same = (rows == val) | (np.isnan(rows) & np.isnan(val)) if a.dtype.kind in "fc" else \
        rows == val
    tied = np.flatnonzero(same.sum(-1) > 1)
    if not tied.size:
        return i
    for r in tied:
        out[r, 0] = kth_index(rows[r], k)
    return Tensor._make(np.ascontiguousarray(np.moveaxis(out.reshape(at.shape), -1, d)),
                        dt.int64)


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """The most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence, as PyTorch's."""
    x = tensor_arg(input, "mode")
    if x.ndim == 0:
        return ModeResult(ops.cast(x, x.dtype), ops.full((), 0, dt.int64, like=x))
    d = normalize_axis(dim, x.ndim)
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    xm = ops.transpose(x, tuple(j for j in range(x.ndim) if j != d) + (d,))
    xd = xm.detach()
    counts = ops.reduce_sum(ops.cast(ops.eq(ops.reshape(xd, tuple(xd.shape) + (1,)),
                                            ops.reshape(xd, tuple(xd.shape[:-1]) + (1, n))),
                                     dt.int64), (xd.ndim,))
    best = ops.reshape(ops.reduce_max(counts, (xd.ndim - 1,)), tuple(xd.shape[:-1]) + (1,))
    big = float("inf") if x.dtype.is_floating_point else (
        True if x.dtype is dt.bool_ else int(np.iinfo(x.dtype.np).max))
    cand = ops.where(ops.eq(counts, best), xd, _const(xd, big))
    value = ops.reshape(ops.reduce_min(cand, (xd.ndim - 1,)), tuple(xd.shape[:-1]) + (1,))
    pos = ops.iota(tuple(xd.shape), dt.int64, xd.ndim - 1, like=xd)
    last = ops.reduce_max(ops.where(ops.eq(xd, value), pos, -1), (xd.ndim - 1,))
    last = ops.reshape(last, tuple(xd.shape[:-1]) + (1,))
    v = ops.gather(xm, last, xd.ndim - 1)
    back = tuple(range(d)) + (x.ndim - 1,) + tuple(range(d, x.ndim - 1))
    v, last = ops.transpose(v, back), ops.transpose(last, back)
    if not keepdim:
        shape = tuple(s for j, s in enumerate(x.shape) if j != d)
        v, last = ops.reshape(v, shape), ops.reshape(last, shape)
    return ModeResult(_named(v, "ModeBackward0"), last)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, x, q, dim, keepdim, interpolation, ignore_nan):
    x = tensor_arg(x, name)
    if not x.dtype.is_floating_point or x.dtype in (dt.float16, dt.bfloat16):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    if isinstance(q, Tensor):
        if q.dtype is not x.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        qt = ops.reshape(q, (q.numel(),))
    else:
        qs = [float(v) for v in (q if isinstance(q, (list, tuple)) else [q])]
        if any(not 0 <= v <= 1 for v in qs):
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {qs[0]}")
        scalar_q = not isinstance(q, (list, tuple))
        qt = Tensor._make(np.asarray(qs, dtype=x.dtype.np), x.dtype)
    full = dim is None
    xs = ops.reshape(x, (x.numel(),)) if full else x
    d = 0 if full else normalize_axis(dim, x.ndim)
    if xs.ndim == 0:      # a 0-d input's "dim 0" is the identity: no dim to keep
        xs, d, keepdim = ops.reshape(xs, (1,)), 0, keepdim and full
    n = xs.shape[d]
    if n == 0:
        raise IndexError(f"{name}() input tensor must be non-empty")
    s, _ = _sorted(xs, d)
    # Rows last, one q per leading entry: [Q, rows..., n].
    s = ops.transpose(s, tuple(j for j in range(s.ndim) if j != d) + (d,))
    nq = qt.shape[0]
    rows = tuple(s.shape[:-1])
    s = ops.broadcast_to(ops.reshape(s, (1,) + rows + (n,)), (nq,) + rows + (n,))
    valid = ops.cast(_count_valid(s, s.ndim - 1), x.dtype)
    qb = ops.reshape(qt, (nq,) + (1,) * (len(rows) + 1))
    if ignore_nan:   # PyTorch clamps negative ranks (all-NaN rows) to 0
        rank = ops.mul(qb, ops.sub(valid, 1.0))
        rank = ops.where(ops.lt(rank, 0.0), 0.0, rank)
    else:
        # A row with NaN: its last sorted element (a NaN), as PyTorch.
        rank = ops.mul(qb, float(n - 1))
        rank = ops.where(ops.lt(valid, float(n)), float(n - 1), rank)
    if interpolation == "nearest":
        rank = _rint(rank)
    lo = _floor(rank)
    hi = ops.sub(0.0, _floor(ops.neg(rank)))
    v_lo = ops.gather(s, ops.cast(lo, dt.int64), s.ndim - 1)
    v_hi = ops.gather(s, ops.cast(hi, dt.int64), s.ndim - 1)
    if interpolation in ("lower", "nearest"):
        v = v_lo
    elif interpolation == "higher":
        v = v_hi
    else:
        w = ops.sub(rank, lo) if interpolation == "linear" else _const(rank, 0.5)
        v = ops.add(v_lo, ops.mul(w, ops.sub(v_hi, v_lo)))
    v = ops.reshape(v, (nq,) + rows)
    if keepdim:
        if full:
            v = ops.reshape(v, (nq,) + (1,) * x.ndim)
        else:
            v = ops.reshape(v, (nq,) + rows[:d] + (1,) + rows[d:])
    if scalar_q:
        v = ops.reshape(v, tuple(v.shape[1:]))
    return _named(v, "QuantileBackward0")


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# --- scans -----------------------------------------------------------------------------------

def _cum_extreme(name, result, x, dim, better):
    x = tensor_arg(x, name)
    d = normalize_axis(dim, x.ndim)
    if x.ndim == 0:
        return result(ops.cast(x, x.dtype), ops.full((), 0, dt.int64, like=x))
    n = x.shape[d]
    xd = x.detach()
    idx = ops.iota(tuple(x.shape), dt.int64, d, like=x)
    v, i = xd, idx
    floating = x.dtype.is_floating_point
    k = 1
    # A symbolic length: every shift up to a limit above the traced one,
    # each padded first and sliced after (a shift past the end is all
    # padding), with one guard (n <= limit), as ``_scan`` does.
    limit = _scan_limit(n) if isinstance(n, Sym) else n
    zero = (0,) * x.ndim
    while k < limit:
        low = tuple(k if j == d else 0 for j in range(x.ndim))
        if isinstance(n, Sym):
            pv = _slice(ops.pad(v, low, zero, zero, 0), d, 0, n)
            pi = _slice(ops.pad(i, low, zero, zero, -1), d, 0, n)
        else:
            pv = ops.pad(_slice(v, d, 0, n - k), low, zero, zero, 0)
            pi = ops.pad(_slice(i, d, 0, n - k), low, zero, zero, -1)
        # Later wins on ties and when it is NaN (PyTorch's kernel moves the
        # index to every NaN it meets); a NaN already seen stays otherwise.
        take = ops.logical_or(better(v, pv), ops.eq(pi, -1))
        if floating:
            take = ops.logical_or(ops.logical_and(take, ops.eq(pv, pv)), ops.ne(v, v))
        v = ops.where(take, v, pv)
        i = ops.where(take, i, pi)
        k *= 2
    return result(_named(ops.gather(x, i, d), name.capitalize() + "Backward0"), i)


def cummax(input, dim):  # noqa: A002
    return _cum_extreme("cummax", CummaxResult, input, dim, ops.ge)


def cummin(input, dim):  # noqa: A002
    return _cum_extreme("cummin", CumminResult, input, dim, ops.le)


def _logaddexp_scan(a, b):
    # b is the earlier (shifted) value; -inf pads combine to a.
    m = ops.maximum(a, b)
    both_inf = ops.logical_and(ops.eq(a, b), ops.eq(ops.abs_(a), float("inf")))
    dlt = ops.neg(ops.abs_(ops.sub(ops.where(both_inf, 0.0, a), ops.where(both_inf, 0.0, b))))
    return ops.where(both_inf, a, ops.add(m, ops.log(ops.add(ops.exp(dlt), 1.0))))


def logcumsumexp(input, dim):  # noqa: A002
    x = F._float_unary("logcumsumexp", lambda t: t)(input)
    return _scan(x, dim, None, _logaddexp_scan, float("-inf"), "LogcumsumexpBackward0")


# --- covariance ------------------------------------------------------------------------

def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """Covariance of the rows (variables) of ``input`` over its columns
    (observations), with PyTorch's frequency and analytic weights."""
    x = tensor_arg(input, "cov")
    if x.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {x.ndim} dimensions")
    if not x.dtype.is_floating_point:
        x = ops.cast(x, dt.get_default_dtype())
    x = ops.reshape(x, (1, x.numel())) if x.ndim < 2 else x
    n = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is not None:
            wt = ops.cast(wt, x.dtype) if wt.dtype is not x.dtype else wt
            w = wt if w is None else F.mul(w, wt)
    if w is None:
        avg = F.mean(x, 1, keepdim=True)
        norm = float(max(n - correction, 0))
        xw = ops.sub(x, avg)
        c = F.div(F.matmul(xw, S.mT(xw)), norm)
    else:
        w_sum = F.sum(w)
        avg = F.div(F.sum(F.mul(x, w), 1, keepdim=True), w_sum)
        if aweights is None:
            norm = F.sub(w_sum, correction)
        else:
            a = ops.cast(aweights, x.dtype)
            norm = F.sub(w_sum, F.div(F.mul(F.sum(F.mul(w, a)), correction), w_sum))
        norm = F.where(F.lt(norm, 0), 0.0, norm)
        xw = ops.sub(x, avg)
        c = F.div(F.matmul(F.mul(xw, w), S.mT(xw)), norm)
    # PyTorch squeezes the result: one variable's covariance is 0-d.
    return ops.reshape(c, ()) if input.ndim < 2 or c.shape[0] == 1 else c


def corrcoef(input):  # noqa: A002
    c = cov(input)
    if c.ndim == 0:
        return F.div(c, c)
    d = F.sqrt(diagonal_of(c))
    c = F.div(F.div(c, ops.reshape(d, (d.shape[0], 1))), ops.reshape(d, (1, d.shape[0])))
    return F.clamp(c, -1, 1)


def diagonal_of(m):
    n = m.shape[0]
    return ops.slice_(ops.reshape(m, (n * n,)), (0,), (n * n,), (n + 1,))


_METHODS = {"prod": prod, "nansum": nansum, "nanmean": nanmean, "aminmax": aminmax,
            "median": median, "nanmedian": nanmedian, "mode": mode, "kthvalue": kthvalue,
            "quantile": quantile, "nanquantile": nanquantile, "cummax": cummax,
            "cummin": cummin, "logcumsumexp": logcumsumexp, "count_nonzero": count_nonzero,
            "cov": cov, "corrcoef": corrcoef}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
