"""``torch._ops``: the operator classes libraries check calls against
(``isinstance(func, torch._ops.OpOverload)``) and ``torch._ops.ops``
(``torch.ops``)."""
from tracec import ops  # noqa: F401
from tracec.library import OpOverload, OpOverloadPacket  # noqa: F401

__all__ = ["OpOverload", "OpOverloadPacket", "ops"]
