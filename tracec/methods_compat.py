"""Tensor methods PyTorch keeps for compatibility that public programs still
call: ``new``, ``fill_diagonal_``, ``resize_as_``, ``H``,
``mH``, ``adjoint``, ``prelu``, ``hardshrink``, ``apply_``/``map_``/``map2_``,
``register_post_accumulate_grad_hook``, the ``is_xpu``-style device flags
(all False: tracec tensors live on the CPU), ``volatile`` and ``_cdata``.

Invariants: each is composed from recorded tensor operations, except
``apply_``/``map_``/``map2_`` (they run a Python callable per element,
which a compiled function cannot record: inside one they raise the
data-dependence error) and the post-accumulate hooks (Python run by the
engine; inside ``tracec.compile`` a backward reaching one is recorded op by
op, the hook's ops with it).
"""
from __future__ import annotations

import numbers
import operator
import warnings
import weakref

import numpy as np

from tracec import creation, graph
from tracec import dtypes as dt
from tracec.mem_overlap import internal_overlap
from tracec.shape_ops import _C_TYPE_NAMES
from tracec.tensor import Size, Tensor, _HookHandle, concrete, legacy_sizes

# id(leaf) -> (weak reference to the leaf, hooks run after its .grad is
# accumulated): keyed by identity (a tensor's == is elementwise), and weak,
# so a hook never keeps a parameter alive; the entry goes with the leaf.
POST_ACCUMULATE_HOOKS: dict = {}


def new(self, *args, **kwargs):
    """``x.new(2, 3)`` / ``x.new(torch.Size)`` (uninitialized), ``x.new(data)``
    (``x``'s dtype), ``x.new(tensor)`` (the tensor's storage), ``x.new()``."""
    d = kwargs.pop("dtype", None) or self.dtype
    kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() got unexpected keyword arguments {sorted(kwargs)}")
    if not args:
        return creation.empty(0, dtype=d)
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not self.dtype:
            # (fairseq's GradMultiply: res = x.new(x), always one dtype)
            raise TypeError(f"expected {_tensor_options(self.dtype)} (got "
                            f"{_tensor_options(args[0].dtype)})")
        return args[0].detach()
    sizes = legacy_sizes(args)
    if sizes is not None:
        return creation.empty(tuple(sizes), dtype=d)
    if len(args) == 1:
        return creation.tensor(args[0], dtype=d)
    raise TypeError(f"new() received an invalid combination of arguments: {args!r}")


def _tensor_options(d: dt.DType) -> str:
    """How PyTorch's legacy constructors print a CPU tensor's options."""
    return (f"TensorOptions(dtype={_C_TYPE_NAMES.get(d.name, d.name)}, device=cpu, "
            "layout=Strided, requires_grad=false (default), pinned_memory=false (default), "
            "memory_format=(nullopt))")


def fill_diagonal_(self, fill_value, wrap=False):
    """``self[i, i, ..., i] = fill_value``; for a tall matrix with ``wrap``,
    the diagonal restarts every ``cols + 1`` rows, as NumPy's and PyTorch's."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = tuple(self.shape)
    if self.dim() > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(shape, bool)
    if self.dim() == 2:
        rows, cols = shape
        step = cols + 1
        flat = mask.reshape(-1)
        stop = rows * cols if wrap or rows <= cols else cols * cols
        flat[0:stop:step] = True
    else:
        idx = np.arange(shape[0])
        mask[(idx,) * self.dim()] = True
    mask = Tensor._make(mask, dt.bool_)
    if isinstance(self._data, np.ndarray) and internal_overlap(self._data):
        # (an expanded tensor: PyTorch fills its diagonal without
        # masked_fill_'s deprecation warning)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Use of masked_fill_ on expanded", UserWarning)
            return self.masked_fill_(mask, fill_value)
    return self.masked_fill_(mask, fill_value)


def resize_as_(self, the_template, memory_format=None):
    return self.resize_(*the_template.shape)


_WARNED_0D: set = set()


def _warn_0d(message):
    """PyTorch's TORCH_WARN_ONCE for the 0-D forms: once per process."""
    if message not in _WARNED_0D:
        _WARNED_0D.add(message)
        warnings.warn(message, UserWarning, stacklevel=3)


def _conj_transpose(self, name):
    """The conjugate transpose of the last two dimensions (PyTorch's
    ``_adjoint``): a lazily conjugated view for a complex tensor, the
    transpose for a real one; a 0-D tensor's conjugate; 1-D refused."""
    if self.dim() == 1:
        raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of "
                           "matrices. Got 1-D tensor.")
    out = self if self.dim() == 0 else self.transpose(-2, -1)
    return out.conj() if self.is_complex() else out


def _H(self):
    nd = self.dim()
    if nd == 0:
        _warn_0d("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().")
    if nd not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {nd}-D "
                           "tensor." + (" For batches of matrices, consider using tensor.mH"
                                        if nd > 2 else ""))
    return _conj_transpose(self, "H")


def _mH(self):
    if self.dim() == 0:
        _warn_0d("Tensor.mH is deprecated on 0-D tensors. Consider using x.conj().")
    return _conj_transpose(self, "mH")


def adjoint(self):
    if self.dim() == 0:
        _warn_0d("adjoint() is deprecated on 0-D tensors. Consider using x.conj().")
    return _conj_transpose(self, "adjoint()")


def prelu(self, weight):
    from tracec.nn import functional as F
    return F.prelu(self, weight)


def hardshrink(self, lambd=0.5):
    from tracec.nn import functional as F
    return F.hardshrink(self, lambd)


def _python_element(value, dtype):
    """``value``, one result of ``apply_`` / ``map_``'s callable, checked as
    PyTorch unpacks it for a ``dtype`` tensor: a floating tensor takes any
    real number (``__float__``), an integral or bool one any ``__index__``
    object or float (truncated); anything else is PyTorch's TypeError."""
    if dtype.is_floating_point or dtype.is_complex:
        if isinstance(value, (int, float, complex, np.number)) or \
                hasattr(type(value), "__float__"):
            return value
        raise TypeError(f"must be real number, not {type(value).__name__}")
    if isinstance(value, (float, np.floating)):
        return value
    try:
        operator.index(value)
    except TypeError:
        raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an "
                        "integer") from None
    return value


def _elementwise_python(self, fn, operands, name):
    data = [concrete(t, f"Tensor.{name} (a Python callable per element)") for t in
            (self, *operands)]
    dtype = self.dtype

    def checked(*xs):
        return _python_element(fn(*xs), dtype)
    with np.errstate(all="ignore"):
        values = np.vectorize(checked, otypes=[self.dtype.np])(*data) if self.numel() else data[0]
    with graph.no_grad():
        self._assign(Tensor._make(np.asarray(values, self.dtype.np).reshape(self.shape),
                                  self.dtype), name)
    return self


def apply_(self, callable):  # noqa: A002
    return _elementwise_python(self, callable, (), "apply_")


def map_(self, tensor, callable):  # noqa: A002
    return _elementwise_python(self, callable, (tensor.expand_as(self),), "map_")


def map2_(self, x, y, callable):  # noqa: A002
    return _elementwise_python(self, callable, (x.expand_as(self), y.expand_as(self)), "map2_")


def register_post_accumulate_grad_hook(self, hook):
    """``hook(self)`` after each backward has accumulated into ``self.grad``
    (optimizer-in-backward recipes).  Inside ``tracec.compile`` the hook's
    tensor ops are recorded with the backward (``Recording.on_backward``), so
    compiled calls repeat them; its other Python side effects, as any in a
    compiled function, happen while tracing only."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self._node is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    key = id(self)
    entry = POST_ACCUMULATE_HOOKS.get(key)
    if entry is None or entry[0]() is not self:
        entry = POST_ACCUMULATE_HOOKS[key] = (
            weakref.ref(self, lambda _ref, key=key: POST_ACCUMULATE_HOOKS.pop(key, None)), [])
    hooks = entry[1]
    hooks.append(hook)
    return _HookHandle(hooks, hook)


def run_post_accumulate_hooks(leaf: Tensor) -> None:
    """Called by ``autograd`` after it accumulated into ``leaf.grad``."""
    entry = POST_ACCUMULATE_HOOKS.get(id(leaf))
    if entry is None or entry[0]() is not leaf or not entry[1]:
        return
    hooks = entry[1]
    # (inside tracec.compile the engine's run is recorded op by op when a
    # leaf it reaches has such hooks, ``Recording.on_backward``: the hooks'
    # ops, an optimizer step in backward, are recorded with it)
    for h in list(hooks):
        h(leaf)


def module_load(self, other, assign=False):
    """What ``load_state_dict`` swaps into the parameter ``self`` for the
    checkpoint's ``other`` when ``torch.__future__``'s swap switch is on:
    ``other`` detached (``assign``) or ``self`` with ``other`` copied in,
    detached.  A subclass's ``__torch_function__`` sees the call (a custom
    transformation of the loaded value), as in PyTorch."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


def _volatile(self):
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


def cfloat(self, memory_format=None):
    return self.to(dt.complex64)


def cdouble(self, memory_format=None):
    return self.to(dt.complex128)


def dim_order(self, *, ambiguity_check=False):
    """The dimensions from outermost to innermost in memory (by stride,
    ties in dimension order), as ``Tensor.dim_order``."""
    strides = self.stride()
    return tuple(sorted(range(self.dim()), key=lambda i: -strides[i]))


def _make_subclass(cls, data, require_grad=False, **_):
    """``Tensor._make_subclass(cls, data, require_grad)``: a ``cls`` (a
    Tensor subclass) sharing ``data``'s memory and version counter, as
    custom Parameter-like classes build themselves in ``__new__``."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"cls must be a type (a Tensor subclass), got {cls!r}")
    t = object.__new__(cls)
    t._init(data._data, data.dtype)
    t._vbox = data._vbox
    if require_grad:
        Tensor.requires_grad_(t, True)
    return t


Tensor._make_subclass = staticmethod(_make_subclass)


for _f in (new, fill_diagonal_, resize_as_, adjoint, prelu, hardshrink, apply_,
           map_, map2_, register_post_accumulate_grad_hook, cfloat, cdouble, dim_order,
           module_load):
    setattr(Tensor, _f.__name__, _f)
module_load.__qualname__ = "Tensor.module_load"
Tensor.H = property(_H)
Tensor.mH = property(_mH)
Tensor.volatile = property(_volatile)
# ``_cdata``: PyTorch's address of the C++ tensor behind a Python tensor,
# one per Python tensor object (Parameter(t), t.detach() and views are other
# tensors).  Pyro's ``pyro.module`` compares it to tell whether the param
# store returned the module's own parameter.
Tensor._cdata = property(id)
for _flag in ("is_xpu", "is_mps", "is_mtia", "is_ipu", "is_xla", "is_vulkan", "is_maia"):
    setattr(Tensor, _flag, property(lambda self: False))


def __contains__(self, element) -> bool:
    """``x in t``: whether any element of ``t`` equals ``x`` (PyTorch's;
    without it Python iterates ``t``'s rows and asks each for a bool).
    Only tensors and numbers are accepted."""
    if isinstance(element, (Tensor, numbers.Number)):
        return bool((element == self).any().item())
    raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed "
                       f"in a {type(element)}.")


Tensor.__contains__ = __contains__
