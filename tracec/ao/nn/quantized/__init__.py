"""``torch.ao.nn.quantized``: ``dynamic`` (weights int8, activations
quantized per call) and ``FloatFunctional``."""
from tracec.ao.nn.quantized import dynamic  # noqa: F401
from tracec.ao.nn.quantized.functional_modules import FloatFunctional  # noqa: F401
