"""Custom directives of the tracec assembly format.

* ``custom<TypeSignature>(type(operands), type(results))`` prints one type
  when every operand and the result share it (``: tensor<4x8xf32>``),
  ``Tin -> Tout`` for one operand, and ``(T1, T2) -> Tout`` otherwise.
* ``custom<Scalar>($value)`` prints a fill value bare: ``1.5``, ``-3``,
  ``true``, ``inf``, ``nan``; the literal's form keeps the Python type
  (a float always has a ``.``).
* ``custom<DenseLiteral>($value, type($result))`` prints a constant's data as
  ``dense<[...]> : tensor<..>`` when that text reads back to the very same
  bytes, else as MLIR's hex form ``dense<"0x..."> : tensor<..>``.

Invariant: each directive's ``parse`` reads exactly what its ``print``
writes, so custom syntax round-trips to structurally equal IR.
"""
from __future__ import annotations

import io
import math

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from tracec.ir.attrs import decode_scalar, encode_scalar, format_scalar

__all__ = ["TypeSignature", "Scalar", "DenseLiteral", "READABLE_DENSE_LIMIT"]

#: Constants with more elements than this always print in hex form.
READABLE_DENSE_LIMIT = 64


@irdl_custom_directive
class TypeSignature(CustomDirective):
    """Operand and result types, elided to one type when all are equal."""

    operand_types: TypeDirective
    result_types: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        n_operands = sum(len(o) for o in state.operands if o is not None)
        if parser.parse_optional_punctuation("(") is not None:
            ins = parser.parse_optional_undelimited_comma_separated_list(
                parser.parse_optional_type, parser.parse_type) or []
            parser.parse_punctuation(")")
            parser.parse_punctuation("->")
            out = parser.parse_type()
        else:
            first = parser.parse_type()
            if parser.parse_optional_punctuation("->") is not None:
                ins, out = [first], parser.parse_type()
            else:
                ins, out = [first] * n_operands, first
        self.operand_types.set(state, ins)
        self.result_types.set(state, [out])

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        ins = op.operand_types
        out = op.result_types[0]
        if all(t == out for t in ins):
            printer.print_attribute(out)
            return
        if len(ins) == 1:
            printer.print_attribute(ins[0])
        else:
            with printer.in_parens():
                printer.print_list(ins, printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(out)


@irdl_custom_directive
class Scalar(CustomDirective):
    """A bool, int or float scalar property, printed bare."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if parser.parse_optional_keyword("true") is not None:
            v = True
        elif parser.parse_optional_keyword("false") is not None:
            v = False
        elif parser.parse_optional_keyword("nan") is not None:
            v = math.nan
        elif parser.parse_optional_keyword("inf") is not None:
            v = math.inf
        else:
            negative = parser.parse_optional_punctuation("-") is not None
            if negative and parser.parse_optional_keyword("inf") is not None:
                v = -math.inf
            else:
                v = parser.parse_number()
                if negative:
                    v = -v
        self.value.set(state, encode_scalar(v))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_string(format_scalar(decode_scalar(self.value.get(op))))


def _attr_text(attr) -> str:
    out = io.StringIO()
    Printer(stream=out).print_attribute(attr)
    return out.getvalue()


def dense_text(attr: DenseIntOrFPElementsAttr) -> str:
    """The text ``DenseLiteral`` prints for ``attr`` (exact by construction)."""
    if len(attr) <= READABLE_DENSE_LIMIT:
        try:
            text = _attr_text(attr)
            if Parser(Context(), text).parse_attribute() == attr:
                return text
        except Exception:  # noqa: BLE001 - any failure means: use the exact form
            pass
    return f'dense<"0x{attr.data.data.hex().upper()}"> : {_attr_text(attr.type)}'


@irdl_custom_directive
class DenseLiteral(CustomDirective):
    """A dense elements property and the result type it determines."""

    value: AttributeVariable
    result_type: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        pos = parser.pos
        attr = parser.parse_attribute()
        if not isinstance(attr, DenseIntOrFPElementsAttr):
            parser.raise_error("expected a dense<...> literal", at_position=pos,
                               end_position=parser.pos)
        self.value.set(state, attr)
        self.result_type.set(state, [attr.type])

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_string(dense_text(self.value.get(op)))
