"""``tracec.nn.utils.weight_norm``: the hook-based weight normalization
(``weight_norm`` / ``remove_weight_norm``), PyTorch's deprecated API.

Invariants (PyTorch's):
  * ``weight_norm(m, "weight", dim)`` replaces the parameter ``weight`` by
    the parameters ``weight_g`` (the norm over every dim but ``dim``, kept
    with size 1) and ``weight_v`` (the direction), registered in that order,
    so ``state_dict()`` keys are torch's; ``dim=None`` means the norm of the
    whole tensor;
  * before every forward a pre-hook sets the plain attribute ``m.weight =
    v * g / ||v||``, so gradients flow to ``g`` and ``v``;
  * ``remove_weight_norm`` puts back one ``Parameter`` holding that value.
"""
from __future__ import annotations

import warnings

from tracec import functions as TF
from tracec import shape_ops as S
from tracec.nn.parameter import Parameter, UninitializedParameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def norm_except_dim(v, pow: float = 2, dim: int = 0):
    """The ``pow``-norm of ``v`` over every dim except ``dim`` (kept, the
    others size 1); ``dim == -1`` is the norm of the whole tensor (0-d)."""
    a = TF.abs(v) if pow != 2 else v
    if dim == -1:
        return TF.pow(TF.sum(TF.pow(a, pow)), 1.0 / pow)
    dims = tuple(d for d in range(v.ndim) if d != dim)
    return TF.pow(TF.sum(TF.pow(a, pow), dims, keepdim=True), 1.0 / pow)


def _weight_norm(v, g, dim: int = 0):
    """``v * (g / ||v||)`` with the norm taken as ``norm_except_dim``."""
    return TF.mul(v, TF.div(g, norm_except_dim(v, 2, dim)))


class WeightNorm:
    """The forward pre-hook that recomputes ``name`` from ``name_g`` and
    ``name_v``."""

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name: str, dim: int) -> "WeightNorm":
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                      stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before applying "
                             "weight normalization")
        del module._parameters[name]
        module.register_parameter(name + "_g",
                                  Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim: int = 0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (see module doc)."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo ``weight_norm``: ``name`` becomes one Parameter again."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


# one reshape helper shared with spectral norm
def _matrix_along(weight, dim: int):
    """``weight`` with ``dim`` moved first and the rest flattened: ``[h, w]``."""
    if dim != 0:
        weight = S.permute(weight, (dim,) + tuple(d for d in range(weight.ndim) if d != dim))
    return S.reshape(weight, (weight.shape[0], -1))
