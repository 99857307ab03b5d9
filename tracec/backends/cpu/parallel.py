"""Splitting a kernel's outer loop across threads, in the object code.

A parallel call of a kernel ``i32 @k(ptr b0, ..., ptr err, i64 lo, i64 hi)``
with ``m`` pointer arguments (``parallel_call``) fills a context array
``[@k, b0, ..., err]`` on the caller's stack and runs ``[0, n)`` through
the module's ``run_for`` helper with ``@<prefix>chunk_m``, which loads the
kernel and its arguments from the context and calls it over one chunk; the
first nonzero result is returned, and all chunks always run and finish
before it returns.  One ``chunk_m`` serves every kernel of ``m`` pointer
arguments (emitted once per module as LLVM IR text, ``CHUNK``, since it
calls through a pointer): per-kernel wrappers were a tenth of a large
module's functions, and LLVM's code generation costs ~3 ms per function
however small.

``i32 @<prefix>run_for(ptr chunk, ptr ctx, i64 n, i64 align, i64 nthreads)``
is emitted once per module, as LLVM IR text (``RUN_FOR``; it calls through
pointers, which the ``llvm`` dialect converter cannot express; ``codegen``
puts it in place of its declaration).  It, its thread start routine and the
``chunk_m`` helpers are ``optnone`` (no IR optimization, FastISel): they
run a few dozen scalar instructions per kernel call or chunk, next to a
pool dispatch of microseconds, and at O3 they were ~12% of a small
module's LLVM time (the 784-512-512-10 step's 33 functions: 86 -> 76 ms,
one core; ``run_for`` alone ~11 ms, as much as the largest kernel).  When the exported global
``<prefix>run_for_pool`` (named by ``signature["pool_slot"]``) holds the
address of the process's worker pool (``pool.py``: ``tracec_pool_for``; the
runtime sets it after loading the object), it hands the range to the pool:
chunks of about ``n / (CHUNKS_PER_THREAD * nthreads)`` iterations (rounded
up to a multiple of ``align`` while that leaves a chunk per thread) taken
dynamically by the caller and the workers.  Where
it is null (a shared library built by ``tracec build``, or ``TRACEC_POOL=0``)
``run_for`` starts threads itself: ``[0, n)`` cut into ``min(nthreads, n,
MAX_THREADS)`` contiguous chunks, one thread each but the first (run by the
caller); a thread that cannot be created is not an error: its chunk runs on
the calling thread.  The lowering only uses this for kernels with enough
work to amortize the dispatch.
"""
from __future__ import annotations

from tracec.backends.cpu.builder import I32, I64, PTR, ModuleBuilder
from tracec.symbolic import Sym

__all__ = ["parallel_call", "MAX_THREADS", "RUN_FOR", "CHUNK"]

MAX_THREADS = 64
#: Chunks per thread of a pooled kernel (dynamic load balance).
CHUNKS_PER_THREAD = 4

#: The module's ``run_for`` (``@NAME``), with its thread start routine.
RUN_FOR = r"""
@NAME_pool = global ptr null, align 8

define internal ptr @NAME_start(ptr %t) noinline nounwind optnone {
  %fn = load ptr, ptr %t, align 8
  %p1 = getelementptr i64, ptr %t, i64 1
  %ctx = load ptr, ptr %p1, align 8
  %p2 = getelementptr i64, ptr %t, i64 2
  %lo = load i64, ptr %p2, align 8
  %p3 = getelementptr i64, ptr %t, i64 3
  %hi = load i64, ptr %p3, align 8
  %r = call i32 %fn(ptr %ctx, i64 %lo, i64 %hi)
  %p4 = getelementptr i64, ptr %t, i64 4
  %r64 = sext i32 %r to i64
  store i64 %r64, ptr %p4, align 8
  ret ptr null
}

define internal i32 @NAME(ptr %fn, ptr %ctx, i64 %n, i64 %align, i64 %nthreads) noinline nounwind optnone {
entry:
  %tpos = icmp sgt i64 %nthreads, 1
  %t1 = select i1 %tpos, i64 %nthreads, i64 1
  %per = mul i64 %t1, CHUNKS
  %n1 = add i64 %n, %per
  %n2 = sub i64 %n1, 1
  %g0 = sdiv i64 %n2, %per
  %gpos = icmp sgt i64 %g0, 1
  %g1 = select i1 %gpos, i64 %g0, i64 1
  %a1 = add i64 %g1, %align
  %a2 = sub i64 %a1, 1
  %a3 = sdiv i64 %a2, %align
  %up = mul i64 %a3, %align
  %nup = sdiv i64 %n, %up
  %enough = icmp sge i64 %nup, %t1
  %grain = select i1 %enough, i64 %up, i64 %g1
  %pool = load ptr, ptr @NAME_pool, align 8
  %have = icmp ne ptr %pool, null
  br i1 %have, label %pooled, label %spawn
pooled:
  %rp = call i32 %pool(ptr %fn, ptr %ctx, i64 %n, i64 %grain, i64 %nthreads)
  ret i32 %rp
spawn:
  %tasks = alloca [MAXT x [5 x i64]], align 16
  %tids = alloca [MAXT x i64], align 16
  %oks = alloca [MAXT x i8], align 16
  %a = icmp slt i64 %nthreads, %n
  %m1 = select i1 %a, i64 %nthreads, i64 %n
  %b = icmp slt i64 %m1, MAXT
  %m2 = select i1 %b, i64 %m1, i64 MAXT
  %c = icmp slt i64 %m2, 1
  %nt = select i1 %c, i64 1, i64 %m2
  br label %create
create:
  %i = phi i64 [ 1, %spawn ], [ %i1, %created ]
  %more = icmp slt i64 %i, %nt
  br i1 %more, label %create_body, label %run0
create_body:
  %t = getelementptr [MAXT x [5 x i64]], ptr %tasks, i64 0, i64 %i
  store ptr %fn, ptr %t, align 8
  %tc = getelementptr i64, ptr %t, i64 1
  store ptr %ctx, ptr %tc, align 8
  %nl = mul i64 %n, %i
  %lo = sdiv i64 %nl, %nt
  %i1 = add i64 %i, 1
  %nh = mul i64 %n, %i1
  %hi = sdiv i64 %nh, %nt
  %tl = getelementptr i64, ptr %t, i64 2
  store i64 %lo, ptr %tl, align 8
  %th = getelementptr i64, ptr %t, i64 3
  store i64 %hi, ptr %th, align 8
  %tid = getelementptr [MAXT x i64], ptr %tids, i64 0, i64 %i
  %cr = call i32 @pthread_create(ptr %tid, ptr null, ptr @NAME_start, ptr %t)
  %ok = icmp eq i32 %cr, 0
  %ok8 = zext i1 %ok to i8
  %okp = getelementptr [MAXT x i8], ptr %oks, i64 0, i64 %i
  store i8 %ok8, ptr %okp, align 1
  br label %created
created:
  br label %create
run0:
  %hi0 = sdiv i64 %n, %nt
  %r0 = call i32 %fn(ptr %ctx, i64 0, i64 %hi0)
  br label %join
join:
  %j = phi i64 [ 1, %run0 ], [ %j1, %joined ]
  %acc = phi i32 [ %r0, %run0 ], [ %acc1, %joined ]
  %jmore = icmp slt i64 %j, %nt
  br i1 %jmore, label %join_body, label %done
join_body:
  %jt = getelementptr [MAXT x [5 x i64]], ptr %tasks, i64 0, i64 %j
  %jokp = getelementptr [MAXT x i8], ptr %oks, i64 0, i64 %j
  %jok = load i8, ptr %jokp, align 1
  %started = icmp ne i8 %jok, 0
  br i1 %started, label %wait, label %inline
wait:
  %jtidp = getelementptr [MAXT x i64], ptr %tids, i64 0, i64 %j
  %jtid = load i64, ptr %jtidp, align 8
  %jr = call i32 @pthread_join(i64 %jtid, ptr null)
  %jrp = getelementptr i64, ptr %jt, i64 4
  %jr64 = load i64, ptr %jrp, align 8
  %rw = trunc i64 %jr64 to i32
  br label %joined
inline:
  %jlp = getelementptr i64, ptr %jt, i64 2
  %jlo = load i64, ptr %jlp, align 8
  %jhp = getelementptr i64, ptr %jt, i64 3
  %jhi = load i64, ptr %jhp, align 8
  %ri = call i32 %fn(ptr %ctx, i64 %jlo, i64 %jhi)
  br label %joined
joined:
  %r = phi i32 [ %rw, %wait ], [ %ri, %inline ]
  %j1 = add i64 %j, 1
  %keep = icmp ne i32 %acc, 0
  %acc1 = select i1 %keep, i32 %acc, i32 %r
  br label %join
done:
  ret i32 %acc
}
"""


def _run_for(mb: ModuleBuilder) -> str:
    key = ("run_for",)
    if key not in mb.shared:
        name = mb.unique("run_for")
        mb.declare("pthread_create", [PTR, PTR, PTR, PTR], I32)
        mb.declare("pthread_join", [I64, PTR], I32)
        mb.declare(name, [PTR, PTR, I64, I64, I64], I32)
        mb.helpers[name] = (RUN_FOR.replace("NAME", name).replace("MAXT", str(MAX_THREADS))
                            .replace("CHUNKS", str(CHUNKS_PER_THREAD)))
        mb.shared[key] = name
        mb.shared["pool_slot"] = name + "_pool"
    return mb.shared[key]


#: ``@NAME(ptr ctx, i64 lo, i64 hi)``: ``ctx[0]`` the kernel, ``ctx[1..M]`` its
#: pointer arguments (lines ARGS), called over ``[lo, hi)``.
CHUNK = r"""
define internal i32 @NAME(ptr %ctx, i64 %lo, i64 %hi) noinline nounwind optnone {
  %fn = load ptr, ptr %ctx, align 8
ARGS
  %r = call i32 %fn(CALLARGS i64 %lo, i64 %hi)
  ret i32 %r
}
"""


def _chunk(mb: ModuleBuilder, m: int) -> str:
    key = ("chunk", m)
    if key not in mb.shared:
        name = mb.unique(f"chunk_{m}")
        mb.declare(name, [PTR, I64, I64], I32)
        loads = "\n".join(f"  %p{j} = getelementptr ptr, ptr %ctx, i64 {j}\n"
                          f"  %a{j} = load ptr, ptr %p{j}, align 8" for j in range(1, m + 1))
        mb.helpers[name] = (CHUNK.replace("NAME", name)
                            .replace("CALLARGS", "".join(f"ptr %a{j}, " for j in range(1, m + 1)))
                            .replace("ARGS", loads))
        mb.shared[key] = name
    return mb.shared[key]


def parallel_call(fb, kernel: str, args: list, n, nthreads, align=1):
    """Emit a call of ``kernel`` over ``[0, n)`` split across threads; its
    i32 result.  ``args``: the kernel's pointer arguments (buffers, then
    the workspace).  Chunks are rounded up to a multiple of ``align``
    iterations while that leaves at least one chunk per thread (a GEMM's
    row blocks that share a packed block of B)."""
    mb = fb.mb
    run_for = _run_for(mb)
    chunk = _chunk(mb, len(args))
    # One context array per argument count and function: calls run one at
    # a time, and run_for returns only when every chunk has finished.
    ctx = fb.parallel_ctx.get(len(args))
    if ctx is None:
        ctx = fb.parallel_ctx[len(args)] = fb.alloca(PTR, len(args) + 1, 16)
    fb.store(fb.addressof(kernel), ctx, 8)
    for j, a in enumerate(args, 1):
        fb.store(a, fb.gep(ctx, fb.i64(j), PTR), 8)
    return fb.call(run_for, [fb.addressof(chunk), ctx, n,
                             fb.i64(align if isinstance(align, Sym) else max(1, align)),
                             nthreads], I32)
