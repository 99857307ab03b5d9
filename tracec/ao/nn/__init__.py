"""``torch.ao.nn``: the quantized modules (``quantized.dynamic``)."""
from tracec.ao.nn import intrinsic, quantized  # noqa: F401
