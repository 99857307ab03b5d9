"""The process's worker threads for parallel kernels.

Starting a thread per parallel kernel (what ``parallel.py`` falls back to)
costs a ``pthread_create`` and, worse, the wake-up of an idle core: about
120 us on a virtual machine, as long as a whole mid-sized kernel.  This
module is a small runtime library, written in LLVM IR (it needs atomics,
which the ``llvm`` dialect converter lacks) and linked once per process into
the JIT, that keeps workers alive:

    i32 tracec_pool_for(ptr chunk, ptr ctx, i64 n, i64 grain, i64 nthreads)

runs ``i32 chunk(ctx, lo, hi)`` over ``[0, n)`` in chunks of ``grain``, the
caller and up to ``nthreads - 1`` workers taking chunks from a shared counter
(dynamic scheduling: a worker that wakes late takes fewer chunks, never
delays the call), and returns the first nonzero result (0 if none); every
chunk runs even when one fails.  Workers spin for ``tracec_pool_spin_ns``
(default 0.5 ms) after each job, so the next kernel of a step finds them
awake, then sleep on a condition variable.

Protocol: a job is published with a new generation number; a worker *joins*
it by a compare-and-swap on a word holding (generation, closed flag, joined
count); when the caller has run out of chunks it closes the job and waits
only for the workers that joined, so a worker that is still asleep costs
nothing.  One job at a time: a caller that finds the pool busy (another
thread's job) runs its whole range itself.  A forked child starts with no
workers.  ``tracec_pool_shutdown()`` (registered with ``atexit``) stops and
joins the workers before the JIT's memory goes away.

Kernels reach ``tracec_pool_for`` through a pointer the runtime stores in
each loaded object (``parallel.py``); a shared library built by ``tracec
build`` links its own copy (``object_code()``) and sets that pointer on its
first call.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import threading

__all__ = ["library_name", "POOL_FOR"]

POOL_FOR = "tracec_pool_for"
_NAME = "tracec_pool_runtime"
_lock = threading.Lock()
_state: dict = {}

_IR = r"""
@tp_mutex = internal global [64 x i8] zeroinitializer, align 64
@tp_cond = internal global [64 x i8] zeroinitializer, align 64
@tp_run = internal global [64 x i8] zeroinitializer, align 64
@tp_gen = internal global i64 0, align 64
@tp_join = internal global i64 0, align 64
@tp_done = internal global i64 0, align 64
@tp_next = internal global i64 0, align 64
@tp_sleepers = internal global i64 0, align 64
@tp_rc = internal global i32 0, align 64
@tp_stop = internal global i64 0, align 64
@tp_fn = internal global ptr null, align 64
@tp_ctx = internal global ptr null, align 8
@tp_n = internal global i64 0, align 8
@tp_grain = internal global i64 0, align 8
@tp_active = internal global i64 0, align 8
@tp_nworkers = internal global i64 0, align 8
@tp_pid = internal global i32 0, align 8
@tp_tids = internal global [64 x i64] zeroinitializer, align 8
@tracec_pool_spin_ns = global i64 500000, align 8

declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_trylock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i32 @getpid()
declare i32 @clock_gettime(i32, ptr)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
PAUSE_DECL

define internal void @tp_pause() nounwind {
  PAUSE_CALL
  ret void
}

define internal i64 @tp_now(ptr %ts) nounwind {
  %r = call i32 @clock_gettime(i32 1, ptr %ts)
  %s = load i64, ptr %ts, align 8
  %np = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %np, align 8
  %m = mul i64 %s, 1000000000
  %t = add i64 %m, %ns
  ret i64 %t
}

; Take chunks of the current job until none is left.
define internal void @tp_work() nounwind {
entry:
  %fn = load ptr, ptr @tp_fn, align 8
  %ctx = load ptr, ptr @tp_ctx, align 8
  %n = load i64, ptr @tp_n, align 8
  %g = load i64, ptr @tp_grain, align 8
  br label %loop
loop:
  %lo = atomicrmw add ptr @tp_next, i64 %g monotonic, align 8
  %done = icmp sge i64 %lo, %n
  br i1 %done, label %exit, label %body
body:
  %e = add i64 %lo, %g
  %lt = icmp slt i64 %e, %n
  %hi = select i1 %lt, i64 %e, i64 %n
  %rc = call i32 %fn(ptr %ctx, i64 %lo, i64 %hi)
  %bad = icmp ne i32 %rc, 0
  br i1 %bad, label %err, label %loop
err:
  %x = cmpxchg ptr @tp_rc, i32 0, i32 %rc seq_cst seq_cst, align 4
  br label %loop
exit:
  ret void
}

; Join the job of generation %g unless it is closed; 1 if joined.
define internal i1 @tp_try_join(i64 %g) nounwind {
entry:
  %want = shl i64 %g, 32
  br label %loop
loop:
  %s = load atomic i64, ptr @tp_join seq_cst, align 8
  %hiword = and i64 %s, -4294967296
  %closed = and i64 %s, 2147483648
  %same = icmp eq i64 %hiword, %want
  %open = icmp eq i64 %closed, 0
  %ok = and i1 %same, %open
  br i1 %ok, label %cas, label %no
cas:
  %s1 = add i64 %s, 1
  %r = cmpxchg ptr @tp_join, i64 %s, i64 %s1 seq_cst seq_cst, align 8
  %won = extractvalue { i64, i1 } %r, 1
  br i1 %won, label %yes, label %loop
yes:
  ret i1 true
no:
  ret i1 false
}

define internal ptr @tp_worker(ptr %arg) nounwind {
entry:
  %ts = alloca [2 x i64], align 8
  %a = ptrtoint ptr %arg to i64
  %idx = and i64 %a, 255
  %seen0 = lshr i64 %a, 8
  br label %wait
wait:
  %seen = phi i64 [ %seen0, %entry ], [ %g, %next ], [ %seen, %slept ]
  %t0 = call i64 @tp_now(ptr %ts)
  br label %spin
spin:
  %g = load atomic i64, ptr @tp_gen seq_cst, align 8
  %new = icmp ne i64 %g, %seen
  br i1 %new, label %got, label %spin2
spin2:
  %stop = load atomic i64, ptr @tp_stop seq_cst, align 8
  %s = icmp ne i64 %stop, 0
  br i1 %s, label %quit, label %spin3
spin3:
  call void @tp_pause()
  %t = call i64 @tp_now(ptr %ts)
  %el = sub i64 %t, %t0
  %lim = load i64, ptr @tracec_pool_spin_ns, align 8
  %long = icmp sgt i64 %el, %lim
  br i1 %long, label %sleep, label %spin
sleep:
  %l1 = call i32 @pthread_mutex_lock(ptr @tp_mutex)
  %s0 = atomicrmw add ptr @tp_sleepers, i64 1 seq_cst, align 8
  br label %check
check:
  %g3 = load atomic i64, ptr @tp_gen seq_cst, align 8
  %st3 = load atomic i64, ptr @tp_stop seq_cst, align 8
  %still = icmp eq i64 %g3, %seen
  %nostop = icmp eq i64 %st3, 0
  %w = and i1 %still, %nostop
  br i1 %w, label %block, label %woke
block:
  %cw = call i32 @pthread_cond_wait(ptr @tp_cond, ptr @tp_mutex)
  br label %check
woke:
  %s2 = atomicrmw sub ptr @tp_sleepers, i64 1 seq_cst, align 8
  %u1 = call i32 @pthread_mutex_unlock(ptr @tp_mutex)
  br label %slept
slept:
  br label %wait
got:
  %act = load i64, ptr @tp_active, align 8
  %lim1 = sub i64 %act, 1
  %allowed = icmp slt i64 %idx, %lim1
  br i1 %allowed, label %join, label %next
join:
  %joined = call i1 @tp_try_join(i64 %g)
  br i1 %joined, label %work, label %next
work:
  call void @tp_work()
  %d = atomicrmw add ptr @tp_done, i64 1 seq_cst, align 8
  br label %next
next:
  br label %wait
quit:
  ret ptr null
}

define i32 @tracec_pool_for(ptr %fn, ptr %ctx, i64 %n, i64 %grain, i64 %nthreads) nounwind {
entry:
  %few = icmp sle i64 %nthreads, 1
  %one = icmp sle i64 %n, %grain
  %serial = or i1 %few, %one
  br i1 %serial, label %alone, label %trylock
alone:
  %r0 = call i32 %fn(ptr %ctx, i64 0, i64 %n)
  ret i32 %r0
trylock:
  %tl = call i32 @pthread_mutex_trylock(ptr @tp_run)
  %busy = icmp ne i32 %tl, 0
  br i1 %busy, label %alone, label %locked
locked:
  %pid = call i32 @getpid()
  %opid = load i32, ptr @tp_pid, align 4
  %forked = icmp ne i32 %pid, %opid
  br i1 %forked, label %reset, label %spawn_check
reset:
  store i32 %pid, ptr @tp_pid, align 4
  store i64 0, ptr @tp_nworkers, align 8
  store atomic i64 0, ptr @tp_sleepers seq_cst, align 8
  call void @llvm.memset.p0.i64(ptr @tp_mutex, i8 0, i64 64, i1 false)
  call void @llvm.memset.p0.i64(ptr @tp_cond, i8 0, i64 64, i1 false)
  br label %spawn_check
spawn_check:
  %want0 = sub i64 %nthreads, 1
  %cap = icmp sgt i64 %want0, 63
  %want = select i1 %cap, i64 63, i64 %want0
  %gen = load atomic i64, ptr @tp_gen seq_cst, align 8
  br label %spawn_loop
spawn_loop:
  %nw = load i64, ptr @tp_nworkers, align 8
  %more = icmp slt i64 %nw, %want
  br i1 %more, label %spawn, label %publish
spawn:
  %sh = shl i64 %gen, 8
  %packed = or i64 %sh, %nw
  %argp = inttoptr i64 %packed to ptr
  %tidp = getelementptr [64 x i64], ptr @tp_tids, i64 0, i64 %nw
  %cr = call i32 @pthread_create(ptr %tidp, ptr null, ptr @tp_worker, ptr %argp)
  %ok = icmp eq i32 %cr, 0
  br i1 %ok, label %spawned, label %publish
spawned:
  %nw1 = add i64 %nw, 1
  store i64 %nw1, ptr @tp_nworkers, align 8
  br label %spawn_loop
publish:
  store ptr %fn, ptr @tp_fn, align 8
  store ptr %ctx, ptr @tp_ctx, align 8
  store i64 %n, ptr @tp_n, align 8
  store i64 %grain, ptr @tp_grain, align 8
  store i64 %nthreads, ptr @tp_active, align 8
  store atomic i64 0, ptr @tp_next seq_cst, align 8
  store atomic i32 0, ptr @tp_rc seq_cst, align 4
  store atomic i64 0, ptr @tp_done seq_cst, align 8
  %gen1 = add i64 %gen, 1
  %jw = shl i64 %gen1, 32
  store atomic i64 %jw, ptr @tp_join seq_cst, align 8
  store atomic i64 %gen1, ptr @tp_gen seq_cst, align 8
  %sl = load atomic i64, ptr @tp_sleepers seq_cst, align 8
  %anysl = icmp ne i64 %sl, 0
  br i1 %anysl, label %wake, label %work
wake:
  %l2 = call i32 @pthread_mutex_lock(ptr @tp_mutex)
  %b2 = call i32 @pthread_cond_broadcast(ptr @tp_cond)
  %u2 = call i32 @pthread_mutex_unlock(ptr @tp_mutex)
  br label %work
work:
  call void @tp_work()
  br label %close
close:
  %s = load atomic i64, ptr @tp_join seq_cst, align 8
  %sc = or i64 %s, 2147483648
  %r = cmpxchg ptr @tp_join, i64 %s, i64 %sc seq_cst seq_cst, align 8
  %won = extractvalue { i64, i1 } %r, 1
  br i1 %won, label %closed, label %close
closed:
  %joined = and i64 %s, 2147483647
  br label %wait
wait:
  %dn = load atomic i64, ptr @tp_done seq_cst, align 8
  %all = icmp eq i64 %dn, %joined
  br i1 %all, label %done, label %wait_pause
wait_pause:
  call void @tp_pause()
  br label %wait
done:
  %rc = load atomic i32, ptr @tp_rc seq_cst, align 4
  %u3 = call i32 @pthread_mutex_unlock(ptr @tp_run)
  ret i32 %rc
}

define void @tracec_pool_shutdown() nounwind {
entry:
  %l = call i32 @pthread_mutex_lock(ptr @tp_run)
  %pid = call i32 @getpid()
  %opid = load i32, ptr @tp_pid, align 4
  %forked = icmp ne i32 %pid, %opid
  br i1 %forked, label %out, label %stop
stop:
  store atomic i64 1, ptr @tp_stop seq_cst, align 8
  %l2 = call i32 @pthread_mutex_lock(ptr @tp_mutex)
  %b = call i32 @pthread_cond_broadcast(ptr @tp_cond)
  %u2 = call i32 @pthread_mutex_unlock(ptr @tp_mutex)
  %nw = load i64, ptr @tp_nworkers, align 8
  br label %loop
loop:
  %i = phi i64 [ 0, %stop ], [ %i1, %body ]
  %more = icmp slt i64 %i, %nw
  br i1 %more, label %body, label %fin
body:
  %tp = getelementptr [64 x i64], ptr @tp_tids, i64 0, i64 %i
  %tid = load i64, ptr %tp, align 8
  %j = call i32 @pthread_join(i64 %tid, ptr null)
  %i1 = add i64 %i, 1
  br label %loop
fin:
  store i64 0, ptr @tp_nworkers, align 8
  store atomic i64 0, ptr @tp_stop seq_cst, align 8
  br label %out
out:
  %u = call i32 @pthread_mutex_unlock(ptr @tp_run)
  ret void
}
"""


def _source(triple: str) -> str:
    if triple.startswith(("x86_64", "i686", "i386")):
        decl, call = "declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"
    elif triple.startswith(("aarch64", "arm64")):
        decl, call = "declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"
    else:
        decl, call = "", ""
    return _IR.replace("PAUSE_DECL", decl).replace("PAUSE_CALL", call)


def library_name() -> str | None:
    """The JIT library holding the pool (built and linked on first use; it
    is never unloaded), or None where it cannot be built or the environment
    sets ``TRACEC_POOL=0`` (kernels then start their own threads).
    ``TRACEC_POOL_SPIN_US`` sets how long idle workers spin."""
    with _lock:
        if "name" not in _state:
            _state["name"] = None
            if os.environ.get("TRACEC_POOL", "1") != "0":
                try:
                    _state["name"] = _build()
                except Exception:  # no pool: kernels start their own threads
                    _state["name"] = None
                spin = os.environ.get("TRACEC_POOL_SPIN_US")
                if _state["name"] is not None and spin:
                    _state["spin"].value = int(float(spin) * 1000)
        return _state["name"]


def object_code() -> bytes:
    """The pool as object code for the host (position independent): linked
    into the JIT here, and into the shared libraries ``tracec build`` makes.
    Kept in the disk cache (under ``runtime/``, keyed by the IR text and the
    target): code generation would cost each new process ~20 ms."""
    from tracec.backends.cpu import codegen
    from tracec.backends.cpu.checked_call import runtime_object
    return runtime_object("worker pool", _source(codegen.host()[0]))


def _build() -> str:
    from tracec.backends.cpu import runtime
    tracker = runtime._link(object_code(), [POOL_FOR, "tracec_pool_shutdown",
                                            "tracec_pool_spin_ns"])
    _state["tracker"] = tracker           # kept for the life of the process
    shutdown = ctypes.CFUNCTYPE(None)(tracker["tracec_pool_shutdown"])
    _state["shutdown"] = shutdown
    atexit.register(shutdown)
    _state["spin"] = ctypes.c_int64.from_address(tracker["tracec_pool_spin_ns"])
    return _NAME


def address() -> int:
    """The address of ``tracec_pool_for`` (0 if there is no pool)."""
    if library_name() is None:
        return 0
    return int(_state["tracker"][POOL_FOR])


def set_spin_ns(ns: int) -> None:
    """How long idle workers spin before they sleep (nanoseconds)."""
    if library_name() is not None:
        _state["spin"].value = int(ns)
