"""The pass pipeline, as one list (DESIGN.md "Passes")."""
from __future__ import annotations

from xdsl.context import Context
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from tracec import ir
from tracec.passes.autodiff import AutodiffPass

AUTODIFF = [AutodiffPass()]
OPTIMIZE = [CommonSubexpressionElimination(), DeadCodeElimination()]


def _ctx() -> Context:
    return ir.context()


def run_passes(passes, module, *, verify: bool = False) -> None:
    ctx = _ctx()
    for p in passes:
        p.apply(ctx, module)
        if verify:
            try:
                module.verify()
            except Exception as e:
                raise RuntimeError(f"IR verification failed after pass {p.name}: {e}") from e
