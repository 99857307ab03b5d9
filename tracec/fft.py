"""``tracec.fft``: PyTorch's discrete Fourier transforms (``fft ifft rfft
irfft hfft ihfft``, their 2-D and n-D forms, ``fftfreq rfftfreq fftshift
ifftshift``), with ``n``/``s``, ``dim`` and ``norm`` as in PyTorch.

Invariant: eagerly the transforms run NumPy's pocketfft on the values;
inside ``tracec.compile`` they are recorded as products with DFT matrices
(``tracec.complex_trace``: exact, O(n^2) per transformed axis; an axis of
symbolic size is refused naming the op and the user's line).  Each is one
of three custom ``autograd.Function``s,
c2c, r2c and c2r, whose backward is PyTorch's: the adjoint transform with
the opposite normalization (``backward`` <-> ``forward``, ``ortho`` stays),
the zero padding or cropping of ``n``/``s`` undone, r2c's gradient padded
back to the full spectrum before its inverse, and c2r's gradient an r2c
whose Hermitian-mirrored bins are doubled.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import functions as F
from tracec.complex_ops import conj, conj_physical, np_function
from tracec.creation import arange
from tracec.functions import tensor_arg
from tracec.out_arg import with_out
from tracec.ops.core import normalize_axis
from tracec.rearrange import roll
from tracec.tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm):
    norm = "backward" if norm is None else norm
    if norm not in _SWAP:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    return norm


def _resize(a: np.ndarray, axes, sizes) -> np.ndarray:
    """``a`` cropped or zero-padded to ``sizes`` along ``axes`` (PyTorch's
    treatment of ``n``/``s``)."""
    for ax, n in zip(axes, sizes):
        m = a.shape[ax]
        if n < m:
            a = np.take(a, np.arange(n), axis=ax)
        elif n > m:
            pad = [(0, 0)] * a.ndim
            pad[ax] = (0, n - m)
            a = np.pad(a, pad)
    return a


def _complex_np(real_np):
    return np.complex128 if real_np == np.float64 else np.complex64


# --- the three transforms, with their VJPs ------------------------------------------------------

def _c2c_fwd(ctx, a, axes, sizes, norm, forward):
    ctx.meta = (tuple(a.shape[ax] for ax in axes), axes, sizes, norm, forward)
    x = _resize(a, axes, sizes)
    f = np.fft.fftn if forward else np.fft.ifftn
    return f(x, axes=axes, norm=norm).astype(a.dtype, copy=False)


def _c2c_bwd(ctx, g):
    orig, axes, sizes, norm, forward = ctx.meta
    f = np.fft.ifftn if forward else np.fft.fftn
    return (_resize(f(g, axes=axes, norm=_SWAP[norm]), axes, orig), None, None, None, None)


def _r2c_fwd(ctx, a, axes, sizes, norm, onesided):
    ctx.meta = (tuple(a.shape[ax] for ax in axes), axes, sizes, norm, onesided)
    x = _resize(a, axes, sizes)
    out = np.fft.rfftn(x, axes=axes, norm=norm) if onesided else \
        np.fft.fftn(x, axes=axes, norm=norm)
    return out.astype(_complex_np(a.dtype), copy=False)


def _r2c_bwd(ctx, g):
    orig, axes, sizes, norm, onesided = ctx.meta
    if onesided:   # the dropped half of the spectrum has no gradient: zeros
        g = _resize(g, axes[-1:], sizes[-1:])
    gx = np.fft.ifftn(g, axes=axes, norm=_SWAP[norm]).real
    return (_resize(gx, axes, orig), None, None, None, None)


def _c2r_fwd(ctx, a, axes, sizes, norm):
    half = sizes[-1] // 2 + 1
    ctx.meta = (tuple(a.shape[ax] for ax in axes), axes, sizes, norm)
    x = _resize(a, axes, tuple(sizes[:-1]) + (half,))
    out = np.fft.irfftn(x, s=sizes, axes=axes, norm=norm)
    return out.astype(a.real.dtype, copy=False)


def _c2r_bwd(ctx, g):
    orig, axes, sizes, norm = ctx.meta
    gx = np.fft.rfftn(g, axes=axes, norm=_SWAP[norm])
    n, half = sizes[-1], sizes[-1] // 2 + 1
    if n - half > 0:
        # Bins 1 .. n - half stand for themselves and their mirror images.
        idx = [slice(None)] * gx.ndim
        idx[axes[-1]] = slice(1, 1 + n - half)
        gx[tuple(idx)] *= 2
    return (_resize(gx, axes, orig), None, None, None)


_c2c = np_function("FftC2CBackward0", _c2c_fwd, _c2c_bwd, traced="fft_c2c")
_r2c = np_function("FftR2CBackward0", _r2c_fwd, _r2c_bwd, traced="fft_r2c")
_c2r = np_function("FftC2RBackward0", _c2r_fwd, _c2r_bwd, traced="fft_c2r")


# --- arguments -----------------------------------------------------------------------------------

def _input(x, name, *, real=False):
    x = tensor_arg(x, name)
    if real and x.dtype.category == 3:
        raise RuntimeError(f"{name} expects a real input tensor, but got "
                           f"{dt.scalar_type_name(x.dtype)}")
    if x.dtype.category < 2:
        x = F._to(x, dt.get_default_dtype())
    elif x.dtype in (dt.float16, dt.bfloat16):
        x = F._to(x, dt.float32)
    return x


def _dims(x: Tensor, s, dim, default_all: bool):
    """PyTorch's ``(s, dim)`` resolution for the n-D transforms: the
    transformed dims (unique, in order) and their sizes (None: the input's)."""
    if dim is None:
        if s is None:
            dims = list(range(x.ndim)) if default_all else [x.ndim - 2, x.ndim - 1]
        else:
            s = list(s)
            if len(s) > x.ndim:
                raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                                   f"{x.ndim} dimensions.")
            dims = list(range(x.ndim - len(s), x.ndim))
    else:
        dims = [normalize_axis(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    if s is not None:
        s = [int(v) for v in s]
        for v, d in zip(s, dims):
            if v == -1:
                continue
            if v < 1:
                raise RuntimeError(f"Invalid number of data points ({v}) specified")
        s = [x.shape[d] if v == -1 else v for v, d in zip(s, dims)]
    return dims, s


def _one(x, n, dim):
    d = normalize_axis(dim, x.ndim)
    if n is not None and n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return [d], (None if n is None else [n])


def _sizes(x, dims, s):
    return tuple(x.shape[d] for d in dims) if s is None else tuple(s)


def _check_size(sizes):
    for v in sizes:
        if v < 1:
            raise RuntimeError(f"Invalid number of data points ({v}) specified")


def _c2c_any(x, dims, s, norm, forward):
    sizes = _sizes(x, dims, s)
    _check_size(sizes)
    if x.dtype.category != 3:
        return _r2c(x, tuple(dims), sizes, norm, False) if forward else \
            _c2c(F._to(x, dt.complex_of(x.dtype)), tuple(dims), sizes, norm, False)
    return _c2c(x, tuple(dims), sizes, norm, forward)


def _r2c_any(x, dims, s, norm):
    sizes = _sizes(x, dims, s)
    _check_size(sizes)
    return _r2c(x, tuple(dims), sizes, norm, True)


def _c2r_any(x, dims, s, norm):
    if x.dtype.category != 3:
        x = F._to(x, dt.complex_of(x.dtype))
    sizes = list(_sizes(x, dims, s))
    if s is None:
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)
    _check_size(sizes)
    return _c2r(x, tuple(dims), tuple(sizes), norm)


# --- the public transforms -----------------------------------------------------------------------

def fft(input, n=None, dim=-1, norm=None):  # noqa: A002
    x = _input(input, "fft")
    return _c2c_any(x, *_one(x, n, dim), _norm(norm), True)


def ifft(input, n=None, dim=-1, norm=None):  # noqa: A002
    x = _input(input, "ifft")
    return _c2c_any(x, *_one(x, n, dim), _norm(norm), False)


def rfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    x = _input(input, "rfft", real=True)
    return _r2c_any(x, *_one(x, n, dim), _norm(norm))


def irfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    x = _input(input, "irfft")
    return _c2r_any(x, *_one(x, n, dim), _norm(norm))


def hfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The FFT of a Hermitian-symmetric signal given by its first half: a
    real result (``irfft`` of the conjugate, with the opposite scaling)."""
    x = _input(input, "hfft")
    if x.dtype.category != 3:
        x = F._to(x, dt.complex_of(x.dtype))
    return _c2r_any(conj(x), *_one(x, n, dim), _SWAP[_norm(norm)])


def ihfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The inverse of ``hfft``: the conjugate of ``rfft`` with the opposite
    scaling."""
    x = _input(input, "ihfft", real=True)
    return conj(_r2c_any(x, *_one(x, n, dim), _SWAP[_norm(norm)]))


def fftn(input, s=None, dim=None, norm=None):  # noqa: A002
    x = _input(input, "fftn")
    return _c2c_any(x, *_dims(x, s, dim, True), _norm(norm), True)


def ifftn(input, s=None, dim=None, norm=None):  # noqa: A002
    x = _input(input, "ifftn")
    return _c2c_any(x, *_dims(x, s, dim, True), _norm(norm), False)


def rfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    x = _input(input, "rfftn", real=True)
    return _r2c_any(x, *_dims(x, s, dim, True), _norm(norm))


def irfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    x = _input(input, "irfftn")
    return _c2r_any(x, *_dims(x, s, dim, True), _norm(norm))


def hfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The n-D FFT of a Hermitian-symmetric signal given by its last-dim half."""
    x = _input(input, "hfftn")
    if x.dtype.category != 3:
        x = F._to(x, dt.complex_of(x.dtype))
    return _c2r_any(conj(x), *_dims(x, s, dim, True), _SWAP[_norm(norm)])


def ihfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The inverse of ``hfftn``: the conjugate of ``rfftn`` with the opposite
    scaling, computed (PyTorch's ``ihfft`` is a conjugate view, its
    ``ihfftn`` / ``ihfft2`` are not: ``view_as_real`` takes them)."""
    x = _input(input, "ihfftn", real=True)
    return conj_physical(_r2c_any(x, *_dims(x, s, dim, True), _SWAP[_norm(norm)]))


def hfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return hfftn(input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return ihfftn(input, s, dim, norm)


def fft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return ifftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return irfftn(input, s, dim, norm)


# --- frequencies and shifts (ordinary tensor ops: they trace) -------------------------------------

def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies ``[0, 1, ..., -n//2 ... -1] / (d * n)``."""
    k = arange(n, dtype=dt.int64)
    k = F.where(F.ge(k, (n + 1) // 2), F.sub(k, n), k)
    # (PyTorch multiplies by 1 / (n d), a scalar rounded to the dtype, not
    # divides: the two differ in the last bit)
    out = F.mul(F._to(k, dtype or dt.get_default_dtype()), 1.0 / (n * d))
    return out.requires_grad_(requires_grad) if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The non-negative sample frequencies ``[0, 1, ..., n//2] / (d * n)``."""
    k = arange(n // 2 + 1, dtype=dtype or dt.get_default_dtype())
    out = F.mul(k, 1.0 / (n * d))       # (as fftfreq: PyTorch's rounding)
    return out.requires_grad_(requires_grad) if requires_grad else out


def _shift_dims(x, dim):
    if dim is None:
        return list(range(x.ndim))
    return [dim] if isinstance(dim, int) else list(dim)


def fftshift(input, dim=None):  # noqa: A002
    """The zero frequency moved to the middle (a roll by ``size // 2``)."""
    x = tensor_arg(input, "fftshift")
    dims = _shift_dims(x, dim)
    return roll(x, [x.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of ``fftshift`` (a roll by ``-(size // 2)``)."""
    x = tensor_arg(input, "ifftshift")
    dims = _shift_dims(x, dim)
    return roll(x, [-(x.shape[d] // 2) for d in dims], dims)


def _fft_out(fn):
    """``fn`` with ``out=`` (``with_out``), whose dtype is checked first as
    PyTorch's transforms do: complex for a complex result, real floating
    point for a real one."""
    name, wrapped = fn.__name__, with_out(fn)

    def wrapper(*args, out=None, **kwargs):
        if isinstance(out, Tensor):
            real = name in _REAL_RESULT
            ok = (out.dtype.is_floating_point and not out.dtype.is_complex) if real \
                else out.dtype.is_complex
            if not ok:
                raise RuntimeError(f"{name} expects a "
                                   f"{'floating point' if real else 'complex'} output tensor, "
                                   f"but got {dt.scalar_type_name(out.dtype)}")
        return wrapped(*args, out=out, **kwargs)
    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = name, fn.__doc__, fn
    return wrapper


#: the transforms with a real result (c2r)
_REAL_RESULT = frozenset("irfft hfft irfft2 hfft2 irfftn hfftn".split())


def _add_out_keyword():
    # torch.fft's transforms and frequency functions take out= (tracec/out_arg.py);
    # the shifts do not.
    g = globals()
    for name in __all__:
        if name.endswith("freq"):
            g[name] = with_out(g[name])
        elif not name.endswith("shift"):
            g[name] = _fft_out(g[name])


_add_out_keyword()
