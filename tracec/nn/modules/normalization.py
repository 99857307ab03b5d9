"""Normalization layers: ``BatchNorm1d/2d/3d``, ``InstanceNorm1d/2d/3d``,
``LayerNorm``, ``GroupNorm``, ``RMSNorm``, ``LocalResponseNorm``.

Invariant (BatchNorm, PyTorch's): in training mode with
``track_running_stats`` the buffers ``running_mean`` / ``running_var`` are
updated in place under ``no_grad`` (unbiased variance) and the int64
``num_batches_tracked`` counts the batches; in eval mode the running
statistics normalize.
"""
from __future__ import annotations

import warnings

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph
from tracec.shape_ops import cat
from tracec.nn import functional as F
from tracec.nn import init
from tracec.nn.modules.linear import _empty
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm",
           "SyncBatchNorm", "CrossMapLRN2d"]


class _NormBase(Module):
    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_empty((num_features,), device, dtype))
            if bias:
                self.bias = Parameter(_empty((num_features,), device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, dtype=dtype,
                                                                device=device))
            self.register_buffer("running_var", creation.ones(num_features, dtype=dtype,
                                                              device=device))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dt.int64,
                                                                        device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with graph.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked
                                   is not None else creation.tensor(0, dtype=dt.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    """The batch norms' common base, as PyTorch's
    ``torch.nn.modules.batchnorm._BatchNorm``: ``BatchNorm1d/2d/3d``,
    ``SyncBatchNorm`` and the lazy batch norms derive from it, the instance
    norms do not (programs test ``isinstance(m, _BatchNorm)`` to find every
    batch norm, e.g. to back up and zero its ``momentum``)."""

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with graph.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                # A tensor, not float(counter): a traced step must not read it.
                factor = TF.div(1.0, self.num_batches_tracked)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_buffers = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_buffers else None,
                            self.running_var if use_buffers else None, self.weight, self.bias,
                            bn_training, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input) -> None:
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class _InstanceNorm(_NormBase):
    """Per-sample, per-channel normalization; PyTorch's defaults differ
    from batch norm (no affine, no running statistics)."""

    _nsp = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _check_input_dim(self, input) -> None:
        n = self._nsp
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.ndim}D input)")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        # Checkpoints from before PyTorch 0.4 carry running stats the layer no
        # longer tracks: PyTorch reports and drops them.
        if local_metadata.get("version", None) is None and not self.track_running_stats:
            keys = [prefix + k for k in ("running_mean", "running_var")
                    if prefix + k in state_dict]
            if keys:
                klass = type(self).__name__
                error_msgs.append(
                    "Unexpected running stats buffer(s) {names} for {klass} with "
                    "track_running_stats=False. If state_dict is a checkpoint saved before "
                    "0.4.0, this may be expected because {klass} does not track running stats "
                    "by default since 0.4.0. Please remove these keys from state_dict. If the "
                    "running stats are actually needed, instead set track_running_stats=True "
                    "in {klass} to enable them. See the documentation of {klass} for "
                    "details.".format(names=" and ".join(f'"{k}"' for k in keys), klass=klass))
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.ndim - (self._nsp + 1)
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          "You can silence this warning by not passing in num_features, "
                          "which is not used because affine=False", stacklevel=2)
        unbatched = input.ndim == self._nsp + 1
        x = input.unsqueeze(0) if unbatched else input
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    _nsp = 1


class InstanceNorm2d(_InstanceNorm):
    _nsp = 2


class InstanceNorm3d(_InstanceNorm):
    _nsp = 3


def _affine_parameters(module, affine: bool, bias: bool, shape, device, dtype) -> None:
    """``weight`` (and ``bias`` unless refused) of ``shape``, or None ones."""
    module.register_parameter("weight", Parameter(_empty(shape, device, dtype))
                              if affine else None)
    module.register_parameter("bias", Parameter(_empty(shape, device, dtype))
                              if affine and bias else None)


def _reset_affine(module) -> None:
    """PyTorch's affine init: weight ones, bias zeros."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, elementwise_affine, bias, self.normalized_shape, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, affine, bias, (num_channels,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_empty(self.normalized_shape, device, dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class SyncBatchNorm(_BatchNorm):
    """``nn.SyncBatchNorm``: batch norm whose training statistics are those
    of the whole batch across the ranks of ``process_group`` (the default
    group).  Without an initialized process group, or in a world of one, it
    is ``BatchNorm`` (as PyTorch's on the CPU).

    Invariant: the global mean and (biased) variance come from two
    differentiable all-reduces (sums and counts, then squared deviations),
    so the backward pass sums the statistics' gradients across ranks as
    PyTorch's does; running statistics use the global count's unbiased
    variance."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _group(self):
        from tracec import distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return None
        pg = dist.default_group(self.process_group)
        return pg if pg.size() > 1 else None

    def forward(self, input):
        pg = self._group() if self.training else None
        if pg is None:
            return super().forward(input)
        from tracec import distributed as dist
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise ValueError(f"expected input with {self.num_features} channels, got "
                             f"{input.shape[1]}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            with graph.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = TF.div(1.0, self.num_batches_tracked)
        axes = (0,) + tuple(range(2, input.ndim))
        shape = (1, -1) + (1,) * (input.ndim - 2)
        local_n = input.numel() // input.shape[1]
        count = creation.full((1,), float(local_n), dtype=input.dtype)
        totals = dist.reduce_tensor(cat([input.sum(axes), count]), dist.ReduceOp.SUM, pg)
        n = totals[-1]
        mean = totals[:-1] / n
        centered = input - mean.reshape(shape)
        var = dist.reduce_tensor((centered * centered).sum(axes), dist.ReduceOp.SUM, pg) / n
        if self.track_running_stats and self.running_mean is not None:
            with graph.no_grad():
                unbiased = var.detach() * (n / (n - 1))
                self.running_mean.copy_(self.running_mean * (1.0 - factor)
                                        + mean.detach() * factor)
                self.running_var.copy_(self.running_var * (1.0 - factor) + unbiased * factor)
        y = centered * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every batch norm (a ``_BatchNorm``, as PyTorch's
        test) replaced by a SyncBatchNorm sharing its parameters and buffers
        (recursively)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group,
                      bias=not module.affine or module.bias is not None)
            if module.affine:
                with graph.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out


def _cross_map_windows(channels: int, size: int):
    """The 0/1 matrix ``W[c, j]``: channel ``j``'s square is in channel
    ``c``'s sum.  PyTorch's legacy CrossMapLRN2d builds the sums with a
    running window whose removal starts one channel late, so channel 0
    stays in every sum: reproduced here by running the same recurrence."""
    pre_pad = int((size - 1) / 2 + 1)
    rows = [[0] * channels for _ in range(channels)]
    for c in range(min(pre_pad, channels)):
        rows[0][c] = 1
    for c in range(1, channels):
        rows[c] = list(rows[c - 1])
        if c < channels - pre_pad + 1:
            rows[c][c + pre_pad - 1] += 1
        if c > pre_pad:
            rows[c][c - pre_pad] -= 1
    return rows


class CrossMapLRN2d(Module):
    """``nn.CrossMapLRN2d``: PyTorch's legacy (Lua-torch) cross-channel
    local response normalization of a 4-D input, windows included (see
    ``_cross_map_windows``): ``x * (k + alpha / size * sum x²) ** -beta``.
    Its gradient is this forward's true one; PyTorch's hand-written backward
    assumes symmetric windows (and fails for ``size=1``)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        windows = creation.tensor(_cross_map_windows(input.shape[1], self.size),
                                  dtype=input.dtype)
        sums = TF.matmul(windows, (input * input).flatten(2))      # [C, C] @ [N, C, H*W]
        scale = sums.reshape(input.shape) * (self.alpha / self.size) + self.k
        return input * scale.pow(-self.beta)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
