"""``Adagrad`` with PyTorch's exact formulas (``torch.optim.Adagrad``).

State per parameter, as in PyTorch: ``step`` (0-d tensor) and ``sum``,
made in the constructor for every parameter (``sum`` filled with
``initial_accumulator_value``) and updated in place.  The decayed learning
rate ``lr / (1 + (step - 1) * lr_decay)`` is computed with float64 tensor
ops from the ``step`` tensor (PyTorch computes it in Python floats), so a
traced step reads the counter as state.
"""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec.contraction import sparse_coo_tensor
from tracec import functions as F
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lr_by_lr
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """PyTorch's ``torch.optim.Adagrad``.  Per parameter with gradient
    ``g`` (``-g`` with ``maximize``)::

        step += 1
        g = g + weight_decay * p                  (if weight_decay != 0)
        clr = lr / (1 + (step - 1) * lr_decay)
        sum = sum + g * g
        p = p - clr * g / (sqrt(sum) + eps)

    A sparse gradient (``Embedding(sparse=True)``'s, as treelstm.pytorch's
    ``--sparse`` runs) takes PyTorch's sparse branch: weight decay refused,
    ``sum`` and ``p`` updated on the gradient's rows only.

    ``foreach`` and ``fused`` are accepted and change nothing.
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        _check_flags(foreach, differentiable, fused)
        for group in self.param_groups:
            for p in group["params"]:
                self._new_state(p)

    def _new_state(self, p) -> None:
        # PyTorch fills every group's sum with the *optimizer's* default
        # initial_accumulator_value (a group's own value is not read).
        state = self.state[p]
        state["step"] = creation.tensor(0.0, dtype=_scalar_dtype())
        state["sum"] = creation.full_like(p, self.defaults["initial_accumulator_value"])

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
        self._steps_as_tensors()

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        lr_decay, eps = group["lr_decay"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if len(self.state[p]) == 0:  # a parameter added by add_param_group
                self._new_state(p)
            grad = p.grad if not maximize else -p.grad
            if grad.is_sparse:
                self._sparse_update(p, grad, self.state[p], lr, lr_decay, eps, weight_decay)
                continue
            p, grad, state = _f.as_real(p, grad, self.state[p])
            step_t, state_sum = state["step"], state["sum"]
            step_t.add_(1)
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            if lr_decay != 0:
                # In float64 tensors, as PyTorch's Python floats.
                step = step_t.to(dt.float64)
                clr = F.div(lr, F.add(F.mul(F.sub(step, 1), lr_decay), 1))
            else:
                clr = lr    # lr / (1 + (step - 1) * 0) is lr exactly
            _f.addcmul_(state_sum, grad, grad)
            std = state_sum.sqrt().add(eps)
            _f.addcdiv_(p, grad, std, value=_f.neg(clr))

    @staticmethod
    def _sparse_update(p, grad, state, lr, lr_decay, eps, weight_decay) -> None:
        """PyTorch's sparse-gradient branch of ``_single_tensor_adagrad``:
        the step counts before weight decay is refused; then ``sum`` gains
        the squared values of the coalesced gradient, and ``p`` moves on
        those rows only by ``-clr * g / (sqrt(sum) + eps)``."""
        step_t, state_sum = state["step"], state["sum"]
        step_t.add_(1)
        if weight_decay != 0:
            raise RuntimeError("weight_decay option is not compatible with sparse gradients")
        clr = lr / (1 + (step_t.item() - 1) * lr_decay)
        if isinstance(clr, Tensor):
            clr = clr.item()
        grad = grad.coalesce()
        indices, values = grad._indices(), grad._values()
        state_sum.add_(sparse_coo_tensor(indices, values.pow(2), grad.size()))
        std_values = state_sum[tuple(indices)].sqrt().add(eps)
        p.add_(sparse_coo_tensor(indices, values / std_values, grad.size()), alpha=-clr)
