"""``torch.testing``: ``assert_close`` (PyTorch's default tolerances per
dtype and its mismatch report), ``assert_allclose`` and ``make_tensor``.

Invariant: ``assert_close`` compares tensors, numbers and (nested)
sequences and mappings of them; attributes first (shape, dtype unless
``check_dtype=False``), then values with ``|a - e| <= atol + rtol·|e|``.
"""
from __future__ import annotations

import collections.abc
import math
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec.tensor import Size, Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# PyTorch's defaults (torch/testing/_comparison.py).
_TOLERANCES = {dt.float16: (1e-3, 1e-5), dt.bfloat16: (1.6e-2, 1e-5),
               dt.float32: (1.3e-6, 1e-5), dt.float64: (1e-7, 1e-7)}


def _as_array(x):
    if isinstance(x, Tensor):
        return x.detach().numpy(), x.dtype
    if isinstance(x, bool):
        return np.array(x), dt.bool_
    if isinstance(x, int):
        return np.array(x, np.int64), dt.int64
    if isinstance(x, float):
        return np.array(x, np.float64), dt.float64
    if isinstance(x, np.ndarray):
        return x, dt.to_dtype(x.dtype) if x.dtype != object else None
    return None, None


def _fail(msg, custom):
    if callable(custom):
        msg = custom(msg)
    elif custom is not None:
        msg = custom
    raise AssertionError(msg)


def _close(actual, expected, rtol, atol, equal_nan, check_dtype, msg, path):
    a, ad = _as_array(actual)
    e, ed = _as_array(expected)
    where = f"\n\nThe failure occurred for item {path}" if path else ""
    if a is None or e is None:
        if actual != expected:
            _fail(f"Object comparison failed: {actual!r} != {expected!r}{where}", msg)
        return
    if isinstance(actual, Tensor) != isinstance(expected, Tensor) and \
            isinstance(actual, (int, float)) != isinstance(expected, (int, float)):
        _fail(f"No comparison pair was able to handle inputs of type {type(actual)} and "
              f"{type(expected)}.", msg)
    if tuple(a.shape) != tuple(e.shape):
        shown = (repr(Size(a.shape)), repr(Size(e.shape)))
        _fail(f"The values for attribute 'shape' do not match: {shown[0]} != {shown[1]}."
              f"{where}", msg)
    if check_dtype and ad is not ed:
        _fail(f"The values for attribute 'dtype' do not match: {ad} != {ed}.{where}", msg)
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'rtol' if rtol is None else 'atol'}.")
    if rtol is None:
        rtol = max(_TOLERANCES.get(ad, (0.0, 0.0))[0], _TOLERANCES.get(ed, (0.0, 0.0))[0])
        atol = max(_TOLERANCES.get(ad, (0.0, 0.0))[1], _TOLERANCES.get(ed, (0.0, 0.0))[1])
    a64 = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.int64)
    e64 = e.astype(np.float64) if e.dtype != np.bool_ else e.astype(np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a64 - e64)
        ok = (diff <= atol + rtol * np.abs(e64)) | (a64 == e64)
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
    if ok.all():
        return
    kind = "Scalars" if a.ndim == 0 and not isinstance(actual, Tensor) else "Tensor-likes"
    n_bad, n = int((~ok).sum()), ok.size
    if a.ndim == 0:
        text = (f"{kind} are not close!\n\nExpected {e.item()} but got {a.item()}.\n"
                f"Absolute difference: {float(diff):g} (up to {atol} allowed)\n"
                f"Relative difference: {float(diff / abs(e64)) if e64 else math.inf:g} "
                f"(up to {rtol} allowed)")
    else:
        d = np.where(ok, -np.inf, np.nan_to_num(diff, nan=np.inf))
        i_abs = tuple(int(i) for i in np.unravel_index(int(np.argmax(d)), a.shape))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(ok, -np.inf, np.nan_to_num(diff / np.abs(e64), nan=np.inf))
        i_rel = tuple(int(i) for i in np.unravel_index(int(np.argmax(rel)), a.shape))
        text = (f"{kind} are not close!\n\nMismatched elements: {n_bad} / {n} "
                f"({100 * n_bad / n:.1f}%)\n"
                f"Greatest absolute difference: {float(diff[i_abs])} at index {i_abs} "
                f"(up to {atol} allowed)\n"
                f"Greatest relative difference: {float(rel[i_rel])} at index {i_rel} "
                f"(up to {rtol} allowed)")
    _fail(text + where, msg)


def _walk(actual, expected, path, kw):
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected,
                                                                  collections.abc.Mapping):
        if set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                  f"{sorted(map(str, expected))}", kw["msg"])
        for k in actual:
            _walk(actual[k], expected[k], f"{path}[{k!r}]", kw)
    elif isinstance(actual, collections.abc.Sequence) and not isinstance(actual, str) \
            and isinstance(expected, collections.abc.Sequence) and not isinstance(expected, str):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                  kw["msg"])
        for i, (x, y) in enumerate(zip(actual, expected)):
            _walk(x, y, f"{path}[{i}]", kw)
    else:
        _close(actual, expected, path=path, **kw)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    _walk(actual, expected, "", dict(rtol=rtol, atol=atol, equal_nan=equal_nan,
                                     check_dtype=check_dtype, msg=msg))


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated form: dtypes need not match; numbers become tensors.
    Warns as PyTorch does (a FutureWarning pointing at assert_close)."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed "
                  "in a future release. Please use `torch.testing.assert_close()` instead. You "
                  "can find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_dtype=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """Uniform values in [low, high) (PyTorch's defaults: [-9, 9) for
    floats, [-9, 10) for integers, {False, True} for bool)."""
    from tracec import creation
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    d = dt.to_dtype(dtype)
    if d is dt.bool_:
        t = creation.randint(0, 2, shape).to(dt.bool_)
    elif d.is_floating_point:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        if lo > hi:
            raise ValueError(f"`low` must be less than or equal to `high`, but got {lo} > {hi}")
        # PyTorch's draws: uniform_ on a tensor of the dtype itself, twice
        # as wide in the last dim and every other element kept when
        # noncontiguous (so that a seed gives PyTorch's values)
        wide = noncontiguous and math.prod(shape) > 1
        t = creation.empty((*shape[:-1], 2 * shape[-1]) if wide else shape, dtype=d)
        t.uniform_(lo, hi)
        if wide:
            t = t[..., 1::2]
        if exclude_zero:
            t = t.masked_fill(t == 0, float(np.finfo(d.np).tiny if d.np != object else 1e-3))
    else:
        lo = -9 if low is None else math.ceil(low)
        hi = 10 if high is None else math.ceil(high) if high != math.floor(high) else int(high)
        if d is dt.uint8:
            lo = max(lo, 0)
        t = creation.randint(lo, hi, shape, dtype=d)
        if exclude_zero:
            t = t.masked_fill(t == 0, 1)
    if requires_grad:
        t.requires_grad_(True)
    return t
