"""``tracec.nn``: modules, parameters, ``functional`` (F), ``init`` and
``utils``, with PyTorch's names and semantics (API.md §3).

Everything a layer computes is a composite over the primitives, so eager
autograd and the tracer see it without rules of their own.
"""
from tracec import methods as _methods  # noqa: F401  (the Tensor methods layers call)
from tracec.nn.parameter import (Buffer, Parameter, UninitializedBuffer,  # noqa: F401
                                 UninitializedParameter)
from tracec.nn.modules import *  # noqa: F401,F403
from tracec.nn.modules import Module  # noqa: F401
from tracec.nn import functional, grad, init, utils  # noqa: F401
# The packages, not ``modules.attention`` / ``modules.utils``, which the star
# import above brings in under the same names (``from tracec.nn import utils``
# would return that attribute): as after ``import torch``.
import importlib as _importlib  # noqa: E402
attention = _importlib.import_module("tracec.nn.attention")
utils = _importlib.import_module("tracec.nn.utils")
from tracec.nn import common_types  # noqa: F401,E402
from tracec.nn import modules  # noqa: F401
from tracec.nn import parallel  # noqa: F401,E402
from tracec.nn._linear_cross_entropy import LinearCrossEntropyOptions  # noqa: F401,E402


def __getattr__(name):
    # ``torch.nn.quantized`` / ``torch.nn.intrinsic``: PyTorch's older names
    # of ``torch.ao.nn.*`` (imported on first use: ``tracec.ao`` builds on nn)
    if name in ("quantized", "intrinsic"):
        mod = _importlib.import_module(f"tracec.nn.{name}")     # (tracec.ao.nn.<name>)
        globals()[name] = mod
        return mod
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
