"""``tracec.nn.utils.clip_grad``: gradient norms and clipping, PyTorch's
``get_total_norm``, ``clip_grads_with_norm_``, ``clip_grad_norm_`` (and its
deprecated spelling ``clip_grad_norm``) and ``clip_grad_value_``.

Invariants: everything runs under ``no_grad``; gradients are scaled in place
(optimizers and compiled steps holding ``.grad`` see the change); the total
norm is the ``norm_type`` norm of the per-tensor norms, as
``torch.linalg.vector_norm`` computes it (``inf``, ``-inf`` and ``0``
included).
"""
from __future__ import annotations

import math
import types
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import fused_eager
from tracec import functions as TF
from tracec import graph, ops
from tracec import shape_ops as S
from tracec.creation import tensor as _tensor
from tracec.tensor import SPARSE, Tensor, _new_tensor, eager_direct

_DIRECT_DTYPES = (dt.float32, dt.float64)
_MUL, _SUM, _SQRT = ops.elementwise.mul_p, ops.reduce.reduce_sum_p, ops.elementwise.sqrt_p

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]


def _as_list(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(x: Tensor, p: float) -> Tensor:
    """``torch.linalg.vector_norm(x, p)`` over all elements (a float16 /
    bfloat16 tensor's in float32, rounded once at the end, as PyTorch's
    kernels accumulate)."""
    if x.dtype in (dt.float16, dt.bfloat16):
        return _vector_norm(x.to(dt.float32), p).to(x.dtype)
    if p == 2:      # (x * x is |x| * |x| to the bit: no pass for abs)
        a = x._data
        if (type(x) is Tensor and x.dtype in _DIRECT_DTYPES and type(a) is np.ndarray
                and a.size < fused_eager.MIN_NUMEL and not SPARSE and eager_direct(x)
                and not graph.is_grad_enabled()):
            # The three primitives' impls on the data, as the ops below run
            # them for such a tensor (no sum kernel below MIN_NUMEL, no
            # node under no_grad): the same bits, without three tensors.
            sq = _MUL.impl(a, a)
            return _new_tensor(_SQRT.impl(_SUM.impl(sq, axes=tuple(range(a.ndim)))), x.dtype)
        return TF.sqrt(TF.sum(TF.mul(x, x)))
    a = TF.abs(x)
    if p == math.inf:
        return TF.amax(a)
    if p == -math.inf:
        return TF.amin(a)
    if p == 0:
        return TF.sum((a != 0).to(x.dtype))
    if p == 1:
        return TF.sum(a)
    return TF.pow(TF.sum(TF.pow(a, p)), 1.0 / p)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The ``norm_type`` norm of all ``tensors`` together, as if they were
    concatenated into one vector; 0 for none."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    with graph.no_grad():
        if not tensors:
            return _tensor(0.0)
        norms = [_vector_norm(t, norm_type) for t in tensors]
        # torch.stack promotes: float16 and float32 norms give a float32 total
        total = _vector_norm(S.stack(norms), norm_type)
        if error_if_nonfinite:
            # A recorded check (tracec.ops.check): a compiled step checks each
            # call's norm, where reading it in Python would stop the trace.
            total = ops.check(total, ops.lt(ops.abs_(total), math.inf),
                              f"The total norm of order {norm_type} for gradients from "
                              "`parameters` is non-finite, so it cannot be clipped. To disable "
                              "this error and scale the gradients by the non-finite norm "
                              "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor,
                          foreach=None) -> None:
    """Scale every ``.grad`` by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with graph.no_grad():
        # PyTorch's ``max_norm / (total_norm + 1e-6)``: a number over a tensor
        # is the tensor's reciprocal times the number (Tensor.__rtruediv__)
        coef = TF.clamp(float(max_norm) / TF.add(total_norm, 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients so that their joint ``norm_type`` norm is at
    most ``max_norm``; returns the norm before clipping."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will "
                          "occur.", stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Deprecated spelling of ``clip_grad_norm_`` (warns ``FutureWarning``)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every ``.grad`` into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with graph.no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
