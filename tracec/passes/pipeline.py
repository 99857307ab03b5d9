"""The pass pipeline, as one list (DESIGN.md "Passes").

Stages: ``trace`` -> ``AUTODIFF`` -> ``autodiff`` -> ``OPTIMIZE`` ->
``optimized``.  Importing this module (through ``tracec.passes.simplify``)
installs the primitives' full type rule into the IR verifier.
"""
from __future__ import annotations

import contextlib
import gc

from xdsl.context import Context
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from tracec import ir
from tracec.passes.autodiff import AutodiffPass
from tracec.passes.dce import DeadCode
from tracec.passes.fusion import FusePass
from tracec.passes.gather_sink import GatherSinkPass
from tracec.passes.simplify import CanonicalizePass

AUTODIFF = [AutodiffPass()]
OPTIMIZE = [
    CanonicalizePass(),                 # algebraic identities, constant folding
    CommonSubexpressionElimination(),   # xDSL's cse: one op per distinct computation
    DeadCode(),                         # dce in one sweep: drop what the rewrites orphaned
    GatherSinkPass(),                   # gathers of elementwise results, one-hot scatters
    DeadCode(),                         # the values only those gathers read
    FusePass(),                         # elementwise chains (+ a reduction) -> tracec.kernel
    DeadCode(),                         # scalar constants / broadcasts copied into kernels
]


def _ctx() -> Context:
    return ir.context()


@contextlib.contextmanager
def paused_gc():
    """Python's cyclic garbage collector off for the block (restored after).

    Building IR allocates hundreds of thousands of long-lived objects; each
    allocation burst triggers a collection that walks every live object, so
    on a large module (an unrolled LSTM step) the passes and the lowering
    spent a third of their time collecting nothing.  Cycles made meanwhile
    are collected by the next collection after the block."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run_passes(passes, module, *, verify: bool | str = False) -> None:
    """Apply ``passes`` in order; with ``verify``, verify after each one and
    name the pass whose output failed; ``verify="stage"``: once, after the
    last (``TRACEC_CHECKS=1``: verifying after every pass was most of the
    checks' cost on a training step; ``TRACEC_CHECKS=2`` names the pass)."""
    with paused_gc():
        _run(passes, module, verify)


def checks_level() -> bool | str:
    """``run_passes``' ``verify`` for ``$TRACEC_CHECKS``: False when unset or
    0, "stage" for 1, True (after every pass) for 2 and above."""
    import os
    level = os.environ.get("TRACEC_CHECKS", "")
    if level in ("", "0"):
        return False
    return True if level not in ("1",) else "stage"


def _run(passes, module, verify) -> None:
    ctx = _ctx()
    for p in passes:
        p.apply(ctx, module)
        if verify is True:
            try:
                module.verify()
            except Exception as e:
                raise RuntimeError(f"IR verification failed after pass {p.name}: {e}") from e
    if verify == "stage":
        try:
            module.verify()
        except Exception as e:
            names = ", ".join(p.name for p in passes)
            raise RuntimeError(f"IR verification failed after the passes {names} "
                               f"(TRACEC_CHECKS=2 verifies after each one): {e}") from e
