"""A small builder for xDSL's ``llvm`` dialect: functions, blocks, loops.

The cpu backend emits the ``llvm`` dialect directly (no arith/func/math
conversion exists upstream, and type conversion is slow).  Op creation is
the cost that matters here (tens of microseconds per op in pure Python), so
this builder

* creates ops with ``Op.create`` and cached property attributes,
* keeps one constant per (value, type) per function, all in the entry block,
* addresses memory with ``getelementptr inbounds`` on the element type
  (never ptrtoint/inttoptr: that blocks vectorization), and every load and
  store carries an explicit alignment (the element size unless told).

Invariant: a function's entry block holds its arguments and constants only
and ends with a branch to the first body block (added by ``finish``), so a
constant created anywhere dominates every use.

Symbolic sizes: ``i64(n)`` of a ``tracec.symbolic.Sym`` (a size known at
run time only, ``B`` or ``4*B*T``) is computed once per function, in the
entry block, from the symbol values the entry function stores in the
workspace (``SIZES_INDEX``: i64 words after the error slot; ``sizes`` is
the function's workspace pointer, set by whoever creates it, and the
module's ``symbols`` order the words).  A static size stays a constant.
"""
from __future__ import annotations

from typing import Callable, Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    TensorType,
    DenseArrayBase,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    VectorType,
    f16,
    f32,
    f64,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from tracec.symbolic import Sym

__all__ = ["PTR", "I1", "I8", "I32", "I64", "F16", "F32", "F64", "ModuleBuilder",
           "FuncBuilder", "vec", "is_float", "bits_of", "SIZES_INDEX"]

#: The i64 word of the workspace where the first symbol's value lives (after
#: the 64-byte error slot, ``plan.ERROR_SLOT_BYTES``).
SIZES_INDEX = 8

PTR = llvm.LLVMPointerType()
I1, I8, I32, I64 = i1, i8, i32, i64
F16, F32, F64 = f16, f32, f64

_NSW = IntegerAttr(llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP]).to_int(), 32)
_NOFLAGS = IntegerAttr(0, 32)
_FM_NONE = llvm.FastMathAttr(None)
_FM_REASSOC = llvm.FastMathAttr([llvm.FastMathFlag.REASSOC])
_GEP1 = DenseArrayBase.from_list(i32, [llvm.GEP_USE_SSA_VAL])
_ZERO32 = IntegerAttr(0, 32)
_ORDER0 = IntegerAttr(0, 64)
_UNIT = UnitAttr()
_CCC = llvm.CallingConventionAttr("ccc")
_NO_TAIL = llvm.TailCallKindAttr(llvm.TailCallKind.NONE)
#: callee name -> its SymbolRefAttr (``FuncBuilder.call``)
_CALLEES: dict = {}
_ICMP = {p.value: IntegerAttr(p.to_int(), 64) for p in llvm.ICmpPredicateFlag}
_FCMP = {p.value: IntegerAttr(p.to_int(), 64) for p in llvm.FCmpPredicateFlag}
_ALIGN: dict[int, IntegerAttr] = {}
_NOALIAS = DictionaryAttr({"llvm.noalias": _UNIT})
_NOATTR = DictionaryAttr({})
_SEG: dict[tuple, DenseArrayBase] = {}

_INT_BIN = {
    "add": llvm.AddOp, "sub": llvm.SubOp, "mul": llvm.MulOp, "shl": llvm.ShlOp,
}
_INT_BIN_PLAIN = {
    "sdiv": llvm.SDivOp, "udiv": llvm.UDivOp, "srem": llvm.SRemOp, "urem": llvm.URemOp,
    "and": llvm.AndOp, "or": llvm.OrOp, "xor": llvm.XOrOp, "lshr": llvm.LShrOp,
    "ashr": llvm.AShrOp,
}
_FLOAT_BIN = {"fadd": llvm.FAddOp, "fsub": llvm.FSubOp, "fmul": llvm.FMulOp,
              "fdiv": llvm.FDivOp, "frem": llvm.FRemOp}
_CASTS = {"sext": llvm.SExtOp, "zext": llvm.ZExtOp, "trunc": llvm.TruncOp,
          "sitofp": llvm.SIToFPOp, "fpext": llvm.FPExtOp, "fptrunc": llvm.FPTruncOp,
          "bitcast": llvm.BitcastOp}


def _align(n: int) -> IntegerAttr:
    a = _ALIGN.get(n)
    if a is None:
        a = _ALIGN[n] = IntegerAttr(n, 64)
    return a


def _segments(*sizes: int) -> DenseArrayBase:
    s = _SEG.get(sizes)
    if s is None:
        s = _SEG[sizes] = DenseArrayBase.from_list(i32, list(sizes))
    return s


def vec(elt: Attribute, n: int) -> VectorType:
    """``vector<n x elt>``."""
    return VectorType(elt, [n])


def is_float(t: Attribute) -> bool:
    if isinstance(t, VectorType):
        t = t.element_type
    return isinstance(t, (Float16Type, Float32Type, Float64Type))


def bits_of(t: Attribute) -> int:
    if isinstance(t, VectorType):
        t = t.element_type
    if isinstance(t, IntegerType):
        return t.width.data
    return {Float16Type: 16, Float32Type: 32, Float64Type: 64}[type(t)]


def _intr_suffix(t: Attribute) -> str:
    if isinstance(t, llvm.LLVMPointerType):
        return "p0"
    if isinstance(t, VectorType):
        return f"v{t.get_shape()[0]}{_intr_suffix(t.element_type)}"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    return {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64"}[type(t)]



def several(n) -> bool:
    """Whether code must handle more than one of the count ``n`` (tiles,
    batches): ``n > 1`` for a number; always for a symbolic count, which
    may be 1 at run time, where the general code (a division by 1) is
    right too, and asking ``n > 1`` would make a size guard."""
    return True if type(n) is Sym else n > 1

class ModuleBuilder:
    """Collects the functions, declarations and globals of one llvm module."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.ops: list[Operation] = []
        self._decls: dict[str, llvm.LLVMFunctionType] = {}
        self._names: set[str] = set()
        self._next: dict[str, int] = {}
        self._issued: dict[str, tuple[str, int]] = {}
        #: Helper functions emitted once per module (e.g. the GEMM micro-kernel).
        self.shared: dict = {}
        #: Functions worth the widest vector registers (compute-bound loops).
        self.wide: set[str] = set()
        #: Declared functions defined by LLVM IR text (what the ``llvm``
        #: dialect cannot express: indirect calls); ``codegen`` splices them in.
        self.helpers: dict[str, str] = {}
        #: The size symbols of a symbolic module, in workspace order.
        self.symbols: list[str] = []
        #: Whether routines of a library compiled once (``gemm_lib``) are
        #: declared instead of emitted, and the library variants declared.
        self.use_libraries = False
        #: no libm (the cuda backend's modules): float64 math and float32
        #: sin, cos and pow come from ``mathfns64`` instead of intrinsics
        self.device_math = False
        self.libraries: set = set()

    def unique(self, base: str) -> str:
        # The first number not taken is looked for from the last one handed
        # out for ``base`` (``_next``): a scan from 0 made a module with
        # thousands of kernels of one base quadratic in their count.
        n = self._next.get(base, 0)
        name = f"{self.prefix}{base}" if n == 0 else f"{self.prefix}{base}_{n}"
        while name in self._names:
            n += 1
            name = f"{self.prefix}{base}_{n}"
        self._next[base] = n
        self._issued[name] = (base, n)
        self._names.add(name)
        return name

    def release(self, name: str) -> None:
        """Give back a name ``unique`` handed out and left unused; the next
        ``unique`` of its base may hand it out again."""
        self._names.discard(name)
        base, n = self._issued.pop(name, (None, 0))
        if base is not None and self._next.get(base, 0) > n:
            self._next[base] = n

    def declare(self, name: str, args: Sequence[Attribute], ret: Attribute) -> str:
        """Declare an external function (libm, libpthread) once; its name.
        (A declaration named in ``helpers`` is defined by that LLVM IR text.)"""
        fty = llvm.LLVMFunctionType(list(args), ret if ret is not None else llvm.LLVMVoidType())
        old = self._decls.get(name)
        if old is None:
            self._decls[name] = fty
            self.ops.append(llvm.FuncOp(name, fty, linkage=llvm.LinkageAttr("external")))
        elif old != fty:
            raise ValueError(f"{name} declared with two signatures")
        return name

    def declared(self, name: str):
        """The function type ``name`` was declared with here, or None."""
        return self._decls.get(name)

    def global_constant(self, base: str, elt: Attribute, n: int, raw: bytes) -> str:
        """A private constant array of ``n`` elements of type ``elt`` whose
        little-endian bytes are ``raw``; its symbol name."""
        name = self.unique(base)
        attr = DenseIntOrFPElementsAttr(TensorType(elt, [n]), BytesAttr(raw))
        self.ops.append(llvm.GlobalOp(llvm.LLVMArrayType(n, elt), name, "private",
                                      constant=True, value=attr, alignment=64))
        return name

    def function(self, name: str, args: Sequence[Attribute], ret: Attribute | None,
                 *, noalias: Sequence[bool] = (), exported: bool = False) -> "FuncBuilder":
        fb = FuncBuilder(self, name, list(args), ret, noalias=noalias, exported=exported)
        return fb

    def module(self) -> ModuleOp:
        return ModuleOp(self.ops)


class FuncBuilder:
    """Builds one ``llvm.func``; see the module docstring."""

    def __init__(self, mb: ModuleBuilder, name: str, args: list[Attribute],
                 ret: Attribute | None, *, noalias: Sequence[bool] = (),
                 exported: bool = False):
        self.mb = mb
        self.name = name
        self.ret = ret
        self.entry = Block(arg_types=args)
        self.args = list(self.entry.args)
        self.blocks: list[Block] = [self.entry]
        self.block = self.new_block()
        self._consts: dict[tuple, SSAValue] = {}
        #: pointer-argument count -> the context array of its parallel calls
        #: (``parallel.parallel_call``)
        self.parallel_ctx: dict[int, SSAValue] = {}
        #: The workspace pointer symbolic sizes are read from (None: the
        #: function takes only static sizes).
        self.sizes: SSAValue | None = None
        ret_t = ret if ret is not None else llvm.LLVMVoidType()
        props = {}
        if any(noalias):
            props["arg_attrs"] = ArrayAttr([_NOALIAS if (i < len(noalias) and noalias[i])
                                            else _NOATTR for i in range(len(args))])
        self.op_ = llvm.FuncOp(name, llvm.LLVMFunctionType(args, ret_t),
                               linkage=llvm.LinkageAttr("external"), other_props=props)
        self.exported = exported
        mb.ops.append(self.op_)

    # --- structure -------------------------------------------------------------

    def new_block(self, arg_types: Sequence[Attribute] = ()) -> Block:
        b = Block(arg_types=arg_types)
        self.blocks.append(b)
        return b

    def set_block(self, b: Block) -> None:
        self.block = b

    def finish(self) -> None:
        """Close the entry block and move the blocks into the function."""
        self.entry.add_op(llvm.BrOp(self.blocks[1]))
        region = self.op_.body
        for b in self.blocks:
            region.add_block(b)

    def emit(self, op: Operation) -> SSAValue | None:
        self.block.add_op(op)
        return op.results[0] if op.results else None

    # --- constants ---------------------------------------------------------------

    def const(self, value, t: Attribute) -> SSAValue:
        """A scalar constant of type ``t`` (int or float), cached per function;
        a symbolic size is computed at run time (see the module docstring)."""
        if type(value) is Sym:
            return self.cast("trunc", self.size(value), t) if t != i64 else self.size(value)
        key = (value if not isinstance(value, float) else ("f", value.hex()), t)
        v = self._consts.get(key)
        if v is None:
            # (keyed by exactly what the attribute is made from)
            akey = (t, float(value).hex()) if is_float(t) else \
                (t, bool(value)) if t == i1 else (t, int(value))
            attr = _CONST_ATTRS.get(akey)
            if attr is None:
                attr = _const_attr(value, t)
                if len(_CONST_ATTRS) > 8192:
                    _CONST_ATTRS.clear()
                _CONST_ATTRS[akey] = attr
            op = llvm.ConstantOp.create(result_types=[t], properties={"value": attr})
            self.entry.add_op(op)
            v = self._consts[key] = op.results[0]
        return v

    def i64(self, v: int) -> SSAValue:
        return self.size(v) if type(v) is Sym else self.const(int(v), i64)

    def size(self, n: Sym) -> SSAValue:
        """The run-time value of the symbolic size ``n`` (entry block, once)."""
        key = ("sym", n.terms)
        v = self._consts.get(key)
        if v is None:
            block, self.block = self.block, self.entry
            try:
                v = self._terms(n.terms)
            finally:
                self.block = block
            self._consts[key] = v
        return v

    def _terms(self, terms) -> SSAValue:
        total = None
        for mono, c in terms:
            t = None
            for a in mono:
                x = self._atom(a)
                t = x if t is None else self.mul(t, x)
            if t is None:
                t = self.const(c, i64)
            elif c != 1:
                t = self.mul(t, self.const(c, i64))
            total = t if total is None else self.add(total, t)
        return total if total is not None else self.const(0, i64)

    def _atom(self, a) -> SSAValue:
        key = ("atom", a)
        v = self._consts.get(key)
        if v is None:
            if isinstance(a, str):
                if self.sizes is None or a not in self.mb.symbols:
                    raise ValueError(f"the size {a} is known at run time only, and "
                                     f"{self.name} has no way to read it")
                p = self.gep(self.sizes, self.const(SIZES_INDEX + self.mb.symbols.index(a), i64),
                             i64)
                v = self.load(p, i64, 8)
            else:
                kind, num, den = a
                v = self.floor_div_mod(kind, self._terms(num), self._terms(den))
            self._consts[key] = v
        return v

    def i32(self, v: int) -> SSAValue:
        return self.const(int(v), i32)

    def addressof(self, name: str) -> SSAValue:
        key = ("addr", name)
        v = self._consts.get(key)
        if v is None:
            op = llvm.AddressOfOp.create(result_types=[PTR],
                                         properties={"global_name": SymbolRefAttr(name)})
            self.entry.add_op(op)
            v = self._consts[key] = op.results[0]
        return v

    # --- arithmetic ----------------------------------------------------------------

    def ibin(self, kind: str, a: SSAValue, b: SSAValue, nsw: bool = False) -> SSAValue:
        cls = _INT_BIN.get(kind)
        if cls is not None:
            return self.emit(cls.create(operands=[a, b], result_types=[a.type],
                                        properties={"overflowFlags": _NSW if nsw else _NOFLAGS}))
        return self.emit(_INT_BIN_PLAIN[kind].create(operands=[a, b], result_types=[a.type]))

    def floor_div_mod(self, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """Python's ``a // b`` (kind "//") or ``a % b`` (kind "%") on i64:
        rounded toward minus infinity, the remainder taking ``b``'s sign
        (LLVM's sdiv / srem round toward zero: a symbolic ``-1 % B``, the
        start of ``x[-1]``, was -1, not ``B - 1``)."""
        q, r = self.ibin("sdiv", a, b), self.ibin("srem", a, b)
        zero = self.const(0, a.type)
        # r != 0 and sign(r) != sign(b): step toward minus infinity
        off = self.emit(llvm.AndOp.create(
            operands=[self.icmp("ne", r, zero),
                      self.icmp("slt", self.emit(llvm.XOrOp.create(operands=[r, b],
                                                                    result_types=[a.type])),
                                zero)], result_types=[i1]))
        if kind == "//":
            return self.select(off, self.ibin("sub", q, self.const(1, a.type)), q)
        return self.select(off, self.ibin("add", r, b), r)

    def add(self, a, b):
        """i64 index addition (nsw: indices never wrap)."""
        return self.ibin("add", a, b, nsw=True)

    def mul(self, a, b):
        return self.ibin("mul", a, b, nsw=True)

    def sub(self, a, b):
        return self.ibin("sub", a, b, nsw=True)

    def fbin(self, kind: str, a: SSAValue, b: SSAValue, reassoc: bool = False) -> SSAValue:
        return self.emit(_FLOAT_BIN[kind].create(
            operands=[a, b], result_types=[a.type],
            properties={"fastmathFlags": _FM_REASSOC if reassoc else _FM_NONE}))

    def fneg(self, a: SSAValue) -> SSAValue:
        return self.emit(llvm.FNegOp.create(operands=[a], result_types=[a.type],
                                            properties={"fastmathFlags": _FM_NONE}))

    def icmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(llvm.ICmpOp.create(operands=[a, b], result_types=[i1],
                                            properties={"predicate": _ICMP[pred]}))

    def fcmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(llvm.FCmpOp.create(operands=[a, b], result_types=[i1],
                                            properties={"predicate": _FCMP[pred],
                                                        "fastmathFlags": _FM_NONE}))

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(llvm.SelectOp.create(operands=[c, a, b], result_types=[a.type],
                                              properties={"fastmathFlags": _FM_NONE}))

    def cast(self, kind: str, v: SSAValue, t: Attribute) -> SSAValue:
        if v.type == t and kind in ("sext", "zext", "trunc", "fpext", "fptrunc", "bitcast"):
            return v
        return self.emit(_CASTS[kind].create(operands=[v], result_types=[t]))

    def intr(self, name: str, args: Sequence[SSAValue], ret: Attribute | None,
             overload: Sequence[Attribute] | None = None) -> SSAValue | None:
        """Call an LLVM intrinsic; ``name`` without the type suffix when
        ``overload`` lists the types that mangle it."""
        if overload is not None:
            name = name + "".join("." + _intr_suffix(t) for t in overload)
        op = llvm.CallIntrinsicOp.create(
            operands=list(args), result_types=[ret] if ret is not None else [],
            properties={"intrin": StringAttr(name), "fastmathFlags": _FM_NONE,
                        "op_bundle_sizes": _segments(),
                        "operandSegmentSizes": _segments(len(args), 0)})
        return self.emit(op)

    def call(self, name: str, args: Sequence[SSAValue], ret: Attribute | None) -> SSAValue | None:
        # (the properties ``llvm.CallOp(name, *args, return_type=ret)`` gives,
        # in its order, from shared attributes)
        callee = _CALLEES.get(name)
        if callee is None:
            if len(_CALLEES) > 8192:
                _CALLEES.clear()
            callee = _CALLEES[name] = SymbolRefAttr(name)
        return self.emit(llvm.CallOp.create(
            operands=list(args), result_types=[ret] if ret is not None else [],
            properties={"callee": callee, "fastmathFlags": _FM_NONE, "CConv": _CCC,
                        "op_bundle_sizes": _segments(),
                        "operandSegmentSizes": _segments(len(args), 0),
                        "TailCallKind": _NO_TAIL}))

    # --- memory ----------------------------------------------------------------------

    def gep(self, ptr: SSAValue, idx: SSAValue, elt: Attribute) -> SSAValue:
        """``&ptr[idx]`` for elements of type ``elt`` (inbounds)."""
        return self.emit(llvm.GEPOp.create(
            operands=[ptr, idx], result_types=[PTR],
            properties={"rawConstantIndices": _GEP1, "elem_type": elt,
                        "noWrapFlags": _ZERO32, "inbounds": _UNIT}))

    def load(self, ptr: SSAValue, t: Attribute, align: int) -> SSAValue:
        return self.emit(llvm.LoadOp.create(operands=[ptr], result_types=[t],
                                            properties={"ordering": _ORDER0,
                                                        "alignment": _align(align)}))

    def store(self, v: SSAValue, ptr: SSAValue, align: int) -> None:
        self.emit(llvm.StoreOp.create(operands=[v, ptr],
                                      properties={"ordering": _ORDER0,
                                                  "alignment": _align(align)}))

    def stack_slot(self, elt: Attribute, init: SSAValue, align: int = 8) -> SSAValue:
        """A one-element stack variable set to ``init`` on function entry."""
        p = self.alloca(elt, 1, align)
        self.entry.add_op(llvm.StoreOp.create(operands=[init, p], properties={
            "ordering": _ORDER0, "alignment": _align(bits_of(elt) // 8)}))
        return p

    def alloca(self, elt: Attribute, n: int, align: int = 16) -> SSAValue:
        """A stack array in the entry block (so it is allocated once)."""
        op = llvm.AllocaOp(self.i64(n), elt, alignment=align)
        self.entry.add_op(op)
        return op.results[0]

    # --- control flow ------------------------------------------------------------------

    # (Branches and calls are built with ``create``, as ``llvm.BrOp(dest,
    # *args)``, ``llvm.CondBrOp(...)`` and ``llvm.CallOp(...)`` build them:
    # the constructors' generic IRDL path cost ~0.1 ms an op, for the
    # thousands of loops and kernel calls of a training step;
    # tests/backends/test_builder_ops.py compares the ops.)

    def br(self, dest: Block, *args: SSAValue) -> None:
        self.emit(llvm.BrOp.create(operands=list(args), successors=[dest]))

    def cond_br(self, c: SSAValue, t: Block, f: Block,
                targs: Sequence[SSAValue] = (), fargs: Sequence[SSAValue] = ()) -> None:
        self.emit(llvm.CondBrOp.create(
            operands=[c, *targs, *fargs], successors=[t, f],
            properties={"operandSegmentSizes": _segments(1, len(targs), len(fargs))}))

    def ret_(self, v: SSAValue | None = None) -> None:
        self.emit(llvm.ReturnOp(v))

    def for_range(self, lo: SSAValue, hi: SSAValue,
                  body: Callable[..., Sequence[SSAValue] | None],
                  carried: Sequence[SSAValue] = (), step: int = 1) -> list[SSAValue]:
        """``for i in range(lo, hi, step)`` (i64, signed); ``body(i, *carried)``
        returns the next carried values.  Returns the final carried values.
        The body may create blocks; the loop continues from wherever it ends."""
        hdr = self.new_block([i64] + [v.type for v in carried])
        self.br(hdr, lo, *carried)
        bodyb = self.new_block()
        exit_ = self.new_block()
        self.set_block(hdr)
        i = hdr.args[0]
        self.cond_br(self.icmp("slt", i, hi), bodyb, exit_)
        self.set_block(bodyb)
        new = body(i, *hdr.args[1:]) or ()
        nxt = self.add(i, self.i64(step))
        self.br(hdr, nxt, *new)
        self.set_block(exit_)
        return list(hdr.args[1:])

    def while_loop(self, cond: Callable[..., SSAValue],
                   body: Callable[..., Sequence[SSAValue]],
                   carried: Sequence[SSAValue]) -> list[SSAValue]:
        """``while cond(*vals): vals = body(*vals)``; the final values."""
        hdr = self.new_block([v.type for v in carried])
        self.br(hdr, *carried)
        bodyb = self.new_block()
        exit_ = self.new_block()
        self.set_block(hdr)
        self.cond_br(cond(*hdr.args), bodyb, exit_)
        self.set_block(bodyb)
        self.br(hdr, *body(*hdr.args))
        self.set_block(exit_)
        return list(hdr.args)

    def if_then(self, c: SSAValue, then: Callable[[], None]) -> None:
        """``if c: then()`` (then must not leave the current block open
        elsewhere: it continues into the join block)."""
        tb = self.new_block()
        join = self.new_block()
        self.cond_br(c, tb, join)
        self.set_block(tb)
        then()
        self.br(join)
        self.set_block(join)

    def if_else(self, c: SSAValue, then: Callable[[], None], else_: Callable[[], None]) -> None:
        """``if c: then() else: else_()``, continuing after both."""
        tb, eb, join = self.new_block(), self.new_block(), self.new_block()
        self.cond_br(c, tb, eb)
        self.set_block(tb)
        then()
        self.br(join)
        self.set_block(eb)
        else_()
        self.br(join)
        self.set_block(join)

    def if_return(self, c: SSAValue, value: SSAValue) -> None:
        """``if c: return value``."""
        tb = self.new_block()
        join = self.new_block()
        self.cond_br(c, tb, join)
        self.set_block(tb)
        self.ret_(value)
        self.set_block(join)


#: Constant attributes made before, by type and the Python value they are
#: made from (a float by its ``hex()``, so ``0.0`` and ``-0.0`` stay apart):
#: attributes are immutable, and making and verifying one costs ~20 us.
_CONST_ATTRS: dict = {}


def _const_attr(value, t: Attribute) -> Attribute:
    """The ``value`` property of an ``llvm.mlir.constant`` of type ``t``."""
    if is_float(t):
        return FloatAttr(float(value), t)
    if t == i1:
        return IntegerAttr(-1 if value else 0, t)
    w = bits_of(t)
    iv = int(value) & ((1 << w) - 1)
    if iv >= 1 << (w - 1):
        iv -= 1 << w
    return IntegerAttr(iv, t)
