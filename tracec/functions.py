"""User-facing math on tensors: PyTorch's names and semantics, written as
Python over the primitives (composites need no rule of their own).

Invariant: every function here returns a new Tensor built only through
primitives, so autograd and the tracer see everything; operands are promoted
with PyTorch's rules (``dtypes.result_type``) before any primitive sees them.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from tracec import dtypes as dt
from tracec import autocast_mode, ops
from tracec.symbolic import Sym
from tracec.ops.core import normalize_axis
from tracec.tensor import Tensor, apply_direct, concrete, eager_direct, weak_scalar
from tracec.return_types import structseq

__all__ = [
    "MinMax", "abs", "absolute", "add", "allclose", "amax", "amin", "argmax", "argmin", "bmm",
    "clamp", "clip", "cos", "div", "divide", "dot", "eq", "equal", "erf", "exp", "expm1", "ge",
    "gelu", "greater", "greater_equal", "gt", "isnan", "le", "less", "less_equal", "log",
    "log1p", "log_softmax", "logical_and", "logical_not", "logical_or", "logsumexp", "lt",
    "matmul", "max", "maximum", "mean", "min", "minimum", "mm", "mul", "multiply", "ne", "neg",
    "negative", "not_equal", "outer", "pow", "reciprocal", "relu", "result_type", "rsqrt",
    "sigmoid", "sign", "silu", "sin", "softmax", "sqrt", "square", "std", "sub", "subtract",
    "sum", "tanh", "true_divide", "var", "where",
]

_NUM = (numbers.Number, np.number, np.bool_)


def _operand(x, name):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _NUM):
        if isinstance(x, complex):
            raise TypeError(f"{name}(): complex numbers are not supported")
        return x
    if isinstance(x, np.ndarray):
        return Tensor._from_data(x)
    raise TypeError(f"{name}(): unsupported operand type {type(x).__name__} "
                    "(expected a Tensor or a number)")


def tensor_arg(x, name: str) -> Tensor:
    """``x`` as a Tensor operand of ``name`` (NumPy arrays converted); anything
    else raises PyTorch's TypeError."""
    x = _operand(x, name)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


def _scalar_cat(x) -> int:
    if isinstance(x, (bool, np.bool_)):
        return 0
    if isinstance(x, numbers.Integral):
        return 1
    return 2


def result_type(*xs) -> dt.DType:
    dims, zeros, scal = [], [], []
    for x in xs:
        if isinstance(x, Tensor):
            (dims if x.ndim else zeros).append(x.dtype)
        else:
            scal.append(_scalar_cat(x))
    return dt.result_type(dims, zeros, scal)


def _to(x, d: dt.DType):
    if isinstance(x, Tensor) and x.dtype is not d:
        return ops.cast(x, d)
    return x


_PY_CATEGORY = {bool: 0, int: 1, float: 2}


def promote(name, *xs, min_dtype=None):
    """Operands of one dtype (Tensors cast, scalars left weak)."""
    if len(xs) == 2:
        # Fast path (the common eager case): a tensor with a tensor of its
        # dtype, or with a Python scalar of no higher category.
        a, b = xs
        if isinstance(a, Tensor):
            t, o = a, b
        elif isinstance(b, Tensor):
            t, o = b, a
        else:
            t = None
        if t is not None:
            d = t.dtype
            if min_dtype is None or d.category >= min_dtype.category:
                if isinstance(o, Tensor):
                    if o.dtype is d:
                        return [a, b], d
                elif _PY_CATEGORY.get(type(o), 3) <= d.category:
                    return [a, b], d
    xs = [_operand(x, name) for x in xs]
    d = result_type(*xs)
    if min_dtype is not None and d.category < min_dtype.category:
        d = min_dtype
    return [_to(x, d) for x in xs], d


def _named(t: Tensor, name: str) -> Tensor:
    if t._node is not None:
        t._node._name = name
    return t


# --- arithmetic -----------------------------------------------------------------

def add(a, b, *, alpha=1):
    (a, b), _ = promote("add", a, b)
    if alpha != 1:
        b = ops.mul(b, alpha)
    return ops.add(a, b)


def sub(a, b, *, alpha=1):
    (a, b), d = promote("sub", a, b)
    if d is dt.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if alpha != 1:
        b = ops.mul(b, alpha)
    return ops.sub(a, b)


def mul(a, b):
    (a, b), d = promote("mul", a, b)
    if d is dt.bool_:
        return ops.logical_and(a, b)
    return ops.mul(a, b)


def div(a, b, *, rounding_mode=None):
    (a, b), d = promote("div", a, b, min_dtype=dt.get_default_dtype())
    if rounding_mode is not None:
        raise NotImplementedError("div(rounding_mode=...) is not supported by tracec yet")
    return ops.div(a, b)


true_divide = divide = div
multiply = mul
subtract = sub


def pow(a, b):  # noqa: A001 - PyTorch's name
    (a, b), d = promote("pow", a, b)
    if isinstance(b, _NUM) and not isinstance(a, _NUM):
        if b == 2:
            return _named(ops.mul(a, a), "PowBackward0")
        if b == 1:
            return _named(ops.mul(a, 1), "PowBackward0")
        return _named(ops.pow_(a, b), "PowBackward0")
    if isinstance(a, _NUM) and not isinstance(b, _NUM):
        return _named(ops.pow_(a, b), "PowBackward2")
    return ops.pow_(a, b)


def neg(x):
    x = _operand(x, "neg")
    if isinstance(x, Tensor) and x.dtype is dt.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    return ops.neg(x)


negative = neg


def _float_unary(name, f):
    def fn(x):
        x = _operand(x, name)
        if not isinstance(x, Tensor):
            x = Tensor._from_data(x)
        if not x.dtype.is_floating_point:
            x = ops.cast(x, dt.get_default_dtype())
        return f(x)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (integer inputs become the default float dtype)."
    return fn


exp = _float_unary("exp", ops.exp)
log = _float_unary("log", ops.log)
sqrt = _float_unary("sqrt", ops.sqrt)
rsqrt = _float_unary("rsqrt", ops.rsqrt)
sin = _float_unary("sin", ops.sin)
cos = _float_unary("cos", ops.cos)
tanh = _float_unary("tanh", ops.tanh)
sigmoid = _float_unary("sigmoid", ops.logistic)
erf = _float_unary("erf", ops.erf)


def abs(x):  # noqa: A001
    return ops.abs_(_operand(x, "abs"))


absolute = abs


def sign(x):
    return ops.sign(_operand(x, "sign"))


def square(x):
    return _named(mul(x, x), "PowBackward0")


def reciprocal(x):
    return _named(div(1.0, x), "ReciprocalBackward0")


def log1p(x):
    return log(add(x, 1.0))


def expm1(x):
    return sub(exp(x), 1.0)


_GT, _WHERE = ops.elementwise.gt_p, ops.elementwise.where_p


def relu(x):
    # where(x > 0, x, 0): the gradient at 0 is 0, as PyTorch's.
    x = _operand(x, "relu")
    if isinstance(x, Tensor):
        d = x.dtype
        if d.is_floating_point and d is not dt.bfloat16 and eager_direct(x):
            # The hot activation: its two primitives applied directly (each
            # bind costs more than its NumPy work), same tensors and node.
            xd = x._data
            zero = weak_scalar(0, d)
            mask = apply_direct(_GT, {}, (x, 0), _GT.impl(xd, zero), dt.bool_)
            out = apply_direct(_WHERE, {}, (mask, x, 0), _WHERE.impl(mask._data, xd, zero), d)
            return _named(out, "ReluBackward0")
    return _named(ops.where(ops.gt(x, 0), x, 0), "ReluBackward0")


def gelu(x, approximate: str = "none"):
    x = _operand(x, "gelu")
    if approximate == "none":
        y = ops.mul(ops.mul(x, 0.5), ops.add(ops.erf(ops.mul(x, 1 / math.sqrt(2.0))), 1.0))
    elif approximate == "tanh":
        inner = ops.mul(ops.add(x, ops.mul(ops.mul(ops.mul(x, x), x), 0.044715)),
                        math.sqrt(2 / math.pi))
        y = ops.mul(ops.mul(x, 0.5), ops.add(ops.tanh(inner), 1.0))
    else:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _named(y, "GeluBackward0")


def silu(x):
    x = _operand(x, "silu")
    return _named(ops.mul(x, ops.logistic(x)), "SiluBackward0")


def maximum(a, b):
    (a, b), _ = promote("maximum", a, b)
    return ops.maximum(a, b)


def minimum(a, b):
    (a, b), _ = promote("minimum", a, b)
    return ops.minimum(a, b)


def where(cond, a=None, b=None):
    if a is None and b is None:   # torch.where(cond): nonzero(cond, as_tuple=True)
        from tracec.select_ops import nonzero
        return nonzero(_operand(cond, "where"), as_tuple=True)
    if (a is None) != (b is None):
        raise TypeError("where() takes the condition alone or with both input and other")
    cond = _operand(cond, "where")
    if isinstance(cond, Tensor) and cond.dtype is dt.uint8:
        import warnings
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated "
                      "and will be removed in a future version of PyTorch. Use a boolean "
                      "condition instead.", UserWarning, stacklevel=2)
        cond = ops.ne(cond, 0)
    if not isinstance(cond, Tensor) or cond.dtype is not dt.bool_:
        raise TypeError("where(): the condition must be a bool tensor")
    (a, b), d = promote("where", a, b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        # Two scalars: the result has their promoted dtype, not the condition's.
        a = Tensor._make(np.asarray(a, dtype=d.np), d)
    return ops.where(cond, a, b)


def clamp(x, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    x = _operand(x, "clamp")
    if isinstance(x, Tensor):
        for bound in (min, max):
            dt.check_fits(bound, x.dtype)
    y = x
    # where-based so the gradient passes on the boundary, as in PyTorch.
    if min is not None:
        (y, lo), _ = promote("clamp", y, min)
        y = ops.where(ops.lt(y, lo), lo, y)
    if max is not None:
        (y, hi), _ = promote("clamp", y, max)
        y = ops.where(ops.gt(y, hi), hi, y)
    return _named(y, "ClampBackward1")


clip = clamp


def _cmp(name, prim):
    def fn(a, b):
        (a, b), _ = promote(name, a, b)
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise TypeError(f"{name}(): at least one operand must be a Tensor")
        return prim(a, b)
    fn.__name__ = name
    return fn


eq = _cmp("eq", ops.eq)
ne = _cmp("ne", ops.ne)
lt = _cmp("lt", ops.lt)
le = _cmp("le", ops.le)
gt = _cmp("gt", ops.gt)
ge = _cmp("ge", ops.ge)
greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne


def _as_bool(x, name):
    x = _operand(x, name)
    if isinstance(x, Tensor) and x.dtype is not dt.bool_:
        x = ops.ne(x, 0)
    return x


def logical_and(a, b):
    return ops.logical_and(_as_bool(a, "logical_and"), _as_bool(b, "logical_and"))


def logical_or(a, b):
    return ops.logical_or(_as_bool(a, "logical_or"), _as_bool(b, "logical_or"))


def logical_not(a):
    return ops.logical_not(_as_bool(a, "logical_not"))


def isnan(x):
    return ops.ne(x, x)


def equal(a, b) -> bool:
    # A Python bool from the values: concrete() (a TraceError inside
    # tracec.compile, where the first call's answer would be frozen).
    return tuple(a.shape) == tuple(b.shape) and bool(np.array_equal(
        concrete(a, "equal()"), concrete(b, "equal()")))


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False) -> bool:
    bv = concrete(b, "allclose()") if isinstance(b, Tensor) else np.asarray(b)
    return bool(np.allclose(concrete(a, "allclose()"), bv,
                            rtol=rtol, atol=atol, equal_nan=equal_nan))


# --- reductions -------------------------------------------------------------------

def _dims(x, dim):
    if dim is None or dim == () or dim == []:
        return tuple(range(x.ndim))
    if isinstance(dim, (list, tuple)):
        out = sorted({normalize_axis(d, x.ndim) for d in dim})
        if len(out) != len(dim):
            raise RuntimeError(f"dim {tuple(dim)} appears multiple times in the list of dims")
        return tuple(out)
    return (normalize_axis(dim, x.ndim),)


def _keep(x, y, axes, keepdim):
    if keepdim and x.ndim:
        return ops.reshape(y, tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    return y


def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    x = _operand(x, "sum")
    if dtype is not None:
        x = _to(x, dt.to_dtype(dtype))
    elif x.dtype.category < 2 and x.dtype is not dt.int64:
        x = ops.cast(x, dt.int64)
    axes = _dims(x, dim)
    y = _keep(x, ops.reduce_sum(x, axes), axes, keepdim)
    return _named(y, "SumBackward0" if dim is None else "SumBackward1")


def mean(x, dim=None, keepdim=False, *, dtype=None):
    x = _operand(x, "mean")
    if dtype is not None:
        x = _to(x, dt.to_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: {x.dtype}")
    axes = _dims(x, dim)
    n = math.prod(x.shape[a] for a in axes) if x.ndim else 1
    # A symbolic size (a symbolic trace) stays one: the count is a run-time value.
    y = ops.div(ops.reduce_sum(x, axes), n if isinstance(n, Sym) else
                float(n) if n else float("nan"))
    return _named(_keep(x, y, axes, keepdim), "MeanBackward0" if dim is None else "MeanBackward1")


def amax(x, dim=None, keepdim=False):
    axes = _dims(x, dim)
    return _keep(x, ops.reduce_max(x, axes), axes, keepdim)


def amin(x, dim=None, keepdim=False):
    axes = _dims(x, dim)
    return _keep(x, ops.reduce_min(x, axes), axes, keepdim)


MinMax = structseq("max", ["values", "indices"])
MinResult = structseq("min", ["values", "indices"])


def _extreme(x, dim, keepdim, other, arg, full, name):
    if isinstance(dim, Tensor) and other is None:
        dim, other = None, dim
    if other is not None:
        return (maximum if name == "max" else minimum)(x, other)
    if dim is None:
        return _named(full(x, tuple(range(x.ndim))), "MaxBackward1" if name == "max"
                      else "MinBackward1")
    d = normalize_axis(dim, x.ndim)
    if x.ndim == 0:
        return (MinMax if name == "max" else MinResult)(x, Tensor._from_data(np.zeros((), np.int64)))
    idx = arg(x, d)
    kidx = ops.reshape(idx, tuple(1 if i == d else s for i, s in enumerate(x.shape)))
    vals = ops.gather(x, kidx, d)
    if not keepdim:
        vals = ops.reshape(vals, idx.shape)
    else:
        idx = kidx
    result = MinMax if name == "max" else MinResult
    return result(_named(vals, "MaxBackward0" if name == "max" else "MinBackward0"), idx)


def max(x, dim=None, keepdim=False, *, other=None):  # noqa: A001
    return _extreme(x, dim, keepdim, other, ops.argmax, ops.reduce_max, "max")


def min(x, dim=None, keepdim=False, *, other=None):  # noqa: A001
    return _extreme(x, dim, keepdim, other, ops.argmin, ops.reduce_min, "min")


def _arg(name, prim):
    def fn(x, dim=None, keepdim=False):
        if dim is None:
            r = prim(ops.reshape(x, (x.numel(),)), 0)
            return ops.reshape(r, (1,) * x.ndim) if keepdim else r
        d = normalize_axis(dim, x.ndim)
        r = prim(x, d)
        if keepdim and x.ndim:
            r = ops.reshape(r, tuple(1 if i == d else s for i, s in enumerate(x.shape)))
        return r
    fn.__name__ = name
    return fn


argmax = _arg("argmax", ops.argmax)
argmin = _arg("argmin", ops.argmin)


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool) and unbiased is None:  # var(x, False)
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    axes = _dims(x, dim)
    n = math.prod(x.shape[a] for a in axes) if x.ndim else 1
    m = mean(x, axes, keepdim=True)
    d = sub(x, m)
    y = ops.div(ops.reduce_sum(ops.mul(d, d), axes), float(builtin_max(n - correction, 0)))
    return _named(_keep(x, y, axes, keepdim), "VarBackward0")


builtin_max = __builtins__["max"] if isinstance(__builtins__, dict) else __builtins__.max


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _named(sqrt(var(x, dim, unbiased, keepdim, correction=correction)), "StdBackward0")


def _stop_max(x, axes):
    """max over ``axes`` (kept), as a constant; infinities become 0 so that
    ``x - m`` stays finite.  The gradient through it cancels exactly."""
    keep = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    if any(x.shape[a] == 0 for a in axes):  # nothing to reduce: no shift needed
        return ops.full(keep, 0.0, x.dtype, like=x)
    m = ops.reshape(ops.reduce_max(x.detach() if isinstance(x, Tensor) else x, axes), keep)
    return ops.where(ops.eq(ops.abs_(m), float("inf")), 0.0, m)


def logsumexp(x, dim, keepdim=False):
    x = _float_unary("logsumexp", lambda t: t)(x)
    axes = _dims(x, dim)
    m = _stop_max(x, axes)
    s = ops.log(ops.reduce_sum(ops.exp(ops.sub(x, m)), axes))
    y = ops.add(s, ops.reshape(m, s.shape))
    return _named(_keep(x, y, axes, keepdim), "LogsumexpBackward0")


def softmax(x, dim, dtype=None):
    x = _float_unary("softmax", lambda t: t)(x)
    if dtype is not None:
        x = _to(x, dt.to_dtype(dtype))
    axes = _dims(x, dim)
    e = ops.exp(ops.sub(x, _stop_max(x, axes)))
    s = ops.reshape(ops.reduce_sum(e, axes), tuple(1 if i in axes else n
                                                    for i, n in enumerate(x.shape)))
    return _named(ops.div(e, s), "SoftmaxBackward0")


def log_softmax(x, dim, dtype=None):
    x = _float_unary("log_softmax", lambda t: t)(x)
    if dtype is not None:
        x = _to(x, dt.to_dtype(dtype))
    axes = _dims(x, dim)
    z = ops.sub(x, _stop_max(x, axes))
    lse = ops.log(ops.reduce_sum(ops.exp(z), axes))
    y = ops.sub(z, ops.reshape(lse, tuple(1 if i in axes else n for i, n in enumerate(x.shape))))
    return _named(y, "LogSoftmaxBackward0")


# --- linear algebra ---------------------------------------------------------------

def matmul(a, b):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul(): both operands must be Tensors, got "
                        f"{type(a).__name__} and {type(b).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if autocast_mode.ACTIVE:
        a, b = autocast_mode.lower_precision(a, b)
    (a, b), _ = promote("matmul", a, b)
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = ops.reshape(a, (1,) + a.shape)
    if vb:
        b = ops.reshape(b, b.shape + (1,))
    out = ops.matmul(a, b)
    if va or vb:
        shape = out.shape[:-2] + (() if va else (out.shape[-2],)) + (() if vb else (out.shape[-1],))
        out = ops.reshape(out, shape)
        return _named(out, "DotBackward0" if va and vb else "MvBackward0")
    return _named(out, "MmBackward0" if a.ndim == 2 and b.ndim == 2 else "BmmBackward0")


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {a.ndim}D and {b.ndim}D")
    return matmul(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3D tensors, got {a.ndim}D and {b.ndim}D")
    return matmul(a, b)


def dot(a, b):
    return matmul(a, b)


def outer(a, b):
    return mul(ops.reshape(a, (a.shape[0], 1)), b)
