"""Named sizes of a built library (``tracec build --arg x=f32[B,784]``).

The step is traced with each named size symbolic (``tracec.mark_dynamic``
under the user's name) and compiled once as size-generic code
(``backends/cpu/sized.py``).  Each name becomes an ``int64_t`` parameter
of the C function, after the buffers, in the order the names first appear
in the ``--arg`` list.  Before any generated code runs, the wrapper checks
(``SizePlan.checks``, C conditions):

* every size is at least 2 (a symbol stands for a size >= 2: sizes 0 and 1
  would be specialized, and the code may rely on it).  Calls with sizes of
  1 are dispatched before this check to code traced at 1
  (``aot._size_one_variants``), where the function can run there; the
  check's message then says "at least 1";
* names the trace found to be one size (``--arg x=f32[B,8] --arg y=i64[N]``
  where the function combines ``B`` and ``N``) are equal;
* the trace's size guards (comparisons the user's Python made on sizes,
  ``if T > 128:``) and the executable's (``signature["size_guards"]``:
  decisions the compiler made from the sizes it compiled for) hold.

A failed check returns ``ERR_SIZE`` and ``NAME_error_message(ERR_SIZE)``
says which check and the sizes of the call.  The symbols' values are then
written into the workspace after its 64-byte error slot, in
``signature["symbols"]`` order, as the Python runtime does.

Invariant: a named size the trace specialized (``int(B)``, a comparison
that fixed it to a number) is a build error naming it, never a library
that silently serves one size.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tracec.symbolic import Sym, parse

__all__ = ["ERR_SIZE", "SizePlan", "plan_sizes", "c_expr", "count", "SizesError"]

#: The step's return code for a call whose sizes the library does not serve.
ERR_SIZE = -4


class SizesError(ValueError):
    pass


def _terms_c(terms, var) -> str:
    if not terms:
        return "0"
    parts = []
    for mono, c in terms:
        factors = [f"{c}LL"] if c != 1 or not mono else []
        for a in mono:
            if isinstance(a, str):
                factors.append(var[a])
            else:
                kind, num, den = a
                fn = "tc_floordiv" if kind == "//" else "tc_floormod"
                factors.append(f"{fn}({_terms_c(num, var)}, {_terms_c(den, var)})")
        parts.append("*".join(factors))
    return "(" + " + ".join(parts) + ")"


def c_expr(x, var: dict) -> str:
    """A size (int, ``Sym`` or its text) as a C ``int64_t`` expression;
    ``var`` maps each symbol name to its C variable."""
    if isinstance(x, str):
        x = parse(x)
    if isinstance(x, Sym):
        return _terms_c(x.terms, var)
    return f"{int(x)}LL"


def count(shape):
    """The number of elements of ``shape`` (an int, or a ``Sym``)."""
    n = 1
    for d in shape:
        n = n * (parse(d) if isinstance(d, str) else d)
    return n


#: C helpers the size expressions use (floor division and modulo, as
#: Python's ``//`` and ``%``).
C_HELPERS = """\
static inline int64_t tc_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tc_floormod(int64_t a, int64_t b) { return a - tc_floordiv(a, b) * b; }
"""


@dataclass
class SizePlan:
    """The named sizes of one library (see the module docstring)."""
    #: the C size parameters (the user's names), in order
    names: list
    #: trace symbol name -> the C variable holding it
    var: dict
    #: ``[(C condition that must hold, what it means)]``
    checks: list = field(default_factory=list)
    #: the executable's symbols (``signature["symbols"]`` order), as C variables
    workspace_order: list = field(default_factory=list)


def plan_sizes(trace, dim_names: dict, arg_names: list, signature: dict) -> SizePlan | None:
    """The ``SizePlan`` of a build whose arguments ``dim_names``
    (``{arg name: (size name or None per dimension)}``) name sizes, from
    the symbolic ``trace`` and the generic executable's ``signature``;
    None when no size is named.  Raises ``SizesError`` where a named size
    cannot stay a parameter."""
    if not dim_names:
        return None
    info = trace.symbolic
    notes = "; ".join(info.notes) if info is not None and info.notes else ""
    by_source = {spec.source: spec for spec in trace.inputs if spec.kind == "arg"}
    names, symbol_of = [], {}
    for arg, dims in dim_names.items():
        spec = by_source.get(arg_names.index(arg))
        for d, uname in enumerate(dims):
            if uname is None:
                continue
            if uname not in names:
                names.append(uname)
            value = spec.shape[d] if spec is not None else None
            if not isinstance(value, Sym) or len(value.terms) != 1 or \
                    value.terms[0][1] != 1 or len(value.terms[0][0]) != 1 or \
                    not isinstance(value.terms[0][0][0], str):
                raise SizesError(
                    f"the size {uname} ({arg}[{d}]) cannot be a parameter: the function "
                    f"fixes it to {value}" + (f" ({notes})" if notes else "")
                    + "; build with a number instead")
            prev = symbol_of.setdefault(uname, str(value))
            if prev != str(value):
                raise SizesError(f"the size {uname} names dimensions the trace found "
                                 f"different ({prev} and {value})")
    var: dict = {}
    checks = []
    for uname in names:
        checks.append((f"{uname} >= 2", f"the size {uname} must be at least 2"))
    for uname in names:
        s = symbol_of[uname]
        first = var.setdefault(s, uname)
        if first != uname:
            checks.append((f"{uname} == {first}",
                           f"the sizes {first} and {uname} must be equal (the function "
                           "combines them)"))
    if info is not None:
        for kind, lhs, op, rhs, res, where in info.guards:
            cond = f"({c_expr(lhs, var)} {op} {c_expr(rhs, var)})"
            checks.append((cond if res else f"!{cond}",
                           f"the function was traced with {'' if res else 'not '}"
                           f"{lhs} {op} {rhs}" + (f" (at {where})" if where else "")))
    for lhs, op, rhs, res in signature.get("size_guards", ()):
        cond = f"({c_expr(lhs, var)} {op} {c_expr(rhs, var)})"
        checks.append((cond if res else f"!{cond}",
                       f"the code was compiled for sizes with {'' if res else 'not '}"
                       f"{lhs} {op} {rhs}"))
    order = []
    for name, _, _ in signature.get("symbols", ()):
        if name not in var:
            raise SizesError(f"the compiled code reads a size {name} that no --arg names")
        order.append(var[name])
    return SizePlan(names, var, checks, order)
