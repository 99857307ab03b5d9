"""``torch.fx._symbolic_trace``: the tracer (``tracec.fx``)."""
from tracec.fx import Tracer, symbolic_trace, wrap  # noqa: F401

__all__ = ["Tracer", "symbolic_trace", "wrap"]
