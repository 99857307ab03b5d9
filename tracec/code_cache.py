"""Python code that tracec generates at run time (``tracec.fast_run``'s
specialized calls), compiled once per machine.

``compiled(source)`` is ``compile(source, ...)``'s code object, kept in
memory and, marshalled, in the disk cache under ``runtime/`` (where the
worker pool and the GEMM library live, ``backends.cache.DiskCache``: atomic
writes, checksummed entries): a warm start loads it instead of compiling a
few hundred generated lines again (~5-10 ms a training step).

Invariant: an entry is found by the SHA-256 of the source text itself and
of the running Python's version (marshal's format is per version), so it
holds exactly what compiling that text gives; a corrupt entry is discarded
(DiskCache) and one that does not unmarshal to a code object is compiled
again.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
import warnings

_MEMO: dict = {}
_TAG = f"tracec-pycode|{sys.implementation.cache_tag}|{sys.version}|{marshal.version}"


def _disk():
    from tracec.backends import cache
    return cache.DiskCache(os.path.join(cache.cache_root(), "runtime"))


def compiled(source: str, filename: str = "<tracec generated>") -> types.CodeType:
    """The code object of ``source`` (module-level code, ``exec`` mode)."""
    code = _MEMO.get((source, filename))
    if code is not None:
        return code
    disk = None if os.environ.get("TRACEC_NO_CACHE") else _disk()
    key = hashlib.sha256(f"{_TAG}|{filename}|{source}".encode()).hexdigest()
    hit = disk.get(key) if disk is not None else None
    if hit is not None:
        try:
            code = marshal.loads(hit[1])
        except (ValueError, EOFError, TypeError):
            code = None
        if type(code) is not types.CodeType or code.co_filename != filename:
            code = None
    if code is None:
        code = compile(source, filename, "exec")
        if disk is not None:
            try:
                disk.put(key, {"kind": "python code"}, marshal.dumps(code))
            except OSError as e:
                warnings.warn(f"tracec cache: cannot write the cache ({e}); continuing")
    if len(_MEMO) > 256:
        _MEMO.clear()
    _MEMO[(source, filename)] = code
    return code
