"""``tracec.nn.utils.parametrizations``: weight and spectral normalization
as parametrizations (PyTorch's current API), and ``orthogonal`` (its own
file, ``_orthogonal``).

Invariants (PyTorch's):
  * ``weight_norm(m)`` stores ``g`` and ``v`` as
    ``parametrizations.weight.original0`` / ``original1``, and loads old
    checkpoints' ``weight_g`` / ``weight_v`` keys into them;
  * ``spectral_norm(m)`` keeps the weight at ``parametrizations.weight.original``
    and the power-method vectors as buffers ``parametrizations.weight.0._u``
    / ``_v`` (15 warm-up iterations at registration); in training mode each
    access runs ``n_power_iterations`` more, updating them in place without
    grad; the value is ``W / (u . W v)``; 1-D weights are just normalized.
"""
from __future__ import annotations

from tracec import functions as TF
from tracec import graph
from tracec import shape_ops as S
from tracec.nn import functional as F
from tracec.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from tracec.nn.modules.module import Module
from tracec.nn.utils import parametrize
from tracec.nn.utils._orthogonal import orthogonal  # noqa: F401
from tracec.nn.utils.weight_norm import _matrix_along, _weight_norm, norm_except_dim
from tracec.tensor import Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (norm over every
    dim but ``dim``; ``None``: the whole tensor)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys,
                                 unexpected_keys, error_msgs) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            with graph.no_grad():
                u = weight_mat.new_empty(h).normal_(0, 1)
                v = weight_mat.new_empty(w).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if weight.ndim <= 1:
            raise AssertionError(f"Expected weight to have more than 1 dimension, got "
                                 f"{weight.ndim}")
        return _matrix_along(weight, self.dim)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """``u <- normalize(W v)``, ``v <- normalize(W^T u)``, in place, no grad."""
        with graph.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(TF.matmul(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(TF.matmul(S.t(weight_mat), self._u), dim=0,
                                          eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # clones: the buffers change in place at the next access, but this
        # value's backward needs the ones used here
        u, v = self._u.clone(), self._v.clone()
        sigma = TF.dot(u, TF.matmul(weight_mat, v))
        return TF.div(weight, sigma)

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Normalize ``module.<name>`` by its spectral norm, estimated by the
    power method (see the module docstring)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
