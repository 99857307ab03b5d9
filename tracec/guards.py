"""What a traced function can see besides its arguments, as one guard.

A compiled function reads Python state it was not given: closure cells,
module globals, default arguments, the attributes of ``self`` and of plain
objects passed in.  The trace bakes in what it read there: Python numbers
and strings become constants, branches are specialized, tensors are read
from the very objects seen while tracing.  ``EnvGuard`` snapshots all of it
(bounded, see ``_Snapshot``) before the traced call; a later call reuses the
trace only while the snapshot is equal, so a changed global, a rebound
closure tensor or a changed attribute retraces instead of being silently
stale.  The same snapshot taken after the traced call tells whether the
call itself changed that state (``history.append(loss)``, ``self.n += 1``):
a side effect that compiled calls would not repeat.

Invariant: every value a snapshot leaves out (Python modules, classes,
functions' bodies, containers past the budget) is listed in the audit
table (docs/guards.md) as a documented limit.
"""
from __future__ import annotations

import dataclasses
import dis
import functools
import inspect
import random as _pyrandom
import sys
import types

import numpy as np

from tracec.mutation import EPOCH, GENERATORS, generator_state
from tracec.nn.modules.module import Module
from tracec.optim.optimizer import Optimizer
from tracec.tensor import Tensor

__all__ = ["EnvGuard", "GlobalRNGs"]

#: Nodes one root's snapshot visits at most; past it a container is guarded
#: by identity and length only (a data set kept in a global list).
BUDGET = 256
#: Containment depth followed from a root.
DEPTH = 4
#: NumPy arrays up to this many elements are guarded by content too.
SMALL_ARRAY = 4096
_SCALARS = (bool, int, float, complex, str, bytes, type(None), range, slice)
_OPAQUE = (type, types.ModuleType, types.BuiltinFunctionType, types.MethodWrapperType,
           types.WrapperDescriptorType, types.MethodDescriptorType)
_MISSING = ("<unbound>",)


#: Random generator objects a program keeps as state (not the global
#: ones: GlobalRNGs watches those).
_GENERATORS = GENERATORS
_generator_state = generator_state


class _Snapshot:
    """One snapshot walk; ``tensors`` collects the tensors it saw (kept
    alive by the guard, so the identities it compares stay unique)."""

    def __init__(self):
        self.budget = BUDGET
        self.tensors: list = []

    def value(self, x, depth: int):
        self.budget -= 1
        tx = type(x)
        if tx in _SCALARS:
            return (tx, x)
        if isinstance(x, Tensor):
            self.tensors.append(x)
            return ("T", id(x))
        if isinstance(x, (np.number, np.bool_)):
            return (tx, x.item())
        if isinstance(x, np.ndarray):
            content = x.tobytes() if x.size <= SMALL_ARRAY else None
            return ("A", id(x), x.shape, x.dtype.str, content)
        if isinstance(x, _GENERATORS):
            # a generator object's draws are Python side effects too: its
            # state tells whether a traced call drew from it (a noise array
            # from np.random.default_rng() that the trace would bake in)
            return ("R", id(x), _generator_state(x))
        if isinstance(x, _OPAQUE) or depth <= 0 or getattr(tx, "_tracec_opaque", False):
            return ("O", id(x))
        if isinstance(x, (types.FunctionType, types.MethodType)):
            return ("F", id(getattr(x, "__func__", x)), id(getattr(x, "__self__", None)))
        if isinstance(x, Module):
            # Submodules guard themselves when called (Module.mode_and_tensors);
            # here: the module's own Python attributes and tensor attributes.
            return ("M", id(x), x.mode_and_tensors())
        if isinstance(x, Optimizer):
            return ("P", id(x))  # guards itself when it steps
        if isinstance(x, (tuple, list, dict, set, frozenset)):
            if len(x) > self.budget:
                return ("big", id(x), len(x))
            if isinstance(x, dict):
                return (tx, tuple((k if type(k) in _SCALARS else ("O", id(k)),
                                   self.value(v, depth - 1)) for k, v in list(x.items())))
            if isinstance(x, (set, frozenset)):
                return (tx, id(x), len(x))
            return (tx, tuple(self.value(v, depth - 1) for v in x))
        if dataclasses.is_dataclass(x) or hasattr(x, "__dict__"):
            d = getattr(x, "__dict__", None)
            if d is None:
                return ("O", id(x))
            if len(d) > self.budget:
                return ("big", id(x), len(d))
            return ("P", id(x), tuple((k, self.value(v, depth - 1))
                                      for k, v in list(d.items())))
        return ("O", id(x))


#: The instructions that read or write a module global by name.
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL",
                         "STORE_NAME", "DELETE_NAME"})


def _code_names(code, out: set) -> set:
    """The global names ``code`` (and the functions, lambdas and
    comprehensions inside it) reads or writes.  Not ``co_names``: that also
    holds every attribute name, so ``p.data.add_(...)`` made a global
    ``data`` (a script's loop variable, passed as this very argument) a
    root, and each new batch then retraced as "an argument that was also
    read as state"."""
    out.update(_global_names(code))
    return out


#: Their opcodes, for ``_scan``; LOAD_GLOBAL's name index is ``arg >> 1``
#: from Python 3.11 (its low bit says whether NULL is pushed).
_GLOBAL_OPCODES = {dis.opmap[n]: n for n in _GLOBAL_OPS if n in dis.opmap}
_FAST_SCAN = sys.version_info[:2] in ((3, 11), (3, 12)) and hasattr(dis, "_unpack_opargs")


def _dis_names(code) -> set:
    return {ins.argval for ins in dis.get_instructions(code) if ins.opname in _GLOBAL_OPS}


def _scan(code) -> set:
    """``_dis_names(code)`` from the raw instructions (``dis`` also finds
    jump labels, line starts and every argument's value: ~0.3 ms a function,
    paid for each function a first trace reads).  Only on the Python
    versions whose encoding it follows (a test compares the two on every
    code object of tracec and the standard library loaded)."""
    names = code.co_names
    out = set()
    for _, op, arg in dis._unpack_opargs(code.co_code):
        kind = _GLOBAL_OPCODES.get(op)
        if kind is not None:
            out.add(names[arg >> 1 if kind == "LOAD_GLOBAL" else arg])
    return out


@functools.lru_cache(maxsize=4096)
def _global_names(code) -> frozenset:
    names = _scan(code) if _FAST_SCAN else _dis_names(code)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return frozenset(names)


_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR"})


@functools.lru_cache(maxsize=4096)
def _module_attrs(code) -> frozenset:
    """``(global name, attribute)`` for each ``name.attr`` that ``code``
    (and the code inside it) loads, calls or stores: a global read as a
    module's attribute (``import config; config.lr``, ``helpers.scale(x)``)."""
    out, prev = set(), None
    for ins in dis.get_instructions(code):
        if ins.opname in _ATTR_OPS and prev is not None and prev.opname == "LOAD_GLOBAL":
            out.add((prev.argval, ins.argval))
        prev = ins
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _module_attrs(c)
    return frozenset(out)


def _program_module(mod) -> bool:
    """A module of the program (not of tracec, the standard library or an
    installed package): its attributes are the program's state."""
    name = (getattr(mod, "__name__", None) or "").split(".")[0]
    path = getattr(mod, "__file__", None) or ""
    return bool(path) and name not in sys.stdlib_module_names and \
        name not in ("tracec", "torch", "numpy") and "-packages" not in path


def _module_attr_roots(code, name, mod, out: list, seen: set, depth: int) -> None:
    """Roots for the attributes of the program's module ``mod`` (the global
    ``name``) that ``code`` names as ``name.attr``, and what the functions
    among them read."""
    if not _program_module(mod):
        return
    d = mod.__dict__
    for g, attr in sorted(_module_attrs(code)):
        if g != name or ("global", id(d), attr) in seen or attr not in d:
            continue
        seen.add(("global", id(d), attr))
        v = d[attr]
        if isinstance(v, type):
            _class_roots(v, out, seen)
            continue
        if isinstance(v, types.ModuleType):
            continue
        out.append((f"global '{attr}' of {mod.__name__} (read as {name}.{attr})",
                    functools.partial(d.get, attr, _MISSING)))
        if isinstance(v, types.FunctionType):
            _roots(v, [], out, seen, depth - 1)
        elif isinstance(v, Module):
            _forward_generators(v, out, seen)


def _roots(fn, objects, out: list, seen: set, depth: int = 3) -> list:
    """``(label, getter)`` for what ``fn`` can read: its closure cells,
    the globals its code names, its defaults, and (recursively, to
    ``depth``) the same for the Python functions among them."""
    fn = inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn
    while isinstance(fn, functools.partial):
        # the bound arguments (``partial(step, cfg=cfg)``, a number in
        # ``p.keywords``) are read by every call as a closure's cells are
        objects = objects + [(f"arguments bound by functools.partial({fn.func!r})",
                              fn.args), (f"keywords bound by functools.partial({fn.func!r})",
                                         fn.keywords)]
        fn = fn.func
    if isinstance(fn, types.MethodType):
        objects = objects + [("self", fn.__self__)]
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType) or id(fn) in seen or depth <= 0:
        for label, obj in objects:
            out.append((label, (lambda o=obj: o)))
        return out
    seen.add(id(fn))
    code = fn.__code__
    g = fn.__globals__
    for label, obj in objects:
        out.append((label, (lambda o=obj: o)))
    for _, obj in objects:
        if isinstance(obj, Module):
            _forward_generators(obj, out, seen)
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        out.append((f"closure variable '{name}' of {fn.__qualname__}",
                    (lambda c=cell: _cell(c))))
        v = _cell(cell)
        if isinstance(v, types.FunctionType):
            _roots(v, [], out, seen, depth - 1)
        elif isinstance(v, Module):
            _forward_generators(v, out, seen)
    for name in sorted(_code_names(code, set())):
        if name in g:
            v = g[name]
            if isinstance(v, type):
                _class_roots(v, out, seen)   # its data attributes (a counter)
                continue
            if isinstance(v, types.ModuleType):
                # imported modules: code, but the program's own modules'
                # attributes it names (``config.lr``) are state
                _module_attr_roots(code, name, v, out, seen, depth)
                continue
            out.append((f"global '{name}' of {fn.__module__}",
                        functools.partial(g.get, name, _MISSING)))
            if isinstance(v, types.FunctionType):
                _roots(v, [], out, seen, depth - 1)
            elif isinstance(v, Module):
                _forward_generators(v, out, seen)
    if fn.__defaults__ or fn.__kwdefaults__:
        out.append((f"default arguments of {fn.__qualname__}",
                    (lambda f=fn: (f.__defaults__, f.__kwdefaults__))))
    return out


def _forward_generators(module, out: list, seen: set) -> None:
    """Roots for what the modules of ``module`` read through their code: a
    compiled step calling the module runs it, which ``_roots`` does not walk
    (a module guards its own attributes when called).

    - The random generator objects (``_GENERATORS``) that the ``forward`` of
      any of them names as globals: a draw would otherwise be baked in.
    - For a module of a class of the program's own (not tracec's), every
      global that its ``forward`` and the methods ``forward`` reaches by
      name (``self.reparameterize(...)``, ``self.helper`` and theirs, see
      ``_reached_methods``) load or store: a global list a helper pops
      (``eps = EPS.pop(0)``) would otherwise be read once, at the trace, and
      its first element reused by every compiled call."""
    for name, m in module.named_modules():
        cls = type(m)
        _class_roots(cls, out, seen)
        if m is not module and ("submodule", id(m)) not in seen and \
                not (cls.__module__ or "").startswith("tracec"):
            # A submodule of the program's class as a root of its own: a
            # number its forward counts (``self.step += 1`` in a model that
            # a compiled step calls through torch.compile's wrapper, or in a
            # block) is a change the call made, lifted by the next trace,
            # not a change of its guard at every call (a trace per call).
            seen.add(("submodule", id(m)))
            out.append((f"submodule '{name}' of {type(module).__qualname__}",
                        (lambda o=m: o)))
        f = getattr(cls, "forward", None)
        if not isinstance(f, types.FunctionType) or ("forward", id(f)) in seen:
            continue
        seen.add(("forward", id(f)))
        g = f.__globals__
        if not _is_tracec(f):
            for method in _reached_methods(cls, f):
                _global_roots(method, out, seen)
            continue
        for name in sorted(_code_names(f.__code__, set())):
            if isinstance(g.get(name), _GENERATORS):
                out.append((f"global '{name}' of {f.__module__} (read by "
                            f"{cls.__qualname__}.forward)",
                            functools.partial(g.get, name, _MISSING)))


def _is_tracec(f) -> bool:
    return (f.__module__ or "").split(".")[0] == "tracec"


def _reached_methods(cls, forward) -> list:
    """``forward`` and the functions of ``cls`` (of the program's classes in
    its MRO) whose names it and they mention (``co_names``: attribute names
    too, so ``self.helper()`` reaches ``helper``)."""
    found, todo = [], [forward]
    while todo:
        f = todo.pop()
        if f in found:
            continue
        found.append(f)
        for name in f.__code__.co_names:
            v = inspect.getattr_static(cls, name, None)
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            if isinstance(v, types.FunctionType) and not _is_tracec(v) and v not in found:
                todo.append(v)
    return found


def _global_roots(f, out: list, seen: set) -> None:
    """Roots for the globals method ``f`` loads or stores (row 9's rule for
    the functions a compiled function calls by name), once each."""
    g = f.__globals__
    for name in sorted(_code_names(f.__code__, set())):
        if name not in g or ("global", id(g), name) in seen:
            continue
        seen.add(("global", id(g), name))
        v = g[name]
        if isinstance(v, type):
            _class_roots(v, out, seen)   # its data attributes (a counter)
            continue
        if isinstance(v, types.ModuleType):
            _module_attr_roots(f.__code__, name, v, out, seen, 2)
            continue  # imported modules: code, but see _module_attr_roots
        out.append((f"global '{name}' of {f.__module__} (read by {f.__qualname__})",
                    functools.partial(g.get, name, _MISSING)))
        if isinstance(v, types.FunctionType):
            _roots(v, [], out, seen, 2)
        elif isinstance(v, Module):
            _forward_generators(v, out, seen)


class ClassData:
    """A class of the program as a root (``_class_roots``): its snapshot is
    the class's own data attributes (``step = 0`` read and counted as
    ``C.step += 1`` / ``type(self).step += 1`` in ``forward``), shaped as a
    plain object's (``("P", id, items)``), so a number the call changes is
    lifted as an attribute's (``lifted_state.resolve`` unwraps ``cls``)."""

    __slots__ = ("cls",)

    def __init__(self, cls):
        self.cls = cls


#: The class attribute values ``ClassData`` snapshots: numbers, strings,
#: containers, tensors and arrays (not a class-level logger or lock, whose
#: internals change as the program runs).
_CLASS_DATA = (bool, int, float, complex, str, bytes, type(None), tuple, list, dict, set,
               Tensor, np.ndarray, np.number)


def _class_data_items(cls) -> list:
    """The data attributes in ``cls.__dict__`` (``_CLASS_DATA``), not
    dunders."""
    return [(k, v) for k, v in list(vars(cls).items())
            if not (k.startswith("__") and k.endswith("__")) and isinstance(v, _CLASS_DATA)]


def _class_value(x, s) -> tuple:
    cls = x.cls
    return ("P", id(cls), tuple((k, s.value(v, DEPTH - 1)) for k, v in _class_data_items(cls)))


def _program_class(cls) -> bool:
    top = (getattr(cls, "__module__", None) or "builtins").split(".")[0]
    return top not in sys.stdlib_module_names and top not in ("builtins", "tracec", "numpy",
                                                               "torch", "xdsl")


def _class_roots(cls, out: list, seen: set) -> None:
    """Roots for the data attributes of the program's classes in ``cls``'s
    MRO, once each: a class attribute a ``forward`` reads or counts would
    otherwise be a constant of the trace."""
    for c in getattr(cls, "__mro__", ()):
        if ("class", id(c)) in seen or not _program_class(c) or not _class_data_items(c):
            continue
        seen.add(("class", id(c)))
        out.append((f"class attributes of {c.__qualname__}",
                    (lambda d=ClassData(c): d)))


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:   # an empty cell (assigned later in the enclosing scope)
        return _MISSING


class EnvGuard:
    """The Python state ``fn`` can see (see the module docstring).

    ``objects``: further ``(label, object)`` roots, e.g. the plain objects
    passed as arguments, whose attributes the function may read."""

    def __init__(self, fn, objects=()):
        if isinstance(fn, Module) and isinstance(getattr(type(fn), "forward", None),
                                                 types.FunctionType):
            # tracec.compile(model): what its forward reads (the module
            # itself guards its attributes when called).
            fn = types.MethodType(type(fn).forward, fn)
        self.roots = _roots(fn, list(objects), [], set())
        self.tensors: list = []
        self.kept: list | None = None   # the first snapshot's tensors, kept alive
        #: ``(value, epoch or None, ((getter, object or _NO, its type, its
        #: value), ...))``: the root objects seen when ``holds(value)`` last
        #: found it held (the epoch then, where a module's root depends on it).
        self._memo = None

    def __call__(self):
        return self.snapshot()

    def holds(self, value) -> bool:
        """``self() == value``, cheaper: a root whose snapshot the object's
        identity decides (a scalar, a tensor, an optimizer, an opaque object,
        a function; a module whose guard the mutation epoch covers, while
        the epoch stands where it stood) is the object seen when this last
        held, by identity and type; other roots are snapshotted again."""
        memo = self._memo
        if memo is not None and memo[0] is value and (memo[1] is None or memo[1] == EPOCH[0]):
            s = None
            for get, obj, tp, v in memo[2]:
                x = get()
                if x is obj and type(x) is tp:
                    continue
                if s is None:
                    s = _Snapshot()
                s.budget = BUDGET
                if s.value(x, DEPTH) != v:
                    return False
            return True
        epoch = EPOCH[0]
        objs = [get() for _, get in self.roots]
        if self._values(objs) != value:
            return False
        marks = [_by_identity(o, v) for o, v in zip(objs, value)]
        self._memo = (value, epoch if any(m[2] for m in marks) else None,
                      tuple((get, *m[:2], v) for (_, get), m, v in zip(self.roots, marks, value)))
        return True

    def snapshot(self) -> tuple:
        return self._values([get() for _, get in self.roots])

    def _values(self, objs) -> tuple:
        s = _Snapshot()
        out = []
        for x in objs:
            s.budget = BUDGET
            out.append(_class_value(x, s) if type(x) is ClassData else s.value(x, DEPTH))
        self.tensors = s.tensors
        if self.kept is None:        # the identities guards compare must stay unique
            self.kept = s.tensors
        return tuple(out)

    def changed_root(self, old, new) -> str | None:
        for (label, _), a, b in zip(self.roots, old, new):
            if a != b:
                return label
        return None

    def describe_change(self, old, new) -> str:
        for (label, _), a, b in zip(self.roots, old, new):
            if a != b:
                return f"{label} changed" + _what(a, b)
        return "Python state the function reads changed"


_NO = object()   # a root that identity does not decide (never ``is`` a root object)


def _by_identity(obj, v) -> tuple:
    """``(obj, type(obj), by_epoch)`` if ``obj``'s snapshot ``v`` holds as
    long as the root is ``obj`` itself (for a module: while the mutation
    epoch stands still and watches its guard), else ``(_NO, None, False)``."""
    tag = v[0] if type(v) is tuple and v else None
    if (tag in _SCALARS or tag in ("T", "O", "F")) or (tag == "P" and len(v) == 2):
        return obj, type(obj), False
    if tag == "M" and obj._guard_watched():
        return obj, type(obj), True
    return _NO, None, False


def _what(a, b) -> str:
    if a[0] in _SCALARS and b[0] in _SCALARS:
        return f" ({a[1]!r} -> {b[1]!r})"
    if a[0] == "T" or b[0] == "T":
        return " (now another tensor object)"
    if isinstance(a[1], tuple) and isinstance(b[1], tuple) and len(a[1]) != len(b[1]):
        return f" (length {len(a[1])} -> {len(b[1])})"
    return ""


class GlobalRNGs:
    """Python's ``random`` and NumPy's global generator: a traced call that
    draws from them bakes the draw into the trace (a branch taken, a
    constant), so a call that advanced either is refused."""

    @staticmethod
    def state():
        st = np.random.get_state()
        return (_pyrandom.getstate(), st[1].tobytes(), st[2])

    @staticmethod
    def changed(before) -> str | None:
        now = GlobalRNGs.state()
        if now[0] != before[0]:
            return "Python's random module"
        if now[1:] != before[1:]:
            return "NumPy's global random generator (np.random)"
        return None
