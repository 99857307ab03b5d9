"""``Rprop`` with PyTorch's formulas and state (``step``, ``prev`` the last
gradient used, ``step_size`` per element, started at ``lr``).

Invariant: the sign logic is elementwise ``where``s, no Python branch on
tensor values, so a traced step serves every later step.
"""
from __future__ import annotations

from tracec import creation
from tracec import functions as F
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, _scalar_dtype
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """PyTorch's ``torch.optim.Rprop``: per element, the step size grows by
    ``etaplus`` while the gradient keeps its sign and shrinks by
    ``etaminus`` when it flips (that step then skips the element);
    ``p -= sign(g) * step_size``."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_flags(foreach, differentiable, None)
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
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
        """``p``'s state, made if it has none (``p.grad`` exists): before a
        traced first step too (``Optimizer._state_before_traced_step``), so
        that the second call reuses that trace; the step size starts at the
        lr of the first step (PyTorch's), a tensor the trace reads."""
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            state["prev"] = creation.zeros_like(p)
            lr = float(group["lr"])
            # a complex parameter's components are two reals: both start at lr
            state["step_size"] = creation.full_like(
                p.grad, complex(lr, lr) if p.dtype.category == 3 else lr)
        return state

    def _update_group(self, group) -> None:
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:    # an Embedding(sparse=True)'s gradient
                raise RuntimeError("Rprop does not support sparse gradients")
            p, grad, state = _f.as_real(p, p.grad if not group["maximize"] else -p.grad,
                                        self._init_state(group, p))
            prev, step_size = state["prev"], state["step_size"]
            state["step"].add_(1)
            sign = grad.mul(prev).sign()
            # in the gradient's dtype (Python-number branches alone would
            # give the default dtype)
            factor = F.where(F.gt(sign, 0), creation.full_like(sign, etaplus),
                             F.where(F.lt(sign, 0), creation.full_like(sign, etaminus),
                                     creation.full_like(sign, 1.0)))
            step_size.copy_(F.clamp(step_size.mul(factor), step_size_min, step_size_max))
            grad = F.where(F.eq(factor, etaminus), 0.0, grad)
            p.sub_(grad.sign().mul(step_size))
            prev.copy_(grad)
