"""``SparseAdam``: PyTorch's constructor, checks and masked Adam update.

PyTorch's SparseAdam takes only sparse gradients: those of an ``Embedding``
/ ``EmbeddingBag`` made with ``sparse=True`` (or of ``F.embedding(...,
sparse=True)``'s weight).  tracec's autograd makes those gradients dense
with the same values (API.md: a sparse tensor may be dense), and marks such
a weight (``_tracec_sparse_grad``, set by the module's constructor and by
the functional): a step over any other gradient, or over such a weight's gradient once a dense
gradient was added to it (``graph.SPARSE_GRAD_NODES``), raises PyTorch's
error, which names ``Adam`` as the replacement.

The update is PyTorch's ``F.sparse_adam`` restricted to the rows the sparse
gradient holds, here the rows whose gradient is not all zero (a row
PyTorch's gradient holds with an exactly zero value, e.g. one looked up
only where a clamp cut the gradient, has its moments decayed there and
is left as it is here)::

    step += 1
    on those rows:
        exp_avg    += (g - exp_avg) * (1 - beta1)
        exp_avg_sq += (g * g - exp_avg_sq) * (1 - beta2)
        p += -(lr * sqrt(1 - beta2 ** step) / (1 - beta1 ** step))
             * exp_avg / (sqrt(exp_avg_sq) + eps)

``state['step']`` is a 0-d tensor (PyTorch's is a Python int), as for the
other optimizers: a compiled step reads it as state, so one trace serves
every step; the bias corrections are computed from it in float64, as
PyTorch's Python floats.
"""
from __future__ import annotations

from tracec import creation
from tracec.autograd import known_dense
from tracec import dtypes as dt
from tracec import functions as F
from tracec.optim.optimizer import Optimizer, _scalar_dtype, reads_lr_by_lr
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

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)
        self._steps_as_tensors()

    @reads_lr_by_lr
    def _update_group(self, group) -> None:
        lr = self._lr(group)
        beta1, beta2 = group["betas"]
        eps, maximize = group["eps"], group.get("maximize", False)
        for p in group["params"]:
            if p.grad is None:
                continue
            # A sparse=True weight's gradient is sparse unless a dense one was
            # added to it (an L2 term over the whole table: PyTorch's sum is
            # dense; ``autograd.known_dense``).
            if not getattr(p, "_tracec_sparse_grad", False) or known_dense(p.grad):
                raise RuntimeError("SparseAdam does not support dense gradients, please "
                                   "consider Adam instead")
            state = self.state[p]
            if len(state) == 0:
                state["step"] = creation.tensor(0.0, dtype=_scalar_dtype())
                state["exp_avg"] = creation.zeros_like(p)
                state["exp_avg_sq"] = creation.zeros_like(p)
            state["step"].add_(1)
            step = state["step"].to(dt.float64)
            # (its values as a dense tensor: the masked update below is dense
            # arithmetic, and a COO tensor minus a dense one is refused)
            grad = (p.grad if not maximize else -p.grad).to_dense()
            rows = grad.ne(0)
            if grad.dim() > 1:
                rows = rows.flatten(1).any(1).reshape((-1,) + (1,) * (grad.dim() - 1))
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            avg_update = grad.sub(exp_avg).mul(1 - beta1)
            sq_update = grad.pow(2).sub(exp_avg_sq).mul(1 - beta2)
            numer = avg_update.add(exp_avg)
            new_sq = sq_update.add(exp_avg_sq)
            exp_avg.copy_(F.where(rows, numer, exp_avg))
            exp_avg_sq.copy_(F.where(rows, new_sq, exp_avg_sq))
            denom = new_sq.sqrt().add(eps)
            bias_correction1 = F.sub(1, F.pow(beta1, step))
            bias_correction2 = F.sub(1, F.pow(beta2, step))
            step_size = F.div(F.mul(lr, F.sqrt(bias_correction2)), bias_correction1)
            p.add_(F.where(rows, F.mul(F.neg(step_size), numer.div(denom)), 0.0))
