"""Complex tensors' own ops: ``complex polar view_as_real view_as_complex
real imag conj conj_physical resolve_conj is_conj angle sgn`` (and the
``Tensor`` attributes and methods of the same names).

Invariant: arithmetic, matmul, reductions and movement on complex tensors
run through the ordinary primitives (whose VJPs conjugate where PyTorch's
conjugate Wirtinger convention says so, see ``tracec.ops.elementwise.conj``);
the ops here move between complex values and their real components, in
NumPy, as custom ``autograd.Function``s whose backward follows the same
convention: for a real loss L of ``z = a + ib``, ``z.grad = dL/da + i dL/db``.
Inside ``tracec.compile`` the ones made with ``np_function(traced=...)`` are
told, by name, to the tracer (``TRACED_OPS``), which records them in real
primitives (``tracec.complex_trace``), as are ``tracec.fft``'s transforms;
the others (``angle``, ``sgn``) fail naming the op and the user's line
(``concrete``), never computing a wrong number.  ``view_as_real``, ``view_as_complex``, ``.real``
and ``.imag`` share memory with their operand, as PyTorch's views do.
"""
from __future__ import annotations

import re

import numpy as np

from tracec import autograd
from tracec import dtypes as dt
from tracec import math_extra as M
from tracec import math_trig as _trig
# The real-tensor methods of these names first: this module's replace them.
from tracec import math_methods as _math_methods  # noqa: F401
from tracec.functions import tensor_arg
from tracec.linalg_lapack import _sum_to
from tracec.tensor import Tensor, concrete

__all__ = ["complex", "polar", "view_as_real", "view_as_complex", "real", "imag", "conj",
           "conj_physical", "resolve_conj", "is_conj", "angle", "sgn", "np_function",
           "eager_only", "TRACED_OPS"]

# Callables ``(name, inputs, out)`` told of each application of an op made
# with ``np_function(traced=name)`` (a tracer registers one while recording).
TRACED_OPS: list = []


def _arr(x: Tensor, name: str) -> np.ndarray:
    return concrete(x, f"{name}() (complex values are eager only)")


def _wrap(a: np.ndarray, dtype: dt.DType | None = None) -> Tensor:
    a = np.asarray(a)
    d = dtype or dt.from_numpy_dtype(a.dtype)
    return Tensor._make(a if a.dtype == d.np else a.astype(d.np), d)


def _grad_for(g: np.ndarray, like: Tensor) -> Tensor:
    """A NumPy cotangent as the gradient of ``like``: a real operand gets the
    real part (PyTorch's rule for real inputs of complex functions)."""
    if like.dtype.category != 3 and np.iscomplexobj(g):
        g = g.real
    return Tensor._make(np.ascontiguousarray(g, dtype=like.dtype.np), like.dtype)


def np_function(name: str, forward, backward=None, traced: str | None = None):
    """A differentiable eager op over NumPy: ``forward(ctx, *arrays)`` returns
    an array (its tracec dtype is the array's, or ``ctx.out_dtype``);
    ``backward(ctx, g)`` returns one NumPy cotangent (or None) per operand.
    Tensor operands reach ``forward`` as arrays, other arguments as they are.
    ``traced``: the name under which each application is told to ``TRACED_OPS``
    (a tracer records it by a rule of that name); without it a traced operand
    is refused (``concrete``)."""
    # the user's op in messages: AngleBackward0 -> angle, FftC2CBackward0 -> fft_c2c
    op = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.removesuffix("Backward0")).lower()

    def fwd(ctx, *xs):
        ctx.inputs = xs
        arrays = [(x._data if traced else _arr(x, op)) if isinstance(x, Tensor) else x
                  for x in xs]
        ctx.out_dtype = None
        out = forward(ctx, *arrays)
        return _wrap(out, ctx.out_dtype)

    def bwd(ctx, g):
        if backward is None:
            raise RuntimeError(f"{name}: tracec does not implement the derivative of this op")
        grads = backward(ctx, _arr(g, name))
        return tuple(None if r is None or not isinstance(x, Tensor) else _grad_for(r, x)
                     for r, x in zip(grads, ctx.inputs))
    cls = type(name.removesuffix("Backward0"), (autograd.Function,),
               {"forward": staticmethod(fwd), "backward": staticmethod(bwd), "node_name": name,
                "traced": traced})
    if traced is None:
        return cls.apply

    def apply(*xs):
        out = cls.apply(*xs)
        for hook in TRACED_OPS:
            hook(traced, xs, out)
        return out
    return apply


def eager_only(x: Tensor, op: str) -> Tensor:
    """``x``, checked to be usable by the eager-only ``op``: inside
    ``tracec.compile`` a traced ``x`` fails naming ``op`` and the user's line."""
    concrete(x, f"{op}() (complex values are eager only)")
    return x


# --- building complex values from real ones ------------------------------------------------

def _complex_fwd(ctx, re, im):
    out = np.empty(np.broadcast_shapes(re.shape, im.shape),
                   np.complex128 if re.dtype == np.float64 else np.complex64)
    out.real, out.imag = re, im
    ctx.shapes = (re.shape, im.shape)
    return out


_complex = np_function("ComplexBackward0", _complex_fwd,
                       lambda ctx, g: (_sum_to(g.real, ctx.shapes[0]),
                                       _sum_to(g.imag, ctx.shapes[1])), traced="complex")


def _real_pair(a, b, name):
    a, b = tensor_arg(a, name), tensor_arg(b, name)
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected object of scalar type {dt.scalar_type_name(a.dtype)} but "
                           f"got scalar type {dt.scalar_type_name(b.dtype)} for second argument")
    if a.dtype not in (dt.float32, dt.float64, dt.float16):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{dt.scalar_type_name(a.dtype)} and {dt.scalar_type_name(b.dtype)}")
    return a, b


def complex(real, imag):  # noqa: A001 - PyTorch's name
    """``real + i imag`` (``real`` and ``imag`` of one float dtype)."""
    real, imag = _real_pair(real, imag, "complex")
    return _complex(real, imag)


def _polar_fwd(ctx, r, theta):
    ctx.r, ctx.theta = r, theta
    out = (r * np.cos(theta)) + 1j * (r * np.sin(theta))
    return out.astype(np.complex128 if r.dtype == np.float64 else np.complex64)


def _polar_bwd(ctx, g):
    e = np.exp(1j * ctx.theta)
    gr = (g * np.conj(e)).real
    gt = (g * np.conj(1j * ctx.r * e)).real
    return (_sum_to(gr, ctx.r.shape), _sum_to(gt, ctx.theta.shape))


_polar = np_function("PolarBackward0", _polar_fwd, _polar_bwd, traced="polar")


def polar(abs, angle):  # noqa: A002 - PyTorch's names
    """``abs * (cos(angle) + i sin(angle))``."""
    abs, angle = _real_pair(abs, angle, "polar")
    return _polar(abs, angle)


# --- views between complex values and their components ----------------------------------------

def _complex_input(x, name):
    x = tensor_arg(x, name)
    if x.dtype.category != 3:
        raise RuntimeError(f"{name} is only supported for complex tensors, got "
                           f"{x.dtype}" if name != "view_as_real" else
                           "view_as_real is only supported for complex tensors")
    return x


def _as_real_view(a: np.ndarray) -> np.ndarray:
    """``a``'s memory seen as ``[..., 2]`` real components."""
    r = a.real.dtype
    return np.lib.stride_tricks.as_strided(
        a.real, shape=a.shape + (2,), strides=a.strides + (r.itemsize,), writeable=True)


def _view_as_real_fwd(ctx, a):
    return _as_real_view(a)


def _as_complex_array(g):
    g = np.ascontiguousarray(g)
    return g.view(np.complex128 if g.dtype == np.float64 else np.complex64)[..., 0]


_view_as_real = np_function("ViewAsRealBackward0", _view_as_real_fwd,
                            lambda ctx, g: (_as_complex_array(g),), traced="view_as_real")


def view_as_real(input):  # noqa: A002
    """A ``[..., 2]`` real view of a complex tensor (same memory)."""
    x = _complex_input(input, "view_as_real")
    if is_conj(x):
        raise RuntimeError("view_as_real doesn't work on unresolved conjugated tensors.  "
                           "To resolve the conjugate tensor so you can view it as real, use "
                           "self.resolve_conj(); however, be warned that the resulting "
                           "tensor will NOT alias the original.")
    return _shared(_view_as_real(x), x)


def _view_as_complex_fwd(ctx, a):
    item = a.dtype.itemsize
    if a.ndim == 0 or a.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if a.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s in a.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                           "dimension")
    c = np.complex128 if a.dtype == np.float64 else np.complex64
    return a.view(c)[..., 0]   # NumPy needs only the last axis contiguous


_view_as_complex = np_function("ViewAsComplexBackward0", _view_as_complex_fwd,
                               lambda ctx, g: (_as_real_view(np.asarray(g)),),
                               traced="view_as_complex")


def view_as_complex(input):  # noqa: A002
    """A complex view of a ``[..., 2]`` float tensor (same memory)."""
    x = tensor_arg(input, "view_as_complex")
    if x.dtype not in (dt.float32, dt.float64):
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {dt.scalar_type_name(x.dtype)}")
    return _shared(_view_as_complex(x), x)


def _shared(out: Tensor, base: Tensor) -> Tensor:
    """A view's result shares the version counter of the tensor it views,
    so in-place writes through either are seen by autograd's checks."""
    out._vbox = base._vbox
    out._component_view = True
    return out


def _component(which):
    def fwd(ctx, a):
        return getattr(a, which)

    def bwd(ctx, g):
        return ((g + 0j) if which == "real" else (1j * g),)
    return np_function("RealBackward0" if which == "real" else "ImagBackward0", fwd, bwd,
                       traced=which)


_real, _imag = _component("real"), _component("imag")


def real(input):  # noqa: A002
    """The real part of a complex tensor, as a writable view; a real tensor
    itself."""
    x = tensor_arg(input, "real")
    if x.dtype.category != 3:
        return M.real(x)
    return _shared(_real(x), x)


def imag(input):  # noqa: A002
    """The imaginary part of a complex tensor, as a writable view."""
    x = tensor_arg(input, "imag")
    if x.dtype.category != 3:
        return M.imag(x)
    return _shared(_imag(x), x)


# --- conjugation ---------------------------------------------------------------------------------

_conj = np_function("ConjBackward0", lambda ctx, a: np.conj(a), lambda ctx, g: (np.conj(g),),
                    traced="conj")
_conj_physical = np_function("ConjPhysicalBackward0", lambda ctx, a: np.conj(a),
                             lambda ctx, g: (np.conj(g),), traced="conj_physical")
_resolve = np_function("ResolveConjBackward0", lambda ctx, a: a.copy(), lambda ctx, g: (g,),
                       traced="resolve_conj")


def conj(input):  # noqa: A002
    """The complex conjugate; a real tensor itself.  PyTorch's is a lazy
    view with the conjugate bit set: here the values are conjugated at once
    (a copy) and ``is_conj()`` reports the bit."""
    x = tensor_arg(input, "conj")
    if x.dtype.category != 3:
        return M.conj(x)
    out = _conj(x)
    out._conj_bit = not is_conj(x)
    return out


def conj_physical(input):  # noqa: A002
    x = tensor_arg(input, "conj_physical")
    if x.dtype.category != 3:
        return M.conj_physical(x)
    return _conj_physical(x)


def resolve_conj(input):  # noqa: A002
    x = tensor_arg(input, "resolve_conj")
    if not is_conj(x):
        return x
    return _resolve(x)


def is_conj(input) -> bool:  # noqa: A002
    return bool(input.__dict__.get("_conj_bit", False))


# --- polar components ------------------------------------------------------------------------

def _over(num, den, like):
    """``num / den``, 0 where ``den`` is 0 (the value PyTorch gives at z = 0)."""
    with np.errstate(all="ignore"):
        return np.where(den == 0, 0, num / np.where(den == 0, 1, den)).astype(like.dtype)


def _angle_fwd(ctx, a):
    ctx.a = a
    return np.angle(a).astype(a.real.dtype)


_angle = np_function("AngleBackward0", _angle_fwd,
                     lambda ctx, g: (_over(g * 1j * ctx.a, (ctx.a * np.conj(ctx.a)).real,
                                           ctx.a),))


def _sgn_fwd(ctx, a):
    ctx.a = a
    ctx.out = _over(a, np.abs(a), a)
    return ctx.out


def _sgn_bwd(ctx, g):
    # sgn(z) = z/|z|: the cotangent is (g - Re(conj(g) sgn z) sgn z) / |z|, 0 at 0.
    s = ctx.out
    return (_over(g - (np.conj(g) * s).real * s, np.abs(ctx.a), ctx.a),)


_sgn = np_function("SgnBackward0", _sgn_fwd, _sgn_bwd)


def _complex_unary(name, f, derivative):
    """``f`` of a complex tensor in NumPy (its C99 complex functions, as
    PyTorch's std::complex ones), the cotangent ``g * conj(f'(z))``
    (PyTorch's convention)."""
    def fwd(ctx, a):
        ctx.a = a
        with np.errstate(all="ignore"):
            return f(a)

    def bwd(ctx, g):
        with np.errstate(all="ignore"):
            return (g * np.conj(derivative(ctx.a)),)
    return np_function(name, fwd, bwd)


_trig.COMPLEX.update({
    "sinh": _complex_unary("SinhBackward0", np.sinh, np.cosh),
    "cosh": _complex_unary("CoshBackward0", np.cosh, np.sinh),
    "asin": _complex_unary("AsinBackward0", np.arcsin, lambda z: 1 / np.sqrt(1 - z * z)),
    "acos": _complex_unary("AcosBackward0", np.arccos, lambda z: -1 / np.sqrt(1 - z * z)),
    "asinh": _complex_unary("AsinhBackward0", np.arcsinh, lambda z: 1 / np.sqrt(z * z + 1)),
    "atan": _complex_unary("AtanBackward0", np.arctan, lambda z: 1 / (z * z + 1)),
})


def angle(input):  # noqa: A002
    """The argument of each element (radians, in [-pi, pi])."""
    x = tensor_arg(input, "angle")
    return M.angle(x) if x.dtype.category != 3 else _angle(x)


def sgn(input):  # noqa: A002
    """``z / |z|`` (0 at 0) for complex tensors; ``sign`` for real ones."""
    x = tensor_arg(input, "sgn")
    return M.sgn(x) if x.dtype.category != 3 else _sgn(x)


# --- Tensor attributes and methods ------------------------------------------------------------

def _set_component(which):
    def setter(self, value):
        view = real(self) if which == "real" else imag(self)
        view.copy_(value)
    return setter


Tensor.real = property(real, _set_component("real"))
Tensor.imag = property(imag, _set_component("imag"))
for _name, _fn in (("conj", conj), ("conj_physical", conj_physical),
                   ("resolve_conj", resolve_conj), ("is_conj", is_conj), ("angle", angle),
                   ("sgn", sgn)):
    setattr(Tensor, _name, _fn)
