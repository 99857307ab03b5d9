"""``tracec.nn.utils.spectral_norm``: the hook-based spectral normalization
(``spectral_norm`` / ``remove_spectral_norm``), PyTorch's older API.

Invariants (PyTorch's):
  * the parameter ``weight`` becomes ``weight_orig`` (same Parameter
    object), plus buffers ``weight_u`` ``[h]`` and ``weight_v`` ``[w]`` of
    the weight seen as an ``h x w`` matrix along ``dim`` (1 for transposed
    convolutions, else 0); ``state_dict()`` carries
    ``_metadata[prefix]["spectral_norm"]["weight.version"] = 1``;
  * before every forward, in training mode, ``n_power_iterations`` steps of
    the power method update ``weight_u`` / ``weight_v`` in place (no grad),
    then ``weight = weight_orig / (u . W v)`` with gradient through ``W``
    only; in eval mode the stored ``u``, ``v`` are used as they are;
  * ``remove_spectral_norm`` restores one ``weight`` Parameter.
"""
from __future__ import annotations

import numpy as np

from tracec import functions as TF
from tracec import graph
from tracec import shape_ops as S
from tracec.creation import tensor as _tensor
from tracec.nn import functional as F
from tracec.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from tracec.nn.parameter import Parameter, UninitializedParameter
from tracec.nn.utils.weight_norm import _matrix_along

__all__ = ["SpectralNorm", "SpectralNormLoadStateDictPreHook", "SpectralNormStateDictHook",
           "spectral_norm", "remove_spectral_norm"]


def _mv(m, x):
    return TF.matmul(m, x)


class SpectralNorm:
    """The forward pre-hook computing ``name`` from ``name_orig``, ``name_u``
    and ``name_v``."""

    _version: int = 1

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        return _matrix_along(weight, self.dim)

    def compute_weight(self, module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with graph.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(_mv(S.t(weight_mat), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(_mv(weight_mat, v), dim=0, eps=self.eps))
                # clones: the buffers change in place at the next call, but
                # this call's backward needs the values it used
                u, v = u.clone(), v.clone()
        sigma = TF.dot(u, _mv(weight_mat, v))
        return TF.div(weight, sigma)

    def remove(self, module) -> None:
        with graph.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat, u, target_sigma):
        """The ``v`` with ``u^T W v = target_sigma`` in the least-norm sense
        (loading a version-0 checkpoint that stored ``weight``, not ``v``)."""
        wt = S.t(weight_mat)
        v = S.squeeze(TF.matmul(TF.matmul(_pinv(TF.matmul(wt, weight_mat)), wt),
                                S.unsqueeze(u, 1)), 1)
        return TF.mul(v, TF.div(target_sigma, TF.dot(u, _mv(weight_mat, v))))

    @staticmethod
    def apply(module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> "SpectralNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if isinstance(weight, UninitializedParameter):
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before applying "
                             "spectral normalization")
        with graph.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(SpectralNormStateDictHook(fn))
        module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


def _pinv(a):
    """Moore-Penrose pseudo-inverse, computed in NumPy (load-time only, no grad)."""
    return _tensor(np.linalg.pinv(a.detach().cpu().numpy()), dtype=a.dtype)


class SpectralNormLoadStateDictPreHook:
    """Loads checkpoints written before ``weight_v`` existed (version 0)."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, state_dict, prefix, local_metadata, strict, missing_keys,
                 unexpected_keys, error_msgs) -> None:
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is None or version < 1:
            weight_key = prefix + fn.name
            if (version is None and weight_key not in state_dict
                    and all(weight_key + s in state_dict for s in ("_orig", "_u", "_v"))):
                return
            has_missing_keys = False
            for suffix in ("_orig", "", "_u"):
                key = weight_key + suffix
                if key not in state_dict:
                    has_missing_keys = True
                    if strict:
                        missing_keys.append(key)
            if has_missing_keys:
                return
            with graph.no_grad():
                weight_orig = state_dict[weight_key + "_orig"]
                weight = state_dict.pop(weight_key)
                sigma = TF.mean(TF.div(weight_orig, weight))
                weight_mat = fn.reshape_weight_to_matrix(weight_orig)
                u = state_dict[weight_key + "_u"]
                state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, u, sigma)


class SpectralNormStateDictHook:
    """Writes ``spectral_norm.<name>.version`` into the state dict's metadata."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, module, state_dict, prefix, local_metadata) -> None:
        meta = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in meta:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        meta[key] = self.fn._version


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None):
    """Normalize ``module.<name>`` by its spectral norm, estimated by the
    power method (see module doc)."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Undo ``spectral_norm``: ``name`` becomes one Parameter again."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    for table, kind in (("_state_dict_hooks", SpectralNormStateDictHook),
                        ("_load_state_dict_pre_hooks", SpectralNormLoadStateDictPreHook)):
        hooks = module.__dict__.get(table, {})
        for k, hook in hooks.items():
            if isinstance(hook, kind) and hook.fn.name == name:
                del hooks[k]
                break
    return module
