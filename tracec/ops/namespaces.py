"""``torch.ops.<namespace>.<op>``: the operator namespaces that
``tracec.library`` defines (``custom_op("mylib::foo")``,
``Library("mylib", "DEF").define(...)``), reached as attributes of
``tracec.ops`` (PyTorch's ``torch.ops``; ``install_as_torch`` makes
``torch.ops`` this package).

Invariant: this module only holds the registry; what an operator does
(its kernels, fake and autograd registrations) is ``tracec.library``'s.
A namespace name never shadows one of tracec's own primitive modules
(``tracec.ops.random`` stays the module).
"""
from __future__ import annotations

__all__ = ["NAMESPACES", "OpNamespace", "namespace"]


class OpNamespace:
    """``torch.ops.<name>``: its operators as attributes (each an
    ``OpOverloadPacket`` of ``tracec.library``)."""

    def __init__(self, name: str):
        self.name = name
        self._ops: dict = {}

    def __getattr__(self, op: str):
        ops = self.__dict__.get("_ops", {})
        if op in ops:
            return ops[op]
        if op.startswith("__"):
            raise AttributeError(op)
        raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op}'")

    def __dir__(self):
        return sorted(self._ops)

    def __iter__(self):
        return iter(self._ops)

    def __repr__(self) -> str:
        return f"<module 'torch.ops.{self.name}' from 'torch.ops'>"


#: namespace name -> OpNamespace (created by the first definition in it)
NAMESPACES: dict = {}


def namespace(name: str) -> OpNamespace:
    """The namespace ``name``, made on first use."""
    ns = NAMESPACES.get(name)
    if ns is None:
        ns = NAMESPACES[name] = OpNamespace(name)
    return ns
