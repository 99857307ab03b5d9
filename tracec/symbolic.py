"""Symbolic sizes: int-like expressions over named dimensions (``B``, ``T``).

A ``Sym`` is a polynomial with integer coefficients over *atoms*: a size
symbol (a name) or an opaque ``a // b`` or ``a % b`` that did not simplify.
Arithmetic with ints and other ``Sym`` normalizes (``B*T // T`` is ``B``,
``B - B`` is the int ``0``): a result that is a constant is a plain int, so
static sizes stay Python ints everywhere.

Every symbol stands for a size of at least 2 (0 and 1 are always
specialized, as Dynamo does), which decides most comparisons the shape
rules make (``B != 1``, ``B > 0``).  A comparison that those facts do not
decide needs a *hint*, the size's value in the call being traced: the
answer comes from the hints and is reported to ``GUARD_SINKS`` (the tracer
turns it into a guard on later calls).  Without a hint (a type read back
from IR text), ``==``/``!=`` are structural and an undecided ordering
raises ``SymbolicError``.  ``int()``/``index()`` of a hinted ``Sym``
specialize it: they report ``size == hint`` and return the hint.

Text form (in tensor types and parameters): ``B``, ``B*T``, ``2*B+1``,
``(B+1)//2``; ``parse`` reads it back (``parse(str(s)) == s``).
"""
from __future__ import annotations

import ast
import numbers
import operator
import sys

import numpy as np

__all__ = ["Sym", "SymbolicError", "symbol", "parse", "evaluate", "is_symbolic",
           "hint_of", "GUARD_SINKS", "with_hints", "free_symbols", "hinted", "known",
           "recorded_guards", "guard_holds", "substitute", "size_sources", "failed_size_guard",
           "equal_if_exact", "HINT_ENVS", "count_of"]


class SymbolicError(TypeError):
    """A symbolic size was used where a concrete number is needed and
    there is no value to take it from."""


#: Callbacks ``sink(kind, sym, op, other, result)`` told of every decision
#: made from hints: kind "compare" (``sym op other`` was ``result``) or
#: "specialize" (``int(sym)``: it was ``result``).
GUARD_SINKS: list = []

#: ``{name: size}`` dicts of the symbols' values in the call being traced
#: (the tracer's ``SymbolTable.hints``), for decisions on expressions
#: whose parts carry no hint of their own (``_exact_divisions``).
HINT_ENVS: list = []

#: ``[env]``: sizes in effect (``hinted``) for a ``Sym`` without a hint of
#: its own (one read back from IR types), or ``[None]``.
_ENV: list = [None]


def _hint(x):
    """``x``'s value in the call being traced or compiled, or None."""
    if not isinstance(x, Sym):
        return x
    if x.hint is not None:
        return x.hint
    env = _ENV[0]
    if env is None:
        return None
    try:
        return _eval_terms(x.terms, env)
    except (KeyError, ZeroDivisionError):
        return None


class hinted:
    """``with hinted({"B": 32}):`` sizes without hints take their values
    from ``env`` (the passes and the backend, compiling a symbolic module
    for a call's sizes); decisions made from them reach ``GUARD_SINKS``."""

    def __init__(self, env: dict):
        self.env = dict(env)

    def __enter__(self):
        self._old = _ENV[0]
        _ENV[0] = self.env
        return self

    def __exit__(self, *exc):
        _ENV[0] = self._old
        return False


_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def _atom_text(a) -> str:
    if isinstance(a, str):
        return a
    kind, num, den = a
    return f"{_operand_text(num)}{kind}{_operand_text(den)}"


def _operand_text(terms) -> str:
    t = _terms_text(terms)
    simple = len(terms) <= 1 and (not terms or not terms[0][0] or (
        len(terms[0][0]) == 1 and terms[0][1] == 1 and isinstance(terms[0][0][0], str)))
    return t if simple else f"({t})"


def _terms_text(terms) -> str:
    if not terms:
        return "0"
    parts = []
    for mono, c in terms:
        # A // or % factor among others, or negated, is parenthesized: the
        # text parses back to the same size (``64*(X//64)``, not the
        # ``(64*X)//64`` that ``64*X//64`` would be).
        alone = len(mono) == 1 and c == 1
        body = "*".join(_atom_text(a) if alone or isinstance(a, str) else f"({_atom_text(a)})"
                        for a in mono)
        if not mono:
            t = str(abs(c))
        elif abs(c) == 1:
            t = body
        else:
            t = f"{abs(c)}*{body}"
        parts.append(("-" if c < 0 else ("+" if parts else "")) + t)
    return "".join(parts)


def _norm(d: dict):
    """A dict monomial -> coef as sorted terms, or an int if constant."""
    terms = tuple(sorted(((m, c) for m, c in d.items() if c), key=_term_key))
    if not terms:
        return 0
    if len(terms) == 1 and not terms[0][0]:
        return terms[0][1]
    return terms


def _term_key(t):
    # Highest degree first, constants last: ``B*T+2*B+1``.
    return (-len(t[0]) if t[0] else 1, [str(a) for a in t[0]])


def _terms_of(x) -> dict:
    if isinstance(x, Sym):
        return dict(x.terms)
    return {(): int(x)} if x else {}


#: Modules whose hashing of a size stays structural (``Sym.__hash__``).
_OWN_MODULES = ("tracec", "xdsl")


class Sym:
    """A symbolic size (see the module docstring)."""

    __slots__ = ("terms", "hint")

    def __init__(self, terms: tuple, hint=None):
        self.terms = terms
        self.hint = hint

    @staticmethod
    def make(d: dict, hint=None):
        t = _norm(d)
        return t if isinstance(t, int) else Sym(t, hint)

    # --- arithmetic ----------------------------------------------------------

    def _bin(self, other, fn, hint_fn):
        if not isinstance(other, (Sym, int)) or isinstance(other, bool):
            if isinstance(other, numbers.Integral):
                other = int(other)
            elif isinstance(other, numbers.Real):
                # A float (``size * 0.5``, a scale factor): the size is
                # needed as a number, so it is specialized (``int``: a
                # guard and a note), never a TypeError.
                return hint_fn(int(self), other)
            else:
                return NotImplemented
        r = fn(self, other)
        if isinstance(r, Sym):
            ho = other.hint if isinstance(other, Sym) else other
            r.hint = hint_fn(self.hint, ho) if self.hint is not None and ho is not None \
                else None
        return r

    def __add__(self, o):
        return self._bin(o, _add, operator.add)

    __radd__ = __add__

    def __sub__(self, o):
        return self._bin(o, lambda a, b: _add(a, _scale(b, -1)), operator.sub)

    def __rsub__(self, o):
        return self._bin(o, lambda a, b: _add(_scale(a, -1), b), lambda a, b: b - a)

    def __mul__(self, o):
        return self._bin(o, _mul, operator.mul)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        return self._bin(o, lambda a, b: _div(a, b, "//"), operator.floordiv)

    def __rfloordiv__(self, o):
        return self._bin(o, lambda a, b: _div(b, a, "//"), lambda a, b: b // a)

    def __mod__(self, o):
        return self._bin(o, lambda a, b: _div(a, b, "%"), operator.mod)

    def __rmod__(self, o):
        return self._bin(o, lambda a, b: _div(b, a, "%"), lambda a, b: b % a)

    def __divmod__(self, o):
        q = self // o
        return NotImplemented if q is NotImplemented else (q, self % o)

    def __rdivmod__(self, o):
        q = o // self
        return NotImplemented if q is NotImplemented else (q, o % self)

    def __pow__(self, o):
        # a natural power stays a size (``T ** 2``); any other exponent needs
        # the number (``d ** 0.5``, attention's scale): specialized, as a float
        # factor is in ``_bin``
        if isinstance(o, numbers.Integral) and not isinstance(o, (bool, Sym)) and o >= 0:
            r = 1
            for _ in range(int(o)):
                r = self * r
            return r
        if isinstance(o, (numbers.Real, Sym)) and not isinstance(o, bool):
            return int(self) ** (int(o) if isinstance(o, Sym) else o)
        return NotImplemented

    def __rpow__(self, o):
        if isinstance(o, numbers.Real):
            return o ** int(self)
        return NotImplemented

    def __neg__(self):
        r = _scale(self, -1)
        r.hint = None if self.hint is None else -self.hint
        return r

    def __pos__(self):
        return self

    # --- comparisons ----------------------------------------------------------

    def _cmp(self, other, op: str):
        if not isinstance(other, (Sym, int)) or isinstance(other, bool):
            if isinstance(other, numbers.Integral):
                other = int(other)
            else:
                return NotImplemented
        diff = _add(self, _scale(other, -1))
        if isinstance(diff, int):
            return _OPS[op](diff, 0)
        known = _decide(diff, op)
        if known is not None:
            return known
        if op in ("==", "!="):
            exact = _equal_if_exact(diff)
            if exact:
                # Equal wherever the divisions in it are exact (``x.view(B,
                # G, -1)`` viewed back as ``[B, C, L]``): the divisibility
                # tests are the guards, not an equation that would
                # specialize every size in it.
                if _exact_divisions(exact):
                    return op == "=="
        hs, ho = _hint(self), _hint(other)
        if hs is None or ho is None:
            if op in ("==", "!="):
                return (op == "!=")   # structurally different, undecided: unequal
            raise SymbolicError(f"cannot decide {self} {op} {other} without sizes")
        result = _OPS[op](hs, ho)
        for sink in GUARD_SINKS:
            sink("compare", self, op, other, result)
        return result

    def __eq__(self, o):
        return self._cmp(o, "==")

    def __ne__(self, o):
        return self._cmp(o, "!=")

    def __lt__(self, o):
        return self._cmp(o, "<")

    def __le__(self, o):
        return self._cmp(o, "<=")

    def __gt__(self, o):
        return self._cmp(o, ">")

    def __ge__(self, o):
        return self._cmp(o, ">=")

    def __bool__(self):
        return self._cmp(0, "!=")

    def __hash__(self):
        # Structural for tracec's own tables of shapes; user code (a dict
        # keyed by sizes: ``{3: a, 5: b}.get(x.shape[0])``) hashes the number
        # under a guard, as ``int()``, so that lookups find the number's key
        # (a structural hash missed it silently, with no guard).
        f = sys._getframe(1)
        for _ in range(4):       # (through the standard library's Python code)
            if f is None:
                break
            name = f.f_globals.get("__name__", "")
            if name.startswith(_OWN_MODULES):
                break
            if name.partition(".")[0] not in sys.stdlib_module_names:
                return hash(int(self))
            f = f.f_back
        return hash(self.terms)

    # --- escaping to numbers ---------------------------------------------------

    def __int__(self):
        h = _hint(self)
        if h is None:
            raise SymbolicError(f"the size {self} has no value here")
        for sink in GUARD_SINKS:
            sink("specialize", self, "==", h, h)
        return h

    __index__ = __int__

    def __array__(self, dtype=None, copy=None):
        # NumPy meets a size (``np.sqrt(d_k)``, ``torch.tensor(x.size(0))``):
        # it needs the number, specialized under a guard as by int()
        return np.asarray(int(self), dtype=dtype)

    def __float__(self):
        return float(int(self))

    def __truediv__(self, o):
        return int(self) / o

    def __rtruediv__(self, o):
        return o / int(self)

    def __abs__(self):
        return self if self > 0 else -self

    def __str__(self):
        return _terms_text(self.terms)

    def __repr__(self):
        return str(self) if self.hint is None else f"{self}(={self.hint})"

    def __reduce__(self):
        return (parse, (str(self),))

    def same(self, other) -> bool:
        """Structural equality (no guard)."""
        return isinstance(other, Sym) and other.terms == self.terms


numbers.Integral.register(Sym)


def same(a, b) -> bool:
    """Structural equality of two sizes (ints or ``Sym``), making no guard:
    a symbol and a number, or two different expressions, are not the same
    even where the sizes at hand happen to be equal.  For decisions where
    "not the same" is always safe (whether to fuse)."""
    if isinstance(a, Sym) or isinstance(b, Sym):
        return isinstance(a, Sym) and a.same(b)
    return a == b


def _scale(a, k: int):
    if isinstance(a, int):
        return a * k
    return Sym.make({m: c * k for m, c in a.terms})


def _add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    d = _terms_of(a)
    for m, c in _terms_of(b).items():
        d[m] = d.get(m, 0) + c
    return Sym.make(d)


def _mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    d: dict = {}
    for m1, c1 in _terms_of(a).items():
        for m2, c2 in _terms_of(b).items():
            m = tuple(sorted(m1 + m2, key=str))
            d[m] = d.get(m, 0) + c1 * c2
    return Sym.make(d)


def _div(a, b, kind: str):
    """``a // b`` or ``a % b``, exact where every term divides."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if kind == "//" else a % b
    if isinstance(b, int) and b == 1:
        return a if kind == "//" else 0
    ta, tb = _terms_of(a), _terms_of(b)
    if len(tb) == 1:
        (mb, cb), = tb.items()
        q = {}
        for m, c in ta.items():
            rest = list(m)
            try:
                for x in mb:
                    rest.remove(x)
            except ValueError:
                break
            if c % cb:
                break
            q[tuple(rest)] = c // cb
        else:
            return Sym.make(q) if kind == "//" else 0
    if isinstance(a, Sym) and isinstance(b, Sym) and a.same(b):
        return 1 if kind == "//" else 0
    if isinstance(b, int) and b > 0 and isinstance(a, Sym):
        # (k*E + c) // k == E + c // k for integer E (floor semantics), and
        # (k*E + c) % k == c % k: a strided slice's size ((2*X + 3) // 2)
        # is then X + 1, the size it equals at every X
        ta = _terms_of(a)
        c = ta.get((), 0)
        if all(v % b == 0 for m, v in ta.items() if m):
            if kind == "%":
                return c % b
            q = {m: v // b for m, v in ta.items() if m}
            q[()] = c // b
            return Sym.make(q)
    num = a.terms if isinstance(a, Sym) else ((((), a),) if a else ())
    den = b.terms if isinstance(b, Sym) else ((((), b),) if b else ())
    return Sym((((((kind, num, den)),), 1),))


def _exact_divisions(divisions) -> bool:
    """Whether each ``(num, den)`` divides exactly at the sizes in effect
    (``HINT_ENVS``, else ``hinted``); each answer is reported to
    ``GUARD_SINKS`` as ``num % den == 0`` (a divisibility guard).  False
    where the sizes are not known."""
    env = {}
    for e in HINT_ENVS:
        env.update(e)
    if not env and _ENV[0] is not None:
        env = _ENV[0]
    if not env:
        return False       # (``reshape``'s rule asks first: ``equal_if_exact``)
    for num, den in divisions:
        try:
            ok = _eval_terms(num, env) % _eval_terms(den, env) == 0
        except (KeyError, ZeroDivisionError):
            return False
        rem = _div(Sym(num), Sym(den), "%")
        if isinstance(rem, Sym):
            for sink in GUARD_SINKS:
                sink("compare", rem, "==", 0, ok)
        if not ok:
            return False
    return True


def equal_if_exact(a, b) -> bool:
    """Whether ``a`` and ``b`` are equal wherever the divisions in them are
    exact, with no sizes known to test that (an IR type read back: its
    trace guarded the divisions).  The shape rules of views ask this and
    raise ``SymbolicError`` (undecided) rather than a shape error."""
    diff = _add(a, _scale(b, -1))
    return isinstance(diff, Sym) and bool(_equal_if_exact(diff)) and not HINT_ENVS \
        and _ENV[0] is None and _hint(a) is None


def _equal_if_exact(diff: "Sym") -> list | None:
    """The ``(num, den)`` divisions whose exactness makes ``diff`` zero
    (each ``num // den`` with a one-term ``den`` replaced by the quotient
    it then is), or None if it does not become zero so."""
    d = dict(diff.terms)
    used: list = []
    for _ in range(8):
        out: dict = {}
        changed = False
        for m, c in d.items():
            for i, a in enumerate(m):
                if isinstance(a, tuple) and a[0] == "//" and len(a[2]) == 1 and a[2][0][1] > 0:
                    (mden, cden), = a[2]
                    rest = list(m[:i] + m[i + 1:])
                    try:
                        for x in mden:
                            rest.remove(x)
                    except ValueError:
                        continue
                    if c % cden:
                        continue
                    for mn, cn in a[1]:
                        key = tuple(sorted(rest + list(mn), key=str))
                        out[key] = out.get(key, 0) + c // cden * cn
                    if (a[1], a[2]) not in used:
                        used.append((a[1], a[2]))
                    changed = True
                    break
            else:
                out[m] = out.get(m, 0) + c
        d = {m: c for m, c in out.items() if c}
        if not changed:
            break
    return used if used and not d else None


def _bounds(x):
    """``(lower, upper)`` bounds of ``x`` from every symbol being >= 2
    (None where there is none): a polynomial whose non-constant terms are
    products of symbols with coefficients of one sign is monotonic in them."""
    if isinstance(x, int):
        return x, x
    const, low, signs = 0, 0, set()
    for m, c in x.terms:
        if not m:
            const += c
        elif all(isinstance(a, str) for a in m):
            signs.add(c > 0)
            low += c * (2 ** len(m))
        else:
            return None, None
    if signs == {True}:
        return const + low, None
    if signs == {False}:
        return None, const + low
    return None, None


def _decide(x, op: str):
    """``x op 0`` when the bounds decide it, else None."""
    lo, hi = _bounds(x)
    pos = lo is not None and lo > 0
    nonneg = lo is not None and lo >= 0
    neg = hi is not None and hi < 0
    nonpos = hi is not None and hi <= 0
    if op == ">":
        return True if pos else False if nonpos else None
    if op == ">=":
        return True if nonneg else False if neg else None
    if op == "<":
        return True if neg else False if nonneg else None
    if op == "<=":
        return True if nonpos else False if pos else None
    if pos or neg:
        return op == "!="
    return None


class recorded_guards:
    """``with recorded_guards() as guards:`` collects, as JSON-able
    ``[lhs text, op, rhs text, result]`` (each once), the decisions made
    from hints inside the block: what must hold at a call for code made
    there to apply (``guard_holds``)."""

    def __enter__(self):
        self.guards: list = []
        self._seen: set = set()
        GUARD_SINKS.append(self._sink)
        return self.guards

    def _sink(self, kind, lhs, op, rhs, result):
        g = [str(lhs), op, str(rhs), bool(result)]
        key = tuple(g)
        if key not in self._seen:
            self._seen.add(key)
            self.guards.append(g)

    def __exit__(self, *exc):
        GUARD_SINKS.remove(self._sink)
        return False


def guard_holds(guard, env: dict) -> bool:
    """Whether ``[lhs, op, rhs, result]`` (as ``recorded_guards`` makes
    them, or with parsed sizes) holds for the sizes ``env``."""
    lhs, op, rhs, result = guard
    a = evaluate(parse(lhs) if isinstance(lhs, str) else lhs, env)
    b = evaluate(parse(rhs) if isinstance(rhs, str) else rhs, env)
    return _OPS[op](a, b) == result


def size_sources(shapes) -> tuple[dict, set]:
    """``({symbol: (argument index, dim)}, missing)`` for a function's
    argument ``shapes``: where a run time reads each size symbol (the first
    dimension that is exactly it), and the symbols of those shapes that are
    no argument's dimension (that cannot be read)."""
    out: dict = {}
    needed: set = set()
    for i, shape in enumerate(shapes):
        for d, n in enumerate(shape):
            if isinstance(n, int):
                continue
            needed |= free_symbols(n)
            if len(free_symbols(n)) == 1 and n.same(symbol(str(n))):
                out.setdefault(str(n), (i, d))
    return out, needed - set(out)


def failed_size_guard(names, guards, env: dict) -> str | None:
    """None if the sizes ``env`` are ones that code compiled for the
    symbols ``names`` with the size ``guards`` (``[lhs, op, rhs, result]``)
    serves, else why not (each symbol stands for 2 or more)."""
    for name in names:
        if env.get(name, 0) < 2:
            return f"the size {name} is {env.get(name)} (a symbol stands for 2 or more)"
    for g in guards:
        if not guard_holds(g, env):
            lhs, op, rhs, res = g
            return (f"compiled for sizes with {'' if res else 'not '}{lhs} {op} {rhs}, "
                    f"called with {', '.join(f'{k}={v}' for k, v in sorted(env.items()))}")
    return None


def known(a, op: str, b=0):
    """``a op b`` where every size >= 2 decides it (ints, or bounds of a
    polynomial), else None: never a guard (``plan.py`` reuses memory only
    where this says so)."""
    diff = _add(a, _scale(b, -1))
    if isinstance(diff, int):
        return _OPS[op](diff, 0)
    return _decide(diff, op)


def count_of(x) -> int:
    """``x`` (a count made of sizes: ``ceil(B / 3)`` pieces of a split) as
    the number it is in the call being traced, under the guards ``x >= n``
    and ``x <= n``: the trace serves every size where the count is the
    same, where ``int(x)`` would specialize each size in it."""
    if not isinstance(x, Sym):
        return int(x)
    n = _hint(x)
    if n is None:
        raise SymbolicError(f"the count {x} has no value here")
    if not (x >= n and x <= n):
        raise AssertionError("unreachable: the hint is the count")
    return n


def symbol(name: str, hint: int | None = None) -> Sym:
    """The size symbol ``name`` (with the value ``hint`` in this call)."""
    return Sym((((name,), 1),), hint)


_PARSED: dict = {}
_AST_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
            ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def parse(text: str):
    """A size from its text (``"784"`` -> 784, ``"B*T"`` -> a Sym)."""
    r = _PARSED.get(text)
    if r is None:
        try:
            r = _eval_ast(ast.parse(text, mode="eval").body)
        except (SyntaxError, KeyError, ValueError) as e:
            raise ValueError(f"not a size expression: {text!r}") from e
        _PARSED[text] = r
    return r


def _eval_ast(n):
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return n.value
    if isinstance(n, ast.Name):
        return symbol(n.id)
    if isinstance(n, ast.BinOp):
        return _AST_OPS[type(n.op)](_eval_ast(n.left), _eval_ast(n.right))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        return -_eval_ast(n.operand)
    raise ValueError(ast.dump(n))


def _eval_terms(terms, env) -> int:
    total = 0
    for mono, c in terms:
        v = c
        for a in mono:
            if isinstance(a, str):
                v *= env[a]
            else:
                kind, num, den = a
                x, y = _eval_terms(num, env), _eval_terms(den, env)
                v *= x // y if kind == "//" else x % y
        total += v
    return total


def evaluate(x, env: dict) -> int:
    """The value of a size under ``env`` (symbol name -> int)."""
    if isinstance(x, Sym):
        return _eval_terms(x.terms, env)
    return int(x)


def _subst_terms(terms, env):
    total = 0
    for mono, c in terms:
        v = c
        for a in mono:
            if isinstance(a, str):
                v = v * env.get(a, symbol(a))
            else:
                kind, num, den = a
                x, y = _subst_terms(num, env), _subst_terms(den, env)
                v = v * (_div(x, y, kind))
        total = _add(total, v)
    return total


def substitute(x, env: dict):
    """``x`` with the symbols named in ``env`` replaced by its values (ints
    or ``Sym``); an int where nothing symbolic is left.  No hint, no guard."""
    if not isinstance(x, Sym):
        return x
    r = _subst_terms(x.terms, env)
    if isinstance(r, Sym):
        r.hint = None
    return r


def is_symbolic(x) -> bool:
    return isinstance(x, Sym)


def hint_of(x):
    """A size's value in the traced call, or under ``hinted`` sizes (an int
    stays itself; None if unknown)."""
    return _hint(x)


def with_hints(x, env: dict):
    """``x`` with its hint computed from ``env`` (for types read from IR)."""
    if isinstance(x, Sym):
        return Sym(x.terms, _eval_terms(x.terms, env))
    return x


def free_symbols(x) -> set:
    """The symbol names a size depends on."""
    out: set = set()

    def walk(terms):
        for mono, _ in terms:
            for a in mono:
                if isinstance(a, str):
                    out.add(a)
                else:
                    walk(a[1])
                    walk(a[2])
    if isinstance(x, Sym):
        walk(x.terms)
    return out


class SymFloat:
    """``torch.SymFloat``, for ``isinstance`` checks: tracec traces no
    symbolic floats (a lifted Python number is ``sym_scalar.SymScalar``), so
    none is ever made."""

    def __init__(self, *args, **kwargs):
        raise TypeError("tracec makes no SymFloat: its symbolic values are sizes (SymInt)")


class SymBool(SymFloat):
    """``torch.SymBool``, for ``isinstance`` checks (never made, as SymFloat)."""
