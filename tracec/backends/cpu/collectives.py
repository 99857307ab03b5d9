"""Native collectives: ``all_reduce``, ``broadcast``, ``all_gather`` call the
MPI library's C functions directly (the library mpi4py loaded), so a
compiled step never returns to Python to communicate.

Each collective is one kernel (never split across threads) that:

1. converts the handles it needs from their Fortran integers:
   ``MPI_Type_f2c`` and ``MPI_Op_f2c`` of constants taken from mpi4py when
   lowering, and ``MPI_Comm_f2c`` of the communicator's handle, which the
   kernel reads from the workspace (word ``COMMS_INDEX + k`` of the
   64-byte call header, for the module's k-th communicator): the runtime
   writes there the handles the trace used (``signature["comms"]``), a
   ``tracec build`` library the ``MPI_Fint comm`` its caller passes.  A C
   handle is an ``int`` in MPICH and a pointer in Open MPI; the lowering
   asks mpi4py its size;
2. checks the ranks' types when the communicator has more than one rank:
   ``MPI_Allgather`` of the op's ``type_record`` (``tracec.ops.collective``,
   the same record the eager impl exchanges), and returns an error naming
   the op and its location if any rank's differs -- every rank then raises
   instead of reducing garbage;
3. moves the data: ``MPI_Allreduce`` (with ``MPI_IN_PLACE`` when the result
   is donated to the operand's buffer, else from the input into the output;
   AVG then divides by the communicator's size), ``MPI_Bcast`` (of a copy,
   unless in place), ``MPI_Allgather``.

Invariant: a collective kernel runs on the calling thread, in the order
the IR lists the collectives (the entry calls kernels one after another),
so every rank issues the same sequence of MPI calls.
"""
from __future__ import annotations

import math

from xdsl.dialects import llvm

from tracec import ir
from tracec.backends.cpu import scalar
from tracec.backends.cpu.builder import I1, I32, I64, PTR
from tracec.ops import collective as coll

__all__ = ["COLLECTIVES", "emit_collective", "COMMS_INDEX", "MAX_COMMS"]

#: The i64 word of the workspace holding the module's first communicator
#: handle (words 1..7 of the 64-byte error slot, whose word 0 alone
#: reports errors: ``plan.ERROR_SLOT_BYTES``).
COMMS_INDEX = 1
MAX_COMMS = 7

COLLECTIVES = ("all_reduce", "broadcast", "all_gather")

_MPI_TYPE = {"float32": "FLOAT", "float64": "DOUBLE", "int32": "INT32_T", "int64": "INT64_T"}


def _comm_slot(low, fint: int) -> int:
    """The workspace word of communicator ``fint`` (registered in the
    module's ``signature["comms"]`` order)."""
    comms = low.mb.shared.setdefault("comms", [])
    if fint not in comms:
        if len(comms) == MAX_COMMS:
            raise ValueError(f"a function may use at most {MAX_COMMS} communicators")
        comms.append(fint)
    return COMMS_INDEX + comms.index(fint)


def emit_collective(low, op, name: str) -> None:
    """Emit the kernel of collective ``op`` (``low``: the Lowering)."""
    from tracec.backends.cpu.lower import describe
    MPI = coll.mpi()   # also makes the MPI library's symbols visible to the JIT
    p = ir.op_params(op)
    x, res = op.operands[0], op.results[0]
    d = ir.dtype_of(x.type)
    shape = ir.shape_of(x.type)
    count = math.prod(shape)
    if count >= 2 ** 31:
        raise ValueError(f"{count} elements exceed MPI's int count")
    handle = I32 if MPI._sizeof(MPI.Comm) == 4 else PTR
    mb = low.mb
    for fn in ("MPI_Comm_f2c", "MPI_Type_f2c", "MPI_Op_f2c"):
        mb.declare(fn, [I32], handle)
    mb.declare("MPI_Comm_size", [handle, PTR], I32)
    mb.declare("MPI_Allgather", [PTR, I32, handle, PTR, I32, handle, handle], I32)
    mb.declare("MPI_Allreduce", [PTR, PTR, I32, handle, handle, handle], I32)
    mb.declare("MPI_Bcast", [PTR, I32, handle, I32, handle], I32)
    mb.declare("malloc", [I64], PTR)
    mb.declare("free", [PTR], None)
    where = describe(op)
    bad_types = low.kernels.error(f"{where}: the ranks passed different shapes or dtypes to "
                                  f"this collective (this rank: {ir.format_type(x.type)})")
    failed = low.kernels.error(f"{where}: the MPI call failed")
    record = coll.type_record(shape, d.np)
    n_rec = coll.RECORD_LEN
    type_f = getattr(MPI, _MPI_TYPE[d.name]).py2f()
    nbytes = count * scalar.itemsize(d)
    slot = _comm_slot(low, p["comm"])

    def body(fb, ptrs, ws, lo, hi, status):
        out, inp = ptrs
        in_place = out is inp      # the result donated to the operand's buffer
        fint = fb.load(fb.gep(ws, fb.i64(slot), I64), I64, 8)
        comm = fb.call("MPI_Comm_f2c", [fb.cast("trunc", fint, I32)], handle)
        dtype = fb.call("MPI_Type_f2c", [fb.i32(type_f)], handle)
        size_slot = fb.alloca(I32, 1, 4)
        rc = fb.call("MPI_Comm_size", [comm, size_slot], I32)
        fb.if_return(fb.icmp("ne", rc, fb.i32(0)), fb.i32(failed))
        size = fb.cast("sext", fb.load(size_slot, I32, 4), I64)
        # 2. the type check (nothing to compare in a world of one)
        fb.if_then(fb.icmp("sgt", size, fb.i64(1)), lambda: _type_check(fb, comm, size))
        # 3. the data
        if name == "all_reduce":
            op_f = getattr(MPI, coll.REDUCE_OPS[p["reduce_op"]]).py2f()
            mpi_op = fb.call("MPI_Op_f2c", [fb.i32(op_f)], handle)
            send = fb.emit(llvm.IntToPtrOp(fb.i64(int(MPI.IN_PLACE)))) if in_place else inp
            rc = fb.call("MPI_Allreduce", [send, out, fb.i32(count), dtype, mpi_op, comm], I32)
            if p["reduce_op"] == coll.AVG:
                _divide(fb, out, count, fb.cast("sitofp", size, scalar.compute_type(d)),
                        scalar.itemsize(d))
        elif name == "broadcast":
            if nbytes and not in_place:
                fb.intr("llvm.memcpy", [out, inp, fb.i64(nbytes), fb.const(False, I1)],
                        None, overload=[PTR, PTR, I64])
            rc = fb.call("MPI_Bcast", [out, fb.i32(count), dtype, fb.i32(p["src"]), comm], I32)
        else:
            rc = fb.call("MPI_Allgather", [inp, fb.i32(count), dtype, out, fb.i32(count), dtype,
                                           comm], I32)
        fb.if_return(fb.icmp("ne", rc, fb.i32(0)), fb.i32(failed))

    def _type_check(fb, comm, size):
        i64t = fb.call("MPI_Type_f2c", [fb.i32(MPI.INT64_T.py2f())], handle)
        mine = fb.alloca(I64, n_rec, 8)
        for i, v in enumerate(record):
            fb.store(fb.i64(v), fb.gep(mine, fb.i64(i), I64), 8)
        total = fb.mul(size, fb.i64(n_rec))
        every = fb.call("malloc", [fb.mul(total, fb.i64(8))], PTR)
        rc = fb.call("MPI_Allgather", [mine, fb.i32(n_rec), i64t, every, fb.i32(n_rec), i64t,
                                       comm], I32)

        def check(i, acc):
            a = fb.load(fb.gep(every, i, I64), I64, 8)
            b = fb.load(fb.gep(mine, fb.ibin("srem", i, fb.i64(n_rec)), I64), I64, 8)
            return [fb.ibin("or", acc, fb.icmp("ne", a, b))]
        (differs,) = fb.for_range(fb.i64(0), total, check, carried=[fb.const(False, I1)])
        fb.call("free", [every], None)
        fb.if_return(fb.icmp("ne", rc, fb.i32(0)), fb.i32(failed))
        fb.if_return(differs, fb.i32(bad_types))

    low.kernels.kernel(name, [low.slot_value(res), low.slot_value(x)], 1, body,
                       parallel_ok=False, can_fail=True)
    # Its failures come before it writes (the type check; an MPI error past
    # it leaves the job unusable anyway): a donated result keeps the call
    # all-or-nothing (lower.py's "atomic").
    low.kernels.calls[-1].fails_before_writing = True


def _divide(fb, buf, count: int, by, itemsize: int) -> None:
    """``buf[:count] /= by`` (the eager AVG's rounding: a true division)."""
    t = by.type

    def step(i):
        q = fb.gep(buf, i, t)
        fb.store(fb.fbin("fdiv", fb.load(q, t, itemsize), by), q, itemsize)
    fb.for_range(fb.i64(0), fb.i64(count), step)
