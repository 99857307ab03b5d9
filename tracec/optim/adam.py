"""``Adam`` and ``AdamW`` with PyTorch's exact formulas.

State per parameter (as in PyTorch): ``step`` (a 0-d float32 tensor,
float64 when that is the default dtype), ``exp_avg``, ``exp_avg_sq`` and,
with ``amsgrad``, ``max_exp_avg_sq``; all are updated in place.  The bias
corrections are computed with tensor ops from the ``step`` tensor (in
float64, like PyTorch's Python-float arithmetic), so a traced step reads the
counter as state instead of baking its value into the trace.
"""
from __future__ import annotations

import numpy as np

from tracec.ops.elementwise import quiet_fp
from tracec import creation
from tracec import dtypes as dt
from tracec import functions as F
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, reads_lifted, _scalar_dtype
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """PyTorch's ``torch.optim.Adam`` (``decoupled_weight_decay=True`` is
    AdamW).  Per parameter with gradient ``g`` (``-g`` with ``maximize``)::

        step += 1
        p = p * (1 - lr * wd)                  (decoupled weight decay), or
        g = g + wd * p                         (L2 weight decay)
        m = lerp(m, g, 1 - beta1)
        v = beta2 * v + (1 - beta2) * g * g
        vmax = max(vmax, v)                    (amsgrad; then vmax is used for v)
        denom = sqrt(v) / sqrt(1 - beta2**step) + eps
        p = p - lr / (1 - beta1**step) * m / denom
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        # (PyTorch's check: an int beta, SPADE's betas=(0, 0.9), is refused)
        if not (all(isinstance(b, float) for b in betas[:2])
                or all(isinstance(b, Tensor) for b in betas[:2])):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = tuple(float(b) if isinstance(b, Tensor) else b for b in betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable,
                    "fused": fused, "decoupled_weight_decay": decoupled_weight_decay}
        _check_flags(foreach, differentiable, fused)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)
        self._steps_as_tensors()

    def _init_state(self, group, p) -> dict:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            state["exp_avg"] = creation.zeros_like(p)
            state["exp_avg_sq"] = creation.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = creation.zeros_like(p)
        return state

    @reads_lifted("beta1")
    def _update_group(self, group) -> None:
        beta2 = group["betas"][1]
        lr = self._lr(group)
        # beta1 (betas[0]) is what OneCycleLR / CyclicLR cycle
        beta1 = self._hyper(group, "beta1", lambda b: abs(1 - b) < 0.5)
        lerp_small = abs(1 - group["betas"][0]) < 0.5
        eps = group["eps"]
        weight_decay = group["weight_decay"]
        amsgrad = group["amsgrad"]
        maximize = group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:    # an Embedding(sparse=True)'s gradient
                raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")
            state = self._init_state(group, p)
            grad = p.grad if not maximize else -p.grad
            p, grad, state = _f.as_real(p, grad, state)
            exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            moments = (exp_avg, exp_avg_sq) + ((state["max_exp_avg_sq"],) if amsgrad else ())
            arrays = _f.direct_arrays(p, grad, moments + (step_t,), lr, beta1, beta2, eps,
                                      weight_decay)
            if arrays is not None:
                _adam_numpy(arrays, lr, beta1, beta2, eps, weight_decay, decoupled,
                            lerp_small)
                _f.bump(step_t, 1, p, 1 + (weight_decay != 0 and decoupled),
                        exp_avg, 1, exp_avg_sq, 2, *((moments[2], 1) if amsgrad else ()))
                continue

            step_t.add_(1)
            if weight_decay != 0:
                if decoupled:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)

            _f.lerp_(exp_avg, grad, _f.one_minus(beta1), small=lerp_small)
            _f.addcmul_(exp_avg_sq.mul_(beta2), grad, grad, value=1 - beta2)

            if group["differentiable"]:
                # PyTorch's differentiable branch: bias corrections as
                # tensors of the step's dtype, folded into the denominator
                bias_correction1 = F.sub(1, F.pow(beta1, step_t))
                step_size_neg = F.neg(F.div(lr, bias_correction1))
                bias_correction2_sqrt = F.sqrt(F.sub(1, F.pow(beta2, step_t)))
                if amsgrad:
                    max_exp_avg_sq = state["max_exp_avg_sq"]
                    max_exp_avg_sq.copy_(F.maximum(max_exp_avg_sq.clone(), exp_avg_sq))
                    exp_avg_sq = max_exp_avg_sq
                denom = exp_avg_sq.sqrt().div(F.mul(bias_correction2_sqrt, step_size_neg)).add_(
                    F.div(eps, step_size_neg))
                _f.addcdiv_(p, exp_avg.clone(), denom)
                continue

            # Bias corrections from the step tensor, in float64 as PyTorch's
            # Python-float arithmetic; mixed with float32 tensors, these 0-d
            # values are rounded to float32 as PyTorch rounds its scalars.
            step = step_t.to(dt.float64)
            bias_correction1 = F.sub(1, F.pow(beta1, step))
            bias_correction2 = F.sub(1, F.pow(beta2, step))
            step_size = F.div(lr, bias_correction1)
            bias_correction2_sqrt = F.sqrt(bias_correction2)

            if amsgrad:
                max_exp_avg_sq = state["max_exp_avg_sq"]
                max_exp_avg_sq.copy_(F.maximum(max_exp_avg_sq, exp_avg_sq))
                denom = max_exp_avg_sq.sqrt().div(bias_correction2_sqrt).add(eps)
            else:
                denom = exp_avg_sq.sqrt().div(bias_correction2_sqrt).add(eps)
            _f.addcdiv_(p, exp_avg, denom, value=F.neg(step_size))


def _adam_numpy(arrays, lr, beta1, beta2, eps, weight_decay, decoupled, lerp_small):
    """``Adam._update_group``'s tensor ops for one parameter as NumPy
    ufuncs in place: the same operations in the same order and dtypes (see
    ``_functional.direct_arrays``), so the same bits."""
    with quiet_fp():   # PyTorch computes inf / nan silently
        p, g, m, v = arrays[:4]
        vmax = arrays[4] if len(arrays) == 6 else None
        step = arrays[-1]
        d = p.dtype
        np.add(step, np.asarray(1, step.dtype), out=step)
        if weight_decay != 0:
            if decoupled:
                np.multiply(p, np.asarray(1 - lr * weight_decay, d), out=p)
            else:
                g = _f.axpy_np(g, p, weight_decay)           # grad.add(p, alpha=wd)
        w = 1 - beta1
        tmp = np.subtract(g, m, out=np.empty_like(m))
        if d == np.float32:                  # fused, as math_extra.lerp / addcmul
            w32 = np.float32(w)
            if lerp_small:                   # fma(w, g - m, m)
                _f.fma32_(m, m, tmp, w32)
            else:                            # fma(w - 1, g - m, g)
                _f.fma32_(m, g, tmp, np.float32(w32 - np.float32(1)))
            np.multiply(v, np.asarray(beta2, d), out=v)
            # fma(g * (1 - beta2), g, v)
            _f.fma32_(v, v, np.multiply(g, np.asarray(1 - beta2, d)) if 1 - beta2 != 1 else g, g)
        else:
            if lerp_small:                   # m + (g - m) * w
                np.multiply(tmp, np.asarray(w, d), out=tmp)
                np.add(m, tmp, out=m)
            else:                            # g - (g - m) * (1 - w)
                np.multiply(tmp, np.asarray(1 - w, d), out=tmp)
                np.subtract(g, tmp, out=m)
            np.multiply(v, np.asarray(beta2, d), out=v)
            if 1 - beta2 != 1:               # v + (g * (1 - beta2)) * g
                np.multiply(g, np.asarray(1 - beta2, d), out=tmp)
                np.multiply(tmp, g, out=tmp)
            else:
                np.multiply(g, g, out=tmp)
            np.add(v, tmp, out=v)
        f64 = np.float64
        step64 = step.astype(f64)
        bc1 = np.subtract(np.asarray(1, f64), np.power(np.asarray(beta1, f64), step64))
        bc2 = np.subtract(np.asarray(1, f64), np.power(np.asarray(beta2, f64), step64))
        step_size = np.true_divide(np.asarray(lr, f64), bc1)
        bc2_sqrt = np.sqrt(bc2)
        if vmax is not None:
            np.maximum(vmax, v, out=vmax)
            v = vmax
        denom = np.sqrt(v, out=np.empty_like(v))  # sqrt(v) / bc2_sqrt + eps
        np.true_divide(denom, bc2_sqrt.astype(d), out=denom)
        np.add(denom, np.asarray(eps, d), out=denom)
        np.multiply(m, np.negative(step_size).astype(d), out=tmp)   # m * -step_size / denom
        np.true_divide(tmp, denom, out=tmp)
        np.add(p, tmp, out=p)



class AdamW(Adam):
    """PyTorch's ``torch.optim.AdamW``: Adam with decoupled weight decay
    (``p *= 1 - lr * weight_decay`` before the Adam update)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
