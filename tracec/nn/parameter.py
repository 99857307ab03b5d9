"""``Parameter``: a leaf tensor that a ``Module`` registers when assigned.

Invariant: a Parameter shares its data (and version counter) with the tensor
it was made from, is always a leaf, and requires grad unless asked not to,
as in PyTorch.  Ops on a Parameter return plain Tensors.
"""
from __future__ import annotations

import numpy as np

from tracec import dtypes as dt
from tracec import graph
from tracec.tensor import RECORDERS, Tensor, _tell_recorders
from tracec.torch_function_switch import disabled_torch_function_impl

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]


def _share_value(t: Tensor, data: Tensor) -> None:
    # Inside tracec.compile the new object holds ``data``'s recorded value
    # (detached: a parameter is a leaf); unknown to the tracer it would be a
    # constant, the first call's data at every call.
    if RECORDERS:
        _tell_recorders(t, data.detach(), "Parameter")


_REQUIRES_GRAD = Tensor.requires_grad   # the slot Tensor keeps the flag in


class _ParameterMeta(type):
    """``isinstance(t, Parameter)`` is also true of a Tensor-subclass
    instance made a parameter (``_is_param``), as PyTorch's metaclass says."""

    def __instancecheck__(cls, instance):
        # Tensor first, as PyTorch's: a non-tensor's __getattr__ (a config
        # dotdict raising KeyError) is never asked for ``_is_param``.
        if cls is Parameter and isinstance(instance, Tensor) and \
                getattr(instance, "_is_param", False):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A Tensor that is a module parameter (``isinstance(p, nn.Parameter)``).
    ``Parameter(t)`` of a Tensor subclass instance keeps its type, as
    PyTorch's: ``t.detach()`` flagged ``_is_param``."""

    # Out of the __torch_function__ protocol, as PyTorch's: ``p * 2`` is a Tensor.
    __torch_function__ = disabled_torch_function_impl
    _plain_repr = True

    @property
    def requires_grad(self) -> bool:
        return _REQUIRES_GRAD.__get__(self)

    @requires_grad.setter
    def requires_grad(self, flag) -> None:
        # A GAN's step flips its networks' flags (StyleGAN2's
        # ``requires_grad(generator, True)`` in the G step): inside
        # tracec.compile the trace is told the flag the call found, which
        # its guard keeps, and the one it leaves, which compiled calls set.
        if RECORDERS and hasattr(self, "_birth"):
            old = _REQUIRES_GRAD.__get__(self)
            for r in RECORDERS:
                r(None, (), {"requires_grad_set": old}, self)
        _REQUIRES_GRAD.__set__(self, flag)

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            data = Tensor._make(np.zeros((0,), dt.get_default_dtype().np),
                                dt.get_default_dtype())
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected a Tensor as data, got {type(data).__name__}")
        kind = type(data)
        if kind is not Tensor and not issubclass(kind, Parameter) and cls is Parameter:
            # a custom tensor (a __torch_function__ subclass, DTensor): its
            # own type, flagged as a parameter
            t = data.detach().requires_grad_(requires_grad)
            if type(t) is not kind:
                raise RuntimeError(
                    f"Creating a Parameter from an instance of type {kind.__name__} requires "
                    "that detach() returns an instance of the same type, but return type "
                    f"{type(t).__name__} was found instead. To use the type as a Parameter, "
                    "please correct the detach() semantics defined by its __torch_dispatch__() "
                    "implementation.")
            t._is_param = True
            return t
        p = object.__new__(cls)
        p._init(data._data, data.dtype)
        p._vbox = data._vbox
        _share_value(p, data)
        if requires_grad:
            Tensor._creation_requires_grad(p)
        return p

    def __init__(self, data=None, requires_grad: bool = True):
        pass  # everything happens in __new__

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with graph.no_grad():
            data = Tensor._from_data(self)   # a copy, recorded inside tracec.compile
        out = type(self)(data, self.requires_grad)
        if self.grad is not None:
            out.grad = Tensor._make(self.grad._data.copy(), self.grad.dtype)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self._data.copy(), self.dtype.name, self.requires_grad))


def _rebuild_parameter(data, dtype_name, requires_grad):
    return Parameter(Tensor._make(data, dt.to_dtype(dtype_name)), requires_grad)


class Buffer(Tensor):
    """PyTorch's ``nn.Buffer`` marker: assigning one to a module attribute
    registers it as a buffer (``persistent`` as given)."""

    __torch_function__ = disabled_torch_function_impl     # PyTorch's Buffer is a plain tensor
    _plain_repr = True

    def __new__(cls, data=None, *, persistent: bool = True):
        if data is None:
            data = Tensor._make(np.zeros((0,), dt.get_default_dtype().np),
                                dt.get_default_dtype())
        b = object.__new__(cls)
        b._init(data._data, data.dtype)
        b._vbox = data._vbox
        _share_value(b, data)
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent: bool = True):
        pass


class UninitializedTensorMixin:
    """A placeholder whose shape is not known yet (lazy modules).  Reading
    its data raises; ``materialize(shape)`` gives it storage in place, so
    whoever holds the object (an optimizer) keeps holding the real tensor,
    and turns it into ``cls_to_become``."""

    cls_to_become = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        dtype = dt.get_default_dtype() if dtype is None else dt.to_dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        req = self.requires_grad
        self._init(np.empty(shape, dtype.np), dtype)
        self.__class__ = self.cls_to_become
        if req and not self.requires_grad:
            Tensor.requires_grad_(self, True)

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. "
                           "This error usually happens in `load_state_dict` when trying to "
                           "load an uninitialized parameter into an initialized one. Call "
                           "`forward` to initialize the parameters before accessing their "
                           "attributes.")

    def numel(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. "
                           "Call `forward` to initialize the parameters before accessing "
                           "their attributes.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        p = Parameter.__new__(cls, None, requires_grad)
        return p

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad)
        return memo[id(self)]


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    cls_to_become = Tensor
    __torch_function__ = disabled_torch_function_impl

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        b = object.__new__(cls)
        d = dt.get_default_dtype()
        b._init(np.zeros((0,), d.np), d)
        if requires_grad:
            Tensor.requires_grad_(b, True)
        return b

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        pass


def is_lazy(param) -> bool:
    """Whether ``param`` is an uninitialized (lazy) parameter or buffer."""
    return isinstance(param, UninitializedTensorMixin)
