"""``RMSprop`` with PyTorch's exact formulas (``torch.optim.RMSprop``).

State per parameter, as in PyTorch: ``step`` (0-d tensor), ``square_avg``,
``momentum_buffer`` (when ``momentum > 0``) and ``grad_avg`` (when
``centered``); all are updated in place, so a traced step carries them as
state.
"""
from __future__ import annotations

from tracec import creation
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lifted
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """PyTorch's ``torch.optim.RMSprop``.  Per parameter with gradient ``g``
    (``-g`` with ``maximize``)::

        g = g + weight_decay * p                  (if weight_decay != 0)
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - gavg**2) with gavg = lerp(gavg, g, 1 - alpha)  (centered)
              sqrt(v)                                                 (otherwise)
        avg = avg + eps
        buf = momentum * buf + g / avg; p = p - lr * buf   (momentum > 0)
        p = p - lr * g / avg                               (otherwise)

    ``foreach`` and ``capturable`` are accepted and change nothing.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        _check_flags(foreach, differentiable, None)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
        self._steps_as_tensors()

    def _init_state(self, group, p) -> dict:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            state["square_avg"] = creation.zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = creation.zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = creation.zeros_like(p)
        return state

    @reads_lifted("momentum")
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        momentum = self._hyper(group, "momentum", lambda m: m > 0)
        alpha, eps, weight_decay = group["alpha"], group["eps"], group["weight_decay"]
        centered, maximize = group["centered"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:    # an Embedding(sparse=True)'s gradient
                raise RuntimeError("RMSprop does not support sparse gradients")
            state = self._init_state(group, p)
            grad = p.grad if not maximize else -p.grad
            p, grad, state = _f.as_real(p, grad, state)
            square_avg = state["square_avg"]
            state["step"].add_(1)
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)
            _f.addcmul_(square_avg.mul_(alpha), grad, grad, value=1 - alpha)
            if centered:
                grad_avg = state["grad_avg"]
                _f.lerp_(grad_avg, grad, 1 - alpha)
                avg = square_avg.sub(grad_avg.mul(grad_avg)).sqrt()
            else:
                avg = square_avg.sqrt()
            avg = avg.add(eps)
            if group["momentum"] > 0:
                buf = state["momentum_buffer"]
                _f.addcdiv_(buf.mul_(momentum), grad, avg)
                _f.add_(p, buf, alpha=_f.neg(lr))
            else:
                _f.addcdiv_(p, grad, avg, value=_f.neg(lr))
