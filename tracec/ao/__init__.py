"""``torch.ao``: PyTorch's architecture-optimization namespace; tracec has
its dynamic quantization (``tracec.ao.quantization.quantize_dynamic``,
``tracec.ao.nn.quantized.dynamic.Linear``)."""
from tracec.ao import nn, quantization  # noqa: F401
