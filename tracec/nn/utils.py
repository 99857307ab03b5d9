"""``tracec.nn.utils``: gradient clipping and parameter/vector conversion.

Invariant: gradients are scaled in place under ``no_grad`` (optimizers and
compiled steps holding ``.grad`` see the change).
"""
from __future__ import annotations

import math

from tracec import functions as TF
from tracec import graph
from tracec import shape_ops as S
from tracec.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters"]


def _params(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients so that their joint ``norm_type`` norm is at
    most ``max_norm``; returns the norm before clipping."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    max_norm, norm_type = float(max_norm), float(norm_type)
    with graph.no_grad():
        if not grads:
            from tracec.creation import tensor
            return tensor(0.0)
        if norm_type == math.inf:
            norms = [TF.amax(TF.abs(g)) for g in grads]
            total = norms[0] if len(norms) == 1 else TF.amax(S.stack(norms))
        else:
            norms = [TF.pow(TF.sum(TF.pow(TF.abs(g), norm_type)), 1.0 / norm_type)
                     for g in grads]
            total = TF.pow(TF.sum(TF.pow(S.stack(norms), norm_type)), 1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(float(total)):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped. To disable "
                               "this error and scale the gradients by the non-finite norm "
                               "anyway, set `error_if_nonfinite=False`")
        coef = TF.clamp(TF.div(max_norm, TF.add(total, 1e-6)), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    clip_value = float(clip_value)
    with graph.no_grad():
        for p in _params(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def parameters_to_vector(parameters) -> Tensor:
    return S.cat([S.reshape(p, -1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected Tensor, but got: {type(vec).__name__}")
    at = 0
    with graph.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(S.reshape(vec[at:at + n], *p.shape))
            at += n
