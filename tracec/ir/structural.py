"""The non-primitive ops of the tracec dialect.

* ``tracec.constant``: a dense tensor literal (``DenseIntOrFPElementsAttr``)
  whose bytes round-trip NumPy data exactly (``constant`` / ``constant_array``).
* ``tracec.backward``: a recorded ``loss.backward()``.  Operands: the loss,
  the values ``wrt`` which gradients are taken, and an optional ``seed``
  (the ``gradient=`` argument); results: one gradient per ``wrt`` value, of
  that value's type.  The autodiff pass replaces it by the reverse-mode graph.
* ``tracec.custom_vjp``: the result of a user ``autograd.Function``
  recorded with its backward.  Operands: ``value`` (the forward's result,
  recorded behind a ``stop_gradient``), the differentiable ``inputs``, their
  gradients ``grads`` as the user's backward computed them from ``seed``
  (ops recorded in the same block, at trace time), and ``seed`` itself;
  result: ``value``'s value.  Its gradient for ``inputs[i]`` is the ops from
  ``seed`` to ``grads[i]`` with the result's cotangent in ``seed``'s place.
  The autodiff pass expands that and replaces the op by ``value``.
* ``tracec.kernel``: a fused kernel.  Operands are its inputs; its single
  region has one block whose arguments correspond one-to-one (same types) to
  the operands; the body holds tracec primitive ops and constants only and
  ends with ``tracec.yield``, whose operand types are the kernel's result
  types.  The kernel is isolated from above: the body sees only its
  arguments.
* ``tracec.yield``: the kernel terminator.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import ConstantLike, HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from tracec import dtypes as dt
from tracec.ir.attrs import format_loc, to_location
from tracec.ir.format import DenseLiteral
from tracec.ir.ops import PrimitiveOp
from tracec.ir.types import dtype_of, format_type, is_tensor_type, shape_of, tensor_type

__all__ = ["ConstantOp", "BackwardOp", "KernelOp", "YieldOp", "constant", "dense_attr",
           "constant_array"]


def _fail(op, msg: str) -> VerifyException:
    return VerifyException(f"{op.name} at {format_loc(op)}: {msg}")


def _check_tensors(op, types) -> None:
    for t in types:
        if not is_tensor_type(t):
            raise _fail(op, f"{t} is not a static tensor of a tracec element type")


# --- constant ------------------------------------------------------------------

def dense_attr(data, dtype=None) -> DenseIntOrFPElementsAttr:
    """A dense attribute holding ``data`` (array-like) as ``dtype`` (default:
    tracec's dtype for the array's NumPy dtype).

    Storage is little-endian; ``bool`` is stored as xDSL's parser stores it
    (0xFF for true) so that text and Python construction agree; ``bfloat16``
    (float32 storage in tracec) is rounded and stored as its 16 top bits."""
    a = np.asarray(data)
    d = dt.to_dtype(dtype) if dtype is not None else dt.from_numpy_dtype(a.dtype)
    if d is dt.bool_:
        raw = (a.astype(bool).astype(np.uint8) * np.uint8(0xFF)).tobytes()
    elif d is dt.bfloat16:
        bits = dt.round_bfloat16(a).view(np.uint32) >> np.uint32(16)
        raw = bits.astype("<u2").tobytes()
    else:
        raw = np.ascontiguousarray(a, dtype=d.np.newbyteorder("<")).tobytes()
    return DenseIntOrFPElementsAttr(tensor_type(a.shape, d), BytesAttr(raw))


def constant_array(x) -> np.ndarray:
    """The NumPy array (tracec storage dtype) of a ConstantOp, its result, or a
    dense attribute.  A fresh, writable array."""
    attr = x
    if isinstance(x, SSAValue):
        attr = x.owner
    if isinstance(attr, ConstantOp):
        attr = attr.value
    shape, d = shape_of(attr.type), dtype_of(attr.type)
    raw = attr.data.data
    if d is dt.bool_:
        return (np.frombuffer(raw, np.uint8) != 0).reshape(shape)
    if d is dt.bfloat16:
        bits = np.frombuffer(raw, "<u2").astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(raw, d.np.newbyteorder("<")).astype(d.np).reshape(shape)


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """``%c = tracec.constant dense<[1.0, 2.0]> : tensor<2xf32>``."""

    name = "tracec.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ConstantLike())
    custom_directives = (DenseLiteral,)
    assembly_format = "attr-dict custom<DenseLiteral>($value, type($result))"

    def __init__(self, value: DenseIntOrFPElementsAttr, loc=None):
        super().__init__(result_types=[value.type], properties={"value": value})
        self.location = to_location(loc)

    def verify_(self) -> None:
        _check_tensors(self, [self.result.type])
        if self.value.type != self.result.type:
            raise _fail(self, f"value type {self.value.type} differs from result type "
                              f"{self.result.type}")
        size = self.value.type.element_type.compile_time_size
        if len(self.value.data.data) != size * math.prod(shape_of(self.result.type)):
            raise _fail(self, "data size does not match the type")


def constant(data, dtype=None, loc=None) -> ConstantOp:
    """A ``tracec.constant`` op holding ``data`` (see ``dense_attr``)."""
    return ConstantOp(dense_attr(data, dtype), loc)


# --- backward --------------------------------------------------------------------

@irdl_op_definition
class BackwardOp(IRDLOperation):
    """``%g0, %g1 = tracec.backward %loss wrt %w, %b : tensor<f32> wrt
    tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>``
    (optionally ``seed %s`` after the wrt list, with ``seed <type>``)."""

    name = "tracec.backward"
    loss = operand_def(TensorType)
    wrt = var_operand_def(TensorType)
    seed = opt_operand_def(TensorType)
    grads = var_result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = ("$loss `wrt` $wrt (`seed` $seed^)? attr-dict `:` type($loss) "
                       "`wrt` type($wrt) (`seed` type($seed)^)? `->` type($grads)")

    def __init__(self, loss: SSAValue, wrt: Sequence[SSAValue],
                 seed: SSAValue | None = None, loc=None):
        super().__init__(operands=[loss, list(wrt), [seed] if seed is not None else []],
                         result_types=[[w.type for w in wrt]])
        self.location = to_location(loc)

    def verify_(self) -> None:
        _check_tensors(self, [*self.operand_types, *self.result_types])
        if not dtype_of(self.loss.type).is_floating_point:
            raise _fail(self, f"loss must be floating point, got {format_type(self.loss.type)}")
        if len(self.grads) != len(self.wrt):
            raise _fail(self, f"{len(self.wrt)} wrt values but {len(self.grads)} gradients")
        for i, (w, g) in enumerate(zip(self.wrt, self.grads)):
            if w.type != g.type:
                raise _fail(self, f"gradient {i} has type {format_type(g.type)}, "
                                  f"its wrt value {format_type(w.type)}")
            if not dtype_of(w.type).is_floating_point:
                raise _fail(self, f"wrt value {i} is not floating point")
        if self.seed is not None:
            if self.seed.type != self.loss.type:
                raise _fail(self, f"seed type {format_type(self.seed.type)} differs from "
                                  f"loss type {format_type(self.loss.type)}")
        elif math.prod(shape_of(self.loss.type)) != 1:
            raise _fail(self, "grad can be implicitly created only for scalar outputs "
                              f"(loss is {format_type(self.loss.type)}; pass a seed)")


# --- custom_vjp ----------------------------------------------------------------------

@irdl_op_definition
class CustomVJPOp(IRDLOperation):
    """``%r = tracec.custom_vjp %y inputs %x grads %gx seed %s : tensor<..>
    inputs tensor<..> grads tensor<..> seed tensor<..> -> tensor<..>``
    (see the module docstring)."""

    name = "tracec.custom_vjp"
    value = operand_def(TensorType)
    inputs = var_operand_def(TensorType)
    grads = var_operand_def(TensorType)
    seed = operand_def(TensorType)
    result = result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = ("$value `inputs` $inputs `grads` $grads `seed` $seed attr-dict `:` "
                       "type($value) `inputs` type($inputs) `grads` type($grads) `seed` "
                       "type($seed) `->` type($result)")

    def __init__(self, value: SSAValue, inputs: Sequence[SSAValue], grads: Sequence[SSAValue],
                 seed: SSAValue, loc=None):
        super().__init__(operands=[value, list(inputs), list(grads), seed],
                         result_types=[value.type])
        self.location = to_location(loc)

    def verify_(self) -> None:
        _check_tensors(self, [*self.operand_types, *self.result_types])
        if self.result.type != self.value.type or self.seed.type != self.value.type:
            raise _fail(self, "the result and the seed must have the value's type")
        if len(self.inputs) != len(self.grads):
            raise _fail(self, f"{len(self.inputs)} inputs but {len(self.grads)} gradients")
        for i, (x, g) in enumerate(zip(self.inputs, self.grads)):
            if x.type != g.type:
                raise _fail(self, f"gradient {i} has type {format_type(g.type)}, its input "
                                  f"{format_type(x.type)}")


# --- kernel ------------------------------------------------------------------------

@irdl_op_definition
class KernelOp(IRDLOperation):
    """A fused kernel; see the module docstring for its invariants."""

    name = "tracec.kernel"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure(), IsolatedFromAbove())
    assembly_format = "$inputs attr-dict `:` functional-type($inputs, $outputs) $body"

    def __init__(self, inputs: Sequence[SSAValue], result_types: Sequence[Attribute],
                 body: Region | Block | None = None, loc=None):
        if body is None:
            body = Block(arg_types=[v.type for v in inputs])
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)],
                         regions=[body])
        self.location = to_location(loc)

    @property
    def block(self) -> Block:
        """The body's only block (its arguments stand for ``inputs``)."""
        return self.body.block

    def verify_(self) -> None:
        _check_tensors(self, [*self.operand_types, *self.result_types])
        block = self.body.block
        if [a.type for a in block.args] != list(self.operand_types):
            raise _fail(self, "block arguments must match the inputs one-to-one: "
                              f"({', '.join(format_type(a.type) for a in block.args)}) vs "
                              f"({', '.join(format_type(t) for t in self.operand_types)})")
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise _fail(self, "body must end with tracec.yield")
        if list(term.operand_types) != list(self.result_types):
            raise _fail(self, "yielded types must equal the result types")
        for op in block.ops:
            if op is not term and not isinstance(op, (PrimitiveOp, ConstantOp)):
                raise _fail(self, f"{op.name} is not allowed in a kernel body")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """``tracec.yield %a, %b : tensor<..>, tensor<..>``: a kernel's results."""

    name = "tracec.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(KernelOp), Pure())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, values: Sequence[SSAValue], loc=None):
        super().__init__(operands=[list(values)])
        self.location = to_location(loc)
