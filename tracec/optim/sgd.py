"""``SGD``: stochastic gradient descent with PyTorch's exact update rules
(weight decay, momentum with dampening, Nesterov, maximize)."""
from __future__ import annotations

import numpy as np

from tracec import creation
from tracec.ops.elementwise import quiet_fp
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, reads_lifted

__all__ = ["SGD"]


def _check_flags(foreach, differentiable, fused) -> None:
    if fused and differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


class SGD(Optimizer):
    """PyTorch's ``torch.optim.SGD``.

    Per parameter with a gradient ``g`` (``-g`` with ``maximize``)::

        g = g + weight_decay * p                        (if weight_decay != 0)
        buf = clone(g) on the first step, else
        buf = momentum * buf + (1 - dampening) * g      (if momentum != 0)
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g

    ``foreach`` and ``fused`` are accepted for compatibility and change
    nothing (the math is the same).
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_flags(foreach, differentiable, fused)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def _init_state(self, group, p) -> dict:
        """Called only before a traced first step (``Optimizer``): a zero
        momentum buffer, which the steady update turns into the first
        step's ``buf = grad`` (``0 * m + 1 * grad``), so the trace is the
        steady step.  With dampening the first step differs: no state then."""
        state = self.state[p]
        if group["momentum"] != 0 and group["dampening"] == 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = creation.zeros_like(p)
        return state

    @reads_lifted("momentum")
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        momentum = self._hyper(group, "momentum", lambda m: m != 0)
        dampening = group["dampening"]
        weight_decay = group["weight_decay"]
        nesterov = group["nesterov"]
        maximize = group["maximize"]
        # PyTorch's foreach SGD adds momentum * buf to the gradients *in
        # place* for Nesterov when they are still the parameters' own
        # (no maximize, no weight decay): p.grad changes, which a later
        # accumulation or a read of p.grad sees.
        nesterov_in_grad = bool(group["foreach"]) and nesterov and not maximize and \
            weight_decay == 0
        for p in group["params"]:
            if p.grad is None:
                continue
            if group["momentum"] != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                arrays = None if buf is None or nesterov_in_grad else _f.direct_arrays(
                    p, p.grad, (buf,), lr, momentum, dampening, weight_decay, step=False)
                if arrays is not None:     # (the ops below, in NumPy in place)
                    _sgd_numpy(*arrays, lr, momentum, dampening, weight_decay, nesterov,
                               maximize)
                    _f.bump(buf, 2, p, 1)
                    continue
            grad = p.grad if not maximize else -p.grad
            if weight_decay != 0:
                grad = _f.add(grad, p, alpha=weight_decay)
            if group["momentum"] != 0:
                if buf is None:
                    buf = grad.detach().clone()
                    state["momentum_buffer"] = buf
                else:
                    _f.add_(buf.mul_(momentum), grad, alpha=1 - dampening)
                if nesterov_in_grad:
                    grad = _f.add_(grad, buf, alpha=momentum)
                else:
                    grad = _f.add(grad, buf, alpha=momentum) if nesterov else buf
            _f.add_(p, grad, alpha=_f.neg(lr))


def _sgd_numpy(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """``SGD._update_group``'s tensor ops for one parameter with a momentum
    buffer, as NumPy ufuncs: the same operations in the same order and
    dtypes (a Python number as a weak scalar of the tensors' (float)
    dtype: ``np.asarray(number, d)``, what ``weak_scalar`` makes; see
    ``_functional.direct_arrays``), so the same bits."""
    d = p.dtype
    with quiet_fp():
        if maximize:                                  # -p.grad
            g = np.negative(g)
        if weight_decay != 0:                         # grad.add(p, alpha=weight_decay)
            g = _f.axpy_np(g, p, weight_decay)
        # buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        np.multiply(buf, np.asarray(momentum, d), out=buf)
        _f.axpy_np(buf, g, 1 - dampening, out=buf)
        if nesterov:                                  # grad.add(buf, alpha=momentum)
            g = _f.axpy_np(g, buf, momentum)
        else:
            g = buf
        # add_(p, grad, alpha=-lr): p.add_(grad, alpha=-lr)
        _f.axpy_np(p, g, -lr, out=p)
