"""Tensor methods, operators and in-place ops, attached to ``Tensor``.

PyTorch's methods are its functions with ``self`` first; this module binds
them so that ``tensor.py`` stays the small core.  In-place ops compute the
functional result and ``_assign`` it (leaf and version-counter rules live
there).
"""
from __future__ import annotations

import numpy as np

from tracec import creation, graph
from tracec import dtypes as dt
from tracec import functions as F
from tracec import indexing, shape_ops as S, torch_rng
from tracec.ops.core import broadcast_shapes as _broadcast_shapes
from tracec.ops.elementwise import _quiet_impl
from tracec.runtime_int import RuntimeInt, operand as runtime_operand
from tracec.symbolic import Sym
from tracec.sym_scalar import SymScalar
from tracec.tensor import OP_OBSERVERS, RECORDERS, SPARSE, Tensor, refuse_partial_overlap, weak_scalar

_METHODS = {
    # math
    "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "true_divide": F.div,
    "multiply": F.mul, "subtract": F.sub, "divide": F.div,
    "pow": F.pow, "neg": F.neg, "negative": F.neg, "abs": F.abs, "absolute": F.abs,
    "exp": F.exp, "log": F.log, "sqrt": F.sqrt, "rsqrt": F.rsqrt, "sin": F.sin, "cos": F.cos,
    "tanh": F.tanh, "sigmoid": F.sigmoid, "relu": F.relu, "erf": F.erf, "sign": F.sign,
    "square": F.square, "reciprocal": F.reciprocal, "log1p": F.log1p, "expm1": F.expm1,
    "maximum": F.maximum, "minimum": F.minimum, "clamp": F.clamp, "clip": F.clamp,
    "eq": F.eq, "ne": F.ne, "lt": F.lt, "le": F.le, "gt": F.gt, "ge": F.ge,
    "logical_and": F.logical_and, "logical_or": F.logical_or, "logical_not": F.logical_not,
    "isnan": F.isnan, "equal": F.equal, "allclose": F.allclose,
    "sum": F.sum, "mean": F.mean, "max": F.max, "min": F.min, "amax": F.amax, "amin": F.amin,
    "argmax": F.argmax, "argmin": F.argmin, "var": F.var, "std": F.std,
    "logsumexp": F.logsumexp, "softmax": F.softmax, "log_softmax": F.log_softmax,
    "matmul": F.matmul, "mm": F.mm, "bmm": F.bmm, "dot": F.dot, "outer": F.outer,
    # structure
    "reshape": S.reshape, "view": S.view, "view_as": S.view_as, "reshape_as": S.reshape_as,
    "permute": S.permute, "transpose": S.transpose, "swapaxes": S.swapaxes, "t": S.t,
    "squeeze": S.squeeze, "unsqueeze": S.unsqueeze, "expand": S.expand,
    "expand_as": S.expand_as, "broadcast_to": S.broadcast_to, "flatten": S.flatten,
    "unflatten": S.unflatten, "split": S.split_method, "chunk": S.chunk, "unbind": S.unbind,
    "masked_fill": S.masked_fill, "gather": S.gather, "scatter_add": S.scatter_add,
    "clone": S.clone, "contiguous": S.contiguous, "to": S.to, "type_as": S.type_as,
    "float": S.float_, "double": S.double, "half": S.half, "long": S.long, "int": S.int_,
    "bool": S.bool_, "bfloat16": S.bfloat16, "byte": S.byte, "char": S.char, "short": S.short,
}

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)


def _tensor_operand(op: str, arg: str, x) -> None:
    """``Tensor.<op>(arg)``: PyTorch's TypeError for a non-tensor ``arg``
    counts positions after ``self`` (``x.mm(a)``: 'mat2' (position 1));
    the function form (``F._tensor_args``) counts ``input`` too."""
    if not isinstance(x, Tensor) and F.dispatching_operand(x) is None:
        raise TypeError(f"{op}(): argument '{arg}' (position 1) must be Tensor, "
                        f"not {F._arg_type_name(x)}")


def _mm_method(self, mat2):
    _tensor_operand("mm", "mat2", mat2)
    return F.mm(self, mat2)


def _matmul_method(self, other):
    _tensor_operand("matmul", "other", other)
    return F.matmul(self, other)


_mm_method.__name__ = _mm_method.__qualname__ = "mm"
_matmul_method.__name__ = _matmul_method.__qualname__ = "matmul"
Tensor.mm = _mm_method
Tensor.matmul = _matmul_method

Tensor.T = property(S.T)
Tensor.mT = property(S.mT)


def _cpu(self, memory_format=None):
    if self.is_meta:
        S._copy_out_of_meta()
    return self


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    from tracec.device import to_device
    to_device("cuda")


Tensor.cpu = _cpu
Tensor.cuda = _cuda
Tensor.__getitem__ = indexing.getitem
Tensor.__setitem__ = indexing.setitem


def defers_to_numpy(other) -> bool:
    """Whether an operator of a tensor and ``other`` is left to NumPy, as
    in PyTorch: its ``Tensor.__mul__`` (every arithmetic, comparison and
    in-place operator but ``__eq__``) returns NotImplemented for a NumPy
    array, so ``t * arr`` is NumPy's ``arr.__rmul__``: the tensor read
    through ``__array__`` (refused while it requires grad), NumPy's type
    promotion (float32 * int64 is float64), the result wrapped back by
    ``__array_wrap__`` (bool as uint8); ``arr * t`` and ``t < arr`` are
    TypeErrors but ``arr / t`` is ``t.reciprocal() * arr`` (PyTorch's
    ``__rdiv__``), ``t != arr`` is Python's identity test (True) and
    ``t += arr`` rebinds ``t`` to a new tensor.  ``t == arr`` alone is a
    tensor comparison."""
    return type(other) is np.ndarray


def numpy_operator(ufunc, fn, self, other):
    """``self <op> other`` (a NumPy array) while a call is traced, where
    NumPy cannot read the traced tensor: NumPy's result (as
    defers_to_numpy says) computed by ``fn`` in tensor ops: the ufunc's
    loop dtypes and result dtype, bool as uint8, no autograd history."""
    self._no_numpy_of_grad()
    a = np.dtype(self.dtype.np)
    try:
        i1, i2, out = ufunc.resolve_dtypes((a, other.dtype, None))
    except (TypeError, ValueError, AttributeError):     # (no loop: NumPy's promotion)
        i1 = i2 = out = np.result_type(a, other.dtype)
    out = np.dtype(np.uint8) if out == np.bool_ else out
    x = self.detach().to(dt.from_numpy_dtype(i1))
    y = Tensor._from_data(np.asarray(other, dtype=i2))
    return fn(x, y).to(dt.from_numpy_dtype(out))


#: Operand types an operator passes straight to its function (what the
#: checks of ``_binop``'s ``op`` let through unchanged).
_PLAIN_OPERANDS = frozenset((Tensor, int, float, bool))


def _binop(fn, reflected=False, arrays=False, ufunc=None):
    """An operator over ``fn``; ``arrays``: it takes a NumPy array itself
    (PyTorch's ``__eq__`` alone does), else NumPy does (defers_to_numpy;
    ``ufunc``: NumPy's, for traced calls: numpy_operator)."""
    def op(self, other):
        if type(other) in _PLAIN_OPERANDS:   # (the common case: no check below applies)
            return fn(other, self) if reflected else fn(self, other)
        if type(other) is RuntimeInt:
            other = runtime_int_operand(self, other)
        if not isinstance(other, (Tensor, int, float, bool, complex, np.number, np.bool_, np.ndarray,
                                  Sym, SymScalar)):
            return NotImplemented
        if not arrays and defers_to_numpy(other):
            if RECORDERS and ufunc is not None and not reflected:
                return numpy_operator(ufunc, fn, self, other)
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    return op


def _inplace_operator(name, fn):
    """``t += other`` and the like: ``name`` in place, NotImplemented for
    a NumPy array (PyTorch's; Python then rebinds ``t`` to ``t + other``)."""
    method = _inplace(name, fn)

    def op(self, other):
        return NotImplemented if defers_to_numpy(other) else method(self, other)
    op.__name__ = method.__name__
    return op


def _reflected_add(other, self):
    # PyTorch's __radd__ is self.add(other): ``1 + coo`` is refused there
    # too, and the node's first input (next_functions[0]) is the tensor's
    if SPARSE:
        F._refuse_sparse_dense(self, other)
    return F.add(self, other)


def _scalar_first(name, fn):
    """``number OP tensor`` as PyTorch's ``rsub(Tensor, Scalar)`` /
    ``pow(Scalar, Tensor)``: its node ``name`` has the tensor as its only
    input (``next_functions``), not tracec's composite's two edges."""
    def reflected(other, self):
        out = fn(other, self)
        if out._node is not None:
            from tracec.node_views import TorchName
            out._node._name = TorchName(name)
            out._node._name.edges = (graph.edge_of(self),)
        return out
    return reflected


Tensor.__add__ = _binop(F.add, ufunc=np.add)
Tensor.__radd__ = _binop(_reflected_add, True)
Tensor.__sub__ = _binop(F.sub, ufunc=np.subtract)
Tensor.__rsub__ = _binop(_scalar_first("RsubBackward1", F.sub), True)
Tensor.__mul__ = _binop(F.mul, ufunc=np.multiply)
# (PyTorch's __rmul__ is self.mul(other): the tensor is the node's first input)
Tensor.__rmul__ = _binop(lambda other, self: F.mul(self, other), True)
Tensor.__truediv__ = _binop(F.div, ufunc=np.true_divide)
# ``number / tensor`` is ``tensor.reciprocal() * number``, as PyTorch's
# Tensor.__rdiv__ computes it (its rounding, not a division's: 255 / t then
# differs from a true quotient in the last bit, which truncating casts see).
_rtruediv = _binop(lambda a, b: F._named(F.mul(F.reciprocal(b), a), "MulBackward0"), True)


def _rtruediv_or_array(self, other):
    # ``arr / t``: PyTorch's __rdiv__ is ``self.reciprocal() * other`` in
    # Python, whose product NumPy then computes (defers_to_numpy): the one
    # reflected operator an array on the left gets a tensor from
    if defers_to_numpy(other):
        return F.reciprocal(self) * other
    return _rtruediv(self, other)


Tensor.__rtruediv__ = _rtruediv_or_array
Tensor.__pow__ = _binop(F.pow, ufunc=np.power)
Tensor.__rpow__ = _binop(_scalar_first("PowBackward2", F.pow), True)
Tensor.__matmul__ = _binop(F.matmul, ufunc=np.matmul)
Tensor.__rmatmul__ = _binop(F.matmul, True)
Tensor.__eq__ = _binop(F.eq, arrays=True)
Tensor.__ne__ = _binop(F.ne)     # (t != arr: NumPy defers back, Python compares identities)
Tensor.__lt__ = _binop(F.lt)
Tensor.__le__ = _binop(F.le)
Tensor.__gt__ = _binop(F.gt)
Tensor.__ge__ = _binop(F.ge)


# & | ^ ~ << >> (bitwise on integers and bool, as PyTorch's): tracec/math_int.py.
Tensor.__neg__ = F.neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = F.abs
Tensor.__hash__ = lambda self: id(self)


# --- in-place ---------------------------------------------------------------------

_DIRECT_UFUNC = {"add_": np.add, "sub_": np.subtract, "mul_": np.multiply,
                 "div_": np.true_divide}
_DIRECT_DTYPES = (dt.float32, dt.float64)
_PY_NUMBERS = (int, float)


def _write(ufunc, a, b, alpha, d):
    if alpha != 1:
        if d is dt.float32 and _fused_operand(a, b):
            # rounded once, as PyTorch's kernel (F.fma_rounded): the exact
            # float32 product and the sum in float64, rounded to float32
            F.fused_axpy_(a, b, alpha, ufunc)
            return
        b = np.multiply(b, weak_scalar(alpha, d))
    ufunc(a, b, out=a)


def _fused_operand(a: np.ndarray, b) -> bool:
    """``F.fma_rounded``'s test on arrays: ``b`` (what ``a`` is updated by)
    is not one value repeated along the kernel's inner loop."""
    return type(b) is np.ndarray and F.fma_layout(a.shape, b.shape, a.flags.c_contiguous)


#: ``a = a <ufunc> (b * alpha)`` in place (alpha a Python number, a weak
#: scalar of ``d``), with
#: NumPy's floating point warnings off (PyTorch computes inf / nan
#: silently) as the primitives' impls turn them off (np.errstate costs more)
_write_direct = _quiet_impl(_write)


def _inplace_direct(name, self, args, kwargs):
    """``self.add_(other, alpha=a)`` (``sub_``, ``mul_``, ``div_``) on a
    float32 / float64 tensor written straight into its memory (``out=``)
    when nothing traces or observes and autograd records nothing: the same
    ufunc on the same operands as the tensor op (``other * alpha`` first,
    a Python number as a weak scalar of ``self``'s dtype), so the same
    bits, without a fresh result and its copy into ``self`` (the word
    language model's ``p.data.add_(p.grad, alpha=-lr)`` over a 2M-element
    embedding).  True when done."""
    if len(args) != 1 or RECORDERS or OP_OBSERVERS:
        return False
    alpha = 1
    if kwargs:
        if name not in ("add_", "sub_") or set(kwargs) != {"alpha"}:
            return False
        alpha = kwargs["alpha"]
        if type(alpha) not in _PY_NUMBERS:
            return False
    d = self.dtype
    if d not in _DIRECT_DTYPES:
        return False
    a = self._data
    if type(a) is not np.ndarray or not a.flags.writeable or (
            self._view_chain and self._view_version != self._vbox[0]):
        return False
    other = args[0]
    if isinstance(other, Tensor):
        if other.dtype is not d or type(other._data) is not np.ndarray or (
                other._view_chain and other._view_version != other._vbox[0]):
            return False
        b = other._data
        if b.shape != a.shape and (b.ndim > a.ndim or any(
                m != 1 and m != n for m, n in zip(b.shape[::-1], a.shape[::-1]))):
            return False      # (a broadcast self: the tensor op's error)
        if alpha != 1 and d is dt.float32 and not _fused_operand(a, b):
            return False      # (PyTorch mixes two roundings here: F.add's mask)
        grad_read = other.requires_grad
    elif type(other) in _PY_NUMBERS:
        if alpha != 1:
            other, alpha = other * alpha, 1
        b = weak_scalar(other, d)
        grad_read = False
    else:
        return False
    if graph.is_grad_enabled() and (self.requires_grad or grad_read or (
            self._view_chain and self._base.requires_grad)):
        return False
    _write_direct(_DIRECT_UFUNC[name], a, b, alpha, d)
    self._vbox[0] += 1
    if self._view_chain and "_no_grad_leaf" not in self.__dict__:   # (see Tensor._inplace)
        self._view_version = self._vbox[0]
    return True


def _inplace(name, fn):
    direct = name in _DIRECT_UFUNC

    sparse_checked = name in ("add_", "sub_")

    def method(self, *args, **kwargs):
        if sparse_checked and SPARSE and args:
            # (before the direct path, which writes the dense data in place)
            F._refuse_sparse_dense(self, args[0])
        if args:
            refuse_partial_overlap(self, args)
        if direct and _inplace_direct(name, self, args, kwargs):
            return self
        new = fn(self, *args, **kwargs)
        if not dt.can_cast(new.dtype, self.dtype):
            # PyTorch's words, its ScalarType names, no op name
            raise RuntimeError(f"result type {dt.scalar_type_name(new.dtype)} can't be cast "
                               f"to the desired output type {dt.scalar_type_name(self.dtype)}")
        if new._node is not None and new is not self:
            stops = {id(graph.edge_of(a)) for a in (self,) + args
                     if isinstance(a, Tensor) and a.requires_grad}
            graph.protect_saved(new._node, self._vbox, stops, recorded=bool(RECORDERS))
        return self._assign(new, name)
    method.__name__ = name
    method.__wrapped__ = fn   # its keywords are fn's (inspect.signature shows them)
    return method


for _name, _fn in {"add_": F.add, "sub_": F.sub, "mul_": F.mul, "div_": F.div,
                   "pow_": F.pow, "clamp_": F.clamp, "clip_": F.clamp,
                   "masked_fill_": S.masked_fill, "neg_": F.neg, "exp_": F.exp,
                   "sqrt_": F.sqrt, "relu_": F.relu, "sigmoid_": F.sigmoid,
                   "tanh_": F.tanh}.items():
    setattr(Tensor, _name, _inplace(_name, _fn))

Tensor.__iadd__ = _inplace_operator("add_", F.add)
Tensor.__isub__ = _inplace_operator("sub_", F.sub)
Tensor.__imul__ = _inplace_operator("mul_", F.mul)
Tensor.__itruediv__ = _inplace_operator("div_", F.div)
Tensor.__ipow__ = _inplace_operator("pow_", F.pow)   # (else ``v **= 2`` rebinds v)


_TRUE = Tensor._make(np.array(True), dt.bool_)


def filled(self, value, grad_fn_name="FillBackward0"):
    """``self``'s shape and dtype, every element ``value`` (a number, or a
    tensor broadcast to ``self``). While ``self`` requires grad the result
    does too (PyTorch's fill and in-place random draws keep the history:
    ``self`` gets a zero gradient, a tensor ``value`` the summed one), so it
    is a ``where`` that picks ``value`` everywhere rather than a constant."""
    if graph.is_grad_enabled() and (self.requires_grad or (
            isinstance(value, Tensor) and value.requires_grad)):
        v = value.to(self.dtype) if isinstance(value, Tensor) else value
        return F._named(F.where(_TRUE, v, self), grad_fn_name)
    if isinstance(value, Tensor):
        return S.expand(value.to(self.dtype), *self.shape) if value.ndim == 0 else value
    with graph.no_grad():
        return Tensor._make(np.full(self.shape, value, self.dtype.np), self.dtype)


def runtime_int_operand(x, n):
    """The ``RuntimeInt`` ``n`` (tracec.runtime_int) as an operand of
    tensor ``x``: its 0-d int64 tensor, in ``x``'s integer dtype (a Python
    int takes an integer tensor's dtype, a 0-d int64 tensor would widen a
    0-d one), or its number once inert."""
    t = runtime_operand(n)
    if isinstance(t, Tensor) and x.dtype.category == 1 and x.dtype is not t.dtype:
        t = t.to(x.dtype)
    return t


def _fill(self, value, _op="fill_"):
    if type(value) is RuntimeInt:      # a number read at run time: its tensor
        value = runtime_operand(value)
    value = dt.check_fits(value, self.dtype)
    name = "ZeroBackward0" if _op == "zero_" else (
        "FillBackward3" if isinstance(value, Tensor) else "FillBackward2")
    return self._assign(filled(self, value, name), _op)


def _zero(self):
    return _fill(self, 0, "zero_")


def _copy(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    refuse_partial_overlap(self, (src,))
    if src.dtype is not self.dtype:
        src = src.to(self.dtype)
    if tuple(src.shape) != tuple(self.shape):
        # PyTorch's errors: the sizes that do not broadcast, or a source
        # that broadcasts to more than the destination holds
        full = _broadcast_shapes(tuple(self.shape), tuple(src.shape))
        if full != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the "
                               f"broadcast shape {list(full)}")
        src = S.expand(src, *self.shape)
    if self.requires_grad and graph.is_grad_enabled():   # PyTorch keeps self's history
        src = filled(self, src, "CopyBackwards")
    return self._assign(src, "copy_")


def _uniform(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    # PyTorch's first keyword is ``from`` (a Python keyword: uniform_(**{"from": 0}))
    if kwargs:
        if set(kwargs) != {"from"}:
            raise TypeError(f"uniform_() got an unexpected keyword argument "
                            f"'{next(k for k in kwargs if k != 'from')}'")
        from_ = kwargs["from"]
    if self.is_meta:        # nothing to write, nothing drawn (as PyTorch)
        return self
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and self.dtype.is_floating_point:
        # PyTorch's stream and arithmetic: x * (to - from) + from in the dtype
        u = creation.memory_order_draw(self, lambda n: torch_rng.uniform(
            mt, n, creation.carrier(self.dtype), float(from_), float(to),
            self.dtype.name if self.dtype in (dt.float16, dt.bfloat16) else None))
        u = creation.drawn(u, self.shape, self.dtype)
    else:
        with graph.no_grad():
            u = creation.rand(self.shape, dtype=self.dtype, generator=generator)
            u = F.add(F.mul(u, to - from_), from_)
    return self._assign(filled(self, u, "UniformBackward0"), "uniform_")


def _normal(self, mean=0.0, std=1.0, generator=None):
    if self.is_meta:
        return self
    mt = (generator or creation.default_generator).eager_mt()
    if mt is not None and self.dtype.is_floating_point:
        # PyTorch's stream; mean and std enter its Box-Muller kernel
        z = creation.memory_order_draw(self, lambda n: torch_rng.normal(
            mt, n, creation.carrier(self.dtype), float(mean), float(std),
            contiguous=self.is_contiguous(), reduced=self.dtype in (dt.float16, dt.bfloat16)))
        z = creation.drawn(z, self.shape, self.dtype)
    else:
        with graph.no_grad():
            z = creation.randn(self.shape, dtype=self.dtype, generator=generator)
            z = F.add(F.mul(z, std), mean)
    return self._assign(filled(self, z, "NormalBackward0"), "normal_")


Tensor.fill_ = _fill
Tensor.zero_ = _zero
Tensor.copy_ = _copy
Tensor.uniform_ = _uniform
Tensor.normal_ = _normal
