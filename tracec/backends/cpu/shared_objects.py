"""Object code as shared libraries, so that loading cached code needs no LLVM.

A process that finds its compiled code in the disk cache would otherwise
link the object bytes with llvmlite's LLJIT, importing llvmlite (~35 ms of a
warm start) for that alone.  Here object bytes the JIT linked are also
linked, once per machine, by the system's C compiler into a shared library
kept in the disk cache's folder (``<cache>/v1/<k[:2]>/<k>.so``, ``k`` the
SHA-256 of the object bytes and the exported names); a later process
``dlopen``s it (ctypes) instead.

- Building (``schedule``): after a JIT link, queued; when the process exits
  it starts ``sh -c 'cc ... -o tmp && mv tmp final'`` children (four at a
  time, each in its own session) and waits for them at most ``EXIT_BUDGET``
  (0.5 s; ~15-30 ms of CPU per library): the process's own work is never
  slowed, and the next process finds the libraries.  Links still running
  then finish on their own.  The rename makes a reader see no library or a
  whole one.
- Exports: only the names the caller links for (a version script);
  everything else is local, so libraries loaded side by side never bind to
  each other's helpers.  A library whose routines other code calls (the
  GEMM library, ``shared=True``) is loaded ``RTLD_GLOBAL`` so that modules'
  undefined references to them resolve when those are loaded.
- The JIT stays the fallback: with ``TRACEC_SHARED_OBJECTS=0`` or
  ``TRACEC_NO_CACHE``, without a C compiler, off Linux, or when a library
  fails to load or lacks a name (then it is removed and built again).

Invariant: a library is only ever loaded from the path named by the digest
of the very object bytes (already checked by the disk cache) and names the
caller holds; anything short of a clean ``dlopen`` with every name present
goes to the JIT, so results never depend on which path loaded the code.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

__all__ = ["SharedLibrary", "enabled", "load", "schedule", "wait"]

_lock = threading.Lock()
_scheduled: set = set()


def enabled() -> bool:
    return (sys.platform.startswith("linux") and not os.environ.get("TRACEC_NO_CACHE")
            and os.environ.get("TRACEC_SHARED_OBJECTS", "1") != "0"
            and not os.path.exists(_refused_marker()))


def _refused_marker() -> str:
    """A file saying the cache's folder may not hold code (a ``noexec``
    mount): libraries are neither built nor loaded there again (``tracec
    cache clear`` removes it, to try again)."""
    from tracec.backends import cache
    return os.path.join(cache.DiskCache().root, ".no-shared-libraries")


def _key(blob: bytes, names) -> str:
    h = hashlib.sha256(blob)
    h.update(("|" + ",".join(sorted(names))).encode())
    return h.hexdigest()


def _path(key: str) -> str:
    from tracec.backends import cache
    return os.path.join(cache.DiskCache().root, key[:2], key + ".so")


class SharedLibrary:
    """A loaded library; ``lib[name]`` is the address of an exported
    function or variable (as LLJIT's resource tracker gives it)."""

    def __init__(self, path: str, shared: bool):
        self._lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL if shared else ctypes.RTLD_LOCAL)
        self.path = path

    def __getitem__(self, name: str) -> int:
        try:
            return ctypes.addressof(ctypes.c_char.in_dll(self._lib, name))
        except ValueError:
            raise KeyError(name) from None


def load(blob: bytes, names, shared: bool = False) -> SharedLibrary | None:
    """The library built from ``blob`` exporting ``names``, or None (not
    built, or unusable: then it is removed so that it is built again)."""
    if not enabled():
        return None
    path = _path(_key(blob, names))
    if not os.path.exists(path):
        return None
    try:
        lib = SharedLibrary(path, shared)
        for n in names:
            lib[n]
        return lib
    except (OSError, KeyError) as e:
        # A library whose GEMM routines this process holds in the JIT (not
        # as a library) fails on an undefined symbol: fine, the JIT links
        # it.  Anything else is a broken file: removed, built again.
        if "undefined symbol" not in str(e):
            try:
                os.remove(path)
            except OSError:
                pass
        if "failed to map segment" in str(e):     # the folder is mounted noexec
            try:
                with open(_refused_marker(), "w") as f:
                    f.write(f"{e}\n")
            except OSError:
                pass
        return None


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


#: Links waiting in this process (more are dropped: they are scheduled
#: again by a later process that links the same code).
MAX_PENDING = 32
#: How long an exiting process waits for its links (s); links still running
#: then finish after it (each in its own session, renaming its result).
EXIT_BUDGET = 0.5
_queue: list = []
_registered = [False]


def schedule(blob: bytes, names, objects: list[bytes]) -> None:
    """Queue the building of the library of ``blob`` (its ``objects``)
    exporting ``names``, unless it exists or this process queued it.  The
    queue is linked when the process exits (``_at_exit``): linking while it
    runs would take CPU from what it is doing (on one core, from the very
    compile that queued it), and the library only serves later processes."""
    if not enabled() or _compiler() is None:
        return
    key = _key(blob, names)
    path = _path(key)
    with _lock:
        if key in _scheduled or len(_queue) >= MAX_PENDING or os.path.exists(path):
            return
        _scheduled.add(key)
        _queue.append((path, sorted(names), list(objects)))
        if not _registered[0]:
            _registered[0] = True
            atexit.register(_at_exit)


def _after_fork() -> None:   # a forked child links nothing of its parent's
    global _lock
    _lock = threading.Lock()
    _queue.clear()


os.register_at_fork(after_in_child=_after_fork)


def wait() -> None:
    """Link everything queued now, and wait for it (tests)."""
    _flush(None)


def _at_exit() -> None:
    _flush(EXIT_BUDGET)


def _flush(budget: float | None, parallel: int = 4) -> None:
    """Start the queued links, ``parallel`` at a time, waiting at most
    ``budget`` seconds in all (None: until all are done)."""
    with _lock:
        jobs = list(_queue)
        _queue.clear()
    deadline = None if budget is None else time.monotonic() + budget
    running: list = []

    def left():
        return None if deadline is None else max(0.0, deadline - time.monotonic())
    for job in jobs:
        if deadline is not None and left() == 0.0:
            break
        while len(running) >= parallel:
            try:
                running.pop(0).wait(timeout=left())
            except subprocess.TimeoutExpired:
                return      # out of time: the started links finish on their own
        try:
            running.append(_start(*job))
        except OSError:
            pass   # no library: the JIT links this code next time too
    for p in running:
        try:
            p.wait(timeout=left())
        except subprocess.TimeoutExpired:
            return


def _start(path: str, names: list[str], objects: list[bytes]) -> subprocess.Popen:
    """Start linking in a child in its own session that renames the result
    into place itself (so a process that exits meanwhile leaves it to
    finish) and removes its folder."""
    from tracec.backends.cpu.codegen import write_objects
    os.makedirs(os.path.dirname(path), exist_ok=True)
    work = tempfile.mkdtemp(prefix=".so-", dir=os.path.dirname(path))
    objs = write_objects(objects, work, "part")
    script = os.path.join(work, "exports.map")
    with open(script, "w") as f:
        f.write(f"{{ global: {'; '.join(names)}; local: *; }};\n")
    tmp = os.path.join(work, "lib.so")
    link = [_compiler(), "-shared", "-fPIC", "-o", tmp, *objs, "-lm", "-lpthread",
            f"-Wl,--version-script={script}"]
    cmd = (f"{shlex.join(link)} >/dev/null 2>&1 && mv -f {shlex.quote(tmp)} "
           f"{shlex.quote(path)}; rm -rf {shlex.quote(work)}")
    return subprocess.Popen(["sh", "-c", cmd], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, close_fds=True)
