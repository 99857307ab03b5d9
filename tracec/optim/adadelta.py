"""``Adadelta`` with PyTorch's exact formulas (``torch.optim.Adadelta``).

State per parameter, as in PyTorch: ``step`` (0-d tensor), ``square_avg``
and ``acc_delta``, updated in place.
"""
from __future__ import annotations

import numpy as np

from tracec.ops.elementwise import quiet_fp
from tracec import creation
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lr_by_lr
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """PyTorch's ``torch.optim.Adadelta``.  Per parameter with gradient
    ``g`` (``-g`` with ``maximize``)::

        g = g + weight_decay * p                  (if weight_decay != 0)
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta

    ``foreach`` and ``capturable`` are accepted and change nothing.
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        _check_flags(foreach, differentiable, None)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
        self._steps_as_tensors()

    def _init_state(self, group, p) -> dict:
        """``p``'s state, made (zeros) if it has none: before a traced first
        step too (``Optimizer._state_before_traced_step``), so that the
        second call reuses that trace."""
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            state["square_avg"] = creation.zeros_like(p)
            state["acc_delta"] = creation.zeros_like(p)
        return state

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        rho, eps = group["rho"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:    # an Embedding(sparse=True)'s gradient
                raise RuntimeError("Adadelta does not support sparse gradients")
            p, grad, state = _f.as_real(p, p.grad if not maximize else -p.grad,
                                        self._init_state(group, p))
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            arrays = _f.direct_arrays(p, grad, (square_avg, acc_delta, state["step"]), lr, rho,
                                      eps, weight_decay)
            if arrays is not None:
                _adadelta_numpy(arrays, lr, rho, eps, weight_decay)
                _f.bump(state["step"], 1, square_avg, 2, acc_delta, 2, p, 1)
                continue
            state["step"].add_(1)
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            _f.addcmul_(square_avg.mul_(rho), grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt()
            delta = acc_delta.add(eps).sqrt().div(std).mul(grad)
            _f.addcmul_(acc_delta.mul_(rho), delta, delta, value=1 - rho)
            _f.add_(p, delta, alpha=_f.neg(lr))


def _adadelta_numpy(arrays, lr, rho, eps, weight_decay):
    """``Adadelta._update_group``'s tensor ops for one parameter as NumPy
    ufuncs in place: the same operations in the same order and dtypes (see
    ``_functional.direct_arrays``), so the same bits."""
    with quiet_fp():   # PyTorch computes inf / nan silently
        p, g, v, u, step = arrays
        d = p.dtype
        np.add(step, np.asarray(1, step.dtype), out=step)
        if weight_decay != 0:
            g = _f.axpy_np(g, p, weight_decay)               # grad.add(p, alpha=wd)
        np.multiply(v, np.asarray(rho, d), out=v)            # v * rho + (g * (1 - rho)) * g
        tmp = np.empty_like(v)
        if 1 - rho != 1:
            np.multiply(g, np.asarray(1 - rho, d), out=tmp)
        else:
            np.copyto(tmp, g)
        if d == np.float32:                 # fused, as math_extra.addcmul
            _f.fma32_(v, v, tmp, g)
        else:
            np.multiply(tmp, g, out=tmp)
            np.add(v, tmp, out=v)
        std = np.add(v, np.asarray(eps, d), out=np.empty_like(v))  # sqrt(v + eps)
        np.sqrt(std, out=std)
        delta = np.add(u, np.asarray(eps, d), out=np.empty_like(u))  # sqrt(u + eps) / std * g
        np.sqrt(delta, out=delta)
        np.true_divide(delta, std, out=delta)
        np.multiply(delta, g, out=delta)
        np.multiply(u, np.asarray(rho, d), out=u)   # u * rho + (delta * (1 - rho)) * delta
        if 1 - rho != 1:
            np.multiply(delta, np.asarray(1 - rho, d), out=tmp)
        else:
            np.copyto(tmp, delta)
        if d == np.float32:                 # fused, as math_extra.addcmul
            _f.fma32_(u, u, tmp, delta)
        else:
            np.multiply(tmp, delta, out=tmp)
            np.add(u, tmp, out=u)
        _f.axpy_np(p, delta, -lr, out=p)                     # p.add_(delta, alpha=-lr)
