"""``torch.fx.graph``: ``Graph`` (``tracec.fx``)."""
from tracec.fx import Graph  # noqa: F401

__all__ = ["Graph"]
