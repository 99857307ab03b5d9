"""Size-generic code for a symbolic trace: one native compile for every size.

A symbolic trace (argument sizes that are symbols: ``B``, ``T``) runs the
passes and the backend once on its symbolic module, under the sizes of the
call that needs it (``symbolic.hinted``); the cpu backend emits code that
reads every size at run time (``backends/cpu/sized.py``).  Decisions the
passes and the backend made from those sizes are the executable's size
guards; a call whose sizes break one gets another version (``MAX_GENERIC``
at most).  Past that, and where no size-generic code can be made (a backend
without it, ``check=True``, a lowering
that needs a static size), the trace falls back to static code per size
(``compiled_entry.Entry.run``) and ``cache_info().notes`` says why.

Disk cache: the versions of one trace are stored under keys made from the
trace's key and a number (0, 1, ...); a process loads the first one whose
guards its sizes pass, so a new size in a fresh process compiles nothing.

Invariant: a generic entry runs a call only if the call's sizes pass its
executable's guards (``failed_guard``); it then has the effect of the
static code for those sizes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import warnings

from tracec import symbolic
from tracec.backends import cache

__all__ = ["MAX_GENERIC", "generic_for", "maker", "compile_generic", "compile_generic_backward"]

#: Versions of size-generic code a symbolic trace makes at most.
MAX_GENERIC = 4
#: Size bindings remembered per trace (each maps to the version serving it).
_MEMO = 1024


def generic_for(entry, env: dict, sizes: tuple):
    """The generic entry of symbolic ``entry`` that serves the sizes ``env``
    (made now if none does and another version may be), or None; the
    answer is remembered in ``entry.subs`` under ``sizes``."""
    sub = next((g for g in entry.generic if g.executable.failed_guard(env) is None), None)
    if sub is None and len(entry.generic) < MAX_GENERIC:
        sub = entry.make_generic(env)
        try:
            sub.ensure_compiled()
            why = sub.executable.failed_guard(env)
        except Exception as e:  # noqa: BLE001 - any failure: per-size code instead
            why = f"{type(e).__name__}: {e}"
        if why is not None:
            entry.generic_failed = why
            entry.make_generic = None
            return None
        entry.generic.append(sub)
    if sub is not None and len(entry.subs) < _MEMO:
        entry.subs[sizes] = sub
        entry.generic_served += 1
    return sub


def maker(cf, entry, backend, backward_out):
    """``make(env)`` for ``entry.make_generic``, or None where the backend
    or the trace cannot have size-generic code (``entry.generic_failed``
    then says why)."""
    why = None
    if not getattr(backend, "SIZE_GENERIC", False):
        why = f"the {cf.backend} backend compiles static sizes only"
    elif cf.check:
        why = "check=True compares static code"
    if why is not None:
        entry.generic_failed = why
        return None
    from tracec.compiled_entry import donations
    trace = dataclasses.replace(entry.trace, symbolic=None)   # the module stays symbolic
    donate = donations(trace)

    def make(env):
        sub = cf._make_entry(trace, backward_out)
        sub.number = f"{entry.number}.g{len(entry.generic)}"
        sub.compile_fn = lambda: compile_generic(cf, backend, sub, env, donate)
        if sub.backward_plan is not None:
            sub.backward_plan.generic = lambda module, optimize, env: \
                compile_generic_backward(cf, backend, module, optimize, env)
        return sub
    return make


def compile_generic_backward(cf, backend, module, optimize, env: dict):
    """The size-generic executable of a compiled forward's backward
    (``compiled_backward.BackwardPlan.run``): a version in the disk cache
    whose guards ``env`` passes, else the passes and the backend run on
    the symbolic backward ``module`` under the sizes ``env`` of the call
    that needs it (their decisions are its guards)."""
    def build():
        with symbolic.hinted(env), symbolic.recorded_guards() as guards:
            return backend.compile_module(optimize(), size_guards=guards)
    return _versions(cf, backend, module, "generic-backward", env, build)[0]


def compile_generic(cf, backend, sub, env: dict, donate):
    """``(executable, timings)`` for generic entry ``sub`` serving ``env``:
    a cached version whose guards ``env`` passes, or the passes and the
    backend run under ``env``'s sizes (and the result cached)."""
    def build():
        sub.size_env = dict(env)
        with symbolic.hinted(env), symbolic.recorded_guards() as guards:
            module = sub.optimized()
            exe = backend.compile_module(module, donate=donate, size_guards=guards)
        if hasattr(exe, "signature"):
            exe.signature["size_hints"] = sub.size_env   # (recompiling: Entry.compile_again)
        return exe

    def loaded(signature):
        sub.size_env = dict(signature.get("size_hints") or env)
    return _versions(cf, backend, sub.stages["trace"], f"generic|{sorted(donate.items())}",
                     env, build, loaded)


def _versions(cf, backend, module, tag: str, env: dict, build, loaded=None):
    """``(executable, timings)``: the first version of size-generic code for
    ``module`` (before its passes) in the disk cache whose guards ``env``
    passes, else ``build()``'s (stored as the next version)."""
    if os.environ.get("TRACEC_NO_CACHE") or not hasattr(backend, "load_object"):
        cf.compiles += 1
        return build(), {}
    target = backend.target_id() if hasattr(backend, "target_id") else ""
    base = "|".join((cache.fingerprint(module, locations=True), cf.backend,
                     target, cache.source_digest(), tag))
    disk = cache.DiskCache()
    free = None
    for n in range(MAX_GENERIC * 4):
        key = hashlib.sha256(f"{base}|{n}".encode()).hexdigest()
        hit = disk.get(key)
        if hit is None:
            free = key
            break
        try:
            exe = backend.load_object(hit[1], hit[0]["signature"])
        except Exception as e:  # noqa: BLE001 - a foreign or stale entry: skip it
            warnings.warn(f"tracec cache: skipping unusable entry {key[:12]}: {e}")
            continue
        if exe.failed_guard(env) is None:
            if loaded is not None:
                loaded(hit[0]["signature"])
            cf.loads += 1
            return exe, {"cache": "hit"}
    exe = build()
    cf.compiles += 1
    if free is not None:
        try:
            disk.put(free, {"signature": exe.signature}, exe.object_code)
        except OSError as e:
            warnings.warn(f"tracec cache: cannot write the cache ({e}); continuing")
    return exe, {"cache": "miss"}
