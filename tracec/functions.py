"""User-facing math on tensors: PyTorch's names and semantics, written as
Python over the primitives (composites need no rule of their own).

Invariant: every function here returns a new Tensor built only through
primitives, so autograd and the tracer see everything; operands are promoted
with PyTorch's rules (``dtypes.result_type``) before any primitive sees them.
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from tracec.ops.elementwise import quiet_fp
from tracec import dtypes as dt
from tracec import autocast_mode, blas_dot, fused_eager, graph, ops
from tracec.symbolic import Sym, known
from tracec.ops.core import normalize_axis
from tracec.tensor import RECORDERS, SPARSE, Tensor, _new_tensor, apply_direct, concrete, eager_direct, weak_scalar
from tracec.return_types import structseq
from tracec.wrapper_dispatch import dispatching_operand
from tracec import aten_report
from tracec.aten_report import AtenCall
from tracec.sym_scalar import SymScalar, concrete_operand
from tracec.item_value import ItemValue
from tracec.node_views import TorchName

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
_REAL_NUM = (int, float, np.integer, np.floating)


def _operand(x, name):
    if isinstance(x, Tensor):      # (the common case first: no RuntimeInt is a Tensor)
        return x
    if type(x).__name__ == "RuntimeInt":     # read at run time (tracec.runtime_int)
        from tracec.runtime_int import operand
        return operand(x)
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _NUM):
        return x
    if type(x) is SymScalar:
        return concrete_operand(x)
    if type(x) is ItemValue:    # refused while tracing (it would be a constant)
        return x.use(f"an operand of {name}()")
    if isinstance(x, np.ndarray):
        return Tensor._from_data(x)
    raise TypeError(f"{name}(): unsupported operand type {type(x).__name__} "
                    "(expected a Tensor or a number)")


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes ``warnings.warn``, called by the
    caller of this function, name the first line outside tracec (as
    PyTorch's C++ warnings name the Python line that called the op, however
    many tracec wrappers lie between)."""
    import sys
    level, f = 2, sys._getframe(2)
    while f is not None and f.f_globals.get("__name__", "").startswith("tracec."):
        level, f = level + 1, f.f_back
    return level


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
    if isinstance(x, (complex, np.complexfloating)):
        return 3
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
    if any(type(x) is SymScalar for x in xs):
        xs = _lift_operands(xs, name)
    xs = [_operand(x, name) for x in xs]
    d = result_type(*xs)
    if min_dtype is not None and d.category < min_dtype.category:
        d = min_dtype
    return [_to(x, d) for x in xs], d


def _lift_operands(xs, name):
    """A traced Python number (``tracec.sym_scalar``) with tensors: its
    holder tensor, cast to the dtype the number would compute in, so that
    the operation promotes as with the number itself (a number no tensor
    operand's category covers is used as that number, a specialization)."""
    plain = [x.value if type(x) is SymScalar else _operand(x, name) for x in xs]
    tensors = [x for x in plain if isinstance(x, Tensor)]
    d = result_type(*plain)
    out = []
    for x in xs:
        if type(x) is SymScalar:
            if tensors and builtins.max(t.dtype.category for t in tensors) >= \
                    _scalar_cat(x.value):
                x = _to(x.lift.holder(x), d)
            else:
                x = concrete_operand(x)
        out.append(x)
    return out


def _named(t: Tensor, name: str) -> Tensor:
    if t._node is not None:
        t._node._name = name
    return t


# --- arithmetic -----------------------------------------------------------------

def _wrapped_number(input, other):
    """``input`` as PyTorch's Python arg parser gives it to ``add`` / ``sub``
    / ``mul`` / ``div`` and their aliases when both operands are Python
    (or NumPy) numbers (``torch.div(seq_len, w, rounding_mode="trunc")``): a
    0-d tensor of bool, int64, the default float dtype or its complex type."""
    if isinstance(input, Tensor) or isinstance(other, Tensor) or \
            not isinstance(other, _NUM) or isinstance(input, np.bool_):
        return input
    if isinstance(input, bool):
        d = dt.bool_
    elif isinstance(input, numbers.Integral):
        d = dt.int64
    elif isinstance(input, numbers.Real):
        d = dt.get_default_dtype()
    elif isinstance(input, numbers.Complex):
        d = dt.complex_of(dt.get_default_dtype())
    else:
        return input
    return Tensor._from_data(np.asarray(input, dtype=d.np))


def _check_alpha(alpha, d):
    if d.category < 2 and isinstance(alpha, (float, np.floating)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")


def _number_first(name, scalar, tensors, given, kw, count):
    """PyTorch's deprecated overloads that put the scalar first:
    ``add(input, Number alpha, Tensor other)`` (``x.add_(0.5, y)``, ``sub``)
    and ``addcmul / addcdiv(input, Number value, Tensor t1, Tensor t2)``,
    still accepted (with a warning) and still written by older optimizers
    (``exp_avg_sq.mul_(b2).addcmul_(1 - b2, g, g)``, michaelrzhang's
    Lookahead).  ``scalar`` came in a tensor's slot and ``tensors`` are the
    ``count`` positional arguments after it; returns them."""
    if (len(tensors) != count or isinstance(scalar, Tensor)
            or not isinstance(scalar, numbers.Number) or given != 1):
        raise TypeError(f"{name}() received an invalid combination of arguments")
    names = ("Tensor other",) if count == 1 else ("Tensor tensor1", "Tensor tensor2")
    if not _DEPRECATED_OVERLOAD_WARNED:
        # once per process, as PyTorch's (TORCH_WARN_ONCE in its argument
        # parser: one warning for all the deprecated overloads together)
        _DEPRECATED_OVERLOAD_WARNED.append(name)
        warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number {kw}, "
                      f"{', '.join(names)})\nConsider using one of the following signatures "
                      f"instead:\n\t{name}({', '.join(names)}, *, Number {kw} = 1)",
                      UserWarning, stacklevel=user_stacklevel())
    return tensors


#: the deprecated overload warned about (empty until one is)
_DEPRECATED_OVERLOAD_WARNED: list = []


#: Dtypes whose tensors ``add`` / ``sub`` / ``mul`` / ``div`` may apply
#: directly (``_plain_pair``): none of their special cases (bool,
#: bfloat16 / float16 rounding, integer division's promotion) applies.
_PLAIN_FLOATS = frozenset((dt.float32, dt.float64))
_PLAIN_SCALARS = frozenset((int, float))


def add(input, other, *deprecated, alpha=1):
    if (isinstance(input, Tensor) and input.dtype in _PLAIN_FLOATS and not deprecated
            and not SPARSE and type(alpha) is int and alpha == 1
            and ((isinstance(other, Tensor) and other.dtype is input.dtype)
                 or type(other) in _PLAIN_SCALARS)):
        # (what the general path below does for these operands: promote
        # leaves them as they are, no scaling, no sparse result)
        return ops.add(input, other)
    if deprecated:   # add(input, Number alpha, Tensor other)
        alpha, (other,) = other, _number_first("add", other, deprecated, alpha, "alpha", 1)
    if SPARSE:
        _refuse_sparse_dense(input, other)
    given = (input, other)
    input = _wrapped_number(input, other)
    (input, other), d = promote("add", input, other)
    if d is dt.bfloat16:
        input, other = _bfloat16_addend(input), _bfloat16_addend(other)
    if alpha != 1:
        _check_alpha(alpha, d)
        if d in _HALF and isinstance(other, Tensor) and isinstance(alpha, _REAL_NUM):
            out = _half_scaled_sum(ops.add, input, other, alpha, d)
            return _sparse_sum(out, *given, alpha) if SPARSE else out
        out = None if SPARSE else _rounded_as_torch(ops.add, input, other, alpha, d)
        if out is not None:
            return _named(out, "AddBackward0")
        if type(alpha).__name__ == "SymScalar":   # a lifted number (a traced lr): an operand
            other = mul(other, alpha)
        else:
            other = ops.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    out = ops.add(input, other)
    return _sparse_sum(out, *given, alpha) if SPARSE else out


def _rounded_as_torch(op, input, other, alpha, d):
    """``op(input, alpha * other)`` (``op`` add or sub) where PyTorch's
    kernel rounds it once everywhere (``fma_rounded``) or in part
    (``_mixed_rounding``), as it does; None for the general path."""
    if fma_rounded(input, other, alpha, d):
        return fused_scaled_sum(op, input, other, alpha)
    mixed = _mixed_rounding(input, other, alpha, d)
    if mixed is None:
        return None
    return ops.where(mixed, op(input, ops.mul(other, alpha)),
                     fused_scaled_sum(op, input, other, alpha))


def fma_rounded(input, other, alpha, d) -> bool:
    """Whether PyTorch's CPU kernel rounds ``input + alpha * other`` (a
    ``d`` result) once, as ``fma(other, alpha, input)``: float32 with a
    Python-number (or 0-d tensor) ``alpha`` and an ``other`` tensor not
    broadcast along the kernel's inner loop.  Its vectorized loop is
    ``vec::fmadd`` and its scalar loop (the tail, strided operands) is
    contracted to an fma by the compiler, so every element is rounded
    once; but where ``other`` is one value repeated along the inner loop
    (a number, a 0-d tensor, a ``[m, 1]`` column), the compiler hoists
    ``alpha * other`` out of the tail loop and some tail elements are
    rounded twice (measured on torch 2.13, AVX2 and AVX512 alike):
    ``twice_rounded`` says which, for a tensor ``other`` (a Python number
    keeps the two roundings everywhere).
    (float64 is fused as well by PyTorch; without a wider type tracec
    keeps its two roundings.)"""
    if d is not dt.float32 or not isinstance(other, Tensor) or other.dtype is not d or \
            type(alpha).__name__ == "SymScalar" or (
                isinstance(alpha, Tensor) and alpha.numel() != 1):
        return False
    if not isinstance(input, Tensor):
        return True
    return fma_layout(tuple(input.shape), tuple(other.shape), input.is_contiguous())


def fma_layout(shape: tuple, oshape: tuple, contiguous: bool) -> bool:
    """``fma_rounded``'s test on the shapes of ``input`` (row-major when
    ``contiguous``) and ``other``."""
    if len(oshape) >= len(shape) and oshape[len(oshape) - len(shape):] == shape:
        return True          # (other is not broadcast: input may be)
    if not contiguous:
        return False
    if oshape and oshape[-1] == shape[-1] > 1:
        return True          # the inner loop (a row-major input's last dim) runs along other
    # other repeats one value along the inner loop's run over the trailing
    # dims where it is broadcast (coalesced): with one thread's chunk
    # (numel up to ATen's grain size), a run of n elements is all rounded
    # once when n % 16 <= 4; other lengths mix the two roundings
    run, padded = 1, (1,) * (len(shape) - len(oshape)) + oshape
    for m, o in zip(shape[::-1], padded[::-1]):
        if o != 1:
            break
        run *= m
    return math.prod(shape) <= _GRAIN_SIZE and run % 16 <= 4


def twice_rounded(shape: tuple, oshape: tuple):
    """Where ``fma_layout`` is false for a row-major ``input`` of ``shape``
    and an ``other`` repeated along runs of the inner loop, one chunk
    (numel up to the grain size): a bool array of ``shape``, true where
    PyTorch rounds ``alpha * other`` first (else fused).  In each run of
    ``n`` elements (``q = n - n % 16``, ``r = n % 16``): elements
    ``q + 1 .. q + 4 * ((r - 1) // 4)`` (the compiler's 4-wide epilogue of
    the scalar tail, measured for n up to 129, AVX2 and AVX512).  None
    where not modelled (several chunks)."""
    if math.prod(shape) > _GRAIN_SIZE or not shape:
        return None
    run, padded = 1, (1,) * (len(shape) - len(oshape)) + oshape
    for m, o in zip(shape[::-1], padded[::-1]):
        if o != 1:
            break
        run *= m
    q, r = run - run % 16, run % 16
    k = np.arange(run)
    one_run = (k >= q + 1) & (k < q + 1 + 4 * ((r - 1) // 4)) if r else np.zeros(run, bool)
    return np.broadcast_to(one_run.reshape(-1), (math.prod(shape) // run, run)).reshape(shape)


def fused_axpy_(a: np.ndarray, b: np.ndarray, alpha, ufunc=np.add) -> None:
    """``a = ufunc(a, alpha * b)`` in place for float32 arrays, rounded once
    (``fma_rounded``): the exact product and the sum in float64, in blocks
    of ``_AXPY_BLOCK`` elements when both are contiguous and of one shape
    (a float64 temporary that stays in cache: 2.6 ms instead of 4.2 ms of
    CPU for 2M elements, measured; rounding twice took 1.2 ms)."""
    al = np.float64(np.float32(alpha))
    if a.shape != b.shape or not (a.flags.c_contiguous and b.flags.c_contiguous) or \
            a.size <= _AXPY_BLOCK:
        ufunc(a, np.multiply(b, al), out=a, casting="same_kind")
        return
    fa, fb = a.reshape(-1), b.reshape(-1)
    tmp = np.empty(_AXPY_BLOCK, np.float64)
    for i in range(0, fa.size, _AXPY_BLOCK):
        t = tmp[:builtins.min(_AXPY_BLOCK, fa.size - i)]
        np.multiply(fb[i:i + _AXPY_BLOCK], al, out=t)
        ufunc(fa[i:i + _AXPY_BLOCK], t, out=t)
        fa[i:i + _AXPY_BLOCK] = t


_AXPY_BLOCK = 16384


def _mixed_rounding(input, other, alpha, d):
    """``twice_rounded``'s mask as a constant tensor where PyTorch's kernel
    mixes the two roundings for these operands (float32, a number
    ``alpha``, a row-major ``input`` of a static shape), else None."""
    if d is not dt.float32 or not isinstance(other, Tensor) or other.dtype is not d or \
            not isinstance(input, Tensor) or input.dtype is not d or \
            not isinstance(alpha, (int, float)) or not input.is_contiguous() or \
            not all(isinstance(v, int) for v in tuple(input.shape) + tuple(other.shape)):
        return None
    if tuple(np.broadcast_shapes(tuple(input.shape), tuple(other.shape))) != tuple(input.shape):
        return None
    mask = twice_rounded(tuple(input.shape), tuple(other.shape))
    if mask is None or not mask.any():
        return None
    return Tensor._from_data(np.ascontiguousarray(mask))


#: ATen's ``internal::GRAIN_SIZE``: elementwise kernels over at most this
#: many elements run as one chunk on one thread
_GRAIN_SIZE = 32768


def fused_scaled_sum(op, input, other, alpha):
    """float32 ``op(input, alpha * other)`` (``op`` add or sub) rounded
    once, as PyTorch's CPU kernel computes it (``fma_rounded``): ``alpha``
    rounded to float32 (a number or a 0-d tensor), the product and the sum
    taken in float64, where the product of two float32 is exact, then
    rounded to float32.  The gradient is PyTorch's: ``grad`` for
    ``input``, ``grad * alpha`` rounded once for ``other``."""
    if (not RECORDERS and not isinstance(alpha, Tensor) and isinstance(input, Tensor)
            and type(input._data) is np.ndarray and type(other._data) is np.ndarray
            and input._data.flags.c_contiguous and other._data.flags.c_contiguous
            and input.shape == other.shape and not (graph.is_grad_enabled() and (
                input.requires_grad or other.requires_grad))):
        # eagerly, nothing to record: the same rounding in NumPy, in blocks
        out = input._data.copy()
        fused_axpy_(out, other._data, alpha, np.add if op is ops.add else np.subtract)
        return Tensor._from_data(out)
    f64 = dt.float64
    a = ops.cast(ops.cast(alpha, dt.float32), f64) if isinstance(alpha, Tensor) else \
        float(np.float32(alpha))
    x = ops.cast(input, f64) if isinstance(input, Tensor) else float(np.float32(input))
    out = ops.cast(op(x, ops.mul(ops.cast(other, f64), a)), dt.float32)
    from tracec.tensor_meta import keep_iter_layout
    return keep_iter_layout(out, input, other)


def _half_scaled_sum(op, input, other, alpha, d):
    """``input + alpha * other`` (``op`` add or sub) for a bfloat16 / float16
    result as PyTorch's CPU kernel computes it: ``alpha`` rounded to ``d``,
    the rest in float32, rounded once (tracec rounded the product too)."""
    a = float(np.asarray(alpha, np.float32).astype(d.np)) if d is dt.float16 else \
        float(dt.round_bfloat16(np.asarray(alpha, np.float32)))
    f = [ops.cast(v, dt.float32) if isinstance(v, Tensor) else v for v in (input, other)]
    # the product by alpha itself (the gradient's, grad * alpha as PyTorch's
    # backward makes it) plus the constant, exact, step to alpha rounded
    p = ops.mul(f[1], alpha)
    p = ops.add(p, ops.stop_gradient(ops.sub(ops.mul(f[1], a), p)))
    return ops.cast(op(f[0], p), d)


def _bfloat16_addend(x):
    """A real Python number added to (or subtracted from) a bfloat16
    tensor, rounded to bfloat16: PyTorch casts it to the tensor's dtype
    (its CPU kernels keep a multiplier or divisor in float32 instead,
    which a weak float32 scalar already is)."""
    if isinstance(x, (float, int, np.floating, np.integer)) and not isinstance(x, bool):
        return float(dt.round_bfloat16(np.asarray(x, np.float32)))
    return x


def _refuse_sparse_dense(a, b) -> None:
    """PyTorch has no ``add(sparse, dense)`` (nor ``sub``): a COO tensor
    plus a dense tensor or a number is refused, the other order is dense
    (SGD's ``grad.add(param, alpha=weight_decay)`` over an
    ``Embedding(sparse=True)``'s gradient raises there)."""
    from tracec.contraction import sparse_info
    if isinstance(a, Tensor) and sparse_info(a) is not None and \
            not (isinstance(b, Tensor) and sparse_info(b) is not None):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")


def _sparse_sum(out, a, b, alpha, subtract=False):
    """A COO tensor plus (minus) a COO tensor is COO (``contraction.sparse_added``),
    a CSR (CSC) one plus one of its layout is too (``sparse_compressed.compressed_added``)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        from tracec.contraction import sparse_added
        from tracec.sparse_compressed import compressed_added
        return compressed_added(sparse_added(out, a, b, alpha), a, b, subtract)
    return out


def _is_bool(v) -> bool:
    return isinstance(v, bool) or getattr(v, "dtype", None) is dt.bool_


def sub(input, other, *deprecated, alpha=1):
    if (isinstance(input, Tensor) and input.dtype in _PLAIN_FLOATS and not deprecated
            and not SPARSE and type(alpha) is int and alpha == 1
            and ((isinstance(other, Tensor) and other.dtype is input.dtype)
                 or type(other) in _PLAIN_SCALARS)):
        return ops.sub(input, other)     # (as add's fast path; no bool operand)
    if deprecated:   # sub(input, Number alpha, Tensor other)
        alpha, (other,) = other, _number_first("sub", other, deprecated, alpha, "alpha", 1)
    if SPARSE:
        _refuse_sparse_dense(input, other)
    given = (input, other)
    input = _wrapped_number(input, other)
    bools = _is_bool(input) or _is_bool(other)
    (input, other), d = promote("sub", input, other)
    if d is dt.bfloat16:
        input, other = _bfloat16_addend(input), _bfloat16_addend(other)
    if d is dt.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if bools:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    if alpha != 1:
        _check_alpha(alpha, d)
        if d in _HALF and isinstance(other, Tensor) and isinstance(alpha, _REAL_NUM):
            out = _half_scaled_sum(ops.sub, input, other, alpha, d)
            return _sparse_sum(out, *given, -alpha, True) if SPARSE else out
        out = None if SPARSE else _rounded_as_torch(ops.sub, input, other, alpha, d)
        if out is not None:
            return _named(out, "SubBackward0")
        if type(alpha).__name__ == "SymScalar":   # a lifted number (a traced lr): an operand
            other = mul(other, alpha)
        else:
            other = ops.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    out = ops.sub(input, other)
    return _sparse_sum(out, *given, -alpha, True) if SPARSE else out


def _opmath_scalar_operand(name, input, other):
    """``input * other`` / ``input / other`` for a bfloat16 / float16
    ``input`` and a one-element float ``other`` of another dtype (Adam's
    0-d float64 bias correction), as PyTorch's CPU kernel makes it: the
    scalar read in float32 (not rounded to the half type), the product or
    quotient rounded once; the same for a float16 ``input`` and a Python
    number (a bfloat16 one computes with the number in float32 already:
    its storage is float32); None for any other operands."""
    if isinstance(input, Tensor) and input.dtype is dt.float16 and \
            isinstance(other, (float, int, np.floating, np.integer)) and \
            not isinstance(other, (bool, np.bool_)):
        op = ops.mul if name == "mul" else ops.div
        return _named(ops.cast(op(ops.cast(input, dt.float32), other), dt.float16),
                      "MulBackward0" if name == "mul" else "DivBackward0")
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)) or \
            input.dtype not in _HALF or other.dtype is input.dtype or \
            other.dtype.category != 2 or other.numel() != 1 or \
            promote(name, input, other)[1] is not input.dtype:
        return None
    op = ops.mul if name == "mul" else ops.div
    return _named(ops.cast(op(ops.cast(input, dt.float32), ops.cast(other, dt.float32)), input.dtype),
                  "MulBackward0" if name == "mul" else "DivBackward0")


def mul(input, other):
    if (isinstance(input, Tensor) and input.dtype in _PLAIN_FLOATS and not SPARSE
            and ((isinstance(other, Tensor) and other.dtype is input.dtype)
                 or type(other) in _PLAIN_SCALARS)):
        return ops.mul(input, other)     # (as add's fast path)
    given = (input, other)
    if not SPARSE:
        out = _opmath_scalar_operand("mul", input, other)
        if out is not None:
            return out
    if SPARSE:
        _check_sparse_pair(input, other)
    input = _wrapped_number(input, other)
    (input, other), d = promote("mul", input, other)
    if d is dt.bool_:
        return ops.logical_and(input, other)
    out = ops.mul(input, other)
    return _sparse_scaled(out, *given, True) if SPARSE else out


def _check_sparse_pair(a, b) -> None:
    """PyTorch's refusal of a product of COO tensors of other shapes."""
    from tracec.contraction import sparse_info
    if isinstance(a, Tensor) and isinstance(b, Tensor) and sparse_info(a) is not None \
            and sparse_info(b) is not None and (
                tuple(a.shape) != tuple(b.shape)
                or sparse_info(a)[0].shape[0] != sparse_info(b)[0].shape[0]):
        raise RuntimeError("sparse_binary_op_intersection_cpu(): expects sparse inputs with equal "
                           "dimensionality, number of sparse dimensions, and shape of sparse "
                           "dimensions")


def _sparse_times_sparse(out, a, ia, b, ib):
    """``out`` = ``a * b`` for COO ``a`` and ``b`` as PyTorch's CPU kernel
    gives it: both coalesced, the coalesced intersection of their entries;
    otherwise every entry of the one with fewer entries (the first on a
    tie), in its order, times the other's value there (0 where it has
    none), uncoalesced."""
    from tracec.contraction import mark_sparse, sparse_entries
    (xa, va), (xb, vb) = sparse_entries(a, ia), sparse_entries(b, ib)
    sizes = tuple(a.shape[:xa.shape[0]])
    la, lb = np.ravel_multi_index(tuple(xa), sizes), np.ravel_multi_index(tuple(xb), sizes)
    dtype = out._data.dtype
    if ia[2] and ib[2]:
        keep = np.isin(la, lb)
        idx = xa[:, keep]
        return mark_sparse(out, Tensor._make(np.ascontiguousarray(idx), dt.int64), None, True)
    if xb.shape[1] < xa.shape[1]:
        (xa, va, la), (xb, vb, lb) = (xb, vb, lb), (xa, va, la)
    other = np.asarray(out._data)[tuple(xa)]          # the product, where the other has an entry
    values = np.where(np.isin(la, lb).reshape((-1,) + (1,) * (other.ndim - 1)), other, 0)
    return mark_sparse(out, Tensor._make(xa.copy(), dt.int64),
                       Tensor._make(np.ascontiguousarray(values.astype(dtype)), out.dtype), False)


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        from tracec.math_extra import div as rounding_div
        return rounding_div(input, other, rounding_mode=rounding_mode)
    if (isinstance(input, Tensor) and input.dtype in _PLAIN_FLOATS and not SPARSE
            and ((isinstance(other, Tensor) and other.dtype is input.dtype)
                 or type(other) in _PLAIN_SCALARS)):
        return ops.div(input, other)     # (as add's fast path; a float dtype: no promotion)
    given = (input, other)
    if not SPARSE:
        out = _opmath_scalar_operand("div", input, other)
        if out is not None:
            return out
    input = _wrapped_number(input, other)
    (input, other), d = promote("div", input, other, min_dtype=dt.get_default_dtype())
    out = ops.div(input, other)
    return _sparse_scaled(out, *given, False) if SPARSE else out


def _sparse_scaled(out, input, other, commutes: bool):
    """``out`` = a sparse COO ``input`` (either operand when ``commutes``)
    times / divided by a number or a 0-d tensor: PyTorch's result is COO
    too, with the same indices and coalesced state (APPNP's
    ``(1 - alpha) * A_hat`` buffer); any other product stays dense."""
    from tracec.contraction import mark_sparse, raw_record, set_record, sparse_entries, sparse_info
    if commutes and isinstance(input, Tensor) and isinstance(other, Tensor) \
            and type(out._data) is np.ndarray:
        ia, ib = sparse_info(input), sparse_info(other)
        if ia is not None and ib is not None:
            return _sparse_times_sparse(out, input, ia, other, ib)
    pairs = ((input, other), (other, input)) if commutes else ((input, other),)
    for s, n in pairs:
        info = sparse_info(s) if isinstance(s, Tensor) else None
        if info is None:
            rec = raw_record(s) if isinstance(s, Tensor) else None
            if rec is not None and not commutes:      # PyTorch has no CSR / CSC division
                from tracec.sparse_compressed import layout_name
                raise RuntimeError(f"unsupported tensor layout: {layout_name(s)}")
            if rec is not None and (isinstance(n, _NUM) or (isinstance(n, Tensor) and n.ndim == 0)):
                return set_record(out, rec)     # CSR / CSC times a number: same entries
            continue
        if isinstance(n, _NUM) or (isinstance(n, Tensor) and n.ndim == 0):
            values = None if info[1] is None else (mul(info[1], n) if commutes else div(info[1], n))
            return mark_sparse(_unsigned_zeros(out), info[0], values, info[2])
        if not commutes and isinstance(n, Tensor):
            raise RuntimeError("Sparse division requires a scalar or zero-dim dense tensor divisor "
                               f"(got shape {list(n.shape)} for divisor)")
        if isinstance(n, Tensor) and sparse_info(n) is None and tuple(out.shape) == tuple(s.shape) \
                and type(out._data) is np.ndarray:
            # times a dense tensor (broadcast to its shape): COO, each entry
            # times the dense value at its index
            idx, vals = sparse_entries(s, info)
            dense = np.broadcast_to(np.asarray(n._data), tuple(s.shape))[tuple(idx)]
            values = Tensor._make(np.asarray(vals * dense, dtype=out._data.dtype), out.dtype)
            return mark_sparse(out, info[0], values, info[2])
    return out


def true_divide(input, other):  # noqa: A002
    return div(input, other)


divide = div
multiply = mul
subtract = sub


#: A float32 / float64 tensor to a Python-scalar exponent is one ``pow``
#: node saving ``self`` alone, as PyTorch's PowBackward0 (a saved-tensor
#: hook packs it once), its values PyTorch's CPU specializations (``x * x``,
#: ``x * x * x``, ``sqrt``, ``1 / sqrt``: ``elementwise._EXACT_POW``, where
#: ``powf`` rounds differently by an ulp, enough to move a ``floor``:
#: HashNeRF's ``floor(base * b ** 3)``) and its gradient PyTorch's
#: ``grad * (e * x ** (e - 1))``.  A tensor exponent, even 0-d, takes the
#: general ``pow``, as in PyTorch.
_FLOAT32_64 = (dt.float32, dt.float64)


def pow(input, exponent):  # noqa: A001 - PyTorch's name
    out = _pow(input, exponent)
    return _sparse_unary("pow", out, input, exponent) if SPARSE else out


def _pow(input, exponent):
    (input, exponent), d = promote("pow", input, exponent)
    if isinstance(exponent, _NUM) and isinstance(input, Tensor) and input.dtype.category < 2 \
            and isinstance(exponent, numbers.Integral) and exponent < 0:
        # only a Python-scalar exponent; a tensor one truncates (ops.pow_)
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if isinstance(exponent, _NUM) and not isinstance(input, _NUM):
        if isinstance(input, Tensor) and input.dtype in _FLOAT32_64 and \
                not isinstance(exponent, (bool, np.bool_)):
            return _named(ops.pow_(input, exponent, exact=True), "PowBackward0")
        if exponent == 2:
            return _named(ops.mul(input, input), "PowBackward0")
        if exponent == 1:
            return _named(ops.mul(input, 1), "PowBackward0")
        if isinstance(input, Tensor) and input.dtype is dt.bfloat16:
            if isinstance(exponent, (float, np.floating)):
                # (PyTorch casts the exponent to bfloat16, as NumPy does a weak
                # scalar beside float16; tracec's bfloat16 is float32 storage)
                exponent = float(dt.round_bfloat16(np.asarray(exponent, np.float32)))
            if exponent in (3, -2):
                # PyTorch's bfloat16 kernel: x * (x * x) and 1 / (x * x), each
                # step rounded; the gradient pow's (the values' step exact)
                y = ops.pow_(input, exponent)
                sq = ops.mul(input, input)
                z = ops.mul(input, sq) if exponent == 3 else ops.div(1.0, sq)
                same = ops.eq(z, y)                    # (inf, -0.0: kept as they are)
                step = ops.stop_gradient(ops.where(same, 0.0, ops.sub(z, y)))
                return _named(ops.where(same, y, ops.add(y, step)), "PowBackward0")
        return _named(ops.pow_(input, exponent), "PowBackward0")
    if isinstance(input, _NUM) and not isinstance(exponent, _NUM):
        if isinstance(exponent, Tensor) and exponent.dtype is dt.bfloat16 and \
                isinstance(input, (float, int, np.floating, np.integer)) and \
                not isinstance(input, bool):
            # (the base too is cast to bfloat16 by PyTorch; tracec's bfloat16
            # storage is float32: 0.7 ** x had half its elements one unit off)
            input = float(dt.round_bfloat16(np.asarray(input, np.float32)))
        return _named(ops.pow_(input, exponent), "PowBackward2")
    return ops.pow_(input, exponent)


def neg(input):
    input = _operand(input, "neg")
    if isinstance(input, Tensor) and input.dtype is dt.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    out = ops.neg(input)
    return _sparse_unary("neg", out, input) if SPARSE else out


negative = neg


def _float_unary(name, f, node_name=None):
    """``node_name``: the op's PyTorch node, where a large eager call runs
    as native kernels (``fused_eager``)."""
    def fn(input):
        w = dispatching_operand(input)
        if w is not None:
            return w.__tracec_dispatch__(fn, (input,), {})
        input = _operand(input, name)
        if not isinstance(input, Tensor):
            input = Tensor._from_data(input)
        if input.dtype.category < 2:
            input = ops.cast(input, dt.get_default_dtype())
        y = fused_eager.unary(input, (name,), f, node_name) if node_name is not None else None
        if y is None:
            y = f(input)
        return _sparse_unary(name, y, input) if SPARSE else y
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
sigmoid = _float_unary("sigmoid", ops.logistic, "SigmoidBackward0")
erf = _float_unary("erf", ops.erf, "ErfBackward0")


def abs(input):  # noqa: A001
    input = _operand(input, "abs")
    out = ops.abs_(input)
    return _sparse_unary("abs", out, input) if SPARSE else out


absolute = abs


def sign(input):
    input = _operand(input, "sign")
    # (a bool's sign is itself, as PyTorch's sign of a bool tensor)
    out = input.clone() if input.dtype is dt.bool_ else ops.sign(input)
    return _sparse_unary("sign", out, input) if SPARSE else out


def square(input):
    if SPARSE:
        _sparse_unary("square", None, input)       # (PyTorch's refusals, before computing)
    out = _pow(input, 2) if isinstance(input, Tensor) and input.dtype in _FLOAT32_64 else \
        _named(mul(input, input), "PowBackward0")
    return _sparse_unary("square", out, input) if SPARSE else out


# The unary ops PyTorch runs on sparse tensors, keeping the layout (they map
# 0 to 0), and those it refuses, per layout (its kernels' registrations).
_SPARSE_UNARY = {"neg", "abs", "relu", "sqrt", "tanh", "sin", "sign", "pow", "square"}
_SPARSE_REFUSED = {"exp", "sigmoid"}
_COMPRESSED_REFUSED = {"exp", "sigmoid", "pow", "square"}


def _unsigned_zeros(out):
    """``out``, a COO tensor's dense stand-in after a negation or a
    negative scale, with its unspecified entries +0 as PyTorch's
    ``to_dense`` gives them (-0.0 + 0.0 is +0.0)."""
    a = out._data
    if type(a) is np.ndarray and a.dtype.kind in "fc":
        out._data = a + a.dtype.type(0)
    return out


def _sparse_unary(name, out, input, exponent=None):
    """``out`` = ``name``(``input``) as PyTorch's result when ``input`` is a
    sparse tensor: a zero-preserving op keeps the COO (coalesced: its entries
    at ``input``'s coalesced indices; ``neg`` keeps uncoalesced entries too)
    or CSR / CSC layout; PyTorch's refusals raise; other ops stay dense."""
    from tracec.contraction import coalesced_indices, mark_sparse, raw_record, set_record
    rec = raw_record(input) if isinstance(input, Tensor) else None
    if rec is None:
        return out
    coo = type(rec) is list
    if name in (_SPARSE_REFUSED if coo else _COMPRESSED_REFUSED) or (
            name == "pow" and not (isinstance(exponent, _NUM) and exponent > 0)):
        if coo:
            raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                      "'SparseCPU' backend.")
        from tracec.sparse_compressed import layout_name
        raise RuntimeError(f"unsupported tensor layout: {layout_name(input)}")
    if name not in _SPARSE_UNARY or out is None:
        return out
    if not coo:
        return set_record(out, rec)
    if name == "neg":
        out = _unsigned_zeros(out)
        if not rec[2]:
            return mark_sparse(out, rec[0], ops.neg(rec[1]), False)
    idx = rec[0] if rec[2] else Tensor._make(
        coalesced_indices(rec[0]._data, tuple(input.shape)), dt.int64)
    return mark_sparse(out, idx, None, True)


def reciprocal(input):
    return _named(div(1.0, input), "ReciprocalBackward0")


def log1p(x):
    if getattr(x, "dtype", None) is not None and x.dtype.is_complex:
        return log(add(x, 1.0))
    return _float_unary("log1p", ops.log1p)(x)


def expm1(x):
    if getattr(x, "dtype", None) is not None and x.dtype.is_complex:
        return sub(exp(x), 1.0)
    return _float_unary("expm1", ops.expm1)(x)


_LE, _WHERE = ops.elementwise.le_p, ops.elementwise.where_p


def relu(input):
    out = graph.saves_result(_relu(input))
    return _sparse_unary("relu", out, input) if SPARSE else out


def _relu(input):
    """PyTorch's relu: ``x <= 0 ? (x < 0 ? 0 : x) : x``, so NaN and the
    sign of a zero go through (``clamp_min``), and the gradient is its
    ``threshold_backward``: the incoming one where ``x <= 0`` is false (NaN
    included), 0 elsewhere (at 0 too)."""
    input = _operand(input, "relu")
    if isinstance(input, Tensor):
        y = fused_eager.unary(input, ("relu",), _relu_prims, "ReluBackward0")
        if y is not None:
            return y
        d = input.dtype
        if d.is_floating_point and d is not dt.bfloat16 and eager_direct(input):
            # The hot activation applied directly (each bind costs more than
            # its NumPy work): the node is the gradient's where on x <= 0, its
            # value computed at once (one comparison, one bit select).
            xd = input._data
            zero = weak_scalar(0, d)
            if not (input.requires_grad and graph.is_grad_enabled()):
                # no node to build: the value alone (np.where below the size
                # where the where primitive's bit select pays)
                below = xd < zero
                return _new_tensor(np.where(below, zero, xd)
                                   if xd.size < ops.elementwise.WHERE_BIT_SELECT_MIN
                                   else _WHERE.impl(below, zero, xd), d)
            # (le has no VJP and is no view: apply_direct's whole effect
            # is the tensor; the value's where as the branch above)
            mask = _new_tensor(_LE.impl(xd, zero), dt.bool_)
            below = xd < zero
            value = (np.where(below, zero, xd) if xd.size < ops.elementwise.WHERE_BIT_SELECT_MIN
                     else _WHERE.impl(below, zero, xd))
            out = apply_direct(_WHERE, {}, (mask, 0, input), value, d)
            return _named(out, "ReluBackward0")
    return _named(_relu_prims(input), "ReluBackward0")


def _relu_prims(x):
    below = ops.where(ops.lt(x, 0), 0, ops.stop_gradient(x))   # 0, or x's own zero
    return ops.where(ops.le(x, 0), below, x)


def gelu(x, approximate: str = "none"):
    x = _operand(x, "gelu")
    if isinstance(x, Tensor) and x.dtype in _HALF and approximate in ("none", "tanh"):
        # PyTorch's kernels compute a half-precision GELU in float32 and
        # round once (each primitive rounding would move ~40% of the values
        # by an ulp); the casts' VJPs make the backward do the same.
        y = _gelu_prims(ops.cast(x, dt.float32), approximate)
        return _named(ops.cast(y, x.dtype), "GeluBackward0")
    if approximate in ("none", "tanh"):
        y = fused_eager.unary(x, ("gelu", approximate), _GELU_COMPOSITES[approximate],
                              "GeluBackward0")
        if y is not None:
            return y
    if (approximate == "none" and isinstance(x, Tensor) and x.dtype in (dt.float32, dt.float64)
            and x.ndim and eager_direct(x)):
        return _gelu_eager().apply(x)
    return _gelu_prims(x, approximate)


def _gelu_prims(x, approximate):
    if approximate == "none":
        y = ops.mul(ops.mul(x, 0.5), ops.add(ops.erf(ops.mul(x, 1 / math.sqrt(2.0))), 1.0))
    elif approximate == "tanh":
        inner = ops.mul(ops.add(x, ops.mul(ops.mul(ops.mul(x, x), x), 0.044715)),
                        math.sqrt(2 / math.pi))
        y = ops.mul(ops.mul(x, 0.5), ops.add(ops.tanh(inner), 1.0))
    else:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _named(y, "GeluBackward0")


_GELU_EAGER = []
_GELU_COMPOSITES = {a: (lambda x, a=a: _gelu_prims(x, a)) for a in ("none", "tanh")}


def _gelu_eager():
    """``_gelu_prims`` (exact GELU) run eagerly in NumPy as an autograd
    Function: the primitives' impls in the same order, so the same value,
    and a backward that makes the primitives' VJPs' products (``g * b * 0.5
    + g * h * exp(-u * u) * 2 / sqrt(pi) / sqrt(2)``, each product as they
    make it) in four fresh arrays instead of twelve.  ``x`` is saved with
    its version, as PyTorch's GeluBackward0 saves it; double backward
    (create_graph) differentiates the primitives' graph."""
    if _GELU_EAGER:
        return _GELU_EAGER[0]
    from tracec import graph
    from tracec.autograd import Function, grad as _grad
    from tracec.ops import elementwise as ew

    def consts(d):
        return (weak_scalar(1 / math.sqrt(2.0), d), weak_scalar(0.5, d),
                weak_scalar(1.0, d), weak_scalar(2.0 / math.sqrt(math.pi), d))

    class _GeluEager(Function):
        node_name = "GeluBackward0"

        @staticmethod
        def forward(ctx, x):
            xd = x._data
            c, half, one, _ = consts(x.dtype)
            u = ew.mul_p.impl(xd, c)
            b = ew.erf_p.impl(u)
            with quiet_fp():
                np.add(b, one, out=b)
                y = np.multiply(xd, half)
                y *= b
            ctx.save_for_backward(x)
            ctx.u, ctx.b = u, b
            return Tensor._make(y, x.dtype)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            if graph.is_grad_enabled():
                with graph.enable_grad():
                    y = _gelu_prims(x, "none")
                return _grad(y, (x,), g, create_graph=True)[0]
            gd, u = g._data, ctx.u
            c, half, _, c2 = consts(x.dtype)
            with quiet_fp():
                t = np.multiply(u, u)
                np.negative(t, out=t)
                t = ew.exp_p.impl(t)                # exp(-u * u), the primitive's
                t *= c2
                # each product with its operands in the VJPs' order (a NaN
                # times a NaN is the first one)
                h = np.multiply(x._data, half)      # the forward's x * 0.5
                np.multiply(gd, h, out=h)           # b's cotangent g * h
                np.multiply(h, t, out=t)            # u's: that times erf'(u)
                t *= c                              # x's through u
                s = np.multiply(gd, ctx.b)          # h's cotangent g * b
                s *= half                           # x's through h
                t += s
            return Tensor._make(t, x.dtype)

    _GELU_EAGER.append(_GeluEager)
    return _GeluEager


def silu(x):
    x = _operand(x, "silu")
    if isinstance(x, Tensor) and x.dtype in _HALF:
        # as gelu: PyTorch computes a half-precision SiLU in float32 and
        # rounds once (rounding the sigmoid first moved ~30% of the values)
        y = _silu_prims(ops.cast(x, dt.float32))
        return _named(ops.cast(y, x.dtype), "SiluBackward0")
    y = fused_eager.unary(x, ("silu",), _silu_prims, "SiluBackward0")
    return y if y is not None else _named(_silu_prims(x), "SiluBackward0")


def _silu_prims(x):
    return ops.mul(x, ops.logistic(x))


def maximum(input, other):
    (input, other), _ = promote("maximum", input, other)
    return ops.maximum(input, other)


def minimum(input, other):
    (input, other), _ = promote("minimum", input, other)
    return ops.minimum(input, other)


def where(condition, input=None, other=None):
    if input is None and other is None:   # torch.where(cond): nonzero(cond, as_tuple=True)
        from tracec.select_ops import nonzero
        return nonzero(_operand(condition, "where"), as_tuple=True)
    if (input is None) != (other is None):
        raise TypeError("where() takes the condition alone or with both input and other")
    w = dispatching_operand(condition, input, other)
    if w is not None:
        return w.__tracec_dispatch__(where, (condition, input, other), {})
    condition = _operand(condition, "where")
    if isinstance(condition, Tensor) and condition.dtype is dt.uint8:
        import warnings
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated "
                      "and will be removed in a future version of PyTorch. Use a boolean "
                      "condition instead.", UserWarning, stacklevel=2)
        condition = ops.ne(condition, 0)
    if not isinstance(condition, Tensor):
        raise TypeError("where(): the condition must be a bool tensor")
    if condition.dtype is not dt.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {dt.scalar_type_name(condition.dtype)}")
    (input, other), d = promote("where", input, other)
    if d.category == 1:   # an int number into an integer result: PyTorch's range check
        input, other = (dt.check_fits(v, d) if type(v) is int else v for v in (input, other))
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        # Two scalars: the result has their promoted dtype, not the condition's.
        input = Tensor._make(np.asarray(input, dtype=d.np), d)
    out = ops.where(condition, input, other)
    if type(out) is Tensor and out._data.ndim > 1:
        # (one kernel's layout over the three, as PyTorch's TensorIterator)
        from tracec.tensor_meta import keep_iter_layout
        keep_iter_layout(out, condition, input, other)
    return out


def clamp(input, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    input = _operand(input, "clamp")
    if isinstance(input, Tensor):
        for bound in (min, max):
            if not (type(bound) is float and input.dtype.category < 2):   # (that promotes)
                dt.check_fits(bound, input.dtype)
        if (input.dtype in _CLIP_DTYPES and _number_bound(min) and _number_bound(max)
                and not (input.requires_grad and graph.is_grad_enabled()) and input.ndim
                and eager_direct(input)):
            return _new_tensor(_clip_values(input._data, min, max), input.dtype)
    y = input
    # where-based so the gradient passes on the boundary, as in PyTorch;
    # a NaN number bound makes every element NaN, as PyTorch's kernel.
    if min is not None:
        (y, lo), _ = promote("clamp", y, min)
        y = _nan_tensor_bound(ops.where(_nan_bound(y) if _is_nan(min) else ops.lt(y, lo), lo, y),
                              lo)
    if max is not None:
        (y, hi), _ = promote("clamp", y, max)
        y = _nan_tensor_bound(ops.where(_nan_bound(y) if _is_nan(max) else ops.gt(y, hi), hi, y),
                              hi)
    if isinstance(y, Tensor) and y.dtype.is_floating_point and y.requires_grad:
        # PyTorch's backward passes the gradient where min <= x <= max only:
        # none at a NaN result (a NaN input or bound), to the input or bounds
        y = ops.where(ops.ne(y, y), ops.stop_gradient(y), y)
    tensor_bound = isinstance(min, Tensor) or isinstance(max, Tensor)
    return _named(y, "ClampBackward0" if tensor_bound else "ClampBackward1")


def _nan_tensor_bound(y, bound):
    """``y`` NaN where a tensor ``bound`` is NaN, as PyTorch's kernel
    propagates it (the comparison alone keeps the input there)."""
    if not isinstance(bound, Tensor) or not bound.dtype.is_floating_point:
        return y
    return ops.where(ops.ne(bound, bound), bound, y)


def _is_nan(b) -> bool:
    return type(b) is float and b != b


def _nan_bound(y):
    return ops.full(tuple(y.shape), True, dt.bool_, like=y)


clip = clamp

_CLIP_DTYPES = (dt.float16, dt.float32, dt.float64)


def _number_bound(b) -> bool:
    return b is None or (type(b) in (int, float) and b == b)


def _clip_values(x: np.ndarray, lo, hi) -> np.ndarray:
    """The value of ``clamp``'s two ``where``s in one ``np.clip`` pass (a
    fifth of the time: 4M float32, 41 -> 5 ms, measured): equal but for the
    sign of a zero bound where ``x`` is a zero of the other sign, which the
    ``where``s keep from ``x`` (``x < lo`` is false) and ``np.clip`` may
    take from the bound; those elements are copied back from ``x``."""
    t = dt.to_float16 if x.dtype == np.float16 else x.dtype.type   # (through float32)
    lo = None if lo is None else t(lo)
    hi = None if hi is None else t(hi)
    with quiet_fp():
        out = np.clip(x, lo, hi)
        if (lo is None or lo <= 0) and (hi is None or hi >= 0):
            np.copyto(out, x, where=(x == 0))
    return out


def _cmp(name, prim):
    def fn(input, other):
        (input, other), _ = promote(name, input, other)
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise TypeError(f"{name}(): at least one operand must be a Tensor")
        return prim(input, other)
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


def logical_and(input, other):
    return ops.logical_and(_as_bool(input, "logical_and"), _as_bool(other, "logical_and"))


def logical_or(input, other):
    return ops.logical_or(_as_bool(input, "logical_or"), _as_bool(other, "logical_or"))


def logical_not(input):
    return ops.logical_not(_as_bool(input, "logical_not"))


def isnan(input):
    return ops.ne(input, input)


def equal(input, other) -> bool:
    # A Python bool from the values: concrete() (a TraceError inside
    # tracec.compile, where the first call's answer would be frozen).
    return tuple(input.shape) == tuple(other.shape) and bool(np.array_equal(
        concrete(input, "equal()"), concrete(other, "equal()")))


def allclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False) -> bool:
    bv = concrete(other, "allclose()") if isinstance(other, Tensor) else np.asarray(other)
    return bool(np.allclose(concrete(input, "allclose()"), bv,
                            rtol=rtol, atol=atol, equal_nan=equal_nan))


# --- reductions -------------------------------------------------------------------

def _dims(x, dim):
    """The sorted axes ``dim`` names; a 0-d tensor has none (``dim`` 0 or
    -1 still checked), so reducing it over its "dim 0" is the identity, as
    in PyTorch."""
    if dim is None or dim == () or dim == []:
        return tuple(range(x.ndim))
    if isinstance(dim, (list, tuple)):
        out = sorted({normalize_axis(d, x.ndim) for d in dim})
        if len(out) != len(dim):
            raise RuntimeError(f"dim {tuple(dim)} appears multiple times in the list of dims")
        return tuple(out) if x.ndim else ()
    axis = normalize_axis(dim, x.ndim)
    return (axis,) if x.ndim else ()


def _keep(x, y, axes, keepdim):
    if keepdim and x.ndim:
        return ops.reshape(y, tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    return y


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    if input.__class__ is not Tensor or dim is not None or keepdim is not False:
        # (``x.sum()``, the common call, has no wrapper or other operand to convert)
        w = dispatching_operand(input, dim, keepdim)
        if w is not None:
            return w.__tracec_dispatch__(sum, (input, dim, keepdim), {"dtype": dtype})
        input = _operand(input, "sum")
    if dtype is not None:
        input = _to(input, dt.to_dtype(dtype))
    elif input.dtype.category < 2 and input.dtype is not dt.int64:
        input = ops.cast(input, dt.int64)
    axes = _dims(input, dim)
    y = _reduce_kernels(input, axes, dim, keepdim, "sum")
    if y is not None:
        return y
    y = _keep(input, ops.reduce_sum(input, axes), axes, keepdim)
    return _named(y, "SumBackward0" if dim is None else "SumBackward1")


def _reduce_kernels(x, axes, dim, keepdim, kind):
    """A large float sum or mean over every axis (no keepdim) or over
    trailing ones (a row's features, an image's pixels) through native
    kernels (``fused_eager.nary``: one vectorized, threaded pass; NumPy's
    reduction of 4M float32 over rows of 512 took 0.83 ms to the kernel's
    0.30), else None."""
    if not isinstance(x, Tensor) or x.dtype not in (dt.float32, dt.float64) or not x.ndim:
        return None
    if type(x._data) is np.ndarray and x._data.size < fused_eager.MIN_NUMEL:
        return None       # (what fused_eager.nary answers for it, found sooner)
    name = ("SumBackward" if kind == "sum" else "MeanBackward") + ("0" if dim is None else "1")
    shape = tuple(x._data.shape)
    nd, k = x.ndim, len(axes)
    if k == nd and not keepdim:
        return fused_eager.nary((x,), ((-1,),), (kind, "all"), _REDUCE_ALL[kind], name,
                                out_shape=())
    if axes != tuple(range(nd - k, nd)):
        return None
    inner = math.prod(shape[nd - k:])
    if inner < 2:
        return None
    out = shape[:nd - k] + ((1,) * k if keepdim else ())
    key = (kind, "trailing", nd, k, bool(keepdim))
    return fused_eager.nary((x,), ((-1, inner),), key, _trailing_reduce(*key), name,
                            out_shape=out)


# The composites those kernels compile, on the kernels' folded shape and on
# the tensor's own (where a double backward applies them).
_REDUCE_ALL = {"sum": lambda t: ops.reduce_sum(t, tuple(range(t.ndim))),
               "mean": lambda t: mean(t)}


def _trailing_reduce(kind, _, nd, k, keepdim):
    f = sum if kind == "sum" else mean

    def composite(t):
        if t.ndim != nd:                     # the kernels' (rows, inner) form
            y = f(t, -1)
            return ops.reshape(y, tuple(y.shape) + (1,) * k) if keepdim else y
        return f(t, tuple(range(nd - k, nd)), keepdim)
    return composite


def mean(input, dim=None, keepdim=False, *, dtype=None):
    w = dispatching_operand(input, dim, keepdim)
    if w is not None:
        return w.__tracec_dispatch__(mean, (input, dim, keepdim), {"dtype": dtype})
    input = _operand(input, "mean")
    if dtype is not None:
        input = _to(input, dt.to_dtype(dtype))
    if not (input.dtype.is_floating_point or input.dtype.category == 3):
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: "
                           f"{dt.scalar_type_name(input.dtype)}")
    axes = _dims(input, dim)
    y = _reduce_kernels(input, axes, dim, keepdim, "mean")
    if y is not None:
        return y
    n = math.prod(input.shape[a] for a in axes) if input.ndim else 1
    half = input.dtype if input.dtype in _HALF else None
    # A symbolic size (a symbolic trace) stays one: the count is a run-time value.
    y = ops.div(ops.reduce_sum(input if half is None else ops.cast(input, dt.float32), axes),
                n if isinstance(n, Sym) else float(n) if n else float("nan"))
    if half is not None:
        y = ops.cast(y, half)
    y = _named(_keep(input, y, axes, keepdim), "MeanBackward0" if dim is None else "MeanBackward1")
    if y._node is not None:     # (PyTorch's one node: its input, not tracec's sum, is its edge)
        name = y._node._name = TorchName(y._node._name)
        name.edges = (graph.edge_of(input),)
    return y


def _check_extreme_sizes(x, dim, axes, name):
    """PyTorch's checks before a max / min reduction of ``x`` over ``axes``
    (``dim`` as given): an empty tensor needs a dim, and none of the
    reduced dims may be empty."""
    if not isinstance(x.numel(), Sym) and x.numel() == 0:
        if dim is None or dim == () or dim == []:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                               f"input.numel() == 0. Specify the reduction dim with the 'dim' "
                               f"argument.")
        for a in axes:
            if x.shape[a] == 0:
                raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


def amax(input, dim=None, keepdim=False):
    axes = _dims(input, dim)
    _check_extreme_sizes(input, dim, axes, "amax")
    return _keep(input, ops.reduce_max(input, axes), axes, keepdim)


def amin(input, dim=None, keepdim=False):
    axes = _dims(input, dim)
    _check_extreme_sizes(input, dim, axes, "amin")
    return _keep(input, ops.reduce_min(input, axes), axes, keepdim)


MinMax = structseq("max", ["values", "indices"])
MinResult = structseq("min", ["values", "indices"])


def _extreme(x, dim, keepdim, other, arg, full, name):
    if isinstance(dim, Tensor) and other is None:
        dim, other = None, dim
    if other is not None:
        return (maximum if name == "max" else minimum)(x, other)
    _check_extreme_sizes(x, dim, _dims(x, dim), name)
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


def max(input, dim=None, keepdim=False, *, other=None):  # noqa: A001
    return _extreme(input, dim, keepdim, other, ops.argmax, ops.reduce_max, "max")


def min(input, dim=None, keepdim=False, *, other=None):  # noqa: A001
    return _extreme(input, dim, keepdim, other, ops.argmin, ops.reduce_min, "min")


def _arg(name, prim):
    def fn(input, dim=None, keepdim=False):
        if isinstance(input, Tensor) and input.dtype is dt.bool_:   # (max(0) takes bool)
            raise RuntimeError(f"{name}(): does not support bool input")
        # PyTorch's IndexErrors for an empty reduction (a symbolic size is
        # never known to be 0 here)
        if dim is None:
            if input.ndim and any(type(s) is int and s == 0 for s in input.shape):
                raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                                 f"input.numel() == 0.")
            r = prim(ops.reshape(input, (input.numel(),)), 0)
            return ops.reshape(r, (1,) * input.ndim) if keepdim else r
        d = normalize_axis(dim, input.ndim)
        if input.ndim and type(input.shape[d]) is int and input.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
        r = prim(input, d)
        if keepdim and input.ndim:
            r = ops.reshape(r, tuple(1 if i == d else s for i, s in enumerate(input.shape)))
        return r
    fn.__name__ = name
    return fn


argmax = _arg("argmax", ops.argmax)
argmin = _arg("argmin", ops.argmin)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _var(input, dim, unbiased, keepdim, correction, "var")


def _var(input, dim, unbiased, keepdim, correction, op):
    """``var`` (``op`` names the function PyTorch's warning names)."""
    if isinstance(input, Tensor) and not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if isinstance(dim, bool) and unbiased is None:  # var(x, False)
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if isinstance(input, Tensor) and input.dtype in _HALF:
        # PyTorch's kernel works in float32 and rounds the result once
        if input.requires_grad and graph.is_grad_enabled():
            y = _var(ops.stop_gradient(input), dim, None, keepdim, correction, op)
            return _named(_half_var_vjp(y, input, _dims(input, dim), correction, keepdim),
                          "VarBackward0")
        y = _var(ops.cast(input, dt.float32), dim, None, keepdim, correction, op)
        return _named(ops.cast(y, input.dtype), "VarBackward0")
    axes = _dims(input, dim)
    n = math.prod(input.shape[a] for a in axes) if input.ndim else 1
    m = mean(input, axes, keepdim=True)
    d = sub(input, m)
    count = n - correction
    if not isinstance(count, Sym) and count <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel). "
                      "(Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/native/"
                      "ReduceOps.cpp:1861.)", UserWarning, stacklevel=user_stacklevel())
    if not (isinstance(count, Sym) and known(count, ">", 0) is True):
        count = float(builtin_max(count, 0))
    # (a symbolic count, as mean's, stays a run-time value: no specialization)
    if d.dtype.is_complex:      # |d|^2: a real variance (var(real) + var(imag) in PyTorch)
        sq = ops.cast(ops.mul(d, d.conj()), dt.real_of(d.dtype))
    else:
        sq = ops.mul(d, d)
    y = ops.div(ops.reduce_sum(sq, axes), count)
    return _named(_keep(input, y, axes, keepdim), "VarBackward0")


builtin_max = __builtins__["max"] if isinstance(__builtins__, dict) else __builtins__.max


def _safe_root(s, p):
    """``s ** (1 / p)`` for ``s >= 0`` whose gradient at ``s == 0`` is 0, as
    PyTorch's norm and std backwards mask it (the root's own is infinite,
    and 0 * inf would make a zero vector's gradient NaN)."""
    zero = ops.eq(s, 0.0)
    r = ops.sqrt(ops.where(zero, 1.0, s)) if p == 2 else \
        ops.pow_(ops.where(zero, 1.0, s), 1.0 / p)
    return ops.where(zero, 0.0, r)


def _half_var_vjp(y, x, axes, correction, keepdim, std=False):
    """``y``, the half var (``std``: std) of ``x`` computed without a
    gradient, with PyTorch's backward as its half ops round it:
    ``(c * g) * (x - mean(x))``, ``c = 2 / (N - correction)``, std's ``g``
    first ``g / (2 * y)`` (0 where ``y`` is 0); the added zero term
    ``(sum((x - mean) * (x - x)) * c) / (2 y)`` in ``x``'s dtype is the linear
    map whose transpose that is."""
    n = math.prod(x.shape[a] for a in axes) if x.ndim else 1
    if not isinstance(n, int):                   # (a symbolic size: the composite's own)
        return y
    xs = ops.stop_gradient(x)
    k = ops.sub(xs, mean(xs, axes, keepdim=True))
    t = _keep(x, ops.reduce_sum(ops.mul(k, ops.sub(x, xs)), axes), axes, keepdim)
    t = mul(t, 2.0 / (n - correction) if n != correction else math.inf)   # (opmath: c unrounded)
    if std:
        ys = ops.stop_gradient(y)
        zero = ops.eq(ys, 0.0)
        t = ops.where(zero, 0.0, ops.div(t, ops.where(zero, 1.0, ops.mul(ys, 2.0))))
    return ops.add(y, t)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    # A constant slice has std 0 and, as in PyTorch, gradient 0 (not NaN).
    if isinstance(input, Tensor) and input.dtype in _HALF:     # (as var)
        if input.requires_grad and graph.is_grad_enabled():
            y = std(ops.stop_gradient(input), dim, unbiased, keepdim, correction=correction)
            if isinstance(dim, bool) and unbiased is None:
                dim, unbiased = None, dim
            corr = correction if correction is not None else (
                1 if unbiased is None or unbiased else 0)
            return _named(_half_var_vjp(y, input, _dims(input, dim), corr, keepdim, std=True),
                          "StdBackward0")
        y = std(ops.cast(input, dt.float32), dim, unbiased, keepdim, correction=correction)
        return _named(ops.cast(y, input.dtype), "StdBackward0")
    return _named(_safe_root(_var(input, dim, unbiased, keepdim, correction, "std"), 2),
                  "StdBackward0")


def _stop_max(x, axes, keep_inf=False):
    """max over ``axes`` (kept), as a constant; infinities become 0 so that
    ``x - m`` stays finite (``keep_inf``: only -inf, as PyTorch's softmax
    kernels shift by a +inf max, which makes that slice NaN).  The gradient
    through it cancels exactly."""
    keep = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    if any(x.shape[a] == 0 for a in axes):  # nothing to reduce: no shift needed
        return ops.full(keep, 0.0, x.dtype, like=x)
    m = ops.reshape(ops.reduce_max(x.detach() if isinstance(x, Tensor) else x, axes), keep)
    if keep_inf:
        return ops.where(ops.eq(m, float("-inf")), 0.0, m)
    return ops.where(ops.eq(ops.abs_(m), float("inf")), 0.0, m)


def logsumexp(input, dim, keepdim=False):
    input = _float_unary("logsumexp", lambda t: t)(input)
    axes = _dims(input, dim)
    if input.dtype in _HALF and input.requires_grad and graph.is_grad_enabled():
        y = logsumexp(ops.stop_gradient(input), dim, keepdim)
        return _named(_half_logsumexp_vjp(y, input, axes, keepdim), "LogsumexpBackward0")
    m = _stop_max(input, axes)
    s = ops.log(ops.reduce_sum(ops.exp(ops.sub(input, m)), axes))
    y = ops.add(s, ops.reshape(m, s.shape))
    return _named(_keep(input, y, axes, keepdim), "LogsumexpBackward0")


#: bfloat16 and float16: PyTorch's CPU kernels for mean, softmax and
#: log_softmax compute them in float32 and round the result once
_HALF = (dt.bfloat16, dt.float16)


def _refuse_integer_softmax(name, input, dim, dtype):
    """PyTorch's CPU softmax / log_softmax kernels have no integer or bool
    instances: without ``dtype=`` such an input is its NotImplementedError
    (the kernel named by whether ``dim`` is the last one), not promoted as
    ``exp`` would promote it."""
    if dtype is None and isinstance(input, Tensor) and not (
            input.dtype.is_floating_point or input.dtype.is_complex):
        last = input.ndim == 0 or normalize_axis(dim, input.ndim) == input.ndim - 1
        kernel = f"{name}_lastdim_kernel_impl" if last else f"{name}_kernel_impl"
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{dt.scalar_type_name(input.dtype)}'")


def softmax(input, dim, dtype=None):
    w = dispatching_operand(input, dim)
    if w is not None:
        return w.__tracec_dispatch__(softmax, (input, dim), {"dtype": dtype})
    return graph.saves_result(_softmax(input, dim, dtype))


def _softmax(input, dim, dtype):
    _refuse_integer_softmax("softmax", input, dim, dtype)
    input = _float_unary("softmax", lambda t: t)(input)
    if dtype is not None:
        input = _to(input, dt.to_dtype(dtype))
    input = _contiguous_input(input)
    half = input.dtype if input.dtype in _HALF else None
    axes = _dims(input, dim)
    if half is not None and input.requires_grad and graph.is_grad_enabled():
        y = softmax(ops.stop_gradient(input), dim)
        return _named(_half_softmax_vjp(y, input, axes), "SoftmaxBackward0")
    y = _last_axis_kernels(input, axes, "softmax", _softmax_last, "SoftmaxBackward0")
    if y is not None:
        return y
    x = input if half is None else ops.cast(input, dt.float32)
    e = ops.exp(ops.sub(x, _stop_max(x, axes, keep_inf=True)))
    s = ops.reshape(ops.reduce_sum(e, axes), tuple(1 if i in axes else n
                                                    for i, n in enumerate(input.shape)))
    # (PyTorch's kernel over another dimension than the last sums the float32
    # exponentials but stores them in the half output before dividing)
    last = input.ndim and axes == (input.ndim - 1,)
    y = ops.div(e if half is None or last else _rounded_to(e, half), s)
    return _named(y if half is None else ops.cast(y, half), "SoftmaxBackward0")


def log_softmax(input, dim, dtype=None):
    w = dispatching_operand(input, dim)
    if w is not None:
        return w.__tracec_dispatch__(log_softmax, (input, dim), {"dtype": dtype})
    return graph.saves_result(_log_softmax(input, dim, dtype))


def _log_softmax(input, dim, dtype):
    _refuse_integer_softmax("log_softmax", input, dim, dtype)
    input = _float_unary("log_softmax", lambda t: t)(input)
    if dtype is not None:
        input = _to(input, dt.to_dtype(dtype))
    input = _contiguous_input(input)
    axes = _dims(input, dim)
    if input.dtype in _HALF and input.requires_grad and graph.is_grad_enabled():
        y = log_softmax(ops.stop_gradient(input), dim)
        return _named(_half_log_softmax_vjp(y, input, axes), "LogSoftmaxBackward0")
    if input.dtype in _HALF and input.ndim and axes == (input.ndim - 1,):
        return _log_softmax_half_last(input)
    y = _last_axis_kernels(input, axes, "log_softmax", _log_softmax_last, "LogSoftmaxBackward0")
    if y is not None:
        return y
    if (isinstance(input, Tensor) and input.dtype in (dt.float32, dt.float64) and input.ndim
            and all(input.shape[a] for a in axes) and eager_direct(input)):
        return _log_softmax_eager().apply(input, axes)
    if input.dtype in _HALF:
        # (PyTorch's vectorized kernel over the last dimension rounds an
        # intermediate of its own as well: there about a quarter of the
        # elements land one unit in the last place away)
        y = ops.cast(_log_softmax_prims(ops.cast(input, dt.float32), axes), input.dtype)
        return _named(y, "LogSoftmaxBackward0")
    return _log_softmax_prims(input, axes)


def _contiguous_input(x):
    """``x`` as PyTorch's softmax / log_softmax / layer_norm / rms_norm /
    instance_norm kernels read it: contiguous.  Their results are contiguous whatever the input's
    strides (numpy's elementwise ops would keep a permuted input's order),
    and that order is the one a dropout mask drawn over the result follows
    (talking-heads attention permutes heads before its softmax)."""
    if isinstance(x, Tensor) and not x.is_contiguous():
        return x.contiguous()
    return x


def _last_axis_kernels(x, axes, name, composite, node_name):
    """``composite(x)`` over ``x``'s last axis through native kernels
    (``fused_eager.nary``), or None: only for a reduction over the last
    axis alone, of a size that is no Python-level special case."""
    if not isinstance(x, Tensor) or axes != (x.ndim - 1,) or not x.ndim:
        return None
    n = x._data.shape[-1]
    if n < 2:
        return None
    return fused_eager.nary((x,), ((-1, n),), (name,), composite, node_name)


def _softmax_last(x):
    axes = (x.ndim - 1,)
    e = ops.exp(ops.sub(x, _stop_max(x, axes, keep_inf=True)))
    return ops.div(e, ops.reshape(ops.reduce_sum(e, axes), tuple(x.shape[:-1]) + (1,)))


def _log_softmax_last(x):
    return _log_softmax_prims(x, (x.ndim - 1,))


def _half_logsumexp_vjp(y, x, axes, keepdim):
    """``y``, the bfloat16 / float16 logsumexp of ``x`` computed without a
    gradient, with PyTorch's backward ``g * exp(x - y)`` made of half ops
    (``x - y`` and its exp each rounded to ``x``'s dtype, the product
    too): the zero term ``sum(c * (x - x))``, ``c`` that rounded exp
    (infinite elements of ``x`` take no part: their gradient is 0)."""
    h = x.dtype
    keep = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    f = ops.cast(x, dt.float32)
    fin = ops.lt(ops.abs_(f), float("inf"))
    d = ops.where(fin, ops.sub(f, ops.stop_gradient(f)), 0.0)
    y32 = ops.stop_gradient(ops.cast(y, dt.float32))
    z = ops.cast(ops.sub(ops.stop_gradient(x), ops.cast(ops.reshape(y32, keep), h)), h)
    c = ops.cast(ops.exp(z), dt.float32)
    t = ops.reduce_sum(ops.mul(c, d), axes)
    if keepdim:
        t = ops.reshape(t, keep)
    return ops.cast(ops.add(y32, t), h)


def _half_softmax_vjp(y, x, axes):
    """``y``, the bfloat16 / float16 softmax of ``x`` over ``axes`` computed
    without a gradient, with the gradient PyTorch's CPU backward gives it:
    ``(g - sum(g * y)) * y`` in float32 from the rounded output ``y``,
    rounded once (the composite's own gradient used the unrounded float32
    softmax).  The zero term ``w = v - y sum(v)``, ``v = y (x - x)``, is the
    linear map whose transpose is that formula; infinite elements of ``x``
    (a -inf mask) take no part (their gradient, ``(g - s) * 0``, is 0)."""
    f = ops.cast(x, dt.float32)
    d = ops.where(ops.lt(ops.abs_(f), float("inf")), ops.sub(f, ops.stop_gradient(f)), 0.0)
    y32 = ops.stop_gradient(ops.cast(y, dt.float32))
    v = ops.mul(y32, d)
    keep = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    w = ops.sub(v, ops.mul(y32, ops.reshape(ops.reduce_sum(v, axes), keep)))
    return ops.cast(ops.add(y32, w), y.dtype)


def _half_log_softmax_vjp(y, x, axes):
    """``y``, the bfloat16 / float16 log_softmax of ``x`` computed without a
    gradient, with PyTorch's CPU backward ``g - exp(y) * sum(g)`` in float32
    from the rounded ``y``, rounded once: the transpose of ``d - sum(exp(y)
    d)``, ``d = x - x`` (0 on infinite elements, whose own gradient ``g``
    comes through ``x`` itself, their value)."""
    f = ops.cast(x, dt.float32)
    fin = ops.lt(ops.abs_(f), float("inf"))
    d = ops.where(fin, ops.sub(f, ops.stop_gradient(f)), 0.0)
    y32 = ops.stop_gradient(ops.cast(y, dt.float32))
    keep = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    w = ops.sub(d, ops.reshape(ops.reduce_sum(ops.mul(ops.exp(y32), d), axes), keep))
    # (a row of -inf: NaN, whose gradient is NaN too: f * y)
    nan = ops.ne(y32, y32)
    base = ops.where(fin, y32, ops.where(nan, ops.mul(f, ops.where(nan, y32, 0.0)), f))
    return ops.cast(ops.add(base, w), y.dtype)


def _rounded_to(x, d):
    """float32 ``x`` with the value of ``x.to(d).float()`` (a kernel's
    buffer of dtype ``d``) and ``x``'s own gradient: the rounding error is
    added as a constant."""
    return ops.add(x, ops.stop_gradient(ops.sub(ops.cast(ops.cast(x, d), dt.float32), x)))


def _log_softmax_half_last(x):
    """log_softmax over the last dimension of a bfloat16 / float16 ``x`` as
    PyTorch's CPU kernel computes it: in float32, but with the sum of the
    exponentials and its log each stored in ``x``'s dtype, then ``(x - max)
    - lse`` rounded once."""
    h, axes = x.dtype, (x.ndim - 1,)
    f = ops.cast(x, dt.float32)
    z = ops.sub(f, _stop_max(f, axes, keep_inf=True))
    s = _rounded_to(ops.reduce_sum(ops.exp(z), axes), h)
    lse = _rounded_to(ops.log(s), h)
    y = ops.sub(z, ops.reshape(lse, tuple(x.shape[:-1]) + (1,)))
    return _named(ops.cast(y, h), "LogSoftmaxBackward0")


def _log_softmax_prims(input, axes):
    z = ops.sub(input, _stop_max(input, axes, keep_inf=True))
    lse = ops.log(ops.reduce_sum(ops.exp(z), axes))
    y = ops.sub(z, ops.reshape(lse, tuple(1 if i in axes else n
                                          for i, n in enumerate(input.shape))))
    return _named(y, "LogSoftmaxBackward0")


_LOG_SOFTMAX_EAGER = []


def _log_softmax_eager():
    """``_log_softmax_prims`` run eagerly in NumPy as an autograd Function:
    the primitives' impls in the same order (the same values), in two fresh
    arrays instead of three; the gradient ``g + exp(z) * (-sum(g) / S)`` as
    the primitives' VJPs make it, in three passes over ``g`` instead of four
    (``-sum(g)`` for ``sum(-g)``: equal but for the sign of a zero sum of
    mixed signed zeros).  Double backward (create_graph) differentiates the
    primitives' graph."""
    if _LOG_SOFTMAX_EAGER:
        return _LOG_SOFTMAX_EAGER[0]
    from tracec import graph
    from tracec.autograd import Function, grad as _grad
    from tracec.ops import elementwise as ew, reduce as red

    class _LogSoftmaxEager(Function):
        node_name = "LogSoftmaxBackward0"

        @staticmethod
        def forward(ctx, x, axes):
            xd = x._data
            keep = tuple(1 if i in axes else d for i, d in enumerate(xd.shape))
            m = red.reduce_max_p.impl(xd, axes=axes).reshape(keep)
            m = ew._where_impl(m == -np.inf, np.zeros((), m.dtype), m)
            z = ew.sub_p.impl(xd, m)
            e = ew.exp_p.impl(z)
            total = red.reduce_sum_p.impl(e, axes=axes)
            lse = ew.log_p.impl(total).reshape(keep)
            with quiet_fp():
                np.subtract(z, lse, out=z)
            # x itself only for double backward, without a version check
            # (PyTorch's node keeps the result, which in-place ops on x
            # leave alone; so do the primitives')
            ctx.x, ctx.axes, ctx.e, ctx.total = x, axes, e, total.reshape(keep)
            out = Tensor._make(z, x.dtype)
            ctx.save_for_backward(out)    # (only its version is checked, as PyTorch's result)
            return out

        @staticmethod
        def backward(ctx, g):
            ctx.saved_tensors               # (raises if the result was changed in place)
            x = ctx.x
            if graph.is_grad_enabled():
                with graph.enable_grad():
                    y = _log_softmax_prims(x, ctx.axes)
                return _grad(y, (x,), g, create_graph=True)[0], None
            gd = g._data
            with quiet_fp():
                q = red.reduce_sum_p.impl(gd, axes=ctx.axes).reshape(ctx.total.shape)
                np.negative(q, out=q)
                q = np.divide(q, ctx.total, out=q)
                out = np.multiply(ctx.e, q)
                out += gd
            return Tensor._make(out, x.dtype), None

    _LOG_SOFTMAX_EAGER.append(_LogSoftmaxEager)
    return _LogSoftmaxEager


# --- linear algebra ---------------------------------------------------------------

def _matmul_calls(out, input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        return []
    return aten_report.tensor_matmul_calls(input, other)


@aten_report.reports(_matmul_calls)
def matmul(input, other):
    w = dispatching_operand(input, other)
    if w is not None:
        return w.__tracec_dispatch__(matmul, (input, other), {})
    given = (input, other)      # (a COO operand: promote's cast is no longer one)
    _tensor_args("matmul", ("input", input), ("other", other))
    na, nb = input.ndim, other.ndim     # (casts below keep them)
    if na == 0 or nb == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{na}D and {nb}D")
    if autocast_mode.ACTIVE:
        input, other = autocast_mode.lower_precision(input, other)
    matmul_dtype_check(input, other)
    (input, other), _ = promote("matmul", input, other)
    va, vb = na == 1, nb == 1
    if vb and na <= 2 and input.shape[-1] == other.shape[0] \
            and (input.requires_grad or other.requires_grad) and graph.is_grad_enabled():
        # PyTorch's dot and mv (what its matmul calls for these ranks) save
        # their operands themselves, so a ``vec.data = ...`` between this
        # forward and the backward is what the backward reads (SAGAN's
        # SpectralNorm: sigma = u.dot(w.view(h, -1).mv(v)), then u.data and
        # v.data reassigned by the next forward).  A product through the
        # reshaped vector would save a view of the old data: this form saves
        # the operands themselves.
        out = sum(mul(input, other), -1)
        if va and blas_dot.modelled(input, other):
            out = _value_of(out, _sdot(input, other))
        if out._node is not None:
            # PyTorch's one node, whose inputs (not the product's) are its edges
            name = out._node._name = TorchName("DotBackward0" if va else "MvBackward0")
            name.edges = (graph.edge_of(input), graph.edge_of(other))
        return out
    lead = None
    if nb == 2 and na >= 3:
        # PyTorch folds an N-D @ 2-D product into one mm: the input viewed
        # (a contiguous one) or copied as (-1, k), mm, and an _unsafe_view
        # back; so do its nodes (UnsafeViewBackward0 -> MmBackward0 ->
        # ViewBackward0, or UnsafeViewBackward0 -> CloneBackward0).
        lead = tuple(input.shape[:-1])
        rows = math.prod(lead)
        if input.is_contiguous():
            input = _named(ops.reshape(input, (rows, input.shape[-1])), "ViewBackward0")
        else:
            input = _named(ops.cast(input, input.dtype), "CloneBackward0")
            input = _named(ops.reshape(input, (rows, input.shape[-1])), "UnsafeViewBackward0")
    vectors = (input, other)
    if va:
        input = _named(ops.reshape(input, (1,) + input.shape), "UnsqueezeBackward0")
    if vb:
        other = ops.reshape(other, other.shape + (1,))
    out = ops.matmul(input, other)
    if nb == 2 and out._node is not None and isinstance(out._node, graph.Node):
        # PyTorch's mm backward gives a column-major operand a column-major
        # gradient (its matmul folds an N-D @ 2-D product into one mm, so
        # for ``other`` at any rank of ``input``): tell the VJP which.
        col = (input.ndim == 2 and _column_major(input), _column_major(other))
        if col[0] or col[1]:
            out._node.params = {**out._node.params, "column_major": col}
    if lead is not None:
        _named(out, "MmBackward0")
        out = ops.reshape(out, lead + (out.shape[-1],))
    if va or vb:
        if va and nb == 2:
            _named(out, "MmBackward0")
        shape = out.shape[:-2] + (() if va else (out.shape[-2],)) + (() if vb else (out.shape[-1],))
        out = ops.reshape(out, shape)
    if va and vb and not SPARSE and blas_dot.modelled(*vectors):
        value = _sdot(*vectors)
        out = value if out._node is None and not RECORDERS else _value_of(out, value)
    out = _named(out, _matmul_name(na, nb))
    return sparse_product(out, given[0], given[1]) if SPARSE else out


def _sdot(x, y):
    """``blas_dot``'s value of ``x . y``: in NumPy eagerly, in primitives
    while a call is recorded."""
    if not RECORDERS and type(x._data) is np.ndarray and type(y._data) is np.ndarray:
        return Tensor._from_data(blas_dot.sdot_np(x._data, y._data))
    return blas_dot.sdot(x, y)


def _value_of(out, value):
    """``out`` (float32) with the value of ``value`` (the same quantity,
    rounded otherwise: a last bit or so apart) and ``out``'s gradient:
    ``out + (value - out)`` in float64, where the difference of two close
    float32 is exact, rounded back to ``value`` exactly."""
    f64 = dt.float64
    o = ops.cast(out, f64)
    return ops.cast(ops.add(o, ops.stop_gradient(ops.sub(ops.cast(value, f64), o))), dt.float32)


def matmul_dtype_check(a, b) -> None:
    """PyTorch's refusal of a product of two dtypes (its matmul does not
    promote, unlike ``*``), in the words of the ATen op its matmul calls for
    these ranks: dot (1-D @ 1-D), mv / addmv (a vector on the right), mm (a
    matrix on the right, an N-D left folded into one), bmm (a batch on the
    right).  Under autocast the operands are checked after its casts."""
    if a.dtype is b.dtype:
        return
    name, na, nb = dt.scalar_type_name, a.ndim, b.ndim
    if na == 1 and nb == 1:
        raise RuntimeError("dot : expected both vectors to have same dtype, but found "
                           f"{name(a.dtype)} and {name(b.dtype)}")
    if nb == 1:     # PyTorch names the result's (the vector's), the matrix's, the vector's
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{name(b.dtype)}, {name(a.dtype)}, and {name(b.dtype)}")
    if nb == 2:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{dt.C_TYPE_NAMES[a.dtype.name]} != {dt.C_TYPE_NAMES[b.dtype.name]}")
    raise RuntimeError(f"expected scalar type {name(a.dtype)} but found {name(b.dtype)}")


def addmm_dtype_check(input, mat1, mat2) -> None:
    """PyTorch's refusal of ``addmm(input, mat1, mat2)`` (``F.linear``'s
    ``input @ weight.T + bias``) over different dtypes, in its order: the
    added tensor against mat2 first (a scalar or None is not checked), then
    mat1 against mat2 (mm's words when nothing is added)."""
    name = dt.scalar_type_name
    if isinstance(input, Tensor) and input.dtype is not mat2.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{name(input.dtype)} and {name(mat2.dtype)}")
    if mat1.dtype is not mat2.dtype:
        if isinstance(input, Tensor):
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{name(mat1.dtype)} and {name(mat2.dtype)}")
        matmul_dtype_check(mat1, mat2)


def sparse_product(out, a, b):
    """``out`` = the product of COO matrices ``a`` and ``b`` as PyTorch's
    result: COO too, coalesced, its entries the structural product of the
    two patterns (explicit zeros and cancellations kept as entries).  Any
    other product is returned as it is."""
    from tracec.contraction import mark_sparse, sparse_info
    ia = sparse_info(a) if isinstance(a, Tensor) else None
    ib = sparse_info(b) if isinstance(b, Tensor) else None
    if ia is None or ib is None or a.ndim != 2 or b.ndim != 2 \
            or type(out._data) is not np.ndarray:
        return out
    pa = np.zeros(tuple(a.shape), np.int64)
    pa[tuple(np.asarray(ia[0]._data))] = 1
    pb = np.zeros(tuple(b.shape), np.int64)
    pb[tuple(np.asarray(ib[0]._data))] = 1
    idx = np.stack(np.nonzero(pa @ pb)).astype(np.int64).reshape(2, -1)
    out = _named(out, "SparseSparseMatmulBackward0")
    return mark_sparse(out, Tensor._make(idx, dt.int64), None, True)


def _column_major(t) -> bool:
    """PyTorch's test in mm's backward: ``strides == (1, sizes[0])``."""
    a = t._data
    return isinstance(a, np.ndarray) and a.strides == (a.itemsize, a.itemsize * a.shape[0])


def _matmul_name(na: int, nb: int) -> str:
    """The ``grad_fn`` name PyTorch's ``matmul`` gives its result for
    operands of ``na`` and ``nb`` dims (the ATen op its dispatch ends in)."""
    if na == 1:
        return _DOT_NAMES.get(nb, "UnsafeViewBackward0")
    if na == 2:
        return _MM_NAMES.get(nb, "CloneBackward0")
    return "UnsafeViewBackward0"


_DOT_NAMES = {1: "DotBackward0", 2: "SqueezeBackward4"}
_MM_NAMES = {1: "MvBackward0", 2: "MmBackward0"}


def _arg_type_name(x) -> str:
    """A non-tensor argument's type as PyTorch's argument parser names it
    (CPython's ``tp_name``): a builtin's or a Python class's bare name,
    an extension type's with its module (``numpy.ndarray``)."""
    t = type(x)
    if t.__module__ == "builtins" or t.__flags__ & (1 << 9):    # Py_TPFLAGS_HEAPTYPE
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def _tensor_args(op: str, *named) -> None:
    """PyTorch's TypeError for the first of ``(name, value)`` that is not a
    Tensor: ``mm(): argument 'mat2' (position 2) must be Tensor, not int``."""
    for i, (name, x) in enumerate(named):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {i + 1}) must be Tensor, "
                            f"not {_arg_type_name(x)}")


def mm(input, mat2):
    _tensor_args("mm", ("input", input), ("mat2", mat2))
    if input.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(input, mat2)


def _bmm_calls(out, input, mat2):
    if not (isinstance(input, Tensor) and isinstance(mat2, Tensor)):
        return []
    return [AtenCall("bmm", (tuple(input.shape), tuple(mat2.shape)),
                     (input.requires_grad, mat2.requires_grad))]


@aten_report.reports(_bmm_calls)
def bmm(input, mat2):
    """``torch.bmm``: PyTorch's checks (no batch broadcasting, no dtype
    promotion), then a batched matmul."""
    w = dispatching_operand(input, mat2)
    if w is not None:
        return w.__tracec_dispatch__(bmm, (input, mat2), {})
    if input.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if mat2.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    b, _, k = input.shape
    if mat2.shape[0] != b or mat2.shape[1] != k:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{b}, {k}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    if not autocast_mode.ACTIVE:   # (autocast casts both)
        matmul_dtype_check(input, mat2)
    return _named(matmul(input, mat2), "BmmBackward0")


def dot(input, tensor):
    """``torch.dot``: two 1-D tensors of one dtype and length (PyTorch's
    checks, in its order), their inner product (no conjugation)."""
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if not autocast_mode.ACTIVE:   # (autocast casts both)
        matmul_dtype_check(input, tensor)
    n, m = input.shape[0], tensor.shape[0]
    if isinstance(n, int) and isinstance(m, int) and n != m:   # (symbolic: the ops check)
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have "
                           f"the same number of elements, but got {n} and {m} elements respectively")
    return matmul(input, tensor)


def outer(input, vec2):
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return mul(ops.reshape(input, (input.shape[0], 1)), vec2)
