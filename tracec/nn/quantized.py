"""``torch.nn.quantized``: PyTorch's older name of ``torch.ao.nn.quantized`` (the
same module object, so ``import torch.nn.quantized`` and the attribute agree)."""
import sys

from tracec.ao.nn import quantized as _target

sys.modules[__name__] = _target
