"""Tensor subclasses as PyTorch runs them: the ``__torch_function__`` protocol.

In PyTorch every public function and Tensor method first looks for an
argument whose type is a Tensor subclass with a ``__torch_function__`` of
its own (every subclass inherits ``Tensor.__torch_function__``; only
``Parameter``'s is ``_disabled_torch_function_impl``) and, if one is there,
calls ``type(arg).__torch_function__(func, types, args, kwargs)`` instead.
The inherited default runs ``func`` with the protocol off for the subclass
and converts tensor results to it (``as_subclass``), so ``MyT + 1`` is a
``MyT``; a subclass that overrides it sees every call (logging tensors,
unit-carrying tensors, wrappers).

Here the protocol costs nothing until it is needed: ``Tensor.__init_subclass__``
turns it on the first time a subclass with a live ``__torch_function__`` is
defined.  Only then are the public entry points (the names PyTorch's own
protocol covers, ``tracec/data/overridable.json``, written from torch by
``scripts/overridable_names.py``) replaced by dispatching wrappers: in the
``tracec`` namespace, ``nn.functional``, ``linalg``, ``fft``, ``special``
and on ``Tensor`` (methods, and the properties that return tensors).

Invariants: tracec's own code calls the wrapped functions with the protocol
off (``DisableTorchFunctionSubclass``) or calls the unwrapped ones it
imported, so a subclass sees only the user's calls, as in PyTorch, where
the library runs in C++; the autograd engine runs with it off, so gradients
are plain tensors, as PyTorch's are; ``func`` handed to ``__torch_function__``
is the public object (``func is torch.add`` holds).
"""
from __future__ import annotations

import builtins
import functools
import inspect
import json
import os
import threading
import warnings

from tracec import dtypes as dt
from tracec.tensor import Tensor
from tracec.torch_function_switch import (DisableTorchFunction,  # noqa: F401
                                          DisableTorchFunctionSubclass,
                                          disabled_torch_function_impl)
from tracec.torch_function_switch import ENTERED, PUBLIC_OF, WRAPPER_CODES, mode_stack, modes_on
from tracec.torch_function_switch import off as _off

__all__ = ["DisableTorchFunctionSubclass", "DisableTorchFunction", "disabled_torch_function_impl",
           "enabled", "as_subclass", "dispatch", "place", "get_default_nowrap_functions"]

_on = [False]
_enable_lock = threading.Lock()
#: Properties of the protocol's list whose values are tensors: these are
#: wrapped (the rest -- shape, dtype, device, flags -- answer directly).
_TENSOR_PROPERTIES = ("T", "mT", "H", "mH", "data", "real", "imag")
#: Methods tracec defines beside PyTorch's list whose PyTorch version
#: dispatches too (``-x`` is ``neg``, ``x ** 2`` is ``pow``; ``unflatten``
#: is Python in PyTorch and missing from its list, yet dispatches).
_EXTRA_METHODS = ("__neg__", "__pos__", "__abs__", "__pow__", "__ipow__", "__rtruediv__",
                  "__itruediv__", "__imatmul__", "unflatten")
#: Never wrapped: object protocol, construction, and what the protocol
#: itself uses.
_NEVER = frozenset(("__new__", "__init__", "__init_subclass__", "__torch_function__",
                    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__del__",
                    "__hash__", "__reduce_ex__", "__setstate__", "__deepcopy__", "__repr__",
                    "__format__", "__array__", "__array_wrap__", "__dlpack__",
                    "__dlpack_device__", "as_subclass", "_make_subclass"))


def enabled() -> bool:
    """Whether a Tensor subclass has turned the protocol on in this process."""
    return _on[0]


def _default_torch_function(cls, func, types, args=(), kwargs=None):
    """``Tensor.__torch_function__``: run ``func`` with the protocol off and
    make its tensor results ``cls`` (PyTorch's ``_convert``)."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        if func in _NOWRAP:
            return ret
        return _convert(ret, cls)


def _convert(ret, cls):
    if cls is Tensor:
        return ret
    t = type(ret)
    if issubclass(t, Tensor) and not issubclass(t, cls):
        return as_subclass(ret, cls)
    if issubclass(t, (tuple, list)):
        items = [_convert(r, cls) for r in ret]
        if hasattr(ret, "_fields"):                 # a namedtuple (return_types.max)
            return type(ret)(*items)
        return type(ret)(items)
    return ret


def as_subclass(self, cls):
    """``Tensor.as_subclass(cls)``: a ``cls`` that aliases ``self`` (its
    memory, and its autograd history through an alias node)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass(): argument 'cls' must be a Tensor subclass, "
                        f"not {getattr(cls, '__name__', type(cls).__name__)}")
    with DisableTorchFunction():        # (modes do not see it either)
        out = self[...]                 # AliasBackward0, PyTorch's self.alias()
    # Same instance layout (Tensor's slots hold __dict__ and __weakref__, so a
    # Python subclass adds none): the alias becomes a cls in place.
    out.__class__ = cls
    return out


#: type -> whether it is a Tensor-like type that is no Tensor (PyTorch's
#: docs' ScalarTensor / MetadataTensor, an FX Proxy): a classmethod
#: ``__torch_function__`` makes the functions it is given to call it.
_TENSOR_LIKE: dict = {}


def _tensor_like(t: type) -> bool:
    d = _TENSOR_LIKE.get(t)
    if d is None:
        tf = getattr(t, "__torch_function__", None)
        d = _TENSOR_LIKE[t] = (callable(tf) and tf is not disabled_torch_function_impl
                               and getattr(tf, "__func__", None) is not disabled_torch_function_impl
                               and (getattr(tf, "__self__", None) is t or _plain(t)))
    return d


#: type -> whether its ``__torch_function__`` is a plain method
_PLAIN: dict = {}


def _plain(t: type) -> bool:
    """PyTorch still calls a ``__torch_function__`` defined as a plain
    method (bound to the argument, with a deprecation warning)."""
    p = _PLAIN.get(t)
    if p is None:
        p = _PLAIN[t] = inspect.isfunction(inspect.getattr_static(t, "__torch_function__", None))
    return p


def _handler(a):
    """``a``'s ``__torch_function__`` as PyTorch calls it."""
    t = type(a)
    if t is Tensor or issubclass(t, Tensor) or not _plain(t):
        return t.__torch_function__
    if not _PLAIN_WARNED:
        _PLAIN_WARNED.append(True)          # (PyTorch's TORCH_WARN_ONCE)
        warnings.warn("Defining your `__torch_function__` as a plain method is deprecated and will be "
                      "an error in future, please define it as a classmethod. (Triggered "
                      "internally at /__w/pytorch/pytorch/torch/csrc/utils/python_arg_parser.cpp"
                      ":359.)", UserWarning,
                      stacklevel=4)
    return a.__torch_function__


_PLAIN_WARNED: list = []


def _build_class(func, name, /, *bases, **kwargs):
    """``builtins.__build_class__``, which also turns the protocol on when a
    class statement outside tracec defines ``__torch_function__`` and is
    neither a Tensor subclass (those turn it on in ``__init_subclass__``)
    nor a mode: a Tensor-like type.  It is turned on before the class body
    runs, so that the torch functions the body registers (linear_operator's
    ``@_implements_second_arg(torch.Tensor.mul)``) are the public ones its
    ``__torch_function__`` will be handed."""
    if not _on[0] and "__torch_function__" in getattr(func, "__code__", _NO_CODE).co_names \
            and not str(getattr(func, "__globals__", {}).get("__name__", "")).startswith("tracec") \
            and not any(isinstance(b, type) and (issubclass(b, Tensor) or _is_mode(b))
                        for b in bases):
        enable()
    return _BUILD_CLASS(func, name, *bases, **kwargs)


_NO_CODE = compile("", "<none>", "exec")


def _is_mode(t: type) -> bool:
    """A TorchFunctionMode (its ``__torch_function__`` is no Tensor-like's)."""
    return any(k.__name__ == "TorchFunctionMode" for k in t.__mro__)


def _live(t: type) -> bool:
    tf = getattr(t, "__torch_function__", None)
    return tf is not None and tf is not disabled_torch_function_impl and t is not Tensor


def _overloaded(args, kwargs) -> list:
    """The arguments (and list items) whose types take part, PyTorch's order:
    first appearance, subclasses before their bases."""
    types, out = [], []

    # (type() and issubclass only: isinstance would read a traced number's
    # __class__, which specializes it: tracec.runtime_int)
    def visit(a):
        t = type(a)
        if t is Tensor:
            return
        if issubclass(t, Tensor):
            if _live(t):
                place(types, out, a)
        elif _tensor_like(t):
            place(types, out, a)

    for a in args:
        if issubclass(type(a), (list, tuple)):
            for b in a:
                visit(b)
        else:
            visit(a)
    for a in kwargs.values():
        visit(a)
    return out


def place(types: list, out: list, a) -> None:
    """Add argument ``a`` to ``out`` (its type to ``types``) unless its type is
    there: PyTorch's order, first appearance, subclasses before their bases."""
    t = type(a)
    if t in types:
        return
    at = len(out)
    for i, other in enumerate(types):
        if issubclass(t, other):
            at = i
            break
    types.insert(at, t)
    out.insert(at, a)


def dispatch(public, overloaded, args, kwargs, builtin: bool = False):
    """Call the ``__torch_function__`` of each of ``overloaded``'s types in turn
    until one does not return ``NotImplemented`` (PyTorch's handler); when
    all do, PyTorch's TypeError: its C++ dispatcher's words for what
    PyTorch binds in C++ (``builtin``), its Python handler's for the rest."""
    types = tuple(type(a) for a in overloaded)
    for a in overloaded:
        result = _handler(a)(public, types, args, kwargs)
        if result is not NotImplemented:
            return result
    module = getattr(public, "__module__", "") or ""
    if module.partition(".")[0] == "tracec":     # (under tracec run: PyTorch's name)
        module = dt.PUBLIC_NAME[0] + module[len("tracec"):]
    qualname = getattr(public, "__qualname__", public)
    if isinstance(qualname, str) and qualname.startswith("Tensor."):
        module = dt.PUBLIC_NAME[0]                 # (torch.Tensor.eq)
    name = f"{module}.{qualname}"
    if builtin:
        listed = "".join(f"  - tensor subclass {t}\n" for t in types)
        raise TypeError(f"Multiple dispatch failed for '{name}'; all __torch_function__ "
                        f"handlers returned NotImplemented:\n\n{listed}\nFor more information, "
                        "try re-running with TORCH_LOGS=not_implemented")
    raise TypeError(f"no implementation found for '{name}' on types that implement "
                    f"__torch_function__: {list(types)}")


#: Operators PyTorch hands to __torch_function__ as the named method they
#: call (``t * 2`` is ``Tensor.mul``, ``1 + t`` is ``Tensor.add``), measured
#: against torch 2.13.
_OPERATOR_AS = {"__add__": "add", "__radd__": "add", "__sub__": "sub", "__mul__": "mul",
                "__rmul__": "mul", "__truediv__": "div", "__mod__": "remainder", "__pow__": "pow",
                "__matmul__": "matmul", "__neg__": "neg", "__abs__": "abs", "__pos__": "positive",
                "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
                "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
                "__rtruediv__": "__rdiv__"}
#: PyTorch's binary operators, which answer NotImplemented where every
#: handler declines (``==`` hands only the first overloaded argument's type
#: to __torch_function__, the others all of them)
_BINARY_OPERATORS = frozenset(
    f"__{p}{op}__" for op in ("add", "sub", "mul", "truediv", "div", "floordiv", "mod", "pow",
                              "matmul", "and", "or", "xor", "lshift", "rshift")
    for p in ("", "r", "i")) | {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
#: Those PyTorch defines in Python: their kwargs reach __torch_function__ as
#: a dict even when empty (the C-bound ones give None).
_PYTHON_DEFINED = frozenset(("__rsub__", "__rdiv__", "__rtruediv__", "__floordiv__",
                             "__rfloordiv__", "__pow__", "__rpow__", "__len__", "unflatten"))


def _by_keyword(fn, args, kwargs, first_too: bool = False):
    """``(first argument,), {every other parameter by name}``, as PyTorch's
    Python functions hand their calls to __torch_function__ (``F.relu(x)``
    gives ``kwargs={'inplace': False}``; ``first_too``: ``(), {every
    parameter}``, as ``nn.init``'s do); the call as given where its
    signature has no such form."""
    try:
        sig = _SIGNATURES.get(fn) or _SIGNATURES.setdefault(fn, inspect.signature(fn))
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
        return args, kwargs
    bound.apply_defaults()
    items = list(bound.arguments.items())
    if first_too:
        return (), dict(items)
    return (items[0][1],), dict(items[1:])


_SIGNATURES: dict = {}


def _to_mode(func, fn, args, kwargs, none_kwargs, first_too):
    """Hand the call to the innermost TorchFunctionMode, popped while its
    ``__torch_function__`` runs (calls it makes go to the next mode or the
    implementation), as PyTorch does; what it returns, or NotImplemented."""
    if none_kwargs is None:
        # A Python function of PyTorch's: its tensor arguments take part,
        # plain ones too (F.relu hands types=(Tensor,)), parameters by keyword.
        args, kwargs = _by_keyword(fn, args, kwargs, first_too)
        seen, out = [], []
        for a in list(args) + list(kwargs.values()):
            if type(a) is Tensor or (issubclass(type(a), Tensor) and _live(type(a))):
                place(seen, out, a)
        types = tuple(type(a) for a in out)
    else:
        types = tuple(type(a) for a in _overloaded(args, kwargs))
        kwargs = None if none_kwargs and not kwargs else kwargs
    stack = mode_stack()
    mode = stack.pop()
    try:
        return mode.__torch_function__(func, types, args, kwargs)
    finally:
        stack.append(mode)


def _wrap(fn, module: str, qualname: str, as_method: str | None = None,
          none_kwargs: bool | None = True, first_too: bool = False):
    """The dispatching wrapper of ``fn``, installed as ``module.qualname``
    (its names say so: pickle finds the wrapper there).  ``as_method``: the
    Tensor method handed to __torch_function__ instead (an operator's);
    ``none_kwargs``: no keyword arguments reach it as None, not {} (None:
    every parameter after the first reaches it by keyword, ``_by_keyword``;
    ``first_too``: the first as well)."""
    operator = qualname.rpartition(".")[2] in _BINARY_OPERATORS and qualname.startswith("Tensor.")
    first_only = qualname == "Tensor.__eq__"
    # (bound in C++ by PyTorch: what it does not define in Python)
    builtin = bool(none_kwargs) and qualname.rpartition(".")[2] not in _PYTHON_DEFINED

    @functools.wraps(fn)
    def public(*args, **kwargs):
        if ENTERED[0] and modes_on():
            func = getattr(Tensor, as_method, None) if as_method else public
            r = _to_mode(func or public, fn, args, kwargs, none_kwargs, first_too)
            if r is not NotImplemented:
                return r
        if not _off():
            over = _overloaded(args, kwargs)
            if over:
                func = getattr(Tensor, as_method, None) if as_method else public
                if none_kwargs is None:       # a Python function of PyTorch's
                    args, kwargs = _by_keyword(fn, args, kwargs)
                if not operator:
                    return dispatch(func or public, over, args,
                                    None if none_kwargs and not kwargs else kwargs, builtin)
                try:
                    return dispatch(func or public, over[:1] if first_only else over, args,
                                    None if none_kwargs and not kwargs else kwargs)
                except TypeError:
                    # PyTorch's binary operators turn a TypeError into
                    # NotImplemented: Python then tries the reflected
                    # operator, then raises its own TypeError (or, for
                    # ``!=``, compares identities)
                    return NotImplemented
        return fn(*args, **kwargs)
    public.__tracec_unwrapped__ = fn
    # (the keyword defaults code reads to feature-test an argument: MONAI
    # checks torch.meshgrid.__kwdefaults__ for `indexing`)
    public.__kwdefaults__ = getattr(fn, "__kwdefaults__", None)
    public.__module__, public.__qualname__ = module, qualname
    public.__name__ = qualname.rpartition(".")[2]      # (a method made by a factory: "op")
    WRAPPER_CODES.add(public.__code__)
    PUBLIC_OF[id(fn)] = public
    return public


#: Creation functions outside PyTorch's overridable list that its C++
#: argument parser still hands to TorchFunctionModes (measured against torch
#: 2.13: not ``range``, ``from_numpy``, ``frombuffer`` or the legacy
#: constructors); tensor arguments never make them dispatch to a subclass.
MODE_FACTORIES = ("zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye",
                  "rand", "randn", "randint", "randperm", "tensor", "as_tensor", "asarray",
                  "scalar_tensor", "empty_strided", "empty_permuted", "hann_window",
                  "hamming_window", "bartlett_window", "blackman_window", "kaiser_window",
                  "tril_indices", "triu_indices", "sparse_coo_tensor")


def _wrap_factory(fn, module: str, name: str):
    """``fn`` as a TorchFunctionMode sees it: handed to the innermost mode
    (``types`` empty, keyword arguments None when there are none, as
    PyTorch's parser gives them), else called."""
    @functools.wraps(fn)
    def public(*args, **kwargs):
        if ENTERED[0] and modes_on():
            r = _to_mode(public, fn, args, kwargs, True, False)
            if r is not NotImplemented:
                return r
        return fn(*args, **kwargs)
    public.__tracec_unwrapped__ = fn
    public.__kwdefaults__ = getattr(fn, "__kwdefaults__", None)
    public.__module__, public.__qualname__, public.__name__ = module, name, name
    WRAPPER_CODES.add(public.__code__)
    PUBLIC_OF[id(fn)] = public
    return public


def _wrap_property(prop: property) -> property:
    getter = prop.fget

    def fget(self):
        if ENTERED[0] and modes_on():
            # (a property's __get__ reaches modes too, as in PyTorch)
            r = _to_mode(public.__get__, getter, (self,), {}, True, False)
            if r is not NotImplemented:
                return r
        if not _off() and type(self) is not Tensor and _live(type(self)):
            # PyTorch hands the property's __get__ to __torch_function__.
            return dispatch(public.__get__, [self], (self,), {})
        return getter(self)
    public = property(fget, prop.fset, prop.fdel, prop.__doc__)
    WRAPPER_CODES.add(fget.__code__)
    return public


def _names() -> dict:
    here = os.path.join(os.path.dirname(__file__), "data", "overridable.json")
    with open(here) as f:
        return json.load(f)


def _wrap_namespace(ns, names, by_keyword=(), first_too: bool = False) -> None:
    for name in names:
        fn = ns.__dict__.get(name) if hasattr(ns, "__dict__") else None
        if callable(fn) and not isinstance(fn, type) and not hasattr(fn, "__tracec_unwrapped__"):
            setattr(ns, name, _wrap(fn, ns.__name__, name,
                                    none_kwargs=None if name in by_keyword else True,
                                    first_too=first_too))


#: (namespace module, key in overridable.json), and the autograd module:
#: given by tracec/__init__ (``register``), which sits above every layer.
_NAMESPACES: list = []
_ENGINE: list = []


def overridable_functions() -> dict:
    """``torch.overrides.get_overridable_functions``: each namespace the
    protocol covers (torch, nn.functional, linalg, fft, special; Tensor)
    mapped to the public functions of it that are handed to
    ``__torch_function__``, in name order (PyTorch's walk of ``dir``)."""
    names = _names()
    out: dict = {}
    for ns, key in _NAMESPACES + [(Tensor, "torch.Tensor")]:
        if key == "torch.nn.init":
            continue
        fns = [getattr(ns, n) for n in sorted(set(names[key]))
               if (not n.startswith("_") or n.startswith("__")) and callable(getattr(ns, n, None))]
        out[ns] = fns
    return out


def register(namespaces, engine) -> None:
    """Name the modules ``enable`` wraps: ``namespaces`` as (module, key)
    pairs, ``engine`` the autograd module (its backward and grad run with
    the protocol off)."""
    _NAMESPACES[:] = namespaces
    _ENGINE[:] = [engine]


def enable() -> None:
    """Turn the protocol on for this process (once): wrap the entry points."""
    with _enable_lock:
        if _on[0]:
            return
        names = _names()
        for ns, key in _NAMESPACES:
            # (most of torch.nn.functional's functions are Python in PyTorch:
            # they pass their parameters by keyword)
            python = set(names[key]) - set(names["torch.nn.functional builtins"]) \
                if key == "torch.nn.functional" else ()
            if key == "torch.nn.init":      # Python, every argument by keyword
                python = set(names[key])
            _wrap_namespace(ns, names[key], python, first_too=key == "torch.nn.init")
            if key == "torch":
                for name in MODE_FACTORIES:
                    fn = ns.__dict__.get(name)
                    if callable(fn) and not hasattr(fn, "__tracec_unwrapped__"):
                        setattr(ns, name, _wrap_factory(fn, ns.__name__, name))
        for name in set(names["torch.Tensor"]) | set(_EXTRA_METHODS):
            if name in _NEVER:
                continue
            fn = Tensor.__dict__.get(name)
            if callable(fn) and not isinstance(fn, (type, staticmethod, classmethod)) and \
                    not hasattr(fn, "__tracec_unwrapped__"):
                setattr(Tensor, name, _wrap(fn, Tensor.__module__, f"Tensor.{name}",
                                            _OPERATOR_AS.get(name),
                                            name not in _PYTHON_DEFINED))
        for name in _TENSOR_PROPERTIES:
            prop = Tensor.__dict__.get(name)
            if isinstance(prop, property):
                setattr(Tensor, name, _wrap_property(prop))
        # The autograd engine runs with the protocol off: a subclass's
        # __torch_function__ does not see the backward's own arithmetic,
        # and gradients are plain tensors, as PyTorch's C++ engine makes them.
        for autograd in _ENGINE:
            for name in ("backward", "grad"):
                setattr(autograd, name, _protocol_off(getattr(autograd, name)))
        _on[0] = True


def _protocol_off(fn):
    @functools.wraps(fn)
    def off(*args, **kwargs):
        with DisableTorchFunction():
            return fn(*args, **kwargs)
    return off


def _init_subclass(cls, **kwargs):
    super(Tensor, cls).__init_subclass__(**kwargs)
    if not _on[0] and _live(cls):
        enable()


def get_default_nowrap_functions() -> set:
    """``torch.overrides.get_default_nowrap_functions``: what the default
    ``__torch_function__`` returns unconverted."""
    return set(_NOWRAP)


_NOWRAP: set = set()
_BUILD_CLASS = builtins.__build_class__
builtins.__build_class__ = _build_class
Tensor.__torch_function__ = classmethod(_default_torch_function)
Tensor.__init_subclass__ = classmethod(_init_subclass)
Tensor.as_subclass = as_subclass
for _p in ("grad", "_base"):
    _prop = Tensor.__dict__.get(_p)
    if isinstance(_prop, property):
        _NOWRAP.add(_prop.__get__)
