"""One xDSL op class per tracec primitive: ``tracec.<primitive name>``.

The primitive set and each primitive's operands and parameters are listed
once, in ``SPECS`` below (mirroring ``tracec.ops``, which this layer must not
import); the classes are generated from it.  Every class:

* has one result, tensor-typed operands named as in ``SPECS`` (``concatenate``
  takes a variadic ``xs``), and one property per primitive parameter, encoded
  by kind (see ``tracec.ir.attrs``);
* prints as ``%r = tracec.<name> %a, %b <kw> <param> ... : <types>`` where
  ``<types>`` is a single type when all operand types equal the result type
  (see ``tracec.ir.format.TypeSignature``);
* is ``Pure`` (random numbers are a function of an explicit state operand),
  except the collectives (``COLLECTIVES``): they have an effect beyond
  their result (the other ranks wait for this rank to take part), so no
  pass may erase one whose result is unused, or merge two (a rank whose
  trace differs, as a ``gather``'s non-root does, would leave the others
  waiting or pair the wrong calls);
* verifies cheaply in ``verify_``: element types and how they relate, the
  result dtype, parameter lengths against operand ranks, broadcast shapes of
  elementwise ops, and result shapes fixed by a ``shape`` parameter.  The
  full shape rule lives with the primitive; a higher layer may install it
  with ``set_type_rule`` and then ``verify_`` checks every result type.

``make_op`` / ``op_params`` convert between (primitive name, operands,
Python params) and ops; ``op_params(make_op(n, xs, p, t)) == p``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Mapping, Sequence

from xdsl.dialects.builtin import (
    ArrayAttr, DenseArrayBase, I64, IntegerAttr, StringAttr, TensorType, i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, OpResult, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

from tracec import dtypes as dt
from tracec.ir.attrs import decode_param, encode_param, format_loc, to_location
from tracec.ir.format import Scalar, TypeSignature
from tracec.symbolic import Sym, SymbolicError, parse
from tracec.ir.types import dtype_of, format_type, is_tensor_type, shape_of, tensor_type

__all__ = [
    "PrimSpec", "SPECS", "PrimitiveOp", "OP_BY_PRIMITIVE", "make_op", "op_params",
    "primitive_name", "set_type_rule", "TypeRule",
]


@dataclass(frozen=True)
class PrimSpec:
    """A primitive's IR signature: operand names and (param, kind) pairs.

    ``group`` selects the cheap verification rule; ``variadic`` means the
    single operand group takes any number (>= 1) of tensors."""

    name: str
    group: str
    operands: tuple[str, ...]
    params: tuple[tuple[str, str], ...] = ()
    variadic: bool = False


def _specs() -> dict[str, PrimSpec]:
    out: dict[str, PrimSpec] = {}

    def add(name, group, operands, params=(), variadic=False):
        out[name] = PrimSpec(name, group, tuple(operands), tuple(params), variadic)

    for n in "exp expm1 log log1p sqrt rsqrt sin cos tanh logistic erf".split():
        add(n, "float_unary", ["x"])
    for n in "neg abs sign stop_gradient".split():
        add(n, "unary", ["x"])
    add("logical_not", "not", ["x"])
    for n in "add sub mul div pow maximum minimum fmod bitwise_and bitwise_or bitwise_xor".split():
        add(n, "binary", ["lhs", "rhs"])
    for n in "eq ne lt le gt ge logical_and logical_or".split():
        add(n, "compare", ["lhs", "rhs"])
    add("where", "where", ["cond", "x", "y"])
    # x, failing at run time with ``message`` where cond is false.
    add("check", "check", ["x", "cond"], [("message", "str")])
    add("cast", "cast", ["x"], [("dtype", "dtype")])
    for n in "reduce_sum reduce_max reduce_min".split():
        add(n, "reduce", ["x"], [("axes", "ints")])
    for n in "argmax argmin".split():
        add(n, "arg", ["x"], [("axis", "int")])
    add("argsort", "arg", ["x"], [("axis", "int"), ("descending", "scalar")])
    add("reshape", "reshape", ["x"], [("shape", "ints")])
    add("transpose", "transpose", ["x"], [("perm", "ints")])
    add("broadcast_to", "broadcast_to", ["x"], [("shape", "ints")])
    add("slice", "slice", ["x"], [("starts", "ints"), ("stops", "ints"), ("steps", "ints")])
    add("pad", "pad", ["x"], [("low", "ints"), ("high", "ints"), ("interior", "ints"),
                              ("value", "scalar")])
    add("concatenate", "concatenate", ["xs"], [("axis", "int")], variadic=True)
    for n in "take gather".split():
        add(n, "take", ["x", "idx"], [("axis", "int")])
    for n in "index_add scatter_add scatter_max scatter_min scatter_mul".split():
        add(n, "index_add", ["x", "idx", "src"], [("axis", "int")])
    add("matmul", "matmul", ["lhs", "rhs"])
    add("full", "full", [], [("value", "scalar"), ("shape", "ints"), ("dtype", "dtype")])
    add("iota", "iota", [], [("shape", "ints"), ("dtype", "dtype"), ("axis", "int")])
    add("random_uniform", "random", ["state"], [("shape", "ints"), ("dtype", "dtype")])
    # Collectives: ``comm`` is the communicator's MPI_Fint (tracec.ops.collective).
    add("all_reduce", "collective", ["x"], [("reduce_op", "int"), ("comm", "int")])
    add("broadcast", "collective", ["x"], [("src", "int"), ("comm", "int")])
    add("all_gather", "all_gather", ["x"], [("size", "int"), ("comm", "int")])
    # One direction of a recurrent layer over all steps, and its backward
    # (tracec.ops.recurrent): operands ``gi, w, h0[, c0][, b]`` / ``g, out, w, h0[, c0]``.
    for n in ("rnn_scan", "rnn_scan_grad"):
        add(n, "recurrent", ["xs"], [("mode", "str"), ("reverse", "int")], variadic=True)
    return out


#: Every primitive's IR signature, by primitive name.
SPECS: dict[str, PrimSpec] = _specs()

#: ``rule(prim_name, [(shape, DType), ...], params) -> (shape, DType)``.
TypeRule = Callable[[str, list, dict], tuple]
_type_rule: list[TypeRule | None] = [None]


def set_type_rule(rule: TypeRule | None) -> None:
    """Install (or remove, with None) the full result-type rule that
    ``verify_`` applies after its own cheap checks.  The primitives layer
    owns the rule (``Primitive.abstract_eval``); this hook lets it reach the
    verifier without the IR importing it."""
    _type_rule[0] = rule


def get_type_rule() -> TypeRule | None:
    """The installed full result-type rule, or None."""
    return _type_rule[0]


# --- verification --------------------------------------------------------------

def _broadcast(*shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            j = i - ndim + len(s)
            if j >= 0 and s[j] != 1:
                if size not in (1, s[j]):
                    return None
                size = s[j]
        out.append(size)
    return tuple(out)


def _check_group(op: "PrimitiveOp", p: dict, sh: list, ds: list, rs: tuple, rd):
    """Return an error message, or None; ``sh``/``ds`` are operand shapes and
    dtypes, ``rs``/``rd`` the result's."""
    g = op.SPEC.group
    rank = len(sh[0]) if sh else 0
    if g in ("float_unary", "unary", "not", "cast"):
        if g == "float_unary" and not ds[0].is_floating_point:
            return f"expected a floating point operand, got {ds[0].name}"
        want = {"not": dt.bool_, "cast": p.get("dtype")}.get(g, ds[0])
        if rd is not want:
            return f"result dtype should be {want.name}"
        if rs != sh[0]:
            return "result shape should equal the operand shape"
    elif g in ("binary", "compare", "where"):
        if g == "where" and ds[0] is not dt.bool_:
            return f"condition must be bool, got {ds[0].name}"
        vals = ds[1:] if g == "where" else ds
        if vals[0] is not vals[1]:
            return "operand element types differ"
        want = dt.bool_ if g == "compare" else vals[0]
        if rd is not want:
            return f"result dtype should be {want.name}"
        if rs != _broadcast(*sh):
            return "result shape should be the broadcast of the operand shapes"
    elif g == "check":
        if ds[1] is not dt.bool_:
            return f"condition must be bool, got {ds[1].name}"
        if rd is not ds[0]:
            return f"result dtype should be {ds[0].name}"
        if rs != _broadcast(*sh):
            return "result shape should be the broadcast of the operand shapes"
    elif g == "reduce":
        axes = p["axes"]
        if list(axes) != sorted(set(axes)) or any(not 0 <= a < max(rank, 1) for a in axes):
            return f"axes {list(axes)} must be sorted, unique and in range for rank {rank}"
        want = dt.int64 if op.name == "tracec.reduce_sum" and ds[0] is dt.bool_ else ds[0]
        if rd is not want:
            return f"result dtype should be {want.name}"
    elif g == "arg":
        if rank and not 0 <= p["axis"] < rank:
            return f"axis {p['axis']} out of range for rank {rank}"
        if rd is not dt.int64:
            return "result dtype should be int64"
    elif g in ("reshape", "transpose", "broadcast_to", "slice", "pad"):
        if rd is not ds[0]:
            return f"result dtype should be {ds[0].name}"
        if g in ("reshape", "broadcast_to") and rs != p["shape"]:
            return f"result shape should be {p['shape']}"
        if g == "transpose" and sorted(p["perm"]) != list(range(rank)):
            return f"perm {list(p['perm'])} is not a permutation of rank {rank}"
        lens = [len(v) for k, v in p.items() if k != "value"]
        if g in ("slice", "pad") and any(n != rank for n in lens):
            return f"parameters must have one entry per dimension (rank {rank})"
        if g == "slice" and any(s <= 0 for s in p["steps"]):
            return "slice steps must be positive"
    elif g == "concatenate":
        if any(d is not ds[0] for d in ds) or rd is not ds[0]:
            return "operand and result element types must all be equal"
        if not 0 <= p["axis"] < rank:
            return f"axis {p['axis']} out of range for rank {rank}"
    elif g in ("take", "index_add"):
        if ds[1].category != 1:
            return f"indices must be an integer tensor, got {ds[1].name}"
        if g == "index_add" and (ds[2] is not ds[0] or rs != sh[0]):
            return "source dtype and result type must match the destination"
        if rd is not ds[0]:
            return f"result dtype should be {ds[0].name}"
        if not 0 <= p["axis"] < rank:
            return f"axis {p['axis']} out of range for rank {rank}"
    elif g == "matmul":
        if ds[0] is not ds[1] or rd is not ds[0]:
            return "operand and result element types must all be equal"
        if len(sh[0]) < 2 or len(sh[1]) < 2 or sh[0][-1] != sh[1][-2]:
            return "operands must have rank >= 2 and matching inner dimensions"
    elif g == "recurrent":
        if any(d is not ds[0] for d in ds) or rd is not ds[0] or not rd.is_floating_point:
            return "operand and result element types must be one floating type"
        if len(rs) != 3 or any(len(x) not in (1, 2, 3) for x in sh):
            return "expects 3-D gi / out, 2-D weights and states"
    elif g in ("collective", "all_gather"):
        want = (p["size"], *sh[0]) if g == "all_gather" else sh[0]
        if rd is not ds[0] or rs != want:
            return f"result type should be {format_type(tensor_type(want, ds[0]))}"
    elif g in ("full", "iota", "random"):
        if rd is not p["dtype"] or rs != p["shape"]:
            return f"result type should be {format_type(tensor_type(p['shape'], p['dtype']))}"
        if g == "iota" and not 0 <= p["axis"] < max(len(rs), 1):
            return f"axis {p['axis']} out of range for rank {len(rs)}"
        if g == "random" and (ds[0] is not dt.int64 or sh[0] != (2,)
                              or not rd.is_floating_point):
            return "needs an int64[2] state and a floating point dtype"
    return None


class PrimitiveOp(IRDLOperation):
    """Base of the generated primitive ops.  Class constants: ``SPEC`` (its
    ``PrimSpec``) and ``PRIMITIVE`` (the primitive's name)."""

    SPEC: ClassVar[PrimSpec]
    PRIMITIVE: ClassVar[str]

    def fail(self, msg: str) -> VerifyException:
        """An error naming the op, its operand types and its location."""
        types = ", ".join(format_type(t) for t in self.operand_types) or "no operands"
        return VerifyException(f"{self.name} ({types}) -> "
                               f"{format_type(self.result_types[0])} at "
                               f"{format_loc(self)}: {msg}")

    def verify_(self) -> None:
        for t in (*self.operand_types, *self.result_types):
            if not is_tensor_type(t):
                raise self.fail(f"{t} is not a tensor of a tracec element type with a "
                                f"static or symbolic shape")
        if self.SPEC.variadic and not self.operands:
            raise self.fail("expects at least one operand")
        try:
            p = op_params(self)
        except (TypeError, ValueError, KeyError) as e:
            raise self.fail(f"bad parameter: {e}") from None
        sh = [shape_of(t) for t in self.operand_types]
        ds = [dtype_of(t) for t in self.operand_types]
        rs, rd = shape_of(self.result_types[0]), dtype_of(self.result_types[0])
        msg = _check_group(self, p, sh, ds, rs, rd)
        if msg:
            raise self.fail(msg)
        rule = _type_rule[0]
        if rule is not None:
            try:
                want_shape, want_dtype = rule(self.PRIMITIVE, list(zip(sh, ds)), p)
            except SymbolicError:
                # The rule decides on a symbolic size (``T <= 48``): that
                # holds by the trace's size guards, which the IR does not carry.
                return
            except Exception as e:  # noqa: BLE001 - the rule's own error text
                raise self.fail(str(e)) from None
            if tuple(want_shape) != rs or want_dtype is not rd:
                raise self.fail(f"result type should be "
                                f"{format_type(tensor_type(want_shape, want_dtype))}")


#: primitives every rank of a communicator must take part in (module docstring)
COLLECTIVES = frozenset({"all_reduce", "broadcast", "all_gather"})

_PROP_CONSTRAINT = {
    "ints": lambda: prop_def(DenseArrayBase.constr(i64)),
    "int": lambda: prop_def(IntegerAttr[I64]),
    "dtype": lambda: prop_def(TypeAttribute),
    "scalar": lambda: prop_def(Attribute),
    "str": lambda: prop_def(StringAttr),
}


def _class_name(prim: str) -> str:
    return "".join(part.title() for part in prim.split("_")) + "Op"


def _make_class(spec: PrimSpec) -> type[PrimitiveOp]:
    ns: dict = {
        "name": f"tracec.{spec.name}",
        # Constants of an IRDL op must be annotated ClassVar in its own class.
        "__annotations__": {"SPEC": ClassVar[PrimSpec], "PRIMITIVE": ClassVar[str]},
        "SPEC": spec,
        "PRIMITIVE": spec.name,
        "result": result_def(TensorType),
        "traits": traits_def(MemoryWriteEffect() if spec.name in COLLECTIVES else Pure()),
        "custom_directives": (TypeSignature, Scalar),
        "__doc__": f"``{spec.name}`` primitive: operands "
                   f"({', '.join(spec.operands) or 'none'}), params "
                   f"({', '.join(n for n, _ in spec.params) or 'none'}).",
    }
    for o in spec.operands:
        ns[o] = var_operand_def(TensorType) if spec.variadic else operand_def(TensorType)
    fmt = ["operands"] if spec.operands else []
    for pname, kind in spec.params:
        ns[pname] = _PROP_CONSTRAINT[kind]()
        fmt.append(f"`{pname}` custom<Scalar>(${pname})" if kind == "scalar"
                   else f"`{pname}` ${pname}")
    fmt.append("attr-dict `:`")
    fmt.append("custom<TypeSignature>(type(operands), type(results))" if spec.operands
               else "type($result)")
    ns["assembly_format"] = " ".join(fmt)
    ns["__module__"] = __name__
    cls = irdl_op_definition(type(_class_name(spec.name), (PrimitiveOp,), ns))
    cls.verify_ = _remembering(cls.verify_)
    return cls


#: Signatures (class, numbers of regions and successors, operand types,
#: None, result types, type rule, properties, attributes) of primitive ops that passed verification; at
#: most _VERIFIED_MAX (then forgotten).
_VERIFIED: dict = {}
_VERIFIED_MAX = 1 << 15


def _remembering(verify):
    """``verify`` (xDSL's generated ``verify_``: the IRDL constraints, then
    ``PrimitiveOp.verify_``) run once per signature: both read only the op's
    class, its regions and successors (a primitive op has none), operand
    and result types, properties, attributes and the type rule installed, so ops that agree on all of them get the same verdict
    (the location only names a failure, and failures are not remembered).
    A training step repeats a few hundred signatures over thousands of ops,
    and the checks (TRACEC_CHECKS) verify every stage of it.  (The type
    rule reads ``PRIMITIVES``, which is fixed once the primitives are
    imported.)"""
    def verify_(self) -> None:
        try:
            key = (type(self), len(self.regions), len(self.successors), *self.operand_types,
                   None, *self.result_types, _type_rule[0], *self.properties.items(),
                   *self.attributes.items())
            if key in _VERIFIED:
                return
        except TypeError:     # an unhashable attribute: not remembered
            key = None
        verify(self)
        if key is not None:
            if len(_VERIFIED) >= _VERIFIED_MAX:
                _VERIFIED.clear()
            _VERIFIED[key] = True
    return verify_


#: The op class of every primitive, by primitive name.
OP_BY_PRIMITIVE: dict[str, type[PrimitiveOp]] = {n: _make_class(s) for n, s in SPECS.items()}
globals().update({cls.__name__: cls for cls in OP_BY_PRIMITIVE.values()})
__all__ += [cls.__name__ for cls in OP_BY_PRIMITIVE.values()]


def make_op(prim_name: str, operands: Sequence[SSAValue | Operation],
            params: Mapping[str, object], result_type, loc=None) -> PrimitiveOp:
    """Build the op of primitive ``prim_name`` (not inserted anywhere).

    ``params`` holds exactly the primitive's keyword parameters, as the
    primitive takes them; ``result_type`` is a TensorType or a
    ``(shape, dtype)`` pair; ``loc`` a location attribute, ``(file, line,
    col)`` or None.  Operand and parameter counts are checked here; types
    are checked by ``verify``."""
    try:
        cls = OP_BY_PRIMITIVE[prim_name]
    except KeyError:
        raise ValueError(f"unknown primitive {prim_name!r}") from None
    spec = cls.SPEC
    # (an SSA value's exact type checked first: isinstance against xDSL's
    # abstract classes costs a microsecond an operand, and a trace makes
    # thousands of ops)
    values = [o if type(o) in _VALUE_TYPES else o.results[0] if isinstance(o, Operation) else o
              for o in operands]
    if spec.variadic:
        if not values:
            raise ValueError(f"{prim_name}: expects at least one operand")
    elif len(values) != len(spec.operands):
        raise ValueError(f"{prim_name}: expects {len(spec.operands)} operands, "
                         f"got {len(values)}")
    if not spec.params:
        if params:
            raise ValueError(f"{prim_name}: expects params [], got {sorted(params)}")
        return cls.create(operands=values, result_types=[
            result_type if type(result_type) in _TYPE_TYPES or isinstance(result_type, Attribute)
            else tensor_type(*result_type)], location=to_location(loc))
    names = {n for n, _ in spec.params}
    if set(params) != names:
        raise ValueError(f"{prim_name}: expects params {sorted(names)}, got {sorted(params)}")
    props, attrs = {}, {}
    for n, k in spec.params:
        v = params[n]
        sym = _symbolic_param(k, v)
        if sym is not None:
            # The property holds a placeholder (never read: ``op_params``
            # takes the sizes from the attribute), so the op does not
            # depend on the sizes of the call that was traced.
            attrs[f"sym_{n}"] = sym
            v = tuple(-1 if isinstance(x, Sym) else x for x in v) if k == "ints" else 0
        props[n] = encode_param(k, v, f"{prim_name}.{n}")
    if type(result_type) not in _TYPE_TYPES and not isinstance(result_type, Attribute):
        result_type = tensor_type(*result_type)
    return cls.create(operands=values, result_types=[result_type], properties=props,
                      attributes=attrs, location=to_location(loc))


#: The classes of SSA values (an op's result, a block's argument) and of
#: tensor types, told apart from operations and ``(shape, dtype)`` pairs
#: without an abstract-class check.
_VALUE_TYPES = frozenset((OpResult, BlockArgument))
_TYPE_TYPES = frozenset((TensorType,))


def _symbolic_param(kind: str, v):
    """The attribute of a parameter holding symbolic sizes (the text of
    each entry), or None for a concrete one."""
    if kind == "ints" and not isinstance(v, (str, bytes)) and hasattr(v, "__iter__") \
            and any(isinstance(x, Sym) for x in v):
        return ArrayAttr([StringAttr(str(x)) for x in v])
    if kind == "scalar" and isinstance(v, Sym):
        return StringAttr(str(v))
    return None


def op_params(op: Operation) -> dict:
    """The primitive's keyword parameters of ``op``, as Python values."""
    spec = getattr(type(op), "SPEC", None)
    if spec is None:
        raise TypeError(f"{op.name} is not a primitive op")
    out = {n: decode_param(k, op.properties[n]) for n, k in spec.params}
    if op.attributes:
        for n, k in spec.params:
            a = op.attributes.get(f"sym_{n}")
            if a is not None:
                out[n] = tuple(parse(x.data) for x in a.data) if k == "ints" else parse(a.data)
    return out


def primitive_name(op: Operation) -> str | None:
    """The primitive an op applies, or None for a non-primitive op."""
    return getattr(type(op), "PRIMITIVE", None)
