"""``torch.quantization``: PyTorch's older name of ``torch.ao.quantization``
(the same functions)."""
from tracec.ao.quantization import *  # noqa: F401,F403
from tracec.ao.quantization import QConfig, quantize_dynamic  # noqa: F401
