"""``torch.ao.nn.intrinsic``: the fused-module containers ``fuse_modules``
builds (``ConvReLU2d(conv, relu)``, ``LinearReLU``, ``BNReLU2d``, and for
QAT fusion ``ConvBn2d``, ``ConvBnReLU2d``, ``LinearBn1d``...).

Invariant: each is an ``nn.Sequential`` of the given modules (children
``"0"``, ``"1"``...: the state-dict keys PyTorch gives), built only from
exactly the module types its name says (PyTorch's type check and message);
running it runs them in order.  tracec keeps fused models in float: there
is no convert step to quantized kernels.
"""
from __future__ import annotations

from tracec import nn
from tracec.nn.utils.parametrize import type_before_parametrizations

__all__ = ["ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU", "BNReLU2d", "BNReLU3d",
           "ConvBn1d", "ConvBn2d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d",
           "LinearBn1d", "ConvAdd2d", "ConvAddReLU2d", "LinearLeakyReLU", "LinearTanh"]


class _FusedModule(nn.Sequential):
    """``torch.ao.nn.intrinsic._FusedModule``: a Sequential of fused parts."""


def _fused(name, *kinds):
    def __init__(self, *mods):
        types = tuple(type_before_parametrizations(m) for m in mods)
        if len(mods) != len(kinds) or any(t is not k for t, k in zip(types, kinds)):
            names = [t.__name__ for t in types]
            listed = " and ".join(names) if len(names) == 2 else \
                ", ".join(names[:-1]) + ", and " + names[-1]
            raise AssertionError("Incorrect types for input modules: " + listed)
        _FusedModule.__init__(self, *mods)
    cls = type(name, (_FusedModule,), {"__init__": __init__, "__module__": __name__,
                                       "__doc__": f"``torch.ao.nn.intrinsic.{name}``: "
                                                  + " then ".join(k.__name__ for k in kinds) + "."})
    return cls


ConvReLU1d = _fused("ConvReLU1d", nn.Conv1d, nn.ReLU)
ConvReLU2d = _fused("ConvReLU2d", nn.Conv2d, nn.ReLU)
ConvReLU3d = _fused("ConvReLU3d", nn.Conv3d, nn.ReLU)
LinearReLU = _fused("LinearReLU", nn.Linear, nn.ReLU)
LinearLeakyReLU = _fused("LinearLeakyReLU", nn.Linear, nn.LeakyReLU)
LinearTanh = _fused("LinearTanh", nn.Linear, nn.Tanh)
BNReLU2d = _fused("BNReLU2d", nn.BatchNorm2d, nn.ReLU)
BNReLU3d = _fused("BNReLU3d", nn.BatchNorm3d, nn.ReLU)
ConvBn1d = _fused("ConvBn1d", nn.Conv1d, nn.BatchNorm1d)
ConvBn2d = _fused("ConvBn2d", nn.Conv2d, nn.BatchNorm2d)
ConvBn3d = _fused("ConvBn3d", nn.Conv3d, nn.BatchNorm3d)
ConvBnReLU1d = _fused("ConvBnReLU1d", nn.Conv1d, nn.BatchNorm1d, nn.ReLU)
ConvBnReLU2d = _fused("ConvBnReLU2d", nn.Conv2d, nn.BatchNorm2d, nn.ReLU)
ConvBnReLU3d = _fused("ConvBnReLU3d", nn.Conv3d, nn.BatchNorm3d, nn.ReLU)
LinearBn1d = _fused("LinearBn1d", nn.Linear, nn.BatchNorm1d)


class ConvAdd2d(_FusedModule):
    """``torch.ao.nn.intrinsic.ConvAdd2d``: conv(x1) + x2."""

    def __init__(self, conv, add):
        super().__init__(conv)
        self.add = add

    def forward(self, x1, x2):
        return self.add(self[0](x1), x2)


class ConvAddReLU2d(_FusedModule):
    """``torch.ao.nn.intrinsic.ConvAddReLU2d``: relu(conv(x1) + x2)."""

    def __init__(self, conv, add, relu):
        super().__init__(conv)
        self.add = add
        self.relu = relu

    def forward(self, x1, x2):
        return self.relu(self.add(self[0](x1), x2))
