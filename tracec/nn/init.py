"""``tracec.nn.init``: PyTorch's parameter initializers.

Invariant: every initializer writes into the given tensor in place, under
``no_grad``, through the Tensor in-place methods (``uniform_``, ``normal_``,
``fill_``, ``copy_``), drawing from tracec's generator; it returns the
tensor.  Distributions and fan/gain rules are PyTorch's.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph, ops
from tracec import creation
from tracec.random import host_generator
from tracec.tensor import RECORDERS, Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_",
           "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity: str, param=None) -> float:
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         "2 dimensions")
    receptive = math.prod(tensor.shape[2:]) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _no_grad_uniform(tensor, a, b, generator=None):
    with graph.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def _no_grad_normal(tensor, mean, std, generator=None):
    with graph.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    return _no_grad_uniform(tensor, a, b, generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    return _no_grad_normal(tensor, mean, std, generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    with graph.no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with graph.no_grad():
        return tensor.copy_(creation.eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per_group = tensor.shape[0] // groups
    min_dim = min(out_per_group, tensor.shape[1])
    w = np.zeros(tensor.shape, tensor.dtype.np)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            w[(g * out_per_group + d, d) + centre] = 1
    with graph.no_grad():
        return tensor.copy_(Tensor._make(w, tensor.dtype))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return _no_grad_uniform(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _no_grad_normal(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return _no_grad_uniform(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _no_grad_normal(tensor, 0.0, std, generator)


def _erfinv(x: Tensor) -> Tensor:
    """Inverse error function: Giles' approximation, then two Newton steps
    on ``erf`` (float64 in, float64 out)."""
    w = TF.neg(TF.log(TF.mul(TF.sub(1.0, x), TF.add(1.0, x))))
    small = TF.lt(w, 5.0)
    ws = TF.sub(w, 2.5)
    p1 = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        p1 = TF.add(TF.mul(p1, ws), c)
    wl = TF.sub(TF.sqrt(TF.maximum(w, 5.0)), 3.0)
    p2 = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        p2 = TF.add(TF.mul(p2, wl), c)
    y = TF.mul(TF.where(small, p1, p2), x)
    for _ in range(2):
        err = TF.sub(TF.erf(y), x)
        y = TF.sub(y, TF.div(err, TF.mul(TF.exp(TF.neg(TF.mul(y, y))), 2.0 / math.sqrt(math.pi))))
    return y


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Normal(mean, std) truncated to [a, b], by the inverse CDF (PyTorch's
    method): uniform in [cdf(a), cdf(b)], then ``erfinv``."""
    def cdf(v):
        return (1.0 + math.erf(v / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    if tensor.is_meta:          # no storage: nothing drawn (as PyTorch)
        return tensor
    if (generator or creation.default_generator).eager_mt() is not None \
            and tensor.dtype.is_floating_point:
        return _trunc_normal_torch(tensor, mean, std, a, b, hi - lo, generator)
    if hi - lo >= 0.5 and not RECORDERS and tensor.numel() >= 4096:
        # Most draws land inside [a, b] (``std`` well below the bounds, as
        # trunc_normal_(std=.02) of ViT-style inits): normals redrawn where
        # they fall outside, on the host generator tracec's seed fixes. The
        # same distribution as the inverse CDF below, 50x faster (its erfinv
        # is ~60 NumPy passes in float64: 3.5 s for 10M values).
        rng = host_generator(generator, "nn.init.trunc_normal_")
        z = rng.standard_normal(tensor.numel()) * std + mean
        for _ in range(100):
            out = (z < a) | (z > b)
            k = int(out.sum())
            if not k:
                break
            z[out] = rng.standard_normal(k) * std + mean
        else:
            np.clip(z, a, b, out=z)      # (unreachable in practice: p >= 0.5 per draw)
        with graph.no_grad():
            return tensor.copy_(creation.from_numpy(z.reshape(tuple(tensor.shape)))
                                .to(tensor.dtype))
    with graph.no_grad():
        u = creation.rand(tuple(tensor.shape), dtype=dt.float64, generator=generator)
        u = TF.add(TF.mul(u, 2 * hi - 2 * lo), 2 * lo - 1)
        z = _erfinv(u)
        z = TF.add(TF.mul(z, std * math.sqrt(2.0)), mean)
        z = TF.clamp(z, a, b)
        return tensor.copy_(ops.cast(z, tensor.dtype))


def _trunc_normal_torch(tensor, mean, std, a, b, p, generator):
    """torch 2.13's ``_no_grad_trunc_normal_``, step for step on PyTorch's
    stream (eager): normals redrawn where outside [a, b] when the mass
    ``p`` inside exceeds 0.3, else rejection sampling from uniforms on
    [a, b] against the density's log."""
    with graph.no_grad():
        if p > 0.3:
            lo = float(np.asarray(a, tensor.dtype.np)) if tensor.dtype is not dt.bfloat16 else a
            hi = float(np.asarray(b, tensor.dtype.np)) if tensor.dtype is not dt.bfloat16 else b
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                mask = (result < lo) | (result > hi)
                if not bool(mask.any()):
                    break
                result = TF.where(mask, creation.empty_like(result).normal_(
                    mean, std, generator=generator), result)
            if tensor is not result:
                tensor.copy_(result)
            return tensor
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2
        candidates = creation.empty_like(tensor)
        accept_buf = creation.empty_like(tensor)
        tensor.uniform_(a, b, generator=generator)
        candidates.copy_(tensor)
        candidates.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
        pending = accept_buf.uniform_(generator=generator).log_().gt(candidates)
        if bool(pending.any()):
            result = tensor
            while True:
                candidates.uniform_(a, b, generator=generator)
                result = TF.where(pending, candidates, result)
                candidates.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
                pending = TF.where(pending, accept_buf.uniform_(generator=generator).log_()
                                   .gt(candidates), pending)
                if not bool(pending.any()):
                    break
            tensor.copy_(result)
        return tensor


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a normal
    draw, signs fixed by diag(R), as PyTorch does.  Initialization is not
    traced, so the QR runs in NumPy on the drawn values."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    # PyTorch's draw: new_empty((rows, cols)).normal_(0, 1) in the tensor's
    # dtype (its stream, eagerly), then the QR in float64
    a = creation.empty(rows, cols, dtype=tensor.dtype).normal_(0, 1, generator=generator)
    a = a.numpy().astype(np.float64)
    if rows < cols:
        a = a.T
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with graph.no_grad():
        # (copy_ casts to the tensor's dtype: bfloat16 rounded to its grid)
        return tensor.copy_(Tensor._make(np.ascontiguousarray((q * gain).reshape(tensor.shape)),
                                         dt.float64))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D tensor with ``ceil(sparsity * rows)`` zeros in each column (rows
    chosen by ``randperm``), the rest drawn from ``N(0, std)`` (Martens 2010),
    as PyTorch does."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with graph.no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            zero_rows = creation.randperm(rows)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


def _make_deprecate(meth):
    """PyTorch's deprecated spelling without the trailing underscore: warns
    ``FutureWarning`` and calls ``meth``."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)

    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"{old_name}(...): deprecated, see ``{new_name}``."
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
