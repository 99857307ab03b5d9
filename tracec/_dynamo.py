"""``torch._dynamo`` as scripts touch it: ``config`` flags they set
(``suppress_errors``, ``cache_size_limit``, ...), ``reset()``,
``disable``, ``mark_dynamic``, ``is_compiling``.

tracec's compiler is not Dynamo: the flags are recorded and read back and
change nothing, except ``cache_size_limit``, which is what tracec calls
``max_traces`` (read by compiled functions made afterwards).
"""
from __future__ import annotations

__all__ = ["allow_in_graph", "config", "disable", "is_compiling", "mark_dynamic", "mark_static",
           "reset"]


class _Config:
    """Settable attributes with Dynamo's defaults for the ones scripts read."""

    def __init__(self):
        self.__dict__.update(suppress_errors=False, cache_size_limit=8,
                             accumulated_cache_size_limit=256, verbose=False,
                             capture_scalar_outputs=False, capture_dynamic_output_shape_ops=False,
                             optimize_ddp=True, automatic_dynamic_shapes=True,
                             assume_static_by_default=True, inline_inbuilt_nn_modules=True,
                             recompile_limit=8)

    def __getattr__(self, name):
        raise AttributeError(f"torch._dynamo.config has no attribute {name!r}")


config = _Config()


def reset() -> None:
    """Dynamo forgets its compiled code; tracec's lives in each compiled
    function (``fn.cache_info()``) and on disk (``tracec cache clear``)."""


def disable(fn=None, recursive: bool = True, *, reason=None):
    """``fn`` itself: called inside a compiled function, its ops are traced
    like any other Python (tracec has no graph breaks)."""
    if fn is None:
        return lambda f: f
    return fn


def is_compiling() -> bool:
    """True while tracec records a trace (the code runs to be recorded)."""
    from tracec.tensor import RECORDERS
    return bool(RECORDERS)


def mark_dynamic(t, index, *, min=None, max=None) -> None:  # noqa: A002 - PyTorch's names
    from tracec.sym_shapes import mark_dynamic as mark
    for i in ([index] if isinstance(index, int) else index):
        mark(t, i)


def mark_static(t, index=None) -> None:
    """Accepted: sizes are static unless made dynamic."""


def allow_in_graph(fn):
    """``fn`` itself: tracec records what any Python function computes."""
    return fn
