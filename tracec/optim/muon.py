"""``Muon`` with PyTorch's formulas (``torch.optim.Muon``): momentum
(Nesterov by default), then the quintic Newton-Schulz orthogonalization of
the update in bfloat16, then decoupled weight decay and a step scaled by
the matrix's shape.

Invariant: as in PyTorch, only 2-D parameters are accepted; the
Newton-Schulz iteration runs in bfloat16 (tracec's bfloat16 matmuls
accumulate in float32 and round once, as PyTorch's CPU kernels do), so
results match PyTorch to bfloat16 precision, not bit for bit.
"""
from __future__ import annotations

import math

from tracec import creation
from tracec import dtypes as dt
from tracec.optim import _functional as _f
from tracec.optim.optimizer import Optimizer
from tracec.tensor import Tensor

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5


def _addmm_bf16(x: Tensor, m1: Tensor, m2: Tensor, *, beta: float, alpha: float) -> Tensor:
    """PyTorch's bfloat16 ``addmm`` on the CPU: ``beta * x + alpha * m1 @ m2``
    in float32, rounded to bfloat16 once."""
    f32 = dt.float32
    return x.to(f32).mul(beta).add(m1.to(f32).matmul(m2.to(f32)).mul(alpha)).to(dt.bfloat16)


def _zeropower_via_newtonschulz(grad: Tensor, ns_coefficients, ns_steps: int,
                                eps: float) -> Tensor:
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    ortho = grad.to(dt.bfloat16)
    tall = grad.size(0) > grad.size(1)
    if tall:
        ortho = ortho.T
    ortho = ortho.div(ortho.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = ortho.matmul(ortho.T)
        gram_update = _addmm_bf16(gram, gram, gram, beta=b, alpha=c)
        ortho = _addmm_bf16(ortho, gram_update, ortho, beta=a, alpha=1.0)
    return ortho.T if tall else ortho


def _adjust_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """PyTorch's ``torch.optim.Muon`` (for the 2-D weights of hidden layers;
    give biases and embeddings to another optimizer, as PyTorch says)."""

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS,
                 ns_steps=DEFAULT_NS_STEPS, adjust_lr_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum,
                    "nesterov": nesterov, "ns_coefficients": ns_coefficients, "eps": eps,
                    "ns_steps": ns_steps, "adjust_lr_fn": adjust_lr_fn}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def _init_state(self, group, p: Tensor) -> dict:
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = creation.zeros_like(p)
        return state

    def _update_group(self, group) -> None:
        lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            buf = self._init_state(group, p)["momentum_buffer"]
            _f.lerp_(buf, grad, 1 - momentum)
            update = grad.lerp(buf, momentum) if group["nesterov"] else buf
            update = _zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                                 group["ns_steps"], group["eps"])
            p.mul_(1 - lr * wd)
            p.add_(update.to(p.dtype).mul(-_adjust_lr(lr, group["adjust_lr_fn"], p.shape)))
