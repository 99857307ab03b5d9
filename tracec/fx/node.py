"""``torch.fx.node``: ``Node`` and ``map_arg`` (``tracec.fx``)."""
from tracec.fx import Node, map_arg  # noqa: F401

__all__ = ["Node", "map_arg"]
