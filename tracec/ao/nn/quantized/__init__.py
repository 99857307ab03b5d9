"""``torch.ao.nn.quantized``: ``dynamic`` (weights int8, activations
quantized per call)."""
from tracec.ao.nn.quantized import dynamic  # noqa: F401
