"""One module's LLVM IR text split into parts that compile in parallel.

LLVM optimizes and generates code for one module on one thread; a training
step's module (tens of kernels) takes a few hundred milliseconds.  Split
into parts, each is parsed into its own context and compiled on its own
thread (``codegen.compile_llvm``), and the parts' objects are linked into
one library.

Input: the text ``codegen`` makes (llvmlite.ir's printing plus helpers
spliced in as LLVM IR): top-level lines are module headers, ``declare``s,
global variables (``@g = ...``) and function definitions (``define ...``
up to a line holding ``}`` alone).

Invariants of ``split_module(text, n)``'s parts:

- every function defined in ``text`` is defined in exactly one part, except
  small shared helpers (internal functions of at most ``SMALL`` lines that
  several functions reference, e.g. the thread-pool runner every parallel
  kernel calls), which are copied, still internal, into each part that
  references them;
- a function only one function references (besides the exported ones)
  stays in that function's part, internal (LLVM's interprocedural
  optimizations keep seeing every call); the kernels the exported entry
  calls and larger functions several reference (the GEMM micro-kernel and
  packs, shared by the module's GEMMs) may land in another part than a
  function referencing them: they lose ``internal`` (their names carry the
  module's unique prefix, ``entry_symbol``) and are declared where they
  are referenced;
- parts are balanced by an estimate of LLVM's time (``_cost``);
- a global variable is defined in part 0 only (made non-internal if it is
  referenced elsewhere) and declared ``external`` in the others.

Text it does not understand (a global of a type it cannot declare, a
comdat) gives one part: the caller compiles it whole, as before.
"""
from __future__ import annotations

import re

__all__ = ["split_module", "SMALL"]

#: Internal functions of at most this many lines that several functions
#: reference are copied into every part that needs them.
SMALL = 120
#: Parts lighter than this many lines are not worth a thread of their own.
MIN_PART_LINES = 400

_NAME = r'(?:"[^"]+"|[\w.$-]+)'
_DEFINE = re.compile(rf"^define\s+(.*?)@({_NAME})\(")
_REF = re.compile(rf"@({_NAME})")
_GLOBAL = re.compile(
    rf"^@({_NAME}) = ((?:(?:internal|private|dso_local|hidden|unnamed_addr|local_unnamed_addr)"
    rf" )*)(global|constant) (ptr|i\d+|half|float|double|\[\d+ x (?:i\d+|float|double|ptr)\])"
    rf"[ ,]")
_LINKAGE = re.compile(r"\b(?:internal|private)\s+")


class _Function:
    __slots__ = ("name", "header", "lines", "internal", "refs")

    def __init__(self, name: str, header: str, lines: list[str], internal: bool):
        self.name, self.header, self.lines, self.internal = name, header, lines, internal
        self.refs: set[str] = set()


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


def _parse(text: str):
    """(top-level lines, [_Function]) or None where the text has forms this
    module does not handle."""
    top: list[str] = []
    funcs: list[_Function] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("define"):
            if line.startswith(("$", "module asm")):
                return None
            top.append(line)
            i += 1
            continue
        m = _DEFINE.match(line)
        if m is None:
            return None
        start = i
        while not lines[i].rstrip().endswith("{"):
            i += 1
            if i == len(lines):
                return None
        header = " ".join(x.strip() for x in lines[start:i + 1])[:-1].rstrip()
        j = i
        while lines[j] != "}":
            j += 1
            if j == len(lines):
                return None
        body = lines[start:j + 1]
        linkage = m.group(1).split()
        funcs.append(_Function(_unquote(m.group(2)), header, body,
                               "internal" in linkage or "private" in linkage))
        i = j + 1
    return top, funcs


def _declaration(fn: _Function) -> str:
    """``declare`` for a definition's header (no linkage: it is external)."""
    rest = fn.header[len("define"):]
    return "declare " + _LINKAGE.sub("", rest, count=1).strip()


def split_module(text: str, n: int) -> list[str]:
    """Up to ``n`` module texts that together define what ``text`` does
    (see the module docstring); ``[text]`` when splitting is not possible
    or not worth it."""
    if n < 2:
        return [text]
    parsed = _parse(text)
    if parsed is None:
        return [text]
    top, funcs = parsed
    by_name = {f.name: f for f in funcs}
    globals_: dict[str, re.Match] = {}
    for line in top:
        if line.startswith("@"):
            m = _GLOBAL.match(line)
            if m is None or "@" in line[m.end():]:   # an initializer naming a symbol
                return [text]
            globals_[_unquote(m.group(1))] = m
    referrers: dict[str, set[str]] = {f.name: set() for f in funcs}
    for f in funcs:
        for line in f.lines[1:]:
            for r in _REF.findall(line):
                r = _unquote(r)
                if (r in by_name and r != f.name) or r in globals_:
                    f.refs.add(r)
        for r in f.refs:
            if r in referrers:
                referrers[r].add(f.name)
    roots = {f.name for f in funcs if not f.internal}
    shared = _shared_helpers(funcs, by_name, referrers, roots)

    # Functions that reference each other (roots and shared helpers aside)
    # form a cluster, which one part compiles.
    parent = {f.name: f.name for f in funcs}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for f in funcs:
        if f.name in roots or f.name in shared:
            continue
        for r in f.refs:
            if r in by_name and r not in roots and r not in shared and \
                    len(referrers[r] - roots) == 1:
                parent[find(r)] = find(f.name)
    clusters: dict[str, list[str]] = {}
    for f in funcs:
        if f.name not in shared:
            key = "" if f.name in roots else find(f.name)
            clusters.setdefault(key, []).append(f.name)
    weight = {k: sum(_cost(by_name[x]) for x in v) for k, v in clusters.items()}
    lines = sum(len(f.lines) for f in funcs)
    n = max(1, min(n, lines // max(1, MIN_PART_LINES)))
    if n < 2 or len(clusters) < 2:
        return [text]
    bins: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    order = ([""] if "" in clusters else []) + sorted(
        (k for k in clusters if k), key=lambda k: (-weight[k], k))
    for k in order:
        b = 0 if k == "" else load.index(min(load))
        bins[b] += clusters[k]
        load[b] += weight[k]
    bins = [b for b in bins if b]
    if len(bins) < 2:
        return [text]

    home = {name: i for i, b in enumerate(bins) for name in b}
    defined = []
    for b in bins:
        names = set(b)
        stack = [r for x in b for r in by_name[x].refs if r in shared]
        while stack:     # the shared helpers this part needs, transitively
            s = stack.pop()
            if s not in names:
                names.add(s)
                stack += [r for r in by_name[s].refs if r in shared]
        defined.append(names)
    exported = {r for i, names in enumerate(defined) for x in names
                for r in by_name[x].refs if r in home and home[r] != i}
    used_globals = [{r for x in names for r in by_name[x].refs if r in globals_}
                    for names in defined]
    exported_globals = {g for i in range(1, len(bins)) for g in used_globals[i]}

    parts = []
    for i, names in enumerate(defined):
        out = []
        for line in top:
            if line.startswith("@"):
                m = _GLOBAL.match(line)
                g = _unquote(m.group(1))
                if i == 0:
                    out.append(_LINKAGE.sub("", line, count=1)
                               if g in exported_globals else line)
                elif g in used_globals[i]:
                    out.append(f"@{m.group(1)} = external {m.group(3)} {m.group(4)}")
                continue
            out.append(line)
        for f in funcs:
            if f.name in names:
                body = "\n".join(f.lines)
                if f.name in exported and f.internal and f.name not in shared:
                    body = _LINKAGE.sub("", body, count=1)   # in its define line
                out.append(body)
            elif any(f.name in by_name[x].refs for x in names):
                out.append(_declaration(f))
        parts.append("\n".join(out) + "\n")
    return parts


def _cost(fn: _Function) -> int:
    """A function's LLVM compile time, roughly, in arbitrary units: a fixed
    cost, one per line, and much more per branch (loops are what the
    vectorizers and the code generator spend their time on).  Fitted to
    per-function timings of a training step's kernels (O3 on AVX-512)."""
    return 60 + len(fn.lines) + 30 * sum(1 for x in fn.lines if x.lstrip().startswith("br "))


def _shared_helpers(funcs, by_name, referrers, roots) -> set[str]:
    """Small internal functions referenced by several functions other than
    the roots, with everything they reference (each a small internal
    function too): copied into every part that needs them."""
    # Copyable: small and internal, and so is everything it references.
    copyable = {f.name for f in funcs if f.internal and len(f.lines) <= SMALL}
    changed = True
    while changed:
        before = len(copyable)
        copyable = {c for c in copyable
                    if all(r in copyable for r in by_name[c].refs if r in by_name)}
        changed = len(copyable) != before
    stack = [c for c in copyable if len(referrers[c] - roots) >= 2]
    shared: set[str] = set()
    while stack:
        c = stack.pop()
        if c not in shared:
            shared.add(c)
            stack += [r for r in by_name[c].refs if r in by_name]
    return shared
