"""``Module``: the base class of every layer, with PyTorch's registration
rules, traversal, state dicts, modes and dtype conversion.

Invariants (PyTorch's):
  * assigning a ``Parameter`` / ``Module`` attribute registers it in
    ``_parameters`` / ``_modules``; ``register_buffer`` puts a tensor in
    ``_buffers`` (persistent ones appear in ``state_dict``);
  * traversals are in registration order and yield a shared parameter or
    module once;
  * ``load_state_dict`` copies into the existing tensors in place, under
    ``no_grad``, so anything holding references (optimizers, compiled
    functions) sees the new values.
"""
from __future__ import annotations

import functools
import itertools
import types
import warnings
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator, Mapping

from tracec import dtypes as dt
from tracec import graph
from tracec.device import device as _device, to_device
from tracec.nn.parameter import Buffer, Parameter
from tracec.mutation import (EPOCH, GENERATORS, Ident, WatchedHookDict, WatchedOrderedDict,
                             deep_immutable, epoch_covered, frozen, generator_state)
from tracec.pytree import _NOT_PLAIN_TOP, _PLAIN_STDLIB
from tracec.sym_scalar import LIFTED, SymScalar
from tracec.tensor import RECORDERS, Tensor, _tell_recorders, note_guard
from tracec.tensor_type import typename
from tracec.nn.modules.backward_hooks import (GLOBAL_KIND, global_backward_hooks,
                                              global_backward_pre_hooks, has_backward_hooks,
                                              wrap_inputs, wrap_outputs)
from tracec.removable_handle import TRACE_FLOOR
from tracec.utils.hooks import RemovableHandle as _RemovableHandle
from tracec.nn.modules import legacy_backward_hooks
from tracec.nn.modules.legacy_backward_hooks import ACTIVE as _LEGACY_ACTIVE

#: The state_dict key (after a module's prefix) of what ``get_extra_state``
#: returns.
_EXTRA_STATE_KEY_SUFFIX = "_extra_state"

#: Attribute types a module's guard compares by value.
_NO_ATTR = object()
_PLAIN = frozenset((bool, int, float, str, type(None), tuple))
_SCALARS = frozenset((bool, int, float, str))
#: Attribute types a module's guard compares by identity besides tensors
#: (``self.act = F.gelu``: the trace called that very function).
_FUNCTIONS = frozenset((types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                        functools.partial))
#: Attribute types a module's guard compares by contents (``frozen``): a
#: list or dict that ``forward`` changes (a queue it pops, a cache or a
#: history it fills) is a side effect compiled calls would not repeat, one
#: the program changes between calls is read anew.  Past ``_CONTAINER_ITEMS``
#: items: by identity and length.
_CONTAINERS = frozenset((list, dict))
_CONTAINER_ITEMS = 64
#: Attribute types whose contents may change without a setattr (the
#: epoch covers them only while deep_immutable).
_WATCH_CHECKED = frozenset((tuple, list, dict))


_OBJECT_CLASSES: dict = {}


def _config_object(v) -> bool:
    """A plain object held by a module (a config dataclass, a
    ``SimpleNamespace``, a helper object of the program's class, at most
    ``_CONTAINER_ITEMS`` attributes, not tracec's): its guard compares its
    attributes (``frozen``: numbers by value, tensors by identity), as
    ``self.cfg.temperature`` read by ``forward`` changes no attribute of
    the module itself."""
    tv = type(v)
    if tv in _PLAIN or tv in _CONTAINERS or isinstance(v, (Tensor, Module, type)) or callable(v):
        return False
    d = getattr(v, "__dict__", None)
    if type(d) is not dict or len(d) > _CONTAINER_ITEMS:
        return False
    ok = _OBJECT_CLASSES.get(tv)
    if ok is None:
        # (a logger, a lock, NumPy's and tracec's objects: not the program's data)
        ok = _OBJECT_CLASSES[tv] = tv in _PLAIN_STDLIB or all(
            (getattr(c, "__module__", None) or "builtins").split(".")[0] not in _NOT_PLAIN_TOP
            for c in tv.__mro__ if c is not object)
    return ok


def _container_snapshot(v):
    return ("long", id(v), len(v)) if len(v) > _CONTAINER_ITEMS else frozen(v)

__all__ = ["Module", "ATTR_WRITES", "BUFFER_WRITES", "MODE_WRITES", "PLAIN_WRITES", "ReplayedAttr",
           "replayed_token"]

# Callables ``(module, name, value)`` told when a plain attribute is set to a
# tensor, a tuple of tensors (an LSTM's ``self.hidden = (h, c)``) or None (a
# tracer registers one: a compiled call replays the write).
ATTR_WRITES: list = []
# Callables ``(module, name, old)`` told when a registered buffer holding the
# tensor ``old`` is set to another tensor (DINO's ``self.center = self.center
# * m + ...``; a tracer registers one: compiled calls write the new value into
# ``old``, see ``tracing.Recording.settle_buffer_writes``).
BUFFER_WRITES: list = []
# Callables ``(module, mode)`` told by ``train(mode)`` / ``eval()`` before the
# flag is set (a tracer registers one: compiled calls set the flag likewise).
MODE_WRITES: list = []
# Callables ``(module, name, old)`` told before a plain attribute is set to a
# number, bool or string (``old``: what it held, ``_NO_ATTR`` if nothing; a
# tracer registers one: SAM's bypass_bn sets a batch norm's ``momentum`` for
# one forward and puts it back, see ``tracing.Recording.restored_guards``).
PLAIN_WRITES: list = []


def tensor_leaves(value, depth: int = 4):
    """The leaves of ``value``, a tensor, None, or plain tuples and lists of
    them nested up to ``depth`` deep; None if anything else is in it."""
    if value is None or isinstance(value, Tensor):
        return [value]
    if depth and type(value) in (tuple, list):
        out = []
        for v in value:
            leaves = tensor_leaves(v, depth - 1)
            if leaves is None:
                return None
            out += leaves
        return out
    return None


def _tensor_tuple(value) -> bool:
    """Whether ``value`` is a plain tuple of tensors and Nones, one tensor at
    least, or of tuples and lists of them (pytorch-ntm's ``previous_state =
    (reads, (h, c), head_weights)``)."""
    if type(value) is not tuple:
        return False
    leaves = tensor_leaves(value)
    return leaves is not None and any(isinstance(v, Tensor) for v in leaves)


class ReplayedAttr:
    """The guard token of a module attribute that compiled calls set (llama2.c's
    ``self.last_loss``): only whether it holds None counts, since each call
    sets a new tensor there.  ``ident``: the id of the tensor it held;
    ``read``: the trace read that tensor (its value is baked in as that very
    tensor), so the token never matches and the trace is not reused once
    the attribute changed."""

    __slots__ = ("is_none", "ident", "read")

    def __init__(self, is_none: bool, ident: int = 0, read: bool = False):
        self.is_none, self.ident, self.read = is_none, ident, read

    def __eq__(self, other):
        return (isinstance(other, ReplayedAttr) and not self.read and not other.read
                and self.is_none == other.is_none)

    def __hash__(self):
        return hash(self.is_none)

    def __repr__(self):
        return f"ReplayedAttr(is_none={self.is_none}, read={self.read})"


def replayed_token(entry, read_ids: set) -> tuple:
    """A ``mode_and_tensors`` attribute entry of a replayed attribute as its
    ``ReplayedAttr`` token (``read_ids``: ids of the tensors the trace read)."""
    k, v = entry[0], entry[1]
    if isinstance(v, ReplayedAttr):
        return (k, ReplayedAttr(v.is_none, v.ident, _read(v.ident, read_ids)))
    if len(entry) == 3 and v == "id":
        return (k, ReplayedAttr(False, entry[2], entry[2] in read_ids))
    # a tuple of tensors (an LSTM's (h, c)): frozen as ("tuple", (("id", n), ...))
    ids = _frozen_ids(v)
    return (k, ReplayedAttr(v is None, ids, _read(ids, read_ids)))


def _read(ident, read_ids: set) -> bool:
    """Whether the trace read the tensor ``ident`` names, or one of those
    (a tuple of ids: a tuple attribute's tensors)."""
    if type(ident) is tuple:
        return any(i in read_ids for i in ident)
    return ident in read_ids


def _frozen_ids(v) -> tuple:
    """The tensor ids in a ``mutation.frozen`` snapshot of a tuple or list."""
    if type(v) is tuple and len(v) == 2 and v[0] in ("tuple", "list") and type(v[1]) is tuple:
        return tuple(i for e in v[1] for i in _frozen_ids(e))
    if type(v) is tuple and len(v) == 2 and v[0] == "id":
        return (v[1],)
    return ()


def _value_ids(v):
    """The id a replayed attribute's guard token keeps: of its tensor, or
    of each tensor of a tuple or list it holds."""
    if type(v) in (tuple, list):
        return tuple(id(x) for x in v)
    return id(v)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


#: The hook tables PyTorch's Module.__init__ makes that tracec's makes on
#: first use (``Module._hook_table``): reading one makes it, empty.
_LAZY_HOOK_TABLES = frozenset((
    "_backward_hooks", "_backward_pre_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs", "_state_dict_hooks",
    "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"))

#: hooks every module's call runs before its own (PyTorch's
#: ``register_module_forward_pre_hook`` / ``register_module_forward_hook``);
#: watched, as a module's own tables are (``_CALL_HOOK_TABLES``)
_global_forward_pre_hooks: dict = WatchedHookDict()
_global_forward_hooks: dict = WatchedHookDict()
_global_forward_hooks_always_called: dict = WatchedHookDict()

#: A module's hook tables that decide what its call computes (forward and
#: backward, and the flags saying how a hook is called): part of its guard
#: (``Module.mode_and_tensors``).  ``WatchedHookDict``s, so that a hook
#: registered, removed or replaced between compiled calls, by any path,
#: advances the mutation epoch and the guard is checked again.
_CALL_HOOK_TABLES = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                     "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                     "_backward_hooks", "_backward_pre_hooks")
#: The global tables every module's call reads (and the kind of the global
#: backward hooks, full or deprecated): part of every module's guard while
#: one is not empty.
_GLOBAL_CALL_HOOK_TABLES = (_global_forward_pre_hooks, _global_forward_hooks,
                            _global_forward_hooks_always_called, global_backward_hooks,
                            global_backward_pre_hooks)


def register_module_forward_pre_hook(hook) -> _RemovableHandle:
    """``hook(module, args)`` before every module's forward (and before the
    module's own pre-hooks); a non-None result replaces ``args``."""
    handle = _RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, always_call: bool = False) -> _RemovableHandle:
    """``hook(module, args, output)`` after every module's forward (and
    before the module's own hooks); a non-None result replaces the output."""
    handle = _RemovableHandle(_global_forward_hooks,
                              extra_dict=_global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


#: hooks every module's registrations run (PyTorch's
#: ``register_module_{parameter,buffer,module}_registration_hook``):
#: ``hook(module, name, value)``, a non-None result registered instead
_global_parameter_registration_hooks: dict = OrderedDict()
_global_buffer_registration_hooks: dict = OrderedDict()
_global_module_registration_hooks: dict = OrderedDict()


def _registration_hook(table: dict, hook) -> _RemovableHandle:
    handle = _RemovableHandle(table)
    table[handle.id] = hook
    return handle


def register_module_parameter_registration_hook(hook) -> _RemovableHandle:
    """``hook(module, name, param)`` at every parameter registration."""
    return _registration_hook(_global_parameter_registration_hooks, hook)


def register_module_buffer_registration_hook(hook) -> _RemovableHandle:
    """``hook(module, name, buffer)`` at every buffer registration."""
    return _registration_hook(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook) -> _RemovableHandle:
    """``hook(module, name, submodule)`` at every submodule registration."""
    return _registration_hook(_global_module_registration_hooks, hook)


def _registered(table: dict, module, name, value):
    for hook in list(table.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


def register_module_full_backward_hook(hook) -> _RemovableHandle:
    """``hook(module, grad_input, grad_output)`` for every module, before
    the module's own full backward hooks."""
    _global_backward_hook_kind(True)
    handle = _RemovableHandle(global_backward_hooks)
    global_backward_hooks[handle.id] = hook
    return handle


def register_module_backward_hook(hook) -> _RemovableHandle:
    """PyTorch's deprecated global form of ``Module.register_backward_hook``
    (tracec.nn.modules.legacy_backward_hooks): on every module's output's
    ``grad_fn``, before the module's own."""
    _global_backward_hook_kind(False)
    handle = _RemovableHandle(global_backward_hooks)
    global_backward_hooks[handle.id] = hook
    return handle


def _global_backward_hook_kind(full: bool) -> None:
    if GLOBAL_KIND[0] is (not full):
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a "
                           "global Module hook. Please use only one of them.")
    GLOBAL_KIND[0] = full


def register_module_full_backward_pre_hook(hook) -> _RemovableHandle:
    """``hook(module, grad_output)`` for every module, before the module's
    own backward pre-hooks."""
    handle = _RemovableHandle(global_backward_pre_hooks)
    global_backward_pre_hooks[handle.id] = hook
    return handle


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join((n * " ") + ln if ln.strip() else "" for ln in lines)


def _check_name(self, name, kind, table):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
    if "." in name:
        raise KeyError(f"{kind} name can't contain \".\"")
    if name == "":
        raise KeyError(f"{kind} name can't be empty string \"\"")
    if hasattr(self, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")


def _call_hooks(d: dict) -> tuple:
    """The hooks a call of the module whose ``__dict__`` is ``d`` runs, as
    ``((table name, ((key, Ident(hook)), ...)), ...)`` for its non-empty
    ``_CALL_HOOK_TABLES`` (and ``("global", ...)`` for the global tables):
    equal later only if the same hook objects sit under the same keys in the
    same order.  While a call is traced, the hooks it registered itself
    (handle ids from ``TRACE_FLOOR`` on) are left out: its guard holds the
    hooks the call began with (a feature extractor's ``h =
    layer.register_forward_hook(save); model(x); h.remove()`` in the step
    compiles once; a hook the step leaves registered fails the guard at the
    next call, which then retraces, running it as eager would)."""
    if not (d.get("_forward_hooks") or d.get("_forward_pre_hooks") or d.get("_backward_hooks")
            or d.get("_backward_pre_hooks") or _global_forward_pre_hooks or _global_forward_hooks
            or global_backward_hooks or global_backward_pre_hooks):
        return ()     # (no hook: the common case; a flag marks only a hook there is)
    floor = TRACE_FLOOR[0]
    out = ()
    for name in _CALL_HOOK_TABLES:
        t = d.get(name)
        if t:
            items = tuple((k, Ident(f)) for k, f in t.items()
                          if floor is None or type(k) is not int or k < floor)
            if items:
                out += ((name, items),)
    if d.get("_backward_hooks"):   # (its hooks run as full or deprecated ones)
        out += (("full", d.get("_is_full_backward_hook")),)
    if any(_GLOBAL_CALL_HOOK_TABLES):
        glob = tuple(tuple((k, Ident(f)) for k, f in t.items()
                           if floor is None or type(k) is not int or k < floor)
                     for t in _GLOBAL_CALL_HOOK_TABLES)
        if any(glob):
            out += (("global", GLOBAL_KIND[0]) + glob,)
    return out


class Module:
    """Base class for all neural network modules (PyTorch's ``nn.Module``)."""

    training: bool
    dump_patches = False
    _version = 1
    #: pass ``__init__``'s arguments on to the next class of the MRO (a
    #: cooperative mixin after Module), as PyTorch does when this is True
    call_super_init: bool = False

    def __init__(self, *args, **kwargs):
        if not self.call_super_init and kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword "
                            f"argument '{next(iter(kwargs))}'")
        if not self.call_super_init and args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given")
        d = self.__dict__
        d["training"] = True
        # Watched (tracec.mutation): compiled calls skip this module's guard
        # while nothing it reads has changed.
        d["_parameters"] = WatchedOrderedDict()
        d["_buffers"] = WatchedOrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = WatchedOrderedDict()
        d["_forward_hooks"] = WatchedHookDict()
        d["_forward_pre_hooks"] = WatchedHookDict()
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    # --- forward -----------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    #: ``compile(fn, *args, **kwargs)`` for ``Module.compile()``: set by
    #: ``tracec/__init__`` (the compiler loads on first use).
    _compile_fn = None

    def compile(self, *args, **kwargs):
        """``torch.nn.Module.compile``: this module's calls (hooks included) go
        through ``torch.compile`` from now on, the module itself unchanged
        (its ``state_dict`` keeps its keys)."""
        self.__dict__["_compiled_call_impl"] = Module._compile_fn(self._call_impl, *args,
                                                                  **kwargs)

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call_impl")
        if compiled is not None and not RECORDERS:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        if RECORDERS:
            # While tracec.compile traces: what this module computes depends on
            # its train/eval flag (dropout, batch norm, user code reading
            # self.training) and on which tensors are its parameters and
            # buffers (the trace reads and updates those objects): the trace
            # is reused only while both stay as they are.
            note_guard(self.mode_and_tensors)
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        if (not pre and not post and pre is not None and post is not None
                and not _global_forward_pre_hooks and not _global_forward_hooks
                and not d.get("_backward_hooks") and not d.get("_backward_pre_hooks")
                and not global_backward_hooks and not global_backward_pre_hooks):
            # No hook of any kind (the common case): what the general path
            # below does then, without building its empty lists.
            if _LEGACY_ACTIVE[0]:   # inside a module with a deprecated backward hook
                return legacy_backward_hooks.forward(self, args, kwargs)
            return self.forward(*args, **kwargs)
        state = {"args": args, "kwargs": kwargs, "out": None, "called": set()}
        try:
            return self._hooked_call(d, state)
        except Exception:
            # PyTorch's always_call: such forward hooks (global ones first)
            # run when a pre-hook, forward or another hook raised, each at
            # most once, with the output so far (None before forward
            # returned); their own errors are silenced with a warning.
            args, kwargs, out, called = (state["args"], state["kwargs"], state["out"],
                                         state["called"])
            for hid, hook in list(_global_forward_hooks.items()):
                if hid in _global_forward_hooks_always_called and hid not in called:
                    try:
                        res = hook(self, args, out)
                        out = out if res is None else res
                    except Exception as e:  # noqa: BLE001
                        warnings.warn("global module forward hook with ``always_call=True`` "
                                      "raised an exception that was silenced as another error "
                                      f"was raised in forward: {e}", stacklevel=2)
            always = d.get("_forward_hooks_always_called") or ()
            for hid, hook in list(self._forward_hooks.items()):
                if hid in always and hid not in called:
                    try:
                        res = self._run_forward_hook(hid, hook, args, kwargs, out)
                        out = out if res is None else res
                    except Exception as e:  # noqa: BLE001
                        warnings.warn("module forward hook with ``always_call=True`` raised an "
                                      "exception that was silenced as another error was raised "
                                      f"in forward: {e}", stacklevel=2)
            raise

    def _hooked_call(self, d, state):
        """The call with its hooks; ``state`` records the args, the output
        and the always-call hooks run so far, for ``_call_impl``'s error path."""
        args, kwargs = state["args"], state["kwargs"]
        if _global_forward_pre_hooks:
            for hook in list(_global_forward_pre_hooks.values()):
                res = hook(self, args)
                if res is not None:
                    args = state["args"] = res if isinstance(res, tuple) else (res,)
        pre_kw = d.get("_forward_pre_hooks_with_kwargs") or ()
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in pre_kw:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {res}.")
                    args, kwargs = res
                    state["args"], state["kwargs"] = args, kwargs
            else:
                res = hook(self, args)
                if res is not None:
                    args = state["args"] = res if isinstance(res, tuple) else (res,)
        bw_state = None
        if has_backward_hooks(self):
            args, bw_state = wrap_inputs(self, args)
        legacy = legacy_backward_hooks.hooks_of(self)
        if legacy:
            # (the deprecated hooks' modules, and those inside them, that are
            # one node in PyTorch: legacy_backward_hooks.forward)
            _LEGACY_ACTIVE[0] += 1
            try:
                out = state["out"] = legacy_backward_hooks.forward(self, args, kwargs)
            finally:
                _LEGACY_ACTIVE[0] -= 1
        elif _LEGACY_ACTIVE[0]:
            out = state["out"] = legacy_backward_hooks.forward(self, args, kwargs)
        else:
            out = state["out"] = self.forward(*args, **kwargs)
        called = state["called"]
        if _global_forward_hooks:
            for hid, hook in list(_global_forward_hooks.items()):
                if hid in _global_forward_hooks_always_called:
                    called.add(hid)
                res = hook(self, args, out)
                if res is not None:
                    out = state["out"] = res
        always = d.get("_forward_hooks_always_called") or ()
        for hid, hook in list(self._forward_hooks.items()):
            if hid in always:
                called.add(hid)
            res = self._run_forward_hook(hid, hook, args, kwargs, out)
            if res is not None:
                out = state["out"] = res
        if bw_state is not None:
            out = wrap_outputs(bw_state, out)
        if legacy and graph.is_grad_enabled():
            legacy_backward_hooks.register(self, legacy, args, out)
        return out

    def _run_forward_hook(self, hid, hook, args, kwargs, out):
        if hid in (self.__dict__.get("_forward_hooks_with_kwargs") or ()):
            return hook(self, args, kwargs, out)
        return hook(self, args, out)

    @epoch_covered
    def mode_and_tensors(self) -> tuple:
        """``self.training``, the identities of the module's own parameters,
        submodules, buffers and other tensor attributes, and the values of its plain
        Python attributes (a Dropout's ``p``, a user's ``self.scale``) and
        the contents of its list and dict attributes and the states of its
        random generator objects (a draw in forward is a side effect): the
        guard a traced call of this module reports (a trace bakes them in)."""
        d = self.__dict__
        replayed = d.get("_tracec_replayed", ())
        # A tuple holding a list is compared by its contents now (the tuple
        # itself would compare equal to itself after the list changed).
        # A SymScalar: a number a lifted trace reads (tracec.lifted_state),
        # whose own guard checks it.
        attrs = [(k, ReplayedAttr(v is None, _value_ids(v))) if k in replayed else
                 (k, LIFTED) if type(v) is SymScalar else
                 (k, "items", _container_snapshot(v)) if type(v) in _CONTAINERS else
                 (k, "rng", generator_state(v)) if isinstance(v, GENERATORS) else
                 ((k, v) if type(v) is not tuple or deep_immutable(v) else (k, frozen(v)))
                 if type(v) in _PLAIN else (k, "id", id(v))
                 if isinstance(v, Tensor) or type(v) in _FUNCTIONS else
                 (k, "object", id(v), frozen(dict(v.__dict__)))
                 for k, v in d.items()
                 if k[0] != "_" and (type(v) in _PLAIN or isinstance(v, Tensor)
                                     or type(v) in _FUNCTIONS or type(v) is SymScalar
                                     or type(v) in _CONTAINERS or isinstance(v, GENERATORS)
                                     or _config_object(v))]
        # The submodules' identities too (with the parameters': the three
        # parts keep their meaning for lifted_state and attr_replay): a
        # swapped submodule (``self.act = nn.ReLU()``) is called by the next
        # forward, but the guard the old one reported still holds, and the
        # trace would keep calling it.  And the hooks its call runs (the
        # trace ran those it saw): its own and the global ones.
        hooks = _call_hooks(d)
        return (tuple(map(id, d["_parameters"].values()))
                + ((None,) + tuple(map(id, d["_modules"].values())) if d["_modules"] else ())
                + ((None, hooks) if hooks else ()),
                tuple(map(id, d["_buffers"].values())), attrs)

    def _guard_watched(self) -> bool:
        """Whether every change of what ``mode_and_tensors`` reads advances
        the mutation epoch (``tracec.mutation``): the tables are watched and
        the attributes it compares by value are immutable."""
        d = self.__dict__
        return (type(d.get("_parameters")) is WatchedOrderedDict
                and type(d.get("_buffers")) is WatchedOrderedDict
                and type(d.get("_modules")) is WatchedOrderedDict
                and all(type(d[name]) is WatchedHookDict
                        for name in _CALL_HOOK_TABLES if name in d)
                and all(deep_immutable(v) and not isinstance(v, GENERATORS)
                        for k, v in d.items()
                        if k[0] != "_" and (type(v) in _WATCH_CHECKED
                                            or isinstance(v, GENERATORS)
                                            or _config_object(v))))

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False, always_call: bool = False
                              ) -> _RemovableHandle:
        """``hook(module, args, output)`` (``with_kwargs``: ``hook(module,
        args, kwargs, output)``) after ``forward``; a non-None result
        replaces the output.  ``always_call``: also when forward raises."""
        return self._add_hook("_forward_hooks", hook, prepend,
                              ("_forward_hooks_with_kwargs",) * with_kwargs
                              + ("_forward_hooks_always_called",) * always_call)

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> _RemovableHandle:
        """``hook(module, args)`` before ``forward``: a non-None result
        replaces the args (a non-tuple is wrapped); ``with_kwargs``:
        ``hook(module, args, kwargs)`` returning None or ``(args, kwargs)``."""
        return self._add_hook("_forward_pre_hooks", hook, prepend,
                              ("_forward_pre_hooks_with_kwargs",) * with_kwargs)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False
                                    ) -> _RemovableHandle:
        """``hook(module, grad_input, grad_output)`` (tracec.nn.modules.backward_hooks)."""
        self._backward_hook_kind(True)
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False
                                        ) -> _RemovableHandle:
        """``hook(module, grad_output)``; a returned tuple replaces grad_output."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_backward_hook(self, hook: Callable) -> _RemovableHandle:
        """PyTorch's deprecated form: a hook on the output's ``grad_fn``
        (tracec.nn.modules.legacy_backward_hooks)."""
        self._backward_hook_kind(False)
        return self._add_hook("_backward_hooks", hook, False)

    def _backward_hook_kind(self, full: bool) -> None:
        """``_is_full_backward_hook`` as PyTorch keeps it: one kind per module."""
        if self.__dict__.get("_is_full_backward_hook") is (not full):
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self.__dict__["_is_full_backward_hook"] = full

    def _add_hook(self, table: str, hook: Callable, prepend: bool,
                  flags: tuple = ()) -> _RemovableHandle:
        """Put ``hook`` in the hook table ``table`` and mark it in the flag
        tables ``flags`` (dicts of hook ids: ``_forward_hooks_with_kwargs``);
        the handle's ``remove()`` takes it out of all of them, as PyTorch's
        ``extra_dict``.  (The handle is made before any table changes: a
        table that takes no weak reference, a plain dict an old pickle
        left, cannot leave a hook registered that no handle removes.)"""
        hooks = self._hook_table(table)
        marks = [self._hook_table(name) for name in flags]
        h = _RemovableHandle(hooks, extra_dict=marks)
        hooks[h.id] = hook
        if prepend:
            hooks.move_to_end(h.id, last=False)
        for m in marks:
            m[h.id] = True
        return h

    def _hook_table(self, name: str) -> OrderedDict:
        """A hook table created on first use (modules unpickled from older
        versions lack it)."""
        return self.__dict__.setdefault(name, WatchedHookDict())

    def _register_state_dict_hook(self, hook: Callable) -> _RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after the
        module and its children wrote their entries; a non-None result
        replaces the state dict (PyTorch's private hook, used by spectral_norm)."""
        h = _RemovableHandle(self._hook_table("_state_dict_hooks"))
        self._state_dict_hooks[h.id] = hook
        return h

    def _register_load_state_dict_pre_hook(self, hook: Callable,
                                           with_module: bool = False) -> _RemovableHandle:
        """``hook(state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` (``module`` first if ``with_module``)
        runs before this module loads its entries and may rewrite them."""
        h = _RemovableHandle(self._hook_table("_load_state_dict_pre_hooks"))
        self._load_state_dict_pre_hooks[h.id] = (functools.partial(hook, self) if with_module
                                                 else hook)
        return h

    def register_load_state_dict_pre_hook(self, hook: Callable) -> _RemovableHandle:
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Callable) -> _RemovableHandle:
        """``hook(module, incompatible_keys)`` after ``load_state_dict`` loaded
        this module and its children (before strict's error); it may edit
        the keys' lists in place and must return None."""
        return self._add_hook("_load_state_dict_post_hooks", hook, False)

    def register_state_dict_pre_hook(self, hook: Callable) -> _RemovableHandle:
        """``hook(module, prefix, keep_vars)`` before ``state_dict`` writes
        this module's entries."""
        return self._add_hook("_state_dict_pre_hooks", hook, False)

    def register_state_dict_post_hook(self, hook: Callable) -> _RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` after this
        module and its children wrote their entries; unlike the private
        ``_register_state_dict_hook`` it edits in place and must return None."""
        hook._from_public_api = True
        return self._add_hook("_state_dict_hooks", hook, False)

    # --- registration ------------------------------------------------------------

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(self, name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{typename(param)}' object to parameter '{name}' "
                            f"({dt.PUBLIC_NAME[0]}.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' "
                             "as a function of another Tensor, compute the value in "
                             "the forward() method.")
        else:
            self._parameters[name] = _registered(_global_parameter_registration_hooks, self,
                                                 name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(self, name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                            f"({dt.PUBLIC_NAME[0]} Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = _plain(tensor)
        self._buffers[name] = _registered(_global_buffer_registration_hooks, self, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f"module name can't contain \".\", got: {name}")
        if name == "":
            raise KeyError("module name can't be empty string \"\"")
        self._modules[name] = _registered(_global_module_registration_hooks, self, name, module)

    register_module = add_module

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        if name in _LAZY_HOOK_TABLES:
            # PyTorch makes every hook table in __init__; libraries read
            # them (captum's DeepLift: ``len(module._backward_hooks)``)
            return self._hook_table(name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        EPOCH[0] += 1     # compiled calls re-check module guards (tracec.mutation)
        d = self.__dict__

        def remove_from(*tables):
            for t in tables:
                if name in t:
                    if isinstance(t, dict):
                        del t[name]
                    else:
                        t.discard(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as parameter '{name}' "
                                f"({dt.PUBLIC_NAME[0]}.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = _registered(_global_module_registration_hooks, self, name, value)
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as child module '{name}' "
                                f"({dt.PUBLIC_NAME[0]}.nn.Module or None expected)")
            modules[name] = _registered(_global_module_registration_hooks, self, name, value)
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer) or (buffers is not None and name in buffers):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{typename(value)}' as buffer '{name}' "
                                f"({dt.PUBLIC_NAME[0]}.Tensor or None expected)")
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
                held = buffers.get(name)
                if BUFFER_WRITES and isinstance(value, Tensor) and isinstance(held, Tensor) \
                        and value is not held:
                    for hook in BUFFER_WRITES:
                        hook(self, name, held)
            remove_from(d, self._parameters, self._modules, self._non_persistent_buffers_set)
            self.register_buffer(name, value, persistent)
            return
        if ATTR_WRITES and (value is None or isinstance(value, Tensor)
                            or _tensor_tuple(value)) and \
                d.get(name, _NO_ATTR) is not value:
            for hook in ATTR_WRITES:
                hook(self, name, value)
        elif PLAIN_WRITES and type(value) in _SCALARS:
            for hook in PLAIN_WRITES:
                hook(self, name, d.get(name, _NO_ATTR))
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        EPOCH[0] += 1
        d = self.__dict__
        if name in d["_parameters"]:
            del d["_parameters"][name]
        elif name in d["_buffers"]:
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d["_modules"]:
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        """Also a module PyTorch pickled (``torch.load(f, weights_only=False)``
        of a whole model): its plain ``_parameters`` / ``_buffers`` dicts
        become watched ones (``tracec.mutation``), tables an older pickle
        lacks are made, and its empty hook tables that decide what a call
        runs become watched ones (a hook registered later is then seen by
        compiled calls' guards at no cost); a table holding hooks is kept
        as it is (a handle unpickled with it removes from that one), and
        the module's guard is checked at every compiled call instead."""
        EPOCH[0] += 1
        self.__dict__.update(state)
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if type(d.get(table)) is not WatchedOrderedDict:
                d[table] = WatchedOrderedDict(d.get(table) or ())
        d.setdefault("_non_persistent_buffers_set", set())
        for table in _CALL_HOOK_TABLES:
            t = d.get(table, ())
            if not t and type(t) is not WatchedHookDict and \
                    (table in ("_forward_hooks", "_forward_pre_hooks") or table in d):
                d[table] = WatchedHookDict()

    def get_submodule(self, target: str) -> "Module":
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target`` (its parent must
        exist; with ``strict`` the attribute too), as PyTorch's."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # --- traversal -----------------------------------------------------------------

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name,
                                            remove_duplicate)

    def modules(self, remove_duplicate: bool = True) -> Iterator["Module"]:
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                if recurse else [(prefix, self)])
        for mod_prefix, mod in mods:
            for k, v in get(mod):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- modes and gradients ---------------------------------------------------------

    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for hook in MODE_WRITES:
            hook(self, mode)
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none:
                p.grad = None  # unread, as in Optimizer.zero_grad
            elif p.grad is None:
                continue
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad = False
                with graph.no_grad():
                    g.zero_()

    # --- state dicts -----------------------------------------------------------------

    def get_extra_state(self) -> Any:
        """What a subclass that overrides it saves in ``state_dict`` under
        ``prefix + "_extra_state"`` (and ``set_extra_state`` gets back)."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug.")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug.")

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        if args:
            # PyTorch's deprecated positional (destination, prefix, keep_vars)
            warnings.warn("Positional args are being deprecated, use kwargs instead. Refer to "
                          "https://pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.state_dict for details.", FutureWarning,
                          stacklevel=2)
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs) -> None:
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        from tracec import __future__ as future
        from tracec.utils.swap import swap_tensors
        swap = future.get_swap_module_params_on_conversion()
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  f"{dt.PUBLIC_NAME[0]}.Tensor or Tensor-like object from "
                                  f"checkpoint but received {type(value)}")
                continue
            if param.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
                value = value.reshape(())
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{_size(value.shape)} from checkpoint, the shape in current "
                                  f"model is {_size(param.shape)}.")
                continue
            if param.is_meta and not value.is_meta and not assign:
                warnings.warn(
                    f"for {key}: copying from a non-meta parameter in the checkpoint to a meta "
                    "parameter in the current model, which is a no-op. (Did you mean to "
                    "pass `assign=True` to assign items in the state dictionary to their "
                    "corresponding key in the module instead of copying them in place?)",
                    stacklevel=2)
            try:
                with graph.no_grad():
                    if swap:
                        # PyTorch's swap path: the parameter object stays,
                        # its contents become module_load's result
                        new = param.module_load(value, assign=assign)
                        if new is value or new is param:
                            raise RuntimeError(
                                "module_load returned one of self or other, please .detach() "
                                "the result if returning one of the inputs in module_load")
                        if isinstance(param, Parameter):
                            if not isinstance(new, Parameter):
                                new = Parameter(new, requires_grad=param.requires_grad)
                            else:
                                new.requires_grad_(param.requires_grad)
                        swap_tensors(param, new)
                        del new
                    elif assign:
                        if isinstance(param, Parameter):
                            value = Parameter(value, requires_grad=param.requires_grad)
                        setattr(self, name, value)
                    else:
                        param.copy_(value)
            except Exception as ex:  # noqa: BLE001 - reported like PyTorch does
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions '
                                  f"in the model are {_size(param.shape)} and whose dimensions "
                                  f"in the checkpoint are {_size(value.shape)}, an exception "
                                  f"occurred : {ex.args}.")
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    parts = key[len(prefix):].split(".", 1)
                    if len(parts) > 1:
                        if parts[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif parts[0] not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False):
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, local_sd, prefix=""):
            local_meta = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_meta["assign_to_params_buffers"] = True
            for hook in module.__dict__.get("_load_state_dict_pre_hooks", {}).values():
                hook(local_sd, prefix, local_meta, True, missing, unexpected, errors)
            module._load_from_state_dict(local_sd, prefix, local_meta, True, missing,
                                         unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    cp = prefix + name + "."
                    load(child, {k: v for k, v in local_sd.items() if k.startswith(cp)}, cp)
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in module.__dict__.get("_load_state_dict_post_hooks", {}).values():
                if hook(module, incompatible) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # --- conversion --------------------------------------------------------------------

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> "Module":
        """Apply ``fn`` to every parameter (in place of its data, so the
        Parameter objects stay the same), gradient and buffer (of the
        submodules too with ``recurse``).  ``torch.__future__``'s switches
        change how a parameter takes the result, as in PyTorch: swapped into
        the same object (``swap_tensors``), or a new Parameter (overwrite)."""
        from tracec import __future__ as future
        from tracec.utils.swap import swap_tensors
        if recurse:
            for m in self.children():
                m._apply(fn)
        swap = future.get_swap_module_params_on_conversion()
        overwrite = future.get_overwrite_module_params_on_conversion()
        with graph.no_grad():
            for key, p in list(self._parameters.items()):
                if p is None:
                    continue
                new = fn(p)
                grad = p.grad
                if swap:
                    p.grad = None
                    if new is not p:
                        swap_tensors(p, Parameter(new, requires_grad=p.requires_grad))
                    if grad is not None:
                        g = fn(grad)
                        if g is not grad:
                            swap_tensors(grad, g.requires_grad_(grad.requires_grad))
                        p.grad = grad
                    continue
                if overwrite and new is not p:
                    out = Parameter(new, requires_grad=p.requires_grad)
                    self._parameters[key] = out
                    if grad is not None:
                        out.grad = fn(grad).requires_grad_(grad.requires_grad)
                    continue
                if new is not p:
                    p.data = new
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        p.grad.data = g
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def _tensors(self):
        """Every parameter and buffer of this module and its children."""
        for m in self.modules():
            yield from (p for p in m._parameters.values() if p is not None)
            yield from (b for b in m._buffers.values() if b is not None)

    def to_empty(self, *, device, recurse: bool = True) -> "Module":
        """Parameters and buffers moved to ``device`` without copying their
        values (uninitialized: zeros here), as after building on "meta"."""
        from tracec import creation
        if recurse:
            return self._apply(lambda t: creation.empty_like(t, device=device))
        with graph.no_grad():
            for p in self._parameters.values():
                if p is not None:
                    p.data = creation.empty_like(p, device=device)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = creation.empty_like(b, device=device)
        return self

    def share_memory(self) -> "Module":
        """Move parameters, gradients and buffers into shared memory
        (``Tensor.share_memory_``) for processes forked afterwards."""
        return self._apply(lambda t: t.share_memory_())

    def to(self, *args, **kwargs) -> "Module":
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, dt.DType):
                dtype = a
            elif isinstance(a, (str, _device)):
                dev = a
            elif isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, bool) or a is None:
                continue  # non_blocking given positionally; None: no device / dtype change
            else:
                raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
        if dev is not None:
            kind = to_device(dev).type
            if kind == "meta" or any(t.is_meta for t in self._tensors()):
                self._apply(lambda t: t.to(kind))    # to meta, or the error out of it
        if memory_format is not None:    # PyTorch: it applies to 4-D (5-D) tensors only
            from tracec.tensor_meta import channels_last, channels_last_3d
            rank = {id(channels_last): 4, id(channels_last_3d): 5}.get(id(memory_format))
            if rank is not None:
                self._apply(lambda t: t.to(memory_format=memory_format)
                            if t.ndim == rank else t)
        if dtype is None:
            return self
        dtype = dt.to_dtype(dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")
        if dtype.is_complex:
            warnings.warn(
                "Complex modules are a new feature under active development whose design may "
                "change, and some modules might not work as expected when using complex tensors "
                "as parameters or buffers. Please file an issue at https://github.com/pytorch/"
                "pytorch/issues/new?template=bug-report.yml if a complex module does not work as "
                "expected.", stacklevel=2)
        return self._apply(lambda t: t.to(dtype)
                           if t.dtype.is_floating_point or t.dtype.is_complex else t)

    def type(self, dst_type) -> "Module":
        d = dt.to_dtype(dst_type)
        return self._apply(lambda t: t.to(d))

    def float(self) -> "Module":
        return self._apply(lambda t: t.to(dt.float32) if t.dtype.is_floating_point else t)

    def double(self) -> "Module":
        return self._apply(lambda t: t.to(dt.float64) if t.dtype.is_floating_point else t)

    def half(self) -> "Module":
        return self._apply(lambda t: t.to(dt.float16) if t.dtype.is_floating_point else t)

    def bfloat16(self) -> "Module":
        return self._apply(lambda t: t.to(dt.bfloat16) if t.dtype.is_floating_point else t)

    def cpu(self) -> "Module":
        return self

    def cuda(self, device=None) -> "Module":
        to_device("cuda")
        return self

    # --- printing --------------------------------------------------------------------

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


def _size(shape) -> str:
    """A shape as PyTorch's messages print it: ``torch.Size([2, 3])``."""
    return f"torch.Size([{', '.join(str(s) for s in shape)}])"


def _plain(t: Tensor) -> Tensor:
    out = Tensor._make(t._data, t.dtype)
    out._vbox = t._vbox
    if RECORDERS:   # a traced call: the alias holds t's recorded value
        _tell_recorders(out, t, "register_buffer")
    return out
