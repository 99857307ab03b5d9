"""``Adafactor`` with PyTorch's exact formulas (``torch.optim.Adafactor``,
its single-tensor path).

Invariant: what PyTorch computes in Python floats from ``.item()`` reads
(the step's ``beta2`` and ``rho``, the parameter's RMS, the update's
clipping denominator) is computed here with 0-d float64 tensor ops, rounded
to the parameter's dtype where PyTorch passes a Python float into a kernel,
so a traced step reads them as state and serves every later step.  State
per parameter, as in PyTorch: ``step``, and ``row_var``/``col_var`` (the
factored second moment of a matrix's last two dimensions) or ``variance``
(a vector's).
"""
from __future__ import annotations

import math

import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as F
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lr_by_lr
from tracec.tensor import Tensor

__all__ = ["Adafactor"]


def _lerp_(t: Tensor, end: Tensor, weight: Tensor) -> Tensor:
    """``t.lerp_(end, weight)``, PyTorch's two-sided formula, with a 0-d
    tensor weight (its side chosen per call by ``where``)."""
    w = weight.to(t.dtype)
    diff = end.sub(t)
    return t.copy_(F.where(w.abs() < 0.5, t.add(diff.mul(w)),
                           end.sub(diff.mul(F.sub(1.0, w)))))


class Adafactor(Optimizer):
    """PyTorch's ``torch.optim.Adafactor`` (factored second moments,
    relative step size ``min(lr, 1/sqrt(step))`` scaled by the parameter's
    RMS, update clipping at ``d``)."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {"lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
        self._steps_as_tensors()

    def _init_state(self, group, p: Tensor) -> dict:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            if p.dim() > 1:
                state["row_var"] = creation.zeros((*p.shape[:-1], 1), dtype=p.dtype)
                state["col_var"] = creation.zeros((*p.shape[:-2], 1, p.shape[-1]),
                                                  dtype=p.dtype)
            else:
                state["variance"] = creation.zeros_like(p)
        return state

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        eps1, eps2 = group["eps"]
        d, wd, decay = group["d"], group["weight_decay"], group["beta2_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad if not group["maximize"] else -p.grad
            state = self._init_state(group, p)
            e1 = eps1 if eps1 is not None else float(np.finfo(p.dtype.np).eps)
            state["step"].add_(1)
            step = state["step"].to(dt.float64)
            one_minus_beta2 = F.pow(step, decay)
            inv_sqrt = step.rsqrt()
            rho = F.minimum(inv_sqrt, lr.to(dt.float64)) if isinstance(lr, Tensor) else \
                inv_sqrt.clamp(max=lr)
            rms = p.norm(2).to(dt.float64).div(math.sqrt(p.numel()))
            alpha = rms.clamp(min=eps2).mul(rho)
            if wd != 0:
                p.mul_(F.sub(1, F.mul(lr, wd)) if isinstance(lr, Tensor) else 1 - lr * wd)
            if grad.dim() > 1:
                row_var, col_var = state["row_var"], state["col_var"]
                _lerp_(row_var, grad.norm(dim=-1, keepdim=True).square().div(grad.size(-1)),
                       one_minus_beta2)
                _lerp_(col_var, grad.norm(dim=-2, keepdim=True).square().div(grad.size(-2)),
                       one_minus_beta2)
                var_estimate = row_var.matmul(col_var).div(
                    row_var.mean(dim=-2, keepdim=True).clamp(min=e1))
            else:
                variance = state["variance"]
                _lerp_(variance, grad.mul(grad), one_minus_beta2)
                var_estimate = variance.clone()
            update = var_estimate.clamp(min=e1 * e1).rsqrt().mul(grad)
            denom = update.norm(2).to(dt.float64).div(math.sqrt(update.numel()) * d).clamp(
                min=1.0)
            p.add_(update.mul(F.neg(alpha.div(denom)).to(p.dtype)))
