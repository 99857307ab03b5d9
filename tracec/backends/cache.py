"""The on-disk cache of compiled code.

Layout: ``<root>/v<format>/<key[:2]>/<key>.tcc``, where ``root`` is
``$TRACEC_CACHE_DIR`` or the platform's user cache folder (platformdirs).
An entry is ``MAGIC | u32 header length | header JSON | payload`` and the
header carries the payload's SHA-256, so a truncated, corrupt or foreign
file is detected, discarded with a warning and rebuilt, never executed.

Invariants: writes go to a temporary file in the same folder and are
``os.replace``d into place under a file lock (filelock), so a reader sees
either no entry or a whole one; nothing here executes cached bytes.
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import struct
import tempfile
import warnings

import platformdirs
from filelock import FileLock

from tracec.ir import key_texts

MAGIC = b"TRACEC-CACHE\x00\x01"
FORMAT = 1


def cache_root() -> str:
    return os.environ.get("TRACEC_CACHE_DIR") or platformdirs.user_cache_dir("tracec")


class DiskCache:
    """Key -> (header dict, payload bytes)."""

    def __init__(self, root: str | None = None):
        self.root = os.path.join(root or cache_root(), f"v{FORMAT}")

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + ".tcc")

    def get(self, key: str):
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            warnings.warn(f"tracec cache: cannot read {path} ({e}); recompiling")
            return None
        try:
            if not raw.startswith(MAGIC):
                raise ValueError("not a tracec cache entry")
            (n,) = struct.unpack_from("<I", raw, len(MAGIC))
            start = len(MAGIC) + 4
            header = json.loads(raw[start:start + n].decode("utf-8"))
            payload = raw[start + n:]
            if header.get("key") != key:
                raise ValueError("entry belongs to another key")
            if len(payload) != header.get("size") or \
                    hashlib.sha256(payload).hexdigest() != header.get("sha256"):
                raise ValueError("payload checksum mismatch (truncated or corrupt)")
        except (ValueError, struct.error, UnicodeDecodeError, json.JSONDecodeError) as e:
            warnings.warn(f"tracec cache: discarding corrupt entry {path}: {e}; recompiling")
            self._remove(path)
            return None
        return header, payload

    def put(self, key: str, header: dict, payload: bytes) -> str:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        header = dict(header, key=key, size=len(payload),
                      sha256=hashlib.sha256(payload).hexdigest())
        hbytes = json.dumps(header, sort_keys=True).encode("utf-8")
        with FileLock(path + ".lock", timeout=60):
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    # No fsync (5-10 ms, a noticeable share of a cold start):
                    # an entry a crash left short or empty fails its checksum
                    # at the next read and is rebuilt.
                    f.write(MAGIC + struct.pack("<I", len(hbytes)) + hbytes + payload)
                os.replace(tmp, path)
            except BaseException:
                self._remove(tmp)
                raise
        return path

    @staticmethod
    def _remove(path: str) -> None:
        try:
            os.remove(path)
        except OSError:
            pass

    def entries(self):
        if not os.path.isdir(self.root):
            return []
        out = []
        for d in sorted(os.listdir(self.root)):
            sub = os.path.join(self.root, d)
            if os.path.isdir(sub):
                out += [os.path.join(sub, f) for f in sorted(os.listdir(sub))
                        if f.endswith(".tcc")]
        return out

    def info(self) -> dict:
        files = self.entries()
        return {"path": self.root, "entries": len(files),
                "bytes": sum(os.path.getsize(f) for f in files)}

    def clear(self) -> int:
        n = 0
        for f in self.entries():
            self._remove(f)
            self._remove(f + ".lock")
            n += 1
        # The shared libraries linked from entries' code (backends/cpu/
        # shared_objects.py), what an interrupted link left, and the mark
        # of a folder where libraries could not be loaded.
        self._remove(os.path.join(self.root, ".no-shared-libraries"))
        for d in (os.listdir(self.root) if os.path.isdir(self.root) else ()):
            sub = os.path.join(self.root, d)
            for f in (os.listdir(sub) if os.path.isdir(sub) else ()):
                if f.endswith(".so"):
                    self._remove(os.path.join(sub, f))
                elif f.startswith(".so-"):
                    import shutil
                    shutil.rmtree(os.path.join(sub, f), ignore_errors=True)
        return n


def fingerprint(module, *, locations: bool = False) -> str:
    """A hash of a module's structure (ops, properties, attributes, types,
    operand wiring), cheaper than printing it; with ``locations``, each op's
    source location too.

    Invariant: two modules get the same fingerprint only if they have the
    same ops (by name) in the same nesting, with equal properties,
    attributes and result types (``attribute_text``), the same operand
    wiring and, with ``locations``, the same locations of ops and block
    arguments: the texts joined hold strings only as ``repr``s (or xDSL's
    printed, escaped form), so the control characters separating the
    parts (``\\x00``-``\\x03``) never occur inside one.  Computed at every
    warm start: one text per op, each distinct attribute described once."""
    ids: dict = {}       # by identity: the module keeps every value alive
    # Attributes are immutable and repeat (types above all; a trace shares
    # its locations and parameters): each distinct object described once,
    # from its parameters (xDSL's printer costs ~40 us an attribute).  By
    # identity (equal attributes get equal texts anyway), each kept alive
    # with its text, so no id is reused by another object during the walk.
    # The attributes a trace made from Python keys come with their texts
    # (tracec.ir.key_texts); the others are described here.
    texts: dict = dict(key_texts.TEXTS)

    def text(v) -> str:
        t = texts.get(id(v))
        if t is None:
            t = texts[id(v)] = (v, attribute_text(v))
        return t[1]

    def named(d: dict) -> str:
        # (a property or attribute dict: names in order, each with its text)
        return "\x02".join(f"{k}\x03{text(d[k])}" for k in sorted(d))

    def walk(block):
        put = parts.append
        get_text = texts.get
        for a in block.args:
            ids[id(a)] = len(ids)
            put("a" + text(a.type))
            if locations:   # argument names (tracec.ir.names): compiled errors cite them
                put(text(a.location))
        for op in block.ops:
            props, attrs = op.properties, op.attributes
            # one part per op: its name, properties, attributes, location,
            # operands (numbered by definition order), result types
            loc = ""
            if locations:
                t = get_text(id(op.location))
                loc = t[1] if t is not None else text(op.location)
            operands = ",".join([str(ids.get(id(o), -1)) for o in op.operands])
            results = op.results
            for r in results:
                ids[id(r)] = len(ids)
            types = ",".join([text(r.type) for r in results])
            put(f"{op.name}\x01{named(props) if props else ''}\x01"
                f"{named(attrs) if attrs else ''}\x01{loc}\x01{operands}\x01{types}")
            for region in op.regions:
                for b in region.blocks:
                    put("{")
                    walk(b)
                    put("}")

    # (the parts joined once: one hash update per part cost more than the text)
    parts: list = []
    for op in module.ops:
        for region in op.regions:
            for b in region.blocks:
                walk(b)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


#: Python values an attribute's parameters may hold that ``repr`` writes
#: exactly and distinctly (a float's ``repr`` keeps ``-0.0``).
_EXACT_REPR = (int, float, str, bytes, bool, type(None))


def attribute_text(a) -> str:
    """A text that identifies attribute ``a`` exactly: its class and its
    parameters (or data), recursively; where some part is a value of
    another kind, xDSL's printed form."""
    from xdsl.ir import Data, ParametrizedAttribute   # (loaded: ``a`` is one of its)
    out: list = []
    return "".join(out) if _describe(a, out, Data, ParametrizedAttribute) else str(a)


def _describe(x, out: list, Data, ParametrizedAttribute) -> bool:
    tx = type(x)
    if tx in _EXACT_REPR or isinstance(x, enum.Enum):
        out.append(f"{tx.__name__}:{x!r}")
        return True
    if tx is tuple or tx is list:
        out.append("(")
        for e in x:
            if not _describe(e, out, Data, ParametrizedAttribute):
                return False
            out.append(",")
        out.append(")")
        return True
    if isinstance(x, ParametrizedAttribute):
        out.append(f"{tx.__module__}.{tx.__qualname__}<")
        if not _describe(tuple(x.parameters), out, Data, ParametrizedAttribute):
            return False
        out.append(">")
        return True
    if isinstance(x, Data):
        out.append(f"{tx.__module__}.{tx.__qualname__}[")
        if not _describe(x.data, out, Data, ParametrizedAttribute):
            return False
        out.append("]")
        return True
    return False


_digest: list = []


def _py_files(folder: str, rel: str):
    """``(path relative to the package's parent, stat)`` of every ``.py``
    file under ``folder`` (``rel``: its relative path), one scan per folder."""
    with os.scandir(folder) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    yield from _py_files(e.path, rel + e.name + os.sep)
            elif e.name.endswith(".py") and e.is_file():
                yield rel + e.name, e.stat()


def source_digest() -> str:
    """SHA-256 of tracec's own Python source (every file of the package):
    the passes, the primitives' rules and the backends decide what a trace
    compiles to, so a cache entry made by other code is never reused."""
    if not _digest:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        found = sorted(_py_files(root, os.path.basename(root) + os.sep))
        # Reading and hashing every file costs ~10 ms per process: the digest
        # is kept on disk under the files' names, sizes and modification
        # times (what Python itself checks before reusing a .pyc).
        stats = hashlib.sha256(root.encode())
        for rel, st in found:
            stats.update(f"{rel}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        memo = os.path.join(cache_root(), "runtime", "source-" + stats.hexdigest()[:32])
        try:
            with open(memo) as f:
                digest = f.read().strip()
        except OSError:
            digest = ""
        if len(digest) != 64:
            h = hashlib.sha256()
            for rel, _ in found:
                h.update(rel.split(os.sep, 1)[1].encode())
                with open(os.path.join(os.path.dirname(root), rel), "rb") as f:
                    h.update(f.read())
            digest = h.hexdigest()
            try:
                os.makedirs(os.path.dirname(memo), exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(memo), prefix=".tmp-")
                with os.fdopen(fd, "w") as f:
                    f.write(digest)
                os.replace(tmp, memo)
            except OSError:
                pass        # no cache folder: hashed again next time
        _digest.append(digest)
    return _digest[0]
