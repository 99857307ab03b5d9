"""``SparseAdam``: PyTorch's constructor and checks.  Its step takes only
sparse gradients, which tracec's autograd never produces (``Embedding``
and ``EmbeddingBag`` with ``sparse=True`` are refused), so every step with
a gradient raises PyTorch's error, which names ``Adam`` as the
replacement."""
from __future__ import annotations

from tracec.optim.optimizer import Optimizer
from tracec.tensor import Tensor

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        for p in group["params"]:
            if p.grad is not None:
                raise RuntimeError("SparseAdam does not support dense gradients, please "
                                   "consider Adam instead")
