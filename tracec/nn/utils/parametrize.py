"""``tracec.nn.utils.parametrize``: tensors of a module computed from other
tensors by small modules (PyTorch's ``register_parametrization``,
``remove_parametrizations``, ``is_parametrized``, ``cached``,
``type_before_parametrizations``, ``ParametrizationList``).

Invariants (PyTorch's):
  * after ``register_parametrization(m, "weight", p)``, ``m.weight`` is a
    property of a generated subclass ``Parametrized<Class>`` that returns
    ``p(original)`` on every access (chained parametrizations apply in
    registration order); the original tensor lives at
    ``m.parametrizations.weight.original`` (``original0``, ``original1``, ...
    when ``right_inverse`` returns several), so ``state_dict()`` keys are
    ``parametrizations.weight.original`` like torch's;
  * ``original`` is the same Parameter object as before (optimizers keep
    it); ``right_inverse`` writes its value in place;
  * assigning ``m.weight = X`` calls ``right_inverse(X)``;
  * inside ``with cached():`` each parametrized tensor is computed once.
"""
from __future__ import annotations

import collections.abc
import copy
import copyreg
from contextlib import contextmanager

from tracec import graph
from tracec.nn.modules.container import ModuleDict, ModuleList
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter
from tracec.tensor import Tensor

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache: dict = {}


@contextmanager
def cached():
    """Compute each parametrized tensor at most once inside the block."""
    global _cache_enabled, _cache
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, x) -> None:
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _maybe_set(dest: Tensor, src: Tensor) -> None:
    """``dest.set_(src)``: ``dest`` (same object) now holds ``src``'s data."""
    if src is not dest:
        dest.data = src


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, and its ``original`` (or
    ``original0``, ``original1``, ...) that they are applied to."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = tuple(original.shape), original.dtype
        with graph.no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            with graph.no_grad():
                _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, originali in enumerate(new):
                if not isinstance(originali, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(originali).__name__}.")
                if isinstance(original, Parameter):
                    originali = Parameter(originali, original.requires_grad)
                originali.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", originali)
        if not self.unsafe:
            z = self()
            _check_result(z, original_dtype, original_shape, "unparametrized", "parametrized",
                          "`unsafe` flag")

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that ``self()`` gives ``value`` (no grad)."""
        with graph.no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError("`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _maybe_set(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                 f"{type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                 f"{self.ntensors}. Got a sequence of length {len(value)}.")
            for i, tensor in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError("'right_inverse' must return a sequence of tensors or "
                                     f"reference-type opaques. Got element {i} of type "
                                     f"{type(tensor).__name__}.")
                if original_i.dtype != tensor.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                     f"{tensor.dtype} while `original{i}` has dtype "
                                     f"{original_i.dtype}")
                _maybe_set(original_i, tensor)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        idx = 1
        while hasattr(self, str(idx)):
            x = self[idx](x)
            idx += 1
        return x


def _check_result(x, dtype, shape, was: str, now: str, flag: str) -> None:
    """PyTorch's checks that a parametrization keeps dtype and shape."""
    if not isinstance(x, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
    if x.dtype != dtype:
        raise ValueError(f"Registering a parametrization may not change the dtype of the "
                         f"tensor, unless {'the ' if was.startswith('module') else ''}{flag} "
                         f"is enabled.\n{was} dtype: {dtype}\n{now} dtype: {x.dtype}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"Registering a parametrization may not change the shape of the "
                         f"tensor, unless {'the ' if was.startswith('module') else ''}{flag} "
                         f"is enabled.\n{was} shape: {_fmt(shape)}\n{now} shape: "
                         f"{_fmt(x.shape)}")


def _fmt(shape) -> str:
    return f"torch.Size({list(shape)})"


def _inject_new_class(module: Module) -> None:
    """Give ``module`` its own subclass ``Parametrized<Class>`` to hold the
    properties; it refuses pickling (state dicts only) but deep-copies."""
    cls = module.__class__

    def default_deepcopy(self, memo):
        obj = memo.get(id(self), None)
        if obj is not None:
            return obj
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
        for slot in copyreg._slotnames(self.__class__):
            if hasattr(self, slot):
                setattr(replica, slot, copy.deepcopy(getattr(self, slot), memo))
        return replica

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                           "saving_loading_models.html#saving-loading-a-general-checkpoint-"
                           "for-inference-and-or-resuming-training")

    dct = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module: Module, tensor_name: str) -> None:
    """``module.<tensor_name>``: the parametrization's value on read,
    ``right_inverse`` on write."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute with name '{tensor_name}'")

    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(module), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` computed by ``parametrization`` from an
    original tensor (see the module docstring)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_result(x, y.dtype, y.shape, f"module.{tensor_name}.",
                          f"parametrization(module.{tensor_name}).", "`unsafe` flag")
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    _check_right_inverse(z, y, tensor_name)
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def _check_right_inverse(z, y, tensor_name: str) -> None:
    if not isinstance(z, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                         f"{type(z).__name__}")
    for what, a, b in (("dtype", z.dtype, y.dtype), ("shape", tuple(z.shape), tuple(y.shape))):
        if a != b:
            show = (lambda s: _fmt(s)) if what == "shape" else str
            raise ValueError(f"The tensor returned by parametrization.right_inverse must have "
                             f"the same {what} as module.{tensor_name}, unless the `unsafe` "
                             f"flag is enabled.\nmodule.{tensor_name}.{what}: {show(b)}\n"
                             f"returned {what}: {show(a)}")


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has any parametrization (on ``tensor_name``)."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Remove the parametrizations of ``tensor_name``; it becomes a plain
    parameter (or buffer) again, holding the parametrized value when
    ``leave_parametrized`` and the original otherwise."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with graph.no_grad():
                t = getattr(module, tensor_name)
                _maybe_set(original, t.detach())
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach(), t.requires_grad) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before ``register_parametrization`` subclassed it."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or
    all) on ``to_module`` and make its originals share their data."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for param_func in src:
            register_parametrization(to_module, name, param_func)
        dst = to_module.parametrizations[name]
        with graph.no_grad():
            originals = (["original"] if hasattr(src, "original") else
                         [f"original{i}" for i in range(src.ntensors)])
            for orig in originals:
                _maybe_set(getattr(dst, orig), getattr(src, orig))
    return to_module
