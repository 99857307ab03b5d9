"""``ASGD`` (averaged SGD) with PyTorch's formulas and state (``step``,
``eta``, ``mu`` as float32 0-d tensors, ``ax`` the running average).

Invariant: ``eta`` and ``mu`` are recomputed from the ``step`` tensor
with tensor ops, and PyTorch's ``mu != 1`` branch is a ``where``, so a
traced step serves every later step.
"""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as F
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lr_by_lr
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """PyTorch's ``torch.optim.ASGD``::

        p = p * (1 - lambd * eta) - eta * g
        ax = p if mu == 1 else ax + (p - ax) * mu
        eta = lr / (1 + lambd * lr * step) ** alpha;  mu = 1 / max(1, step - t0)
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags(foreach, differentiable, None)
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
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
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            state["eta"] = creation.tensor(float(group["lr"]), dtype=_scalar_dtype())
            state["mu"] = creation.ones((), dtype=_scalar_dtype())
            state["ax"] = creation.zeros_like(p)
        return state

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        lambd, alpha, t0, wd = group["lambd"], group["alpha"], group["t0"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:    # an Embedding(sparse=True)'s gradient
                raise RuntimeError("ASGD does not support sparse gradients")
            p, grad, state = _f.as_real(p, p.grad if not group["maximize"] else -p.grad,
                                        self._init_state(group, p))
            step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
            step_t.add_(1)
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            eta_value = eta.to(dt.float64)
            p.mul_(F.sub(1.0, F.mul(eta_value, lambd)))
            _f.add_(p, grad, alpha=F.neg(eta_value))
            ax.copy_(F.where(F.eq(mu, 1.0), p, ax.add(p.sub(ax).mul(mu))))
            step = step_t.to(dt.float64)
            eta.copy_(F.div(lr, F.pow(F.add(F.mul(lambd * lr, step), 1.0), alpha)))
            mu.copy_(F.div(1.0, F.maximum(F.sub(step, t0), 1.0)))
