"""A native wrapper around a compiled entry's ``_py`` form that first checks
the header of every NumPy array it is handed, so that a specialized call
(``tracec.fast_run``) needs no per-array checks in Python.

``call(tin, tout, ws, nthreads, ctx) -> int32``: ``tin`` / ``tout`` point
to the items of tuples of NumPy arrays (``runtime._TUPLE_ITEMS``) and
``ctx`` to ``int64`` words made by ``context(kernel, in_rows, out_rows,
slots)``: the ``_py`` entry's address, the counts, one row per array, ``[type,
descr, ndim, flags mask, dim 0 .. dim MAX_DIMS-1]``: the array's type is
the object ``type`` (``np.ndarray``), its dtype the object ``descr`` (the
same check as ``a.dtype is npd``), its ``ndim`` and shape these, and its
flags include the mask (C-contiguous; writeable for memory written in
place).  A row whose ``type`` is 0 is not checked.  Then ``[object, byte
offset, expected]`` triples: a field of a fixed object that must hold the
object ``expected`` (a state tensor's ``dtype``, its ``requires_grad``),
checked first.  If everything passes, the wrapper returns what the entry
returns; else -1, and the entry has not run.

``bound(ctx, nthreads)`` is the same call as a builtin function object
(``METH_FASTCALL``, made with ``PyCFunction_NewEx``): ``f(tin, tout, ws)``
with the tuples themselves and the workspace's address as an int.  A
ctypes call costs ~0.8 us of argument conversion, most of a specialized
call's budget; a builtin's costs ~0.1 us.  It releases the GIL around the
entry as ctypes does (``PyEval_SaveThread``), and reads the C API's
functions from its own words, so nothing is resolved by the linker.

``available()`` is False where NumPy's array object does not have the
layout read here (checked once per process against real arrays): callers
then check in Python.

Invariant: the entry runs only on arrays whose type, dtype object, shape
and flags are the ones the rows ask for, read from the arrays' headers at
the time of the call.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

__all__ = ["available", "call", "context", "row", "slot_offset", "MAX_DIMS", "C_CONTIGUOUS",
           "WRITEABLE"]

MAX_DIMS = 8
ROW = 4 + MAX_DIMS
#: NumPy's flag bits (``NPY_ARRAY_C_CONTIGUOUS``, ``NPY_ARRAY_WRITEABLE``).
C_CONTIGUOUS = 0x0001
WRITEABLE = 0x0400
# Byte offsets in NumPy's array object (PyArrayObject_fields).
_TYPE, _DATA, _ND, _DIMS, _DESCR, _FLAGS = 8, 16, 24, 32, 56, 64
#: Byte offset of a tuple's first item pointer (``PyTupleObject.ob_item``).
_ITEMS = 24
#: ``PyMethodDef.ml_flags`` for ``f(self, args, nargs)``.
_METH_FASTCALL = 0x0080

_IR = f"""
define i32 @tracec_checked_call(ptr %tin, ptr %tout, ptr %ws, i64 %nth, ptr %ctx) {{
entry:
  %kernel = load ptr, ptr %ctx
  %p1 = getelementptr i64, ptr %ctx, i64 1
  %nin = load i64, ptr %p1
  %p2 = getelementptr i64, ptr %ctx, i64 2
  %nout = load i64, ptr %p2
  %p3 = getelementptr i64, ptr %ctx, i64 3
  %nslots = load i64, ptr %p3
  %rows = getelementptr i64, ptr %ctx, i64 4
  %total = add i64 %nin, %nout
  %rwords = mul i64 %total, {ROW}
  %slots = getelementptr i64, ptr %rows, i64 %rwords
  br label %shead
shead:
  %s = phi i64 [0, %entry], [%snext, %sok]
  %sdone = icmp eq i64 %s, %nslots
  br i1 %sdone, label %head, label %sbody
sbody:
  %soff = mul i64 %s, 3
  %srow = getelementptr i64, ptr %slots, i64 %soff
  %sobj = load ptr, ptr %srow
  %sop = getelementptr i64, ptr %srow, i64 1
  %sbyte = load i64, ptr %sop
  %swp = getelementptr i64, ptr %srow, i64 2
  %swant = load i64, ptr %swp
  %sat = getelementptr i8, ptr %sobj, i64 %sbyte
  %sgot = load i64, ptr %sat
  %sbad = icmp ne i64 %sgot, %swant
  br i1 %sbad, label %bad, label %sok
sok:
  %snext = add i64 %s, 1
  br label %shead
head:
  %i = phi i64 [0, %shead], [%inext, %next]
  %done = icmp eq i64 %i, %total
  br i1 %done, label %run, label %body
body:
  %roff = mul i64 %i, {ROW}
  %row = getelementptr i64, ptr %rows, i64 %roff
  %want_type = load i64, ptr %row
  %skip = icmp eq i64 %want_type, 0
  br i1 %skip, label %next, label %check
check:
  %isout = icmp uge i64 %i, %nin
  %j = sub i64 %i, %nin
  %pin = getelementptr ptr, ptr %tin, i64 %i
  %pout = getelementptr ptr, ptr %tout, i64 %j
  %slot = select i1 %isout, ptr %pout, ptr %pin
  %obj = load ptr, ptr %slot
  %tp = getelementptr i8, ptr %obj, i64 {_TYPE}
  %type = load i64, ptr %tp
  %bad_type = icmp ne i64 %type, %want_type
  br i1 %bad_type, label %bad, label %c_descr
c_descr:
  %dp = getelementptr i8, ptr %obj, i64 {_DESCR}
  %descr = load i64, ptr %dp
  %wdp = getelementptr i64, ptr %row, i64 1
  %want_descr = load i64, ptr %wdp
  %bad_descr = icmp ne i64 %descr, %want_descr
  br i1 %bad_descr, label %bad, label %c_nd
c_nd:
  %ndp = getelementptr i8, ptr %obj, i64 {_ND}
  %nd32 = load i32, ptr %ndp
  %nd = sext i32 %nd32 to i64
  %wnp = getelementptr i64, ptr %row, i64 2
  %want_nd = load i64, ptr %wnp
  %bad_nd = icmp ne i64 %nd, %want_nd
  br i1 %bad_nd, label %bad, label %c_flags
c_flags:
  %fp = getelementptr i8, ptr %obj, i64 {_FLAGS}
  %fl32 = load i32, ptr %fp
  %fl = zext i32 %fl32 to i64
  %wmp = getelementptr i64, ptr %row, i64 3
  %mask = load i64, ptr %wmp
  %has = and i64 %fl, %mask
  %bad_flags = icmp ne i64 %has, %mask
  br i1 %bad_flags, label %bad, label %c_dims
c_dims:
  %dimsp = getelementptr i8, ptr %obj, i64 {_DIMS}
  %dims = load ptr, ptr %dimsp
  %wdims = getelementptr i64, ptr %row, i64 4
  br label %dhead
dhead:
  %k = phi i64 [0, %c_dims], [%knext, %dnext]
  %ddone = icmp eq i64 %k, %nd
  br i1 %ddone, label %next, label %dbody
dbody:
  %gp = getelementptr i64, ptr %dims, i64 %k
  %got = load i64, ptr %gp
  %ep = getelementptr i64, ptr %wdims, i64 %k
  %exp = load i64, ptr %ep
  %bad_dim = icmp ne i64 %got, %exp
  br i1 %bad_dim, label %bad, label %dnext
dnext:
  %knext = add i64 %k, 1
  br label %dhead
next:
  %inext = add i64 %i, 1
  br label %head
run:
  %rc = call i32 %kernel(ptr %tin, ptr %tout, ptr %ws, i64 %nth)
  ret i32 %rc
bad:
  ret i32 -1
}}

; f(self, args, nargs): self is an int64 array of words [ctx, nthreads,
; PyLong_FromLong, PyLong_AsVoidPtr, PyEval_SaveThread, PyEval_RestoreThread];
; args are (tin tuple, tout tuple, workspace address); the generated caller
; always passes exactly these three.
define ptr @tracec_checked_fastcall(ptr %self, ptr %args, i64 %nargs) {{
entry:
  %wp = getelementptr i8, ptr %self, i64 {_DATA}
  %w = load ptr, ptr %wp
  %ctx = load ptr, ptr %w
  %w1 = getelementptr i64, ptr %w, i64 1
  %nth = load i64, ptr %w1
  %w2 = getelementptr i64, ptr %w, i64 2
  %fromlong = load ptr, ptr %w2
  %w3 = getelementptr i64, ptr %w, i64 3
  %asptr = load ptr, ptr %w3
  %w4 = getelementptr i64, ptr %w, i64 4
  %save = load ptr, ptr %w4
  %w5 = getelementptr i64, ptr %w, i64 5
  %restore = load ptr, ptr %w5
  %t0 = load ptr, ptr %args
  %tin = getelementptr i8, ptr %t0, i64 {_ITEMS}
  %a1 = getelementptr ptr, ptr %args, i64 1
  %t1 = load ptr, ptr %a1
  %tout = getelementptr i8, ptr %t1, i64 {_ITEMS}
  %a2 = getelementptr ptr, ptr %args, i64 2
  %wsobj = load ptr, ptr %a2
  %ws = call ptr %asptr(ptr %wsobj)
  %ts = call ptr %save()
  %rc = call i32 @tracec_checked_call(ptr %tin, ptr %tout, ptr %ws, i64 %nth, ptr %ctx)
  call void %restore(ptr %ts)
  %rc64 = sext i32 %rc to i64
  %r = call ptr %fromlong(i64 %rc64)
  ret ptr %r
}}
"""

_state: dict = {}


def _layout_ok() -> bool:
    """Whether arrays' headers hold type, ndim, shape, dtype and flags at
    the offsets read above (real arrays of several kinds compared)."""
    base = np.zeros((3, 4), np.float32)
    samples = [base, base[:, 1:], np.empty((2, 5, 7), np.int64), np.zeros(()),
               np.broadcast_to(np.ones(3), (2, 3))]
    for a in samples:
        at = id(a)
        if ctypes.c_void_p.from_address(at + _TYPE).value != id(type(a)):
            return False
        if ctypes.c_int32.from_address(at + _ND).value != a.ndim:
            return False
        if a.ndim:
            dims = ctypes.c_void_p.from_address(at + _DIMS).value
            if tuple((ctypes.c_int64 * a.ndim).from_address(dims)) != a.shape:
                return False
        if ctypes.c_void_p.from_address(at + _DESCR).value != id(a.dtype):
            return False
        if ctypes.c_void_p.from_address(at + _DATA).value != (a.ctypes.data or None):
            return False
        flags = ctypes.c_int32.from_address(at + _FLAGS).value
        if bool(flags & C_CONTIGUOUS) != a.flags.c_contiguous or \
                bool(flags & WRITEABLE) != a.flags.writeable:
            return False
    return True


def runtime_object(kind: str, ir: str, host: bool = False) -> bytes:
    """Object code (position independent) of a small runtime module in LLVM
    IR (without triple and data layout) for ``codegen.target()``, or for
    this machine whatever ``codegen.targeting`` says (``host``); kept in
    the disk cache under ``runtime/`` keyed by the text and the target:
    code generation would cost each new process milliseconds."""
    import hashlib
    import os
    from tracec.backends import cache
    from tracec.backends.cpu import codegen
    target = codegen.host() if host else codegen.target()
    # Keyed without the data layout, which the target decides: finding the
    # object needs no LLVM target machine (nor llvmlite) in this process.
    key = hashlib.sha256(f"tracec-{kind}|{codegen._target_id(target)}|{ir}".encode()).hexdigest()
    disk = None if os.environ.get("TRACEC_NO_CACHE") else \
        cache.DiskCache(os.path.join(cache.cache_root(), "runtime"))
    hit = disk.get(key) if disk is not None else None
    if hit is not None:
        return bytes(hit[1])
    import llvmlite.binding as lb
    tm = codegen._target_machine(target)
    src = f'target triple = "{target[0]}"\ntarget datalayout = "{tm.target_data}"\n' + ir
    with codegen._lock:
        mod = lb.parse_assembly(src, context=lb.create_context())
        mod.verify()
        obj = bytes(tm.emit_object(mod))
    if disk is not None:
        try:
            disk.put(key, {"kind": kind}, obj)
        except OSError:
            pass   # no cache: built again next time
    return obj


class _MethodDef(ctypes.Structure):
    """CPython's ``PyMethodDef``."""
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def _build():
    from tracec.backends.cpu import runtime
    lib = runtime._link(runtime_object("checked call", _IR, host=True),
                        ["tracec_checked_call", "tracec_checked_fastcall"])
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_void_p)(lib["tracec_checked_call"])
    api = ctypes.pythonapi
    # The method definition must outlive every function made from it: kept here.
    _state["def"] = _MethodDef(b"tracec_checked_call", lib["tracec_checked_fastcall"],
                               _METH_FASTCALL, None)
    new = api.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object,
                                                   ctypes.py_object]
    _state["new"] = new
    _state["api"] = [ctypes.cast(getattr(api, name), ctypes.c_void_p).value
                     for name in ("PyLong_FromLong", "PyLong_AsVoidPtr", "PyEval_SaveThread",
                                  "PyEval_RestoreThread")]
    return lib, fn


def available() -> bool:
    if "ok" not in _state:
        _state["ok"] = _layout_ok()
    return _state["ok"]


def call():
    """The wrapper (a ctypes function), built once per process."""
    if "fn" not in _state:
        _state["lib"], _state["fn"] = _build()
    return _state["fn"]


def bound(ctx: np.ndarray, nthreads: int):
    """``f(tin, tout, ws) -> int``: ``call(id(tin) + 24, id(tout) + 24, ws,
    nthreads, ctx.ctypes.data)`` as a builtin function (see the module
    docstring).  It holds its words, not ``ctx``: keep ``ctx`` alive while
    ``f`` is used.  Only generated code calls it: it trusts its arguments to
    be two tuples and an int."""
    call()
    words = np.array([ctx.ctypes.data, nthreads, *_state["api"]], np.int64)
    return _state["new"](ctypes.addressof(_state["def"]), words, None)


def row(shape, npd, mask: int) -> list:
    """One array's row: an ``np.ndarray`` of ``shape`` and dtype object
    ``npd`` with the flag bits ``mask``."""
    if len(shape) > MAX_DIMS:
        raise ValueError(f"more than {MAX_DIMS} dimensions")
    return [id(np.ndarray), id(npd), len(shape), mask, *shape, *[0] * (MAX_DIMS - len(shape))]


def context(kernel: int, in_rows: list, out_rows: list, slots=()) -> np.ndarray:
    """The ``ctx`` words (keep the array alive while calls use it); an
    unchecked output's row is ``None``.  ``slots``: ``(object, byte offset,
    expected)`` triples, each a pointer-sized field of an object (kept
    alive by the caller) that must hold the object ``expected``
    (``slot_offset`` finds a ``__slots__`` field)."""
    words = [kernel, len(in_rows), len(out_rows), len(slots)]
    for r in [*in_rows, *out_rows]:
        words += r if r is not None else [0] * ROW
    for obj, offset, expected in slots:
        words += [id(obj), offset, id(expected)]
    return np.array(words, np.int64)


@functools.lru_cache(maxsize=256)
def slot_offset(cls: type, name: str) -> int | None:
    """The byte offset of ``__slots__`` field ``name`` in instances of
    ``cls`` (found by storing a marker there), or None."""
    try:
        obj = object.__new__(cls)
        marker = object()
        setattr(obj, name, marker)
    except (TypeError, AttributeError):
        return None
    found = [off for off in range(16, cls.__basicsize__, 8)
             if ctypes.c_void_p.from_address(id(obj) + off).value == id(marker)]
    return found[0] if len(found) == 1 else None
