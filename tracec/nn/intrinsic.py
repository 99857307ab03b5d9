"""``torch.nn.intrinsic``: PyTorch's older name of ``torch.ao.nn.intrinsic`` (the
same module object, so ``import torch.nn.intrinsic`` and the attribute agree)."""
import sys

from tracec.ao.nn import intrinsic as _target

sys.modules[__name__] = _target
