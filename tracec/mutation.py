"""A global mutation epoch: the Python state that a compiled call's costliest
guards read, watched where it is changed instead of re-read at every call.

A compiled call re-checks every guard of its trace (``docs/guards.md``).
Two kinds are costly on a real model: each module's ``mode_and_tensors``
(one per submodule called) and the optimizer's per-parameter guard (which
tensors it optimizes and which state tensors each has).  They read only
containers that tracec itself makes and changes: a module's ``__dict__``
(written through ``Module.__setattr__`` / ``__delattr__``), its
``_parameters`` and ``_buffers`` tables, an optimizer's ``state`` and its
groups' ``params`` lists.  Those are the ``Watched*`` types below (or are
written through hooks that call ``bump()``), so every change of them
advances ``EPOCH[0]``.

Invariant: while ``EPOCH[0]`` keeps the value it had when a guard last
held, and every container that guard reads is a watched one
(``guard_watched(owner)``), the guard still holds.  ``Entry.failed_guard``
skips such guards on an unchanged epoch; any change anywhere makes the next
call check them all again.  Writes that go around the hooks
(``module.__dict__[k] = v``, ``object.__setattr__(module, k, v)``) are not
seen until the next epoch change: docs/guards.md lists this limit.
"""
from __future__ import annotations

import random as _pyrandom
from collections import OrderedDict, defaultdict

import numpy as np

__all__ = ["EPOCH", "bump", "WatchedList", "WatchedDict", "WatchedOrderedDict",
           "WatchedHookDict", "WatchedState", "Ident", "deep_immutable", "frozen",
           "epoch_covered", "guard_watched"]

#: Advanced by every change of a watched container (never goes back).
EPOCH = [0]


def bump() -> None:
    EPOCH[0] += 1


def _bumping(base, name):
    method = getattr(base, name)

    def wrapper(self, *args, **kwargs):
        EPOCH[0] += 1
        return method(self, *args, **kwargs)
    wrapper.__name__ = name
    wrapper.__qualname__ = f"Watched.{name}"
    return wrapper


_LIST_MUTATORS = ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend",
                  "insert", "pop", "remove", "clear", "sort", "reverse")
_DICT_MUTATORS = ("__setitem__", "__delitem__", "__ior__", "pop", "popitem", "clear",
                  "update", "setdefault")


class WatchedList(list):
    """A list whose every change advances ``EPOCH``."""
    __slots__ = ()


class WatchedDict(dict):
    """A dict whose every change advances ``EPOCH``."""
    __slots__ = ()


class WatchedOrderedDict(OrderedDict):
    """An OrderedDict whose every change (reordering too) advances ``EPOCH``."""


class WatchedHookDict(WatchedOrderedDict):
    """A hook table (a module's ``_forward_hooks``, the global module
    hooks), watched as ``WatchedOrderedDict`` is: a hook registered,
    removed, reordered or replaced through any path (``register_*_hook``,
    ``handle.remove()``, ``del table[k]``, ``table.clear()``) advances
    ``EPOCH``, so the module guards that hold the hooks a trace ran are
    checked again.

    PyTorch's tables are ``OrderedDict``s, and programs look at them:
    torch.nn.utils.prune's tutorial prints ``_forward_pre_hooks.__class__
    .__name__`` and the table itself.  So its ``__name__`` is
    ``OrderedDict`` (what ``repr`` prints too); pickles name it by its
    qualified name, and ``torch.save``'s PyTorch format writes it as an
    ``OrderedDict`` (tracec.torch_save)."""


WatchedHookDict.__qualname__ = "WatchedHookDict"
WatchedHookDict.__name__ = "OrderedDict"


class WatchedState(defaultdict):
    """An optimizer's ``state``: ``param -> WatchedDict``, watched itself."""

    def __init__(self, items=()):
        super().__init__(WatchedDict)
        for k, v in dict(items).items():
            self[k] = WatchedDict(v) if type(v) is dict else v

    def __missing__(self, key):
        EPOCH[0] += 1
        value = self[key] = WatchedDict()
        return value

    def __reduce__(self):
        return (WatchedState, (dict(self),))

    def __repr__(self):
        # what PyTorch's optimizer.state (a defaultdict(dict)) prints
        return f"defaultdict(<class 'dict'>, {dict.__repr__(self)})"

    def __copy__(self):
        return WatchedState(self)


for _name in _LIST_MUTATORS:
    setattr(WatchedList, _name, _bumping(list, _name))
for _cls, _base in ((WatchedDict, dict), (WatchedOrderedDict, OrderedDict),
                    (WatchedState, defaultdict)):
    for _name in _DICT_MUTATORS + (("move_to_end",) if _base is OrderedDict else ()):
        setattr(_cls, _name, _bumping(_base, _name))


class Ident:
    """Compares equal only to an ``Ident`` of the same object (a guard value
    that must not match an equal-looking replacement), and keeps the object
    alive so that its identity stays unique."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is Ident and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def __repr__(self):
        return f"<{type(self.obj).__name__} at {id(self.obj):#x}>"


_IMMUTABLE = (bool, int, float, complex, str, bytes, type(None))


def deep_immutable(v) -> bool:
    """True for scalars and tuples of them (values a guard compares by value
    that cannot change without the owner's attribute being reassigned)."""
    if type(v) in _IMMUTABLE:
        return True
    return type(v) is tuple and all(deep_immutable(x) for x in v)


def frozen(v, depth: int = 4):
    """A snapshot of ``v`` that compares equal to a later one only if the
    contents are equal: tuples, lists and dicts by their items (to
    ``depth``), scalars by value, anything else by identity."""
    t = type(v)
    if t in _IMMUTABLE:
        return v
    if depth > 0 and t in (tuple, list):
        return (t.__name__, tuple(frozen(x, depth - 1) for x in v))
    if depth > 0 and t is dict:
        return ("dict", tuple((k, frozen(x, depth - 1)) for k, x in v.items()))
    return ("id", id(v))


#: Random generator objects a program keeps as state (a global, a plain
#: object's or a module's attribute): guards compare them by their state,
#: so a draw inside a traced call is a change the call made.
GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
              _pyrandom.Random)


def _frozen_state(v):
    """A generator state (nested dicts, lists, arrays) as comparable tuples."""
    if isinstance(v, dict):
        return tuple((k, _frozen_state(v[k])) for k in sorted(v))
    if isinstance(v, (list, tuple)):
        return tuple(_frozen_state(e) for e in v)
    if isinstance(v, np.ndarray):
        return v.tobytes()
    return v


def generator_state(x):
    """The state of a ``GENERATORS`` object, comparable with ``==``."""
    if isinstance(x, np.random.Generator):
        return _frozen_state(x.bit_generator.state)
    if isinstance(x, np.random.BitGenerator):
        return _frozen_state(x.state)
    if isinstance(x, np.random.RandomState):
        return _frozen_state(x.get_state())
    return x.getstate()


def epoch_covered(method=None, *, watched: str = "_guard_watched"):
    """Mark a guard method (``Module.mode_and_tensors``): its owner's
    method named ``watched`` (``_guard_watched()`` unless given) says
    whether the epoch covers it right now.  ``@epoch_covered`` or
    ``@epoch_covered(watched="_other_predicate")``."""
    def mark(m):
        m._tracec_epoch_covered = watched
        return m
    return mark if method is None else mark(method)


def guard_watched(snap) -> bool | None:
    """None if guard ``snap`` is not epoch-covered; else whether every
    container it reads is watched now (then an unchanged epoch means it
    still holds).  A guard object (not a method) is covered when its class
    sets ``_tracec_epoch_covered`` to the name of its own predicate."""
    func = getattr(snap, "__func__", None)
    if func is None:
        name = getattr(type(snap), "_tracec_epoch_covered", None)
        return None if not name else bool(getattr(snap, name)())
    name = getattr(func, "_tracec_epoch_covered", None)
    if not name:
        return None
    return bool(getattr(snap.__self__, name)())
