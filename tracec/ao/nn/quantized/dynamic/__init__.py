"""``torch.ao.nn.quantized.dynamic``: ``Linear``."""
from tracec.ao.nn.quantized.dynamic.linear import Linear  # noqa: F401

__all__ = ["Linear"]
