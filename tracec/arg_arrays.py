"""NumPy arrays among a compiled call's arguments, read as inputs.

While ``tracec.tracing.record`` traces a call, each NumPy array argument
(an observation, a batch a data loader left as NumPy) is handed to the
function as ``ArgArray``: a view of the user's array (same memory, so the
call computes with the real values) that reports what reads it.  A
conversion by tracec (``from_numpy``, ``tensor``, ``as_tensor``, a
``Tensor`` constructor: ``Watch.tensor``) becomes an input of the trace,
read from each later call's array; any other read of the values (NumPy
arithmetic, indexing, ``tolist()``, ``np.asarray(a, dtype)``, printing)
is *noted* (``Watch.read``), and the trace is not kept: its values could
be baked into the trace where no later call would read them again, so the
compiled function keys such arrays by contents instead (``tracec.pytree``).

Invariant: a value of the array can reach the trace only through
``Watch.tensor`` or a path that calls ``Watch.read``: ufuncs and NumPy's
array functions (``__array_ufunc__`` / ``__array_function__``), every
attribute but metadata (``__getattribute__``), the Python protocols
(items, iteration, numbers, printing, copying, pickling), and NumPy's
``array`` / ``asarray`` family, which ``watching`` replaces for the call.
Two doors stay open, documented in docs/guards.md: the buffer protocol
(``memoryview(a)``, ``bytes(a)``) and unbound C methods
(``np.ndarray.copy(a)``), neither seen in training code.
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

__all__ = ["ArgArray", "Watch", "watched", "watching", "foreign", "LIFTED_DTYPES"]

#: dtypes read as inputs (tracec's tensor dtypes that share NumPy's memory)
LIFTED_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int32,
                                                np.int64, np.bool_))
#: id(stand-in) -> its Watch, while a traced call runs
_WATCHES: dict = {}
#: watches of arrays converted from argument arrays during the call
_DERIVED: list = []
#: attributes that read no value (an array's metadata), and numpy's own hooks
_META = frozenset({"shape", "dtype", "ndim", "size", "itemsize", "nbytes", "__class__",
                   "__array_ufunc__", "__array_function__", "__array_finalize__",
                   "__array_priority__", "__array_wrap__", "__len__", "__dict__",
                   "__getattribute__"})


class Watch:
    """One argument array during a traced call: ``make()`` (the tracer's)
    gives the input tensor; ``reads`` lists how the call read the values
    otherwise."""

    def __init__(self, array: np.ndarray, path, make, parent: "Watch | None" = None):
        self.array, self.path, self.make = array, path, make
        #: the watch this one's array was converted from (``a.astype(t)``,
        #: ``np.asarray(a, dtype=t)``): its input is a cast of the parent's
        self.parent = parent
        #: what the traced call gets in the array's place
        self.stand_in = array.view(ArgArray)
        self.input = None
        self.reads: list = []

    def tensor(self):
        """The trace's input tensor for this array (one per call)."""
        if self.input is None:
            self.input = self.make(self)
        return self.input

    def read(self, what: str) -> None:
        if self.parent is not None:
            return self.parent.read(what)
        if len(self.reads) < 4:
            self.reads.append(what)

    def converted(self, dtype, copy: bool):
        """The stand-in of this array converted to ``dtype`` (a copy where
        ``copy`` or the dtype differs), watched as a cast of this one; the
        stand-in itself where it is the same array."""
        dtype = np.dtype(dtype) if dtype is not None else self.array.dtype
        if dtype == self.array.dtype and not copy:
            return self.stand_in
        derived = Watch(self.array.astype(dtype), self.path, self.make, self)
        _WATCHES[id(derived.stand_in)] = derived
        _DERIVED.append(derived)
        return derived.stand_in


def watched(x):
    """The Watch of ``x`` if it is a stand-in of the call being traced."""
    if type(x) is ArgArray:
        return _WATCHES.get(id(x))
    return None


def foreign(data) -> None:
    """A plain NumPy array (not a stand-in) becomes a tensor while a call
    with watched arrays is traced: its values may have been computed from
    theirs by NumPy where no hook sees it (``np.take(x, a)``, ``x[a]``),
    so every watched array counts as read."""
    if _WATCHES:
        for w in list(_WATCHES.values()):
            w.read("NumPy code whose result became a tensor")


def _note(x, what: str) -> None:
    w = _WATCHES.get(id(x))
    if w is not None:
        w.read(what)


def _plain(x):
    """``x`` with stand-ins (also inside lists and tuples) as plain views."""
    if type(x) is ArgArray:
        return np.ndarray.view(x, np.ndarray)
    if type(x) in (list, tuple):
        return type(x)(_plain(v) for v in x)
    return x


def _any_watched(x, what: str, depth: int = 3) -> None:
    if type(x) is ArgArray:
        _note(x, what)
    elif depth and type(x) in (list, tuple):
        for v in x:
            _any_watched(v, what, depth - 1)
    elif depth and type(x) is dict:
        for v in x.values():
            _any_watched(v, what, depth - 1)


class ArgArray(np.ndarray):
    """A NumPy array argument as the traced call sees it (see the module
    docstring)."""

    def __getattribute__(self, name):
        if name == "astype":
            w = _WATCHES.get(id(self))
            if w is not None:
                return functools.partial(_astype, w)
        if name not in _META:
            _note(self, f".{name}")
        return np.ndarray.__getattribute__(self, name)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        for x in inputs + tuple(kwargs.get("out", ()) or ()):
            _any_watched(x, f"np.{ufunc.__name__}")
        if "out" in kwargs:
            kwargs["out"] = _plain(tuple(kwargs["out"]))
        return getattr(ufunc, method)(*_plain(inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        _any_watched(args, f"np.{func.__name__}")
        _any_watched(kwargs, f"np.{func.__name__}")
        return func(*_plain(tuple(args)), **{k: _plain(v) for k, v in kwargs.items()})


def _astype(w, dtype=None, *args, copy=True, **kwargs):
    """``a.astype(dtype)`` of a watched array: a cast of its input where
    tracec reads the dtype, else a read."""
    if args or kwargs or dtype is None or np.dtype(dtype) not in LIFTED_DTYPES:
        w.read(".astype")
        return np.ndarray.astype(np.ndarray.view(w.stand_in, np.ndarray), dtype, *args,
                                 copy=copy, **kwargs)
    return w.converted(dtype, copy)


def _reading(name):
    base = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        _note(self, name)
        return base(np.ndarray.view(self, np.ndarray), *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__iter__", "__float__", "__int__", "__index__",
              "__complex__", "__bool__", "__repr__", "__str__", "__format__", "__reduce__",
              "__reduce_ex__", "__copy__", "__deepcopy__", "__array__", "__contains__",
              "__setstate__"):
    setattr(ArgArray, _name, _reading(_name))
del _name

#: ... of which those converting an array as ``astype`` would
#: (``np.array`` copies; the others return the array itself for its dtype)
_CONVERTERS = ("array", "asarray", "asanyarray", "ascontiguousarray")
#: NumPy's functions that copy or view an array without dispatching to it
_CONSTRUCTORS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray",
                 "frombuffer", "require")


@contextlib.contextmanager
def watching(watches: list):
    """Stand-ins report to ``watches`` and NumPy's constructors note a
    stand-in among their arguments, for the traced call."""
    originals = {n: getattr(np, n) for n in _CONSTRUCTORS if hasattr(np, n)}

    def wrap(name, fn):
        def constructor(obj=None, *args, **kwargs):
            w = _WATCHES.get(id(obj)) if type(obj) is ArgArray else None
            if w is not None and name in _CONVERTERS and not args and set(kwargs) <= {"dtype"} \
                    and (kwargs.get("dtype") is None
                         or np.dtype(kwargs["dtype"]) in LIFTED_DTYPES):
                # np.asarray(obs, dtype=np.float32): a cast of its input
                return w.converted(kwargs.get("dtype"), name == "array")
            _any_watched(obj, f"np.{name}")
            return fn(obj, *args, **kwargs)
        constructor.__name__ = name
        return constructor
    for w in watches:
        _WATCHES[id(w.stand_in)] = w
    for n, fn in originals.items():
        setattr(np, n, wrap(n, fn))
    try:
        yield
    finally:
        for n, fn in originals.items():
            setattr(np, n, fn)
        for w in watches + _DERIVED:
            _WATCHES.pop(id(w.stand_in), None)
        _DERIVED.clear()
