"""``torch.ao.nn``: the quantized modules (``quantized.dynamic``)."""
from tracec.ao.nn import quantized  # noqa: F401
