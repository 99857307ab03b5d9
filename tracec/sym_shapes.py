"""Symbolic shapes of a traced call: which argument sizes are symbols, what
Python decided on them, and binding them again at each later call.

A ``SymbolTable`` lives for one recording.  It names the symbolic
dimensions of the arguments (dimensions of equal size share one symbol,
"duck sizing" as Dynamo does: ``x[B,T]`` and ``y[B,T]`` broadcast without a
guard; at a call where they differ the trace does not apply), gives the
tracer each recorded value's shape with ``Sym`` sizes carrying the traced
call's values as hints, runs the primitives' shape rules on those shapes
to type each recorded op, and collects every decision the hints made
(``if T > 128:``, ``int(B)``) as a guard.

``SymbolicInfo`` is what a finished trace keeps: the symbols, where each
comes from, the guards, and notes for ``cache_info()``.  ``bind`` reads a
call's sizes into ``{symbol: value}`` (or says why the trace does not
apply); ``tracec.ir.specialize`` then makes the static module for them.

When the recording ends (``SymbolTable.resolve``), the equalities the
trace decided are applied to it rather than kept as guards: a symbol found
equal to a number (``matmul f32[B,T] @ f32[12,16]``: ``T == 12``; ``int(T)``)
becomes that number, and symbols found equal to each other become one.
Under ``dynamic=None``, an argument dimension whose size equals a dynamic
one's in the same call (``mark_dynamic(x, 0)`` and the labels ``y`` of the
same batch) gets a *tentative* symbol: it joins the dynamic symbol it is
found equal to (Dynamo's duck sizing, but only where the trace combines
them) and is specialized back to its size otherwise.

Invariants: a symbol stands for a size >= 2 (sizes 0 and 1 specialize); a
guard holds for the traced call's sizes; a symbolic trace is used only for
calls that bind every symbol consistently and pass every guard; a finished
trace's guards never say that a symbol equals a number or another symbol.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tracec import ir
from tracec import symbolic
from tracec.symbolic import (Sym, evaluate, free_symbols, parse, substitute, symbol,
                             with_hints)
from tracec.pytree import flatten_args, path_name, resolve

__all__ = ["SymbolTable", "SymbolicInfo", "bind", "mark_dynamic", "marked_dims",
           "pattern_key", "choose_dynamic"]

_PREFERRED = {0: "B", 1: "T", 2: "N"}
#: ``choose_dynamic``'s reason for a tentative dimension (see the module docstring).
TENTATIVE = "same size as a dynamic dimension"


def mark_dynamic(t, dim: int, name: str | None = None):
    """Mark dimension ``dim`` of tensor ``t`` symbolic for ``tracec.compile``:
    the first trace of a call passing ``t`` already treats that size as a
    symbol (named ``name`` if given).  Returns ``t``."""
    dims = t.__dict__.setdefault("_tracec_dynamic", {})
    nd = t.ndim
    if not -nd <= dim < nd:
        raise IndexError(f"mark_dynamic: dimension {dim} out of range for a {nd}-d tensor")
    dims[dim % nd] = name
    return t


def marked_dims(t) -> dict:
    """``{dim: name or None}`` marked on ``t`` by ``mark_dynamic``."""
    return t.__dict__.get("_tracec_dynamic", {}) if hasattr(t, "__dict__") else {}


@dataclass
class SymbolicInfo:
    """The symbolic part of a finished trace (see the module docstring)."""
    #: ``[(input index, dim, symbol name)]``: where each argument size comes from.
    sources: list
    #: symbol name -> its value in the traced call
    hints: dict
    #: ``[(kind, lhs text, op, rhs text, result, where)]``
    guards: list
    #: ``{"x[0]": "B (why)"}`` for ``cache_info()``
    dims: dict
    #: sentences: sizes specialized by ``int()``, guards taken
    notes: list = field(default_factory=list)
    _compiled: list = field(default_factory=list)

    def __post_init__(self):
        # Guards parsed once: (kind, lhs Sym, op, rhs, result).
        self._compiled = [(k, parse(lhs), op, parse(rhs), res)
                          for k, lhs, op, rhs, res, _ in self.guards]


class SymbolTable:
    """Symbols of one recording (see the module docstring)."""

    def __init__(self, dynamic: dict, why: dict):
        #: arg path -> {dim: preferred name or None}
        self.dynamic = dynamic
        self.why = why               # (path, dim) -> reason text
        self.by_size: dict = {}      # traced size -> Sym (duck sizing)
        self.hints: dict = {}        # name -> traced size
        self.sources: list = []
        self.dims: dict = {}
        self.guards: list = []
        self._seen: set = set()
        self.notes: list = []
        self._shapes: dict = {}      # an SSA type -> its hinted shape
        self.tentative: set = set()  # names of tentative symbols
        self._where: list = []       # each source's "x[0]" (a key of dims)

    # --- arguments -------------------------------------------------------------

    def input_shape(self, path, t, index: int) -> tuple:
        """The shape of argument ``t`` (at ``path``, input ``index``) with
        its dynamic dimensions as symbols."""
        dims = self.dynamic.get(path, {})
        shape = tuple(t._data.shape)
        if not dims:
            return shape
        out = []
        for d, n in enumerate(shape):
            if d not in dims or n < 2:
                out.append(n)
                continue
            # Each tentative dimension has a symbol of its own: it joins
            # another only where the trace combines them.
            tentative = self.why.get((path, d)) == TENTATIVE
            s = None if tentative else self.by_size.get(n)
            if s is None:
                s = symbol(self._name(dims[d], d), n)
                if not tentative:
                    self.by_size[n] = s
                self.hints[str(s)] = n
                if tentative:
                    self.tentative.add(str(s))
            self.sources.append((index, d, str(s)))
            where = f"{path_name(path)}[{d}]"
            self._where.append(where)
            self.dims[where] = f"{s}: {self.why.get((path, d), 'dynamic')}"
            out.append(s)
        return tuple(out)

    def _name(self, wanted, dim: int) -> str:
        base = wanted or _PREFERRED.get(dim, "S")
        name, k = base, 1
        while name in self.hints:
            k += 1
            name = f"{base}{k}"
        return name

    # --- values ---------------------------------------------------------------

    def shape_of_value(self, v) -> tuple:
        """The shape of an SSA value, symbolic sizes hinted."""
        t = v.type
        s = self._shapes.get(t)
        if s is None:
            s = self._shapes[t] = tuple(with_hints(d, self.hints) for d in ir.shape_of(t)) \
                if ir.is_symbolic_type(t) else ir.shape_of(t)
        return s

    def result_shape(self, prim, args, params, operands, out) -> tuple:
        """The shape of ``prim``'s recorded result: its shape rule run on the
        operands' symbolic shapes and the (possibly symbolic) params."""
        concrete = tuple(out._data.shape)
        shapes, sym = [], False
        for v in operands:
            s = self.shape_of_value(v)
            sym = sym or ir.is_symbolic_type(v.type)
            shapes.append(s)
        if not sym and not any(_has_sym(p) for p in params.values()):
            return concrete
        shape = tuple(prim.shape_rule(*shapes, **params))
        if tuple(symbolic.hint_of(d) for d in shape) != concrete:
            raise ValueError(f"the symbolic shape {tuple(shape)} of {prim.name} does not "
                             f"match its value {concrete}")
        return shape

    # --- guards ---------------------------------------------------------------

    def on_decision(self, kind, lhs, op, rhs, result, where=None) -> None:
        key = (kind, str(lhs), op, str(rhs))
        if key in self._seen:
            return
        self._seen.add(key)
        if kind == "specialize":
            result = True        # the guard: ``lhs == rhs``
        self.guards.append((kind, str(lhs), op, str(rhs), result, where))
        if kind == "specialize":
            self.notes.append(f"{lhs} specialized to {rhs} at {where or 'tracec'} "
                              "(a number was needed: int(), range(), NumPy)")

    # --- equalities -----------------------------------------------------------

    def resolve(self) -> dict:
        """Apply the equalities the trace decided (module docstring):
        returns ``{symbol: int or Sym}`` to substitute in the recorded IR
        and shapes (empty if none), and updates the sources, hints, guards,
        ``cache_info()`` texts and notes to match."""
        parent = {n: n for n in self.hints}
        const: dict = {}      # root -> (value, why)
        solve: list = []      # (symbol, expression, why, lhs, rhs): see below

        def find(a):
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for kind, lhs, op, rhs, res, where in self.guards:
            if not ((op == "==" and res) or (op == "!=" and not res)):
                continue
            if "%" in lhs or "%" in rhs:
                # A divisibility test (``view(B, -1)`` checks that the known
                # sizes divide the element count): kept as a guard, not an
                # equation between sizes to solve.
                continue
            # (int() already left a note: "B specialized to 32 at ...")
            how = None if kind == "specialize" else \
                f"{lhs} {op} {rhs}{'' if res else ' was false'} at {where or 'tracec'}"
            lhs, rhs = _cancel(lhs, rhs)
            a, b = _plain(parse(lhs)), _plain(parse(rhs))
            if isinstance(a, int):
                a, b = b, a
            if a is None and isinstance(b, str):
                a, b = b, a
            if isinstance(a, str) and a in parent and b is None:
                # A lone symbol equal to an expression of others (the flat
                # targets of a language model, ``B2 == B*T``): solved for
                # after the union below, if it can be.
                expr = parse(rhs) if _plain(parse(lhs)) == a else parse(lhs)
                solve.append((a, expr, how, lhs, rhs))
                continue
            if a is None or b is None:
                self._specialize_all(lhs, rhs, how, parent, const, find)
                continue
            if not isinstance(a, str) or a not in parent:
                continue
            if isinstance(b, int):
                const.setdefault(find(a), (b, how))
            elif isinstance(b, str) and b in parent:
                ra, rb = find(a), find(b)
                if ra != rb:
                    # The older (first made) real symbol names the class.
                    order = list(self.hints)
                    keep, gone = sorted((ra, rb), key=lambda n: (n in self.tentative,
                                                                 order.index(n)))
                    parent[gone] = keep
                    if gone in const:
                        const.setdefault(keep, const.pop(gone))
        solved = self._solve(solve, parent, const, find)
        env: dict = {}
        real_in = {find(n) for n in self.hints if n not in self.tentative} | set(solved)
        for n in self.hints:
            r = find(n)
            if r in const:
                env[n] = const[r][0]
            elif r not in real_in:
                env[n] = self.hints[n]           # tentative, never combined with a symbol
            elif r != n:
                env[n] = symbol(r)
        for r, (expr, how) in solved.items():
            # The class of ``r`` is the expression, in the classes' names.
            value = substitute(expr, env)
            for n in self.hints:
                if find(n) == r:
                    env[n] = value
            self.notes.append(f"{r} = {value}: the trace needs it equal to that ({how}); "
                              f"a call passes only sizes where it is")
        if not env:
            return env
        for n, v in env.items():
            r = find(n)
            if n not in self.tentative and isinstance(v, int) and r in const and const[r][1]:
                self.notes.append(f"{n} specialized to {v}: the trace needs it equal to that "
                                  f"size ({const[r][1]})")
        sources, dims = [], {}
        for (index, d, name), where in zip(self.sources, self._where):
            text = self.dims[where]
            new = substitute(symbol(name), env)
            if isinstance(new, int):
                continue
            sources.append((index, d, str(new)))
            why = text.split(": ", 1)[1]
            if name in self.tentative:
                why = f"found equal to {new} by the trace ({TENTATIVE})"
            dims[where] = f"{new}: {why}"
        self.sources, self.dims = sources, dims
        self._where = list(dims)
        self.hints = {n: h for n, h in self.hints.items() if n not in env}
        guards = []
        for kind, lhs, op, rhs, res, where in self.guards:
            a, b = substitute(parse(lhs), env), substitute(parse(rhs), env)
            if isinstance(a - b, int):
                continue                         # decided: it held when traced
            guards.append((kind, str(a), op, str(b), res, where))
        self.guards = guards
        return env

    def _specialize_all(self, lhs, rhs, how, parent, const, find) -> None:
        """An equality of products or sums (``B*T == 12``) with no single
        symbol to solve for: its symbols take their traced sizes."""
        for n in free_symbols(parse(lhs)) | free_symbols(parse(rhs)):
            if n in parent:
                const.setdefault(find(n), (self.hints[n], how))

    def _solve(self, solve, parent, const, find) -> dict:
        """``{class root: (expression, why)}`` for the equalities ``symbol ==
        expression`` of ``solve``, triangular: each expression in the
        classes' roots, none mentioning a solved class.  An equality that
        cannot be solved so (the symbol is a number already, or appears in
        its own expression) specializes its symbols instead."""
        solved: dict = {}
        # Tentative symbols that joined no real one take their sizes back
        # (``resolve``): in an equation they are those numbers already.
        real_in = {find(n) for n in self.hints if n not in self.tentative}
        fixed = {n: self.hints[n] for n in self.hints
                 if n in self.tentative and find(n) not in real_in}
        for a, expr, how, lhs, rhs in solve:
            ra = find(a)
            roots = {n: (fixed[n] if n in fixed else symbol(find(n)))
                     for n in free_symbols(expr) if n in parent}
            if len(roots) != len(free_symbols(expr)) or ra in const:
                self._specialize_all(lhs, rhs, how, parent, const, find)
                continue
            e = substitute(expr, roots)
            if isinstance(e, Sym) and _plain(e) == ra:
                continue                         # a == a: no constraint left
            for _ in range(len(solved) + 1):     # earlier solutions into this one
                e2 = substitute(e, {r: v for r, (v, _) in solved.items()})
                if str(e2) == str(e):
                    break
                e = e2
            if isinstance(e, int) or ra in free_symbols(e) or \
                    any(find(n) in const for n in free_symbols(e)):
                self._specialize_all(lhs, rhs, how, parent, const, find)
                continue
            if ra in solved:
                # Already solved: the two expressions must agree; where
                # they do not, the sizes are specialized (no guard between
                # two expressions is kept).
                if str(solved[ra][0]) != str(e):
                    self._specialize_all(lhs, rhs, how, parent, const, find)
                continue
            solved = {r: (substitute(v, {ra: e}), w) for r, (v, w) in solved.items()}
            solved[ra] = (e, how)
        return solved

    def finish(self) -> SymbolicInfo:
        return SymbolicInfo(self.sources, dict(self.hints), list(self.guards),
                            dict(self.dims), list(self.notes))


def _cancel(lhs: str, rhs: str) -> tuple:
    """``lhs == rhs`` with the symbols both sides multiply by divided out,
    where each side is one product (``4*B*T == B*N*T`` is ``4 == N``): the
    sizes of a symbolic trace are at least 2, so the factors are nonzero,
    and only the remaining symbols need the traced sizes (a reshape of
    ``x @ w`` to ``(B*T, 4)`` specializes w's N, not the batch and
    sequence sizes).  Anything else is returned as it was."""
    def product(x):
        if isinstance(x, int):
            return x, []
        if isinstance(x, Sym) and len(x.terms) == 1 and \
                all(isinstance(a, str) for a in x.terms[0][0]):
            return x.terms[0][1], list(x.terms[0][0])
        return None
    pa, pb = product(parse(lhs)), product(parse(rhs))
    if pa is None or pb is None or not pa[1] or not pb[1]:
        return lhs, rhs
    left, right = list(pa[1]), []
    for n in pb[1]:
        if n in left:
            left.remove(n)
        else:
            right.append(n)
    if len(left) == len(pa[1]):
        return lhs, rhs

    def build(c, names):
        v = c
        for n in names:
            v = v * symbol(n)
        return str(v)
    return build(pa[0], left), build(pb[0], right)


def _plain(x):
    """A size as a symbol name (a lone symbol), an int, or None."""
    if isinstance(x, Sym):
        if len(x.terms) == 1 and x.terms[0][1] == 1 and len(x.terms[0][0]) == 1 \
                and isinstance(x.terms[0][0][0], str):
            return x.terms[0][0][0]
        return None
    return int(x)


def _has_sym(p) -> bool:
    if isinstance(p, Sym):
        return True
    return isinstance(p, (tuple, list)) and any(isinstance(x, Sym) for x in p)


def bind(info: SymbolicInfo, inputs: list, args, kwargs):
    """``(env, None)``: the symbols' values at this call, or ``(None, why)``
    when the trace does not apply (a size differs where the trace is
    static, two dimensions sharing a symbol differ, a size is 0 or 1, or a
    guard fails)."""
    env: dict = {}
    arrays = {}
    for index, spec in enumerate(inputs):
        if spec.kind != "arg":
            continue
        a = resolve(spec.source, args, kwargs)._data.shape
        arrays[index] = a
        for d, s in enumerate(spec.shape):
            if not isinstance(s, Sym) and a[d] != s:
                return None, (f"argument {path_name(spec.source)}: size {a[d]} at dimension "
                              f"{d}, traced with {s} (not symbolic)")
    derived = []
    for index, d, name in info.sources:
        n = arrays[index][d]
        if n < 2:
            return None, f"size {name} is {n} (sizes 0 and 1 are specialized)"
        if _plain(parse(name)) != name:
            derived.append((index, d, name, n))    # an expression: checked below
            continue
        old = env.setdefault(name, n)
        if old != n:
            return None, (f"dimensions traced with one size {name} now differ "
                          f"({old} and {n})")
    for index, d, name, n in derived:
        want = evaluate(parse(name), env)
        if want != n:
            return None, (f"argument {path_name(inputs[index].source)}: size {n} at dimension "
                          f"{d}, where the trace needs {name} = {want}")
    for kind, lhs, op, rhs, res in info._compiled:
        now = symbolic._OPS[op](evaluate(lhs, env), evaluate(rhs, env))
        if now != res:
            what = "specialized size" if kind == "specialize" else "size guard"
            return None, f"{what} {lhs} {op} {rhs} no longer {res}"
    return env, None


def pattern_key(key: tuple) -> tuple:
    """A call key (``compiler.call_key``) with each tensor's shape reduced
    to its rank: the calls one symbolic trace may serve."""
    spec, tensors, *modes = key
    return (spec, tuple((len(k[0]),) + tuple(k[1:]) for k in tensors), *modes)


def choose_dynamic(dynamic, key, args, kwargs, static_keys, sym_entries):
    """``(dims, why)`` for ``SymbolTable`` (``{arg path: {dim: name}}``,
    ``{(path, dim): reason}``), or None for a static trace.

    ``dynamic`` False: static.  True: every dimension.  None: the
    dimensions marked by ``mark_dynamic``, those whose size differs from a
    trace made before for calls of the same structure (``static_keys``:
    the static traces' call keys), and those a symbolic trace of that
    structure (``sym_entries``) already has."""
    if dynamic is False:
        return None
    _, leaves = flatten_args(args, kwargs)
    paths = [p[0] if len(p) == 1 else p for p, _ in leaves]
    dims: dict = {}
    why: dict = {}

    def add(i, d, name, reason):
        p = paths[i]
        dims.setdefault(p, {}).setdefault(d, name)
        why.setdefault((p, d), reason)

    for i, (_, t) in enumerate(leaves):
        for d, name in marked_dims(t).items():
            add(i, d, name, "mark_dynamic")
        if dynamic is True:
            for d in range(t.ndim):
                add(i, d, None, "dynamic=True")
    if dynamic is None:
        pat = pattern_key(key)
        shapes = [k[0] for k in key[1]]
        for old in reversed(list(static_keys)):
            if pattern_key(old) != pat:
                continue
            for i, (a, b) in enumerate(zip((k[0] for k in old[1]), shapes)):
                for d, (m, n) in enumerate(zip(a, b)):
                    if m != n:
                        add(i, d, None, f"its size changed between calls ({m} -> {n})")
            break
        for e in sym_entries:
            for index, d, name in e.trace.symbolic.sources:
                spec = e.trace.inputs[index]
                if spec.source in paths:
                    add(paths.index(spec.source), d, name, "symbolic in an earlier trace")
        sizes = {leaves[paths.index(p)][1].shape[d] for p, ds in dims.items() for d in ds}
        for i, (_, t) in enumerate(leaves):
            for d, n in enumerate(t.shape):
                if n in sizes:
                    add(i, d, None, TENTATIVE)
    return (dims, why) if dims else None
