"""``torch._C._nn``: the ATen functions that PyTorch's
``torch.nn.functional`` exposes directly (``F.gelu is torch._C._nn.gelu``),
as code calls them and as ``torch.fx`` prints and generates calls to them
(``torch._C._nn.gelu(x)``).  Each is the ``tracec.nn.functional`` function
itself, so the two names stay one definition."""
from __future__ import annotations

from tracec.nn import functional as F

#: torch.nn.functional's name -> its ATen name (``torch._C._nn.<name>``)
FUNCTIONAL_NAMES = {"linear": "linear", "gelu": "gelu", "avg_pool2d": "avg_pool2d",
                    "avg_pool3d": "avg_pool3d", "softplus": "softplus", "one_hot": "one_hot",
                    "logsigmoid": "log_sigmoid", "softshrink": "softshrink"}

for _f, _aten in FUNCTIONAL_NAMES.items():
    globals()[_aten] = getattr(F, _f)
del _f, _aten
