"""``torch.utils.dlpack``: tensors to and from DLPack (shared memory)."""
from tracec.control_flow import from_dlpack, to_dlpack  # noqa: F401

__all__ = ["from_dlpack", "to_dlpack"]
