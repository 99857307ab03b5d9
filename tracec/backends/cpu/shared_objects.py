"""Object code as shared libraries, so that loading cached code needs no LLVM.

A process that finds its compiled code in the disk cache would otherwise
link the object bytes with llvmlite's LLJIT, importing llvmlite (~35 ms of a
warm start) for that alone.  Here object bytes the JIT linked are also
linked, once per machine, by the system's C compiler into a shared library
kept in the disk cache's folder (``<cache>/v1/<k[:2]>/<k>.so``, ``k`` the
SHA-256 of the object bytes and the exported names); a later process
``dlopen``s it (ctypes) instead.

- Building (``schedule``): after a JIT link, queued for one thread that runs
  ``nice``d ``sh -c 'cc ... -o tmp && mv tmp final'`` children one at a
  time, each in its own session, so that they neither slow the process that
  made the code (they run on idle cycles) nor die with it.  The rename makes
  a reader see no library or a whole one.
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

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading

__all__ = ["SharedLibrary", "enabled", "load", "schedule", "wait"]

_lock = threading.Lock()
_scheduled: set = set()


def enabled() -> bool:
    return (sys.platform.startswith("linux") and not os.environ.get("TRACEC_NO_CACHE")
            and os.environ.get("TRACEC_SHARED_OBJECTS", "1") != "0")


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
        return None


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


#: Links waiting in this process (more are dropped: they are scheduled
#: again by a later process that links the same code).
MAX_PENDING = 32
_queue: list = []
_worker: list = [None]


def schedule(blob: bytes, names, objects: list[bytes]) -> None:
    """Queue the building of the library of ``blob`` (its ``objects``)
    exporting ``names``, unless it exists or this process queued it.  One
    thread links them one at a time (so a burst of compiles never starts a
    burst of linkers)."""
    if not enabled() or _compiler() is None:
        return
    key = _key(blob, names)
    path = _path(key)
    with _lock:
        if key in _scheduled or len(_queue) >= MAX_PENDING or os.path.exists(path):
            return
        _scheduled.add(key)
        _queue.append((path, sorted(names), list(objects)))
        if _worker[0] is None:
            _worker[0] = threading.Thread(target=_drain, name="tracec-shared-objects",
                                          daemon=True)
            _worker[0].start()


def _after_fork() -> None:   # a forked child has no link thread
    global _lock
    _lock = threading.Lock()
    _queue.clear()
    _worker[0] = None


os.register_at_fork(after_in_child=_after_fork)


def wait() -> None:
    """Wait until the libraries this process queued are built (tests)."""
    t = _worker[0]
    if t is not None:
        t.join()


def _drain() -> None:
    while True:
        with _lock:
            if not _queue:
                _worker[0] = None
                return
            job = _queue.pop(0)
        try:
            _build(*job)
        except OSError:
            pass   # no library: the JIT links this code next time too


def _build(path: str, names: list[str], objects: list[bytes]) -> None:
    """Link in a child in its own session, niced, that renames the result
    into place itself: a process that exits meanwhile leaves it to finish."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    work = tempfile.mkdtemp(prefix=".so-", dir=os.path.dirname(path))
    from tracec.backends.cpu.codegen import write_objects
    objs = write_objects(objects, work, "part")
    script = os.path.join(work, "exports.map")
    with open(script, "w") as f:
        f.write(f"{{ global: {'; '.join(names)}; local: *; }};\n")
    tmp = os.path.join(work, "lib.so")
    link = [_compiler(), "-shared", "-fPIC", "-o", tmp, *objs, "-lm", "-lpthread",
            f"-Wl,--version-script={script}"]
    cmd = (f"{shlex.join(link)} >/dev/null 2>&1 && mv -f {shlex.quote(tmp)} "
           f"{shlex.quote(path)}; rm -rf {shlex.quote(work)}")
    nice = ["nice", "-n", "19"] if shutil.which("nice") else []
    subprocess.Popen([*nice, "sh", "-c", cmd], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, close_fds=True).wait()
