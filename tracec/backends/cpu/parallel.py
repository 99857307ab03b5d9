"""Splitting a kernel's outer loop across threads, in the object code.

For a kernel ``i32 @k(ptr b0, ..., ptr err, i64 lo, i64 hi)`` this emits

* ``ptr @k_task(ptr task)``: a pthread start routine; ``task`` is an array
  of 8-byte slots ``[b0, ..., err, lo, hi, result]``;
* ``i32 @k_par(ptr b0, ..., ptr err, i64 n, i64 nthreads)``: cuts
  ``[0, n)`` into ``min(nthreads, n, MAX_THREADS)`` contiguous chunks,
  starts a thread per chunk but the first (``pthread_create``), runs the
  first chunk itself, joins the others and returns the first nonzero
  result (all chunks always finish before it returns).

Threads are created per call and joined before the kernel returns, so there
is no pool to manage, nothing outlives the call, the object needs only
libpthread (the AOT library links the same code), and a thread that cannot
be created is not an error: its chunk runs on the calling thread.  The
lowering only uses this for kernels with enough work to amortize thread
creation (tens of microseconds).
"""
from __future__ import annotations

from xdsl.dialects import llvm

from tracec.backends.cpu.builder import I8, I32, I64, PTR, ModuleBuilder

__all__ = ["emit_parallel", "MAX_THREADS"]

MAX_THREADS = 64


def _declare(mb: ModuleBuilder) -> None:
    mb.declare("pthread_create", [PTR, PTR, PTR, PTR], I32)
    mb.declare("pthread_join", [I64, PTR], I32)


def _to_ptr(fb, v):
    return fb.emit(llvm.IntToPtrOp.create(operands=[v], result_types=[PTR]))


def _to_int(fb, p):
    return fb.emit(llvm.PtrToIntOp.create(operands=[p], result_types=[I64]))


def emit_parallel(mb: ModuleBuilder, kernel: str, k: int) -> str:
    """Emit ``kernel``'s task and parallel wrappers; the wrapper's name."""
    _declare(mb)
    slots = k + 4

    # Task slots are all pointer-typed (llvmlite's typed-pointer builder
    # refuses mixed stores into one array); integers travel as inttoptr.
    task = mb.function(f"{kernel}_task", [PTR], PTR)
    t = task.args[0]
    vals = [task.load(task.gep(t, task.i64(i), PTR), PTR, 8) for i in range(k + 3)]
    lo, hi = (_to_int(task, v) for v in vals[k + 1:])
    r = task.call(kernel, vals[:k + 1] + [lo, hi], I32)
    task.store(_to_ptr(task, task.cast("sext", r, I64)), task.gep(t, task.i64(k + 3), PTR), 8)
    null = task.emit(llvm.ZeroOp.create(result_types=[PTR]))
    task.ret_(null)
    task.finish()

    fb = mb.function(f"{kernel}_par", [PTR] * (k + 1) + [I64, I64], I32)
    bufs = fb.args[:k + 1]
    n, nthreads = fb.args[k + 1], fb.args[k + 2]
    tasks = fb.alloca(PTR, MAX_THREADS * slots, 16)
    tids = fb.alloca(I64, MAX_THREADS, 16)
    ok = fb.alloca(I8, MAX_THREADS, 16)

    def smin(a, b):
        return fb.select(fb.icmp("slt", a, b), a, b)
    nt = smin(smin(nthreads, n), fb.i64(MAX_THREADS))
    nt = fb.select(fb.icmp("slt", nt, fb.i64(1)), fb.i64(1), nt)

    def chunk_lo(i):
        return fb.ibin("sdiv", fb.mul(n, i), nt)

    def spawn(i):
        base = fb.mul(i, fb.i64(slots))
        for j, b in enumerate(bufs):
            fb.store(b, fb.gep(tasks, fb.add(base, fb.i64(j)), PTR), 8)
        fb.store(_to_ptr(fb, chunk_lo(i)), fb.gep(tasks, fb.add(base, fb.i64(k + 1)), PTR), 8)
        fb.store(_to_ptr(fb, chunk_lo(fb.add(i, fb.i64(1)))),
                 fb.gep(tasks, fb.add(base, fb.i64(k + 2)), PTR), 8)
        rc = fb.call("pthread_create", [fb.gep(tids, i, I64), fb.emit(
            llvm.ZeroOp.create(result_types=[PTR])), fb.addressof(f"{kernel}_task"),
            fb.gep(tasks, base, I64)], I32)
        fb.store(fb.cast("zext", fb.icmp("eq", rc, fb.i32(0)), I8), fb.gep(ok, i, I8), 1)
        return ()
    fb.for_range(fb.i64(1), nt, spawn)
    r0 = fb.call(kernel, list(bufs) + [fb.i64(0), chunk_lo(fb.i64(1))], I32)

    def join(i, acc):
        started = fb.icmp("ne", fb.load(fb.gep(ok, i, I8), I8, 1), fb.const(0, I8))
        jb, rb = fb.new_block(), fb.new_block()
        merge = fb.new_block([I32])
        fb.cond_br(started, jb, rb)
        fb.set_block(jb)
        fb.call("pthread_join", [fb.load(fb.gep(tids, i, I64), I64, 8),
                                 fb.emit(llvm.ZeroOp.create(result_types=[PTR]))], I32)
        base = fb.mul(i, fb.i64(slots))
        r1 = fb.cast("trunc", _to_int(fb, fb.load(fb.gep(tasks, fb.add(base, fb.i64(k + 3)), PTR),
                                                    PTR, 8)), I32)
        fb.br(merge, r1)
        fb.set_block(rb)
        r2 = fb.call(kernel, list(bufs) + [chunk_lo(i), chunk_lo(fb.add(i, fb.i64(1)))], I32)
        fb.br(merge, r2)
        fb.set_block(merge)
        r = merge.args[0]
        return [fb.select(fb.icmp("ne", acc, fb.i32(0)), acc, r)]
    (acc,) = fb.for_range(fb.i64(1), nt, join, carried=[r0])
    fb.ret_(acc)
    fb.finish()
    return f"{kernel}_par"
