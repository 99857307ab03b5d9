"""``torch._foreach_*``: one op applied to every tensor of a list, as
optimizers and EMA helpers call them (timm's ``ModelEmaV3`` updates its
weights with ``_foreach_lerp_``, or ``_foreach_mul_`` then ``_foreach_add_``).

Invariants: each is the per-tensor op (a Tensor method, so eager autograd
and tracing see the ops they always see) applied pairwise, with PyTorch's
overloads: the second operand is a number (``scalar``), a list of tensors
(``other``, with ``alpha`` for add/sub), a list of numbers (``scalars``), or
one 0-dim tensor (``other``); its lists must be as long as the first.
In-place variants (``_`` suffix) update the tensors and return the first
list itself; out-of-place ones return a tuple of new tensors.  PyTorch's
fused kernels compute each element as the per-tensor op does, so results
are the same numbers.
"""
from __future__ import annotations

from tracec.tensor import Tensor

__all__: list[str] = []


def _check_list(tensors, name="self"):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"expected a list or tuple of tensors for '{name}', got "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")


def _same_length(a, b):
    if len(a) != len(b):
        raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(a)} "
                           f"and {len(b)}")


def _pairs(tensors, other, name):
    """``other`` as one operand per tensor (PyTorch's Scalar / List /
    ScalarList / Tensor overloads)."""
    _check_list(tensors)
    if isinstance(other, Tensor):
        if other.ndim != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.ndim} "
                               f"dimensions and {other.numel()} elements.")
        return [other] * len(tensors)
    if isinstance(other, (list, tuple)):
        if other and all(isinstance(o, Tensor) for o in other):
            _same_length(tensors, other)
        elif len(other) != len(tensors):
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(other)
    return [other] * len(tensors)


def _finish(tensors, results, inplace):
    if not inplace:
        return tuple(results)
    for t, r in zip(tensors, results):
        if r is not t:
            t.copy_(r)
    return tensors


def _export(name, fn):
    fn.__name__ = fn.__qualname__ = name
    globals()[name] = fn
    __all__.append(name)


# --- binary: the second operand a number, a list, numbers or a 0-dim tensor -------------

def _binary(op, method, inplace_method, alpha_ok, keyword=("scalar", "other", "scalars")):
    """``_foreach_<op>`` and ``_foreach_<op>_``: ``method(t, o)`` per pair
    (``inplace_method(t, o)`` in place, or ``t.copy_(method(t, o))`` where
    PyTorch has no such Tensor method)."""
    def make(inplace):
        name = f"_foreach_{op}{'_' if inplace else ''}"

        def fn(self, *args, alpha=1, **kw):
            if len(args) + len(kw) != 1 or set(kw) - set(keyword):
                raise TypeError(f"{name}() received an invalid combination of arguments: it "
                                f"takes a list of tensors and one {' / '.join(keyword)}")
            if alpha != 1 and not alpha_ok:
                raise TypeError(f"{name}() got an unexpected keyword argument 'alpha'")
            others = _pairs(self, args[0] if args else next(iter(kw.values())), op)
            extra = {"alpha": alpha} if alpha != 1 else {}
            if inplace and inplace_method is not None:
                for t, o in zip(self, others):
                    getattr(t, inplace_method)(o, **extra)
                return self
            return _finish(self, [method(t, o, **extra) for t, o in zip(self, others)], inplace)
        return fn
    _export(f"_foreach_{op}", make(False))
    _export(f"_foreach_{op}_", make(True))
    return globals()[f"_foreach_{op}"]


def _max_with(t, o):
    return t.clamp_min(o) if not isinstance(o, Tensor) else t.maximum(o)


def _min_with(t, o):
    return t.clamp_max(o) if not isinstance(o, Tensor) else t.minimum(o)


_binary("add", lambda t, o, **k: t.add(o, **k), "add_", True)
_binary("sub", lambda t, o, **k: t.sub(o, **k), "sub_", True)
_binary("mul", lambda t, o: t.mul(o), "mul_", False)
_binary("div", lambda t, o: t.div(o), "div_", False)
_binary("clamp_min", lambda t, o: t.clamp_min(o), "clamp_min_", False)
_binary("clamp_max", lambda t, o: t.clamp_max(o), "clamp_max_", False)
_binary("maximum", _max_with, None, False)
_binary("minimum", _min_with, None, False)
_pow_of_list = _binary("pow", lambda t, o: t.pow(o), "pow_", False, ("exponent",))


def _foreach_pow(self, *args, **kw):
    """``t ** exponent`` per tensor; or one number ``self`` raised to each
    tensor of ``exponent`` (PyTorch's ScalarAndTensor overload)."""
    exponent = args[0] if args else kw.get("exponent")
    if not isinstance(self, (list, tuple)) and isinstance(exponent, (list, tuple)):
        _check_list(exponent, "exponent")
        from tracec.functions import pow as _pow
        return tuple(_pow(self, e) for e in exponent)
    return _pow_of_list(self, *args, **kw)


# --- unary --------------------------------------------------------------------------

def _unary(op):
    def out(self):
        _check_list(self)
        return tuple(getattr(t, op)() for t in self)

    def inplace(self):
        _check_list(self)
        for t in self:
            getattr(t, op + "_")()
        return self
    _export(f"_foreach_{op}", out)
    _export(f"_foreach_{op}_", inplace)


for _op in ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
            "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
            "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc"):
    _unary(_op)


def _foreach_zero_(self):
    _check_list(self)
    for t in self:
        t.zero_()
    return self


def _foreach_clone(self, *, memory_format=None):
    _check_list(self)
    return tuple(t.clone() for t in self)


def _foreach_copy_(self, src, non_blocking=False):
    _check_list(self)
    _check_list(src, "src")
    _same_length(self, src)
    for t, s in zip(self, src):
        t.copy_(s)
    return self


def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002 - PyTorch's name
    """``linalg.vector_norm(t, ord, dtype=dtype)`` of each tensor (0-dim)."""
    _check_list(self)
    from tracec import linalg
    return tuple(linalg.vector_norm(t, ord, dtype=dtype) for t in self)


def _foreach_max(self):
    """The largest element of each tensor (0-dim)."""
    _check_list(self)
    return tuple(t.max() for t in self)


for _name in ("_foreach_zero_", "_foreach_clone", "_foreach_copy_", "_foreach_norm",
              "_foreach_max"):
    __all__.append(_name)


# --- ternary: lerp, addcmul, addcdiv -----------------------------------------------

def _weights(self, w, what):
    if isinstance(w, (list, tuple)):
        if len(w) != len(self):
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got "
                               f"{len(self)} and {len(w)}" if w and isinstance(w[0], Tensor)
                               else "Tensor list must have same number of elements as "
                                    "scalar list.")
        return list(w)
    if isinstance(w, Tensor) and what == "scalars":
        if w.ndim != 1 or w.numel() != len(self):
            raise RuntimeError(f"Expected length of scalars to match input of length "
                               f"{len(self)} but got {w.numel()} instead.")
        return [v.item() for v in w]
    return [w] * len(self)


def _lerp(inplace):
    def fn(self, tensors1, weight):
        _check_list(self)
        _check_list(tensors1, "tensors1")
        _same_length(self, tensors1)
        ws = _weights(self, weight, "weight")
        if inplace:
            for t, e, w in zip(self, tensors1, ws):
                t.lerp_(e, w)
            return self
        return tuple(t.lerp(e, w) for t, e, w in zip(self, tensors1, ws))
    return fn


_export("_foreach_lerp", _lerp(False))
_export("_foreach_lerp_", _lerp(True))


def _addc(op):
    def make(inplace):
        def fn(self, tensor1, tensor2, value=1, *, scalars=None):
            _check_list(self)
            _check_list(tensor1, "tensor1")
            _check_list(tensor2, "tensor2")
            _same_length(self, tensor1)
            _same_length(self, tensor2)
            vs = _weights(self, value if scalars is None else scalars, "scalars")
            name = op + ("_" if inplace else "")
            res = [getattr(t, name)(a, b, value=v) for t, a, b, v in zip(self, tensor1, tensor2, vs)]
            return self if inplace else tuple(res)
        return fn
    _export(f"_foreach_{op}", make(False))
    _export(f"_foreach_{op}_", make(True))


_addc("addcmul")
_addc("addcdiv")
