"""Loading object code and calling it: the cpu backend's executable.

The ABI of a compiled module (see ``lower.py``) is one C function

    int32_t <entry>(void **inputs, void **outputs, void *workspace,
                    int64_t nthreads);

``inputs`` / ``outputs`` hold one pointer per function argument / result
(C-contiguous, element-aligned buffers of the signature's shapes and
dtypes; bool is one byte, float16 is IEEE half, bfloat16 is float32 storage
as in NumPy); ``workspace`` is scratch memory of ``signature["workspace"]``
bytes, 64-byte aligned; ``nthreads`` caps the threads a kernel may start
(pthreads, joined before the call returns).  It returns 0, or ``k`` > 0:
``signature["errors"][k - 1]`` is ``[kind, message]`` for the op that
failed ("index": an index out of range; the first 8 bytes of the
workspace then hold it, substituted for ``{index}`` in the message;
``ERROR_KINDS`` gives each kind's exception).
A module with collectives reads its communicators' Fortran handles
(``signature["comms"]``, the handles its trace used) from the i64 words
after the first (``collectives.COMMS_INDEX``); they are written when a
workspace is made.

The object also exports ``<entry>_py`` with the same arguments except that
``inputs`` / ``outputs`` point to NumPy array *objects*; it reads each
array's data pointer itself.  The runtime uses it (after checking, once per
process, that NumPy's array layout is the expected one) because
``a.ctypes.data`` costs microseconds per array in Python.

The signature (JSON-able) holds: ``format``, ``target`` (CPU, LLVM and the
backend's code), ``entry``, ``entry_py``, ``inputs`` / ``outputs`` (shape,
dtype name), ``workspace`` (bytes), ``errors`` and ``donated``: ``[output,
input]`` pairs whose output the code computes in the input's buffer (the
``outputs`` pointer for it is not used).  The executable then passes, for
such an input, an array whose memory no other input shares (a copy if
needed) and returns that array as the output: callers that donated a state
array get it back, updated in place.  ``load_object(object
bytes, signature)`` links the object into the process's LLJIT (libm and
libpthread symbols resolve from the process) and returns an executable.

Invariant: an executable only ever runs object code whose signature it
checked (format version and target), and it keeps the JIT library alive as
long as it can be called.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
import weakref

import numpy as np

from tracec import dtypes as dt
from tracec.threads import default_threads
from tracec.backends.cpu import codegen, output_pool

__all__ = ["CpuExecutable", "CpuRuntimeError", "CpuIndexError", "CpuValueError", "ERROR_KINDS",
           "load_object", "FORMAT", "default_threads"]

#: Version of the object/signature contract; bump when the ABI changes.
FORMAT = 1

_jit_lock = threading.Lock()
_jit = [None]
_lib_ids = itertools.count()
_ENTRY_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_int64)


class CpuRuntimeError(RuntimeError):
    """A compiled function failed at run time; the message names the op
    and the user's file:line."""


class CpuIndexError(CpuRuntimeError, IndexError):
    """An index out of range in compiled code (an ``IndexError``, as in
    eager mode)."""


class CpuValueError(CpuRuntimeError, ValueError):
    """A value check PyTorch makes in Python failed in compiled code (a
    ``ValueError``, as in eager mode: gaussian_nll_loss's negative var)."""


#: the exception of each error kind a compiled check reports (``check_code``)
ERROR_KINDS = {"index": CpuIndexError, "value": CpuRuntimeError, "value_error": CpuValueError}


def _lljit():
    import llvmlite.binding as lb
    if _jit[0] is None:
        codegen._init()  # the native target
        # JITLink, not RuntimeDyld: RuntimeDyld maps an object's sections
        # one by one, and where the address space is crowded (PyTorch's CUDA
        # libraries loaded, torchvision imported) code and its constants
        # landed over 2 GiB apart; the 32-bit PC-relative relocations of the
        # default code model then failed an LLVM assertion, aborting the
        # process.  JITLink allocates an object's sections together.
        _jit[0] = lb.create_lljit_compiler(use_jit_link=True)
    return _jit[0]


def _link(object_code: bytes, entries: list[str], imports: dict | None = None,
          shared: bool = False):
    """Link ``object_code`` into the process, exporting ``entries``;
    ``imports``: ``{symbol: address}`` its declarations resolve to (library
    routines).  Returns an object whose ``[name]`` is an address.

    The shared library built from the same bytes on an earlier link
    (``shared_objects``; ``shared``: loaded so that later libraries' references
    resolve to it) if there is one, else the JIT (and that library is built
    for next time)."""
    from tracec.backends.cpu import shared_objects
    lib = shared_objects.load(object_code, entries, shared)
    if lib is not None:
        return lib
    import llvmlite.binding as lb
    objects = codegen.unpack_objects(object_code)   # a module compiled in parts
    with _jit_lock:
        jit = _lljit()
        builder = lb.JITLibraryBuilder()
        for obj in objects:
            builder.add_object_img(obj)
        builder.add_current_process()
        for name, address in (imports or {}).items():
            builder.import_symbol(name, address)

        for e in entries:
            builder.export_symbol(e)
        tracker = builder.link(jit, f"tracec_lib_{next(_lib_ids)}")
    shared_objects.schedule(object_code, entries, objects)
    return tracker


def _array_layout_ok() -> bool:
    """Whether a NumPy array's data pointer (``codegen.PYOBJECT_DATA_OFFSET``)
    and a tuple's item pointers (``_TUPLE_ITEMS``) sit where the ``_py``
    entry and ``__call__`` read them; checked once per process."""
    if _layout[0] is None:
        from tracec.backends.cpu.codegen import PYOBJECT_DATA_OFFSET
        ok = True
        for a in (np.zeros(3, np.float32), np.empty((2, 5), np.int64)[:, 1:].copy()):
            ok = ok and ctypes.c_void_p.from_address(id(a) + PYOBJECT_DATA_OFFSET).value \
                == a.ctypes.data
            t = (a, None)
            ok = ok and ctypes.c_void_p.from_address(id(t) + _TUPLE_ITEMS).value == id(a) \
                and ctypes.c_void_p.from_address(id(t) + _TUPLE_ITEMS + 8).value == id(None)
        _layout[0] = ok
    return _layout[0]


_layout: list = [None]
#: Byte offset in the workspace of a symbolic module's size values
#: (``builder.SIZES_INDEX`` i64 words; the error slot comes first).
_SIZES_BYTE = 64
#: Byte offset of the communicator handles (``collectives.COMMS_INDEX``).
_COMMS_BYTE = 8
#: Byte offset of a tuple's first item pointer (after ``PyObject_VAR_HEAD``).
_TUPLE_ITEMS = 24


class CpuExecutable:
    """``executable(list_of_arrays) -> list_of_arrays`` for one module.

    Attributes: ``signature`` (JSON-able dict), ``object_code`` (bytes),
    ``stages`` (stage name -> text; empty when loaded from an object)."""

    def __init__(self, object_code: bytes, signature: dict, stages: dict | None = None):
        if signature.get("format") != FORMAT:
            raise ValueError(f"object format {signature.get('format')!r} is not {FORMAT}")
        if signature.get("target") != codegen.target_id():
            raise ValueError("object code was compiled for another target: "
                             f"{signature.get('target')!r}")
        self.object_code = object_code
        self.signature = signature
        self.stages = stages if stages is not None else {}
        entries = [signature["entry"], *signature.get("exports", ())]
        fast = bool(signature.get("entry_py")) and _array_layout_ok()
        if signature.get("entry_py"):
            entries.append(signature["entry_py"])
        slot = signature.get("pool_slot")
        if slot:
            entries.append(slot)
        imports = None
        if signature.get("libraries"):
            from tracec.backends.cpu import gemm_lib
            imports = gemm_lib.addresses(signature["libraries"])
        self._tracker = _link(object_code, entries, imports)
        if slot:
            from tracec.backends.cpu import pool
            address = pool.address()
            if address:        # parallel kernels run on the worker pool
                ctypes.c_void_p.from_address(self._tracker[slot]).value = address
        self._fn = _ENTRY_T(self._tracker[signature["entry"]])
        self._fn_py = _ENTRY_T(self._tracker[signature["entry_py"]]) if fast else None
        self._ins = [(tuple(s), dt.to_dtype(d).np) for s, d in signature["inputs"]]
        self._outs = [(tuple(s), dt.to_dtype(d).np) for s, d in signature["outputs"]]
        # Large fresh outputs come from recycled memory (output_pool).
        # (A symbolic output's size is known per call: output_pool.empty
        # checks it then.)
        self._alloc = [output_pool.empty if not all(isinstance(n, int) for n in shape)
                       or np.dtype(npd).itemsize * _prod(shape) >= output_pool.MIN_BYTES
                       else np.empty for shape, npd in self._outs]
        self._in_arr_t = ctypes.c_void_p * max(1, len(self._ins))
        self._out_arr_t = ctypes.c_void_p * max(1, len(self._outs))
        self._errors = list(signature["errors"])
        ws = signature["workspace"]
        self._ws_size = ws if isinstance(ws, int) else 0   # symbolic: sized.py
        self._ws_pool: list = []
        self._comms = np.array(signature.get("comms", ()), np.int64)
        self._donated = [(int(k), int(j)) for k, j in signature.get("donated", ())]
        self._unshared = None   # weak references to the last inputs found unshared
        self.nthreads = default_threads()

    def stage(self, name: str) -> str:
        """Text of a stage; "asm" is generated from "llvm" if it was not
        produced at compile time (``compile_module(asm=False)``)."""
        try:
            return self.stages[name]
        except KeyError:
            if name != "asm" or "llvm" not in self.stages:
                raise
        self.stages["asm"] = codegen.assembly(self.stages["llvm"])
        return self.stages["asm"]

    def _workspace(self, size=None):
        """``(raw array, aligned address, offset)`` of at least ``size``
        (default: the signature's) bytes, from the pool when one fits."""
        size = self._ws_size if size is None else size
        pool = self._ws_pool
        for i in range(len(pool) - 1, -1, -1):
            if pool[i][0].size - 64 >= size:
                return pool.pop(i)
        raw = np.empty(size + 64, np.uint8)
        off = (-raw.ctypes.data) % 64
        if self._comms.size:   # the error slot's word 0 alone is ever written
            raw[off + _COMMS_BYTE:off + _COMMS_BYTE + 8 * self._comms.size].view(np.int64)[:] \
                = self._comms
        return raw, raw.ctypes.data + off, off

    #: ``__call__`` takes ``out=``: arrays to reuse as output buffers.
    accepts_out = True

    def __call__(self, arrays, out=None):
        """Run on ``arrays``; ``out`` (optional): per output, an array to
        compute it into instead of a fresh one (used only when it has the
        output's shape and dtype, is C-contiguous, writeable and not an
        input; the caller vouches that nothing else uses it), or None."""
        return self._run(arrays, out, self._ins, self._outs, None)

    def _run(self, arrays, out, specs, out_specs, sizes):
        """Run on ``arrays`` of the input shapes ``specs``, making outputs of
        ``out_specs``; ``sizes``: a symbolic module's symbol values (written
        to the workspace) and workspace bytes, or None."""
        if len(arrays) != len(specs):
            raise TypeError(f"expected {len(specs)} input arrays, got {len(arrays)}")
        for a, (shape, npd) in zip(arrays, specs):
            if (type(a) is not np.ndarray or a.dtype is not npd or a.shape != shape
                    or not a.flags.c_contiguous):
                arrays = [self._coerce(a, shape, npd) for a, (shape, npd) in zip(arrays, specs)]
                break
        if self._donated:
            arrays, outs = self._donated_outputs(arrays, out_specs)
        else:
            outs = [alloc(shape, npd) for alloc, (shape, npd) in zip(self._alloc, out_specs)]
        if out is not None:
            self._reuse(out, outs, arrays, out_specs)
        if sizes is None:
            ws = self._workspace()
        else:
            values, nbytes = sizes
            ws = self._workspace(nbytes)
            ws[0][ws[2] + _SIZES_BYTE:ws[2] + _SIZES_BYTE + 8 * len(values)].view(np.int64)[:] \
                = values
        try:
            if self._fn_py is not None:
                # The entry reads the array pointers from the tuples' item
                # storage (checked once per process: _array_layout_ok);
                # both tuples live until the call returns.
                tin, tout = tuple(arrays), tuple(outs)
                rc = self._fn_py(id(tin) + _TUPLE_ITEMS, id(tout) + _TUPLE_ITEMS, ws[1],
                                 self.nthreads)
            else:
                rc = self._fn(self._in_arr_t(*[a.ctypes.data for a in arrays]),
                              self._out_arr_t(*[o.ctypes.data for o in outs]), ws[1],
                              self.nthreads)
            if rc:
                self._raise(rc, ws)
        finally:
            self._ws_pool.append(ws)
        return outs

    def _donated_outputs(self, arrays, out_specs):
        """``(arrays, outs)`` when some outputs are donated: each such output
        is its input array itself, or a private copy of it (then put in
        ``arrays``, a new list) when its memory is shared with another input
        or it is read-only."""
        outs = [None] * len(self._outs)
        # The same array objects as last time, found not to share memory
        # then: they still do not (an array's memory never changes).
        last = self._unshared
        if last is not None and len(last) == len(arrays) and all(
                w() is x for w, x in zip(last, arrays)) and all(
                arrays[j].flags.writeable for _, j in self._donated):
            for k, j in self._donated:
                outs[k] = arrays[j]
            for k, (shape, npd) in enumerate(out_specs):
                if outs[k] is None:
                    outs[k] = self._alloc[k](shape, npd)
            return arrays, outs
        # Arrays can share memory only if they share a root (the ndarray at
        # the end of their .base chain); a root that wraps foreign memory
        # may alias anything, so it is checked byte-wise.  O(inputs) per call.
        roots: dict = {}
        for i, x in enumerate(arrays):
            r = x
            while type(r.base) is np.ndarray:
                r = r.base
            key = id(r) if r.base is None else -1
            roots.setdefault(key, []).append(i)
        copied = False
        for k, j in self._donated:
            a = arrays[j]
            if not a.flags.writeable:
                shared = True
            else:
                r = a
                while type(r.base) is np.ndarray:
                    r = r.base
                group = roots[id(r) if r.base is None else -1]
                shared = len(group) > 1 and any(
                    i != j and (arrays[i] is a or np.may_share_memory(a, arrays[i]))
                    for i in group)
                if not shared and r.base is not None:   # foreign memory
                    shared = any(i != j and np.may_share_memory(a, x)
                                 for i, x in enumerate(arrays))
            if shared:
                if not copied:
                    arrays, copied = list(arrays), True
                a = arrays[j] = a.copy()
            outs[k] = a
        if not copied:
            self._unshared = [weakref.ref(x) for x in arrays]
        for k, (shape, npd) in enumerate(out_specs):
            if outs[k] is None:
                outs[k] = self._alloc[k](shape, npd)
        return arrays, outs

    def _reuse(self, out, outs, arrays, out_specs) -> None:
        donated = {k for k, _ in self._donated}
        inputs = {id(x) for x in arrays}   # O(inputs + outputs), not their product
        for k, a in enumerate(out[:len(outs)]):
            if a is None or k in donated:
                continue
            shape, npd = out_specs[k]
            if (type(a) is np.ndarray and a.dtype == npd and a.shape == shape
                    and a.flags.c_contiguous and a.flags.writeable
                    and id(a) not in inputs):
                outs[k] = a

    def _raise(self, rc: int, ws) -> None:
        if not 1 <= rc <= len(self._errors):
            raise CpuRuntimeError(f"compiled function failed with code {rc}")
        kind, message = self._errors[rc - 1]
        bad = int(ws[0][ws[2]:ws[2] + 8].view(np.int64)[0])
        raise ERROR_KINDS.get(kind, CpuRuntimeError)(message.replace("{index}", str(bad)))

    @staticmethod
    def _coerce(a, shape, npd):
        if type(a) is np.ndarray and a.dtype is npd and a.shape == shape \
                and a.flags.c_contiguous:
            return a
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = np.array(a, order="C")
        if a.shape != shape:
            raise ValueError(f"input of shape {a.shape} where {shape} was compiled")
        if a.dtype != npd:
            if not np.can_cast(a.dtype, npd, "same_kind"):
                raise TypeError(f"input of dtype {a.dtype} where {npd} was compiled")
            a = a.astype(npd)
        if type(a) is not np.ndarray:
            a = a.view(np.ndarray)
        if a.dtype is not npd:
            a = a.view(npd)   # an equal dtype object that is not the canonical one
        return a


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def load_object(object_code: bytes, signature: dict, stages: dict | None = None) -> CpuExecutable:
    """Rebuild an executable from object bytes and its JSON-able signature
    (``executable.object_code`` / ``executable.signature``); a symbolic
    module's (``signature["symbols"]``) serves every size (``sized.py``)."""
    if "symbols" in signature:
        from tracec.backends.cpu.sized import SizedCpuExecutable
        return SizedCpuExecutable(bytes(object_code), dict(signature), stages)
    return CpuExecutable(bytes(object_code), dict(signature), stages)
