"""Python code that tracec generates at run time (``tracec.fast_run``'s
specialized calls), compiled once per machine.

``compiled(source)`` is ``compile(source, ...)``'s code object, kept in
memory and, marshalled, under the cache folder's ``runtime/`` (where the
worker pool and the GEMM library live): a warm start loads it instead of
compiling a few hundred generated lines again (~5-10 ms a step).

Invariant: an entry is found by the SHA-256 of the source text itself and
of the running Python's version (marshal's format is per version), so it
holds exactly what compiling that text gives; an unreadable or foreign
file is ignored (compiled again), never trusted beyond what marshal checks.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
import tempfile

_MEMO: dict = {}
_TAG = f"{sys.implementation.cache_tag}|{sys.version}|{marshal.version}"


def _path(source: str, filename: str) -> str | None:
    try:
        from tracec.backends.cache import cache_root
        root = cache_root()
    except Exception:      # no cache folder to be had: compile every time
        return None
    key = hashlib.sha256(f"{_TAG}|{filename}|{source}".encode()).hexdigest()
    return os.path.join(root, "runtime", "pycode", key[:2], key + ".marshal")


def compiled(source: str, filename: str = "<tracec generated>"):
    """The code object of ``source`` (module-level code, ``exec`` mode)."""
    key = (source, filename)
    code = _MEMO.get(key)
    if code is not None:
        return code
    path = None if os.environ.get("TRACEC_NO_CACHE") else _path(source, filename)
    if path is not None:
        try:
            with open(path, "rb") as f:
                code = marshal.loads(f.read())
            if type(code).__name__ != "code" or code.co_filename != filename:
                code = None
        except (OSError, ValueError, EOFError, TypeError):
            code = None
    if code is None:
        code = compile(source, filename, "exec")
        if path is not None:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(marshal.dumps(code))
                os.replace(tmp, path)
            except OSError:
                pass         # (a read-only cache folder: compiled again next time)
    if len(_MEMO) > 256:
        _MEMO.clear()
    _MEMO[key] = code
    return code
