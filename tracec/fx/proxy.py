"""``torch.fx.proxy``: ``Proxy``, ``Attribute``, ``TraceError`` (``tracec.fx``)."""
from tracec.fx import Attribute, Proxy, TraceError  # noqa: F401

__all__ = ["Attribute", "Proxy", "TraceError"]
