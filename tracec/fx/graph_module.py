"""``torch.fx.graph_module``: ``GraphModule`` (``tracec.fx``)."""
from tracec.fx import GraphModule  # noqa: F401

__all__ = ["GraphModule"]
