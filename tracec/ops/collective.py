"""Collectives over MPI: ``all_reduce``, ``broadcast``, ``all_gather``.

Each is a primitive like any other (DESIGN.md "one definition per
primitive"): its NumPy impl calls mpi4py; the cpu lowering
(``tracec.backends.cpu.collectives``) calls the same MPI library's C entry
points.  The communicator is a parameter, ``comm``: its Fortran handle
(``MPI_Fint``, ``comm.py2f()``), an integer that names the communicator in
the IR, survives printing and the disk cache, and converts back with
``MPI_Comm_f2c`` in native code.  (MPICH's and Open MPI's handles of
``MPI_COMM_WORLD`` differ, so IR -- and cache keys -- never mix the two.)

Invariants:
  * every rank of ``comm`` applies the same collectives in the same order
    (data-parallel programs trace identically on every rank; the passes
    never fold, reorder or duplicate a collective: its kind is
    "collective", not "elementwise");
  * operand shapes and dtypes agree across ranks, checked before the data
    moves: a mismatch raises ``CollectiveShapeError`` on every rank, naming
    each rank's type (never a sum of garbage, never a hang);
  * ``all_reduce``'s ``reduce_op`` is ``SUM`` (0), ``MAX`` (1) or ``AVG``
    (2, floating point only: the sum divided by the communicator's size,
    which is read when the collective runs, never traced: one trace serves
    every world size, as a ``tracec build`` library must).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import zlib

import numpy as np

from tracec import dtypes as dt
from tracec.ops.core import Primitive, ShapeError

__all__ = ["SUM", "MAX", "AVG", "REDUCE_OPS", "all_reduce", "broadcast", "all_gather",
           "CollectiveShapeError", "mpi", "comm_of", "check_same_type", "type_record",
           "RECORD_LEN", "RECORD_DTYPES"]

SUM, MAX, AVG = 0, 1, 2
#: reduce_op code -> the name of the MPI operation it runs (``MPI.<NAME>``;
#: AVG then divides by the communicator's size)
REDUCE_OPS = {SUM: "SUM", MAX: "MAX", AVG: "SUM"}


class CollectiveShapeError(RuntimeError):
    """Ranks called a collective with different shapes or dtypes."""


def mpi():
    """mpi4py's ``MPI`` module (initializing MPI on first use), or an
    ImportError naming the extra that installs it.  The MPI library it
    loaded is then global in the process (Python loads an extension's
    libraries privately), so native code -- compiled now or loaded from the
    disk cache -- resolves ``MPI_Allreduce`` and the rest in that library."""
    if _MPI:
        return _MPI[0]
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("tracec.distributed needs mpi4py and an MPI library: "
                          "pip install 'tracec[distributed]' "
                          f"(import failed: {e})") from None
    path = _mpi_library_path()
    if path is not None:
        ctypes.CDLL(path, mode=os.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 0))
    _MPI.append(MPI)
    return MPI


_MPI: list = []


def _mpi_library_path() -> str | None:
    """The MPI shared library this process has loaded (mpi4py's)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.rsplit(None, 1)[-1]
                if os.path.basename(name).startswith(("libmpi.so", "libmpi_abi.so")):
                    return name
    except OSError:
        pass
    return ctypes.util.find_library("mpi")


_COMMS: dict[int, object] = {}


def comm_of(fint: int):
    """The mpi4py communicator of Fortran handle ``fint``."""
    c = _COMMS.get(fint)
    if c is None:
        c = _COMMS[fint] = mpi().Comm.f2py(fint)
    return c


#: dtypes a collective moves, by their index in a type record
RECORD_DTYPES = ("float32", "float64", "int32", "int64")
RECORD_LEN = 8
_RECORD_DIMS = RECORD_LEN - 3


def _describe(shape, dtype) -> str:
    return f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"


def type_record(shape, dtype) -> list[int]:
    """The ``int64[8]`` every rank contributes to the type check before a
    collective: ``[crc32 of the type's text, dtype index, rank, first 5
    sizes (-1 past the rank)]``.  Eager code and native code (the cpu
    lowering) exchange the same record with one ``MPI_Allgather``, so a
    rank running compiled code and one tracing eagerly check each other."""
    name = np.dtype(dtype).name
    dims = [int(d) for d in shape[:_RECORD_DIMS]]
    return ([zlib.crc32(_describe(shape, dtype).encode()),
             RECORD_DTYPES.index(name) if name in RECORD_DTYPES else -1, len(shape)]
            + dims + [-1] * (_RECORD_DIMS - len(dims)))


def _record_text(rec) -> str:
    d, ndim, dims = int(rec[1]), int(rec[2]), [int(x) for x in rec[3:3 + min(rec[2], 5)]]
    name = RECORD_DTYPES[d] if 0 <= d < len(RECORD_DTYPES) else "?"
    return f"{name}[{','.join(map(str, dims))}{',...' if ndim > _RECORD_DIMS else ''}]"


def check_same_type(comm, what: str, shape, dtype, label: str = "") -> None:
    """Raise ``CollectiveShapeError`` on every rank unless all ranks of
    ``comm`` pass the same shape and dtype (one Allgather of ``type_record``)."""
    size = comm.Get_size()
    if size == 1:
        return
    rec = np.array(type_record(shape, dtype), np.int64)
    every = np.empty((size, RECORD_LEN), np.int64)
    comm.Allgather(rec, every)
    if np.all(every == rec):
        return
    ranks = ", ".join(f"rank {r}: {_record_text(every[r])}" for r in range(size))
    name = f" of {label}" if label else ""
    raise CollectiveShapeError(f"{what}{name}: shapes or dtypes differ across ranks "
                               f"({ranks})")


def _same_type_rule(s, **_):
    return tuple(s)


def _keep_dtype(d, reduce_op=None, **_):
    if d is dt.bool_ or d in (dt.float16, dt.bfloat16):
        raise ShapeError(f"collectives move float32, float64, int32 and int64 tensors, "
                         f"not {d.name}")
    if reduce_op == AVG and not d.is_floating_point:
        raise ShapeError(f"all_reduce(AVG) needs a floating point tensor, got {d.name}")
    return d


def _all_reduce_impl(x, *, reduce_op, comm):
    MPI = mpi()
    c = comm_of(comm)
    check_same_type(c, "all_reduce", x.shape, x.dtype)
    x = np.array(x, copy=None, order="C")   # (ascontiguousarray makes 0-d 1-d)
    out = np.empty_like(x)
    c.Allreduce(x, out, op=getattr(MPI, REDUCE_OPS[reduce_op]))
    if reduce_op == AVG:
        np.divide(out, out.dtype.type(c.Get_size()), out=out)
    return out


def _all_reduce_vjp(g, x, out=None, *, reduce_op, comm):
    # d(sum_r x_r)/dx_k = 1 on every rank, so rank k's cotangent is the sum of
    # the cotangents of every rank's result (their mean for AVG).
    if reduce_op == MAX:
        raise RuntimeError("all_reduce(MAX) has no gradient")
    return (all_reduce(g, reduce_op, comm),)


all_reduce_p = Primitive("all_reduce", kind="collective", impl=_all_reduce_impl,
                         shape_rule=_same_type_rule, dtype_rule=_keep_dtype,
                         vjp=_all_reduce_vjp)


def _broadcast_impl(x, *, src, comm):
    c = comm_of(comm)
    check_same_type(c, "broadcast", x.shape, x.dtype)
    out = np.array(x, copy=True, order="C")
    c.Bcast(out, root=src)
    return out


broadcast_p = Primitive("broadcast", kind="collective", impl=_broadcast_impl,
                        shape_rule=_same_type_rule, dtype_rule=_keep_dtype,
                        vjp=None)


def _all_gather_shape(s, *, size, comm):
    return (size, *s)


def _all_gather_impl(x, *, size, comm):
    c = comm_of(comm)
    if c.Get_size() != size:
        raise ShapeError(f"all_gather: traced for {size} ranks, the communicator has "
                         f"{c.Get_size()}")
    check_same_type(c, "all_gather", x.shape, x.dtype)
    x = np.array(x, copy=None, order="C")   # (ascontiguousarray makes 0-d 1-d)
    out = np.empty((size, *x.shape), x.dtype)
    c.Allgather(x, out)
    return out


all_gather_p = Primitive("all_gather", kind="collective", impl=_all_gather_impl,
                         shape_rule=_all_gather_shape, dtype_rule=_keep_dtype, vjp=None)


def all_reduce(x, reduce_op: int, comm: int):
    return all_reduce_p.bind(x, reduce_op=int(reduce_op), comm=int(comm))


def broadcast(x, src: int, comm: int):
    return broadcast_p.bind(x, src=int(src), comm=int(comm))


def all_gather(x, size: int, comm: int):
    return all_gather_p.bind(x, size=int(size), comm=int(comm))
