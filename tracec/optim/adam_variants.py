"""``Adamax``, ``NAdam`` and ``RAdam`` with PyTorch's exact formulas
(``torch.optim``'s single-tensor path) and state.

Invariant: what PyTorch computes in Python floats from the step counter
(bias corrections, NAdam's momentum schedule, RAdam's rectification and
its ``rho_t > 5`` branch) is computed here with float64 tensor ops from
the ``step`` state tensor (the branch as a ``where``), so a traced step
reads the counter as state and serves every later step.
"""
from __future__ import annotations

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as F
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lr_by_lr
from tracec.optim.sgd import _check_flags
from tracec.tensor import Tensor

__all__ = ["Adamax", "NAdam", "RAdam"]


def _check(lr, eps, betas, weight_decay) -> None:
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


class _AdamFamily(Optimizer):
    _state_keys = ("exp_avg", "exp_avg_sq")

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in self._flag_defaults.items():
                group.setdefault(k, v)
        self._steps_as_tensors()

    def _init_state(self, group, p) -> dict:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = creation.zeros((), dtype=_scalar_dtype())
            if "mu_product" in self._state_keys:
                state["mu_product"] = creation.ones((), dtype=_scalar_dtype())
            for k in self._state_keys:
                if k != "mu_product":
                    state[k] = creation.zeros_like(p)
        return state

    def _grads(self, group):
        """(param, grad (negated with maximize), state, step as float64)
        for each parameter with a gradient; the step is counted first; a
        complex parameter, its gradient and state come as real views."""
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:    # an Embedding(sparse=True)'s gradient
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
            state = self._init_state(group, p)
            state["step"].add_(1)
            step = state["step"].to(dt.float64)
            # a complex parameter as pairs of reals, as PyTorch's view_as_real
            yield (*_f.as_real(p, p.grad if not group["maximize"] else -p.grad, state), step)


class Adamax(_AdamFamily):
    """PyTorch's ``torch.optim.Adamax``::

        m = lerp(m, g, 1 - beta1); u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**step) * m / u
    """

    _state_keys = ("exp_avg", "exp_inf")
    _flag_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                      "capturable": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check(lr, eps, betas, weight_decay)
        _check_flags(foreach, differentiable, None)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        beta1, beta2 = group["betas"]
        eps, wd = group["eps"], group["weight_decay"]
        for p, grad, state, step in self._grads(group):
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            _f.lerp_(exp_avg, grad, 1 - beta1)
            exp_inf.copy_(F.maximum(exp_inf.mul_(beta2), grad.abs().add(eps)))
            clr = F.div(lr, F.sub(1, F.pow(beta1, step)))
            _f.addcdiv_(p, exp_avg, exp_inf, value=F.neg(clr))


class NAdam(_AdamFamily):
    """PyTorch's ``torch.optim.NAdam`` (Nesterov Adam with the momentum
    schedule ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))``;
    ``mu_product`` is a float32 state tensor, as in PyTorch)."""

    _state_keys = ("mu_product", "exp_avg", "exp_avg_sq")
    _flag_defaults = {"foreach": None, "maximize": False, "capturable": False,
                      "differentiable": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        _check_flags(foreach, differentiable, None)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        beta1, beta2 = group["betas"]
        eps, wd, md = group["eps"], group["weight_decay"], group["momentum_decay"]
        for p, grad, state, step in self._grads(group):
            bias_correction2 = F.sub(1, F.pow(beta2, step))
            if wd != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * wd)
                else:
                    grad = grad.add(p, alpha=wd)
            mu = F.mul(beta1, F.sub(1.0, F.mul(F.pow(0.96, F.mul(step, md)), 0.5)))
            mu_next = F.mul(beta1, F.sub(1.0, F.mul(F.pow(0.96, F.mul(F.add(step, 1), md)),
                                                    0.5)))
            mu_product = state["mu_product"]
            # PyTorch multiplies the float32 tensor by the Python float mu in
            # float32: mu is rounded first.
            mu_product.mul_(mu.to(mu_product.dtype))
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            _f.lerp_(exp_avg, grad, 1 - beta1)
            _f.addcmul_(exp_avg_sq.mul_(beta2), grad, grad, value=1 - beta2)
            denom = exp_avg_sq.div(bias_correction2).sqrt().add(eps)
            mp = mu_product.to(dt.float64)
            neg_lr = _f.neg(lr)
            _f.addcdiv_(p, grad, denom, value=F.div(F.mul(F.sub(1.0, mu), neg_lr),
                                                    F.sub(1.0, mp)))
            _f.addcdiv_(p, exp_avg, denom, value=F.div(F.mul(mu_next, neg_lr),
                                                       F.sub(1.0, F.mul(mp, mu_next))))


class RAdam(_AdamFamily):
    """PyTorch's ``torch.optim.RAdam``: Adam with the variance rectification
    term while ``rho_t > 5``, plain bias-corrected momentum before."""

    _flag_defaults = {"foreach": None, "maximize": False, "capturable": False,
                      "differentiable": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check(lr, eps, betas, weight_decay)
        _check_flags(foreach, differentiable, None)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        beta1, beta2 = group["betas"]
        eps, wd = group["eps"], group["weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1
        for p, grad, state, step in self._grads(group):
            if wd != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * wd)
                else:
                    grad = grad.add(p, alpha=wd)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            _f.lerp_(exp_avg, grad, 1 - beta1)
            _f.addcmul_(exp_avg_sq.mul_(beta2), grad, grad, value=1 - beta2)
            bias_correction1 = F.sub(1, F.pow(beta1, step))
            bias_correction2 = F.sub(1, F.pow(beta2, step))
            corrected = F.mul(exp_avg.div(bias_correction1), lr)
            rho_t = F.sub(rho_inf, F.div(F.mul(F.mul(step, 2), F.pow(beta2, step)),
                                         bias_correction2))
            # (computed at rho_t > 5 only: the sqrt of a negative before
            # would be NaN, never selected, but its gradient through
            # ``where`` (differentiable=True) would be NaN too)
            rho = F.where(F.gt(rho_t, 5.0), rho_t, 6.0)
            rect = F.sqrt(F.div(F.mul(F.mul(F.sub(rho, 4), F.sub(rho, 2)), rho_inf),
                                F.mul(rho, (rho_inf - 4) * (rho_inf - 2))))
            adaptive = F.div(F.sqrt(bias_correction2), exp_avg_sq.sqrt().add(eps))
            rectified = F.mul(F.mul(corrected, adaptive), rect)
            p.sub_(F.where(F.gt(rho_t, 5.0), rectified, corrected))
