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


def _parse_to(*args, **kwargs):
    """``torch._C._nn._parse_to``: the ``(device, dtype, non_blocking,
    memory_format)`` that ``Tensor.to`` / ``Module.to`` arguments name
    (a tensor argument gives its device and dtype), None where not given."""
    from tracec import dtypes as dt
    from tracec.device import device as _device, to_device
    from tracec.tensor import Tensor
    dev = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    memory_format = kwargs.pop("memory_format", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, dt.DType):
            dtype = a
        elif isinstance(a, (str, int, _device)) and not isinstance(a, bool):
            dev = a
        elif isinstance(a, Tensor):
            dev, dtype = a.device, a.dtype
        elif isinstance(a, bool):
            non_blocking = a
        else:
            raise TypeError(f"to() received an invalid combination of arguments - got "
                            f"({type(a).__name__})")
    return (None if dev is None else to_device(dev),
            None if dtype is None else dt.to_dtype(dtype), non_blocking, memory_format)
