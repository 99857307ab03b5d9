"""``F.ctc_loss``: connectionist temporal classification (Graves et al.
2006), PyTorch's arguments, reductions and gradient.

The per-sample negative log-likelihood comes from the log-space forward
(alpha) recursion over the extended label sequence ``blank, l1, blank, l2,
..., blank``, batched over samples with masks for their own input and
target lengths.  Its backward runs the beta recursion and returns, exactly
as PyTorch's kernel does, ``exp(log_probs) - exp(log(sum_s alpha*beta over
label c) + nll - log_probs)`` for ``t < input_length`` (0 after).  That is
the gradient with respect to the logits behind a ``log_softmax`` (PyTorch's
documented convention), so ``log_probs.grad`` matches PyTorch's too, and a
``log_softmax`` in front gives the true gradient.

Invariants: an impossible alignment gives ``inf`` (``0`` and a zero
gradient with ``zero_infinity=True``), a sample with no frames too unless
its target is empty (``-0.0``); ``reduction="mean"`` divides each
loss by its target length (at least 1) and then averages over the batch.
"""
from __future__ import annotations

import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import shape_ops as S
from tracec.autograd import Function
from tracec.methods_extra import isfinite, isinf
from tracec.nn._loss import _reduction
from tracec.tensor import RECORDERS, Tensor, concrete

__all__ = ["ctc_loss"]

_NEG_INF = -float("inf")
# the alignment plan is built in Python from the lengths and targets
_EAGER = "ctc_loss() (eager only: its alignment plan reads the lengths and targets)"


def _lengths(x) -> list:
    if isinstance(x, Tensor):
        return [int(v) for v in np.asarray(concrete(x, _EAGER)).reshape(-1)]
    if isinstance(x, int):
        return [x]
    return [int(v) for v in x]


def _lse(*xs):
    """``log(sum(exp(x)))`` of same-shape tensors, ``-inf`` where all are
    (forward only: no gradient flows through it)."""
    m = xs[0]
    for x in xs[1:]:
        m = TF.maximum(m, x)
    finite = isfinite(m)
    m0 = TF.where(finite, m, creation.zeros_like(m))
    total = TF.exp(TF.sub(xs[0], m0))
    for x in xs[1:]:
        total = TF.add(total, TF.exp(TF.sub(x, m0)))
    return TF.where(finite, TF.add(TF.log(total), m0), m)


def _shift(x, k: int, fill):
    """``x[..., s - k]`` along the last dim, ``fill`` for ``s < k``."""
    pad = creation.full(tuple(x.shape[:-1]) + (k,), fill, dtype=x.dtype, device=x.device)
    return S.cat([pad, x[..., :x.shape[-1] - k]], -1)


def _unshift(x, k: int, fill):
    """``x[..., s + k]`` along the last dim, ``fill`` past the end."""
    pad = creation.full(tuple(x.shape[:-1]) + (k,), fill, dtype=x.dtype, device=x.device)
    return S.cat([x[..., k:], pad], -1)


class _CTC(Function):
    """Per-sample CTC negative log-likelihood ``[N]`` of ``log_probs``
    ``[T, N, C]``; ``plan`` carries the extended labels and masks."""

    # forward and backward are tensor ops (no NumPy on tensor data), so a
    # compiled backward may record them (tracec.tracing's custom Functions)
    recordable = True
    node_name = "CtcLossBackward0"

    @staticmethod
    def forward(ctx, log_probs, plan):
        ext, skip, in_lens, ext_lens, zero_infinity = plan
        steps, batch, _ = log_probs.shape
        width = ext.shape[1]
        dev = log_probs.device
        lpe = S.gather(log_probs, 2, S.expand(S.unsqueeze(ext, 0), steps, batch, width))
        pos = np.arange(width)
        valid = creation.tensor(pos[None, :] < np.asarray(ext_lens)[:, None], device=dev)
        live = [creation.tensor((t < np.asarray(in_lens))[:, None], device=dev)
                for t in range(steps)]
        neg = creation.full((batch, width), _NEG_INF, dtype=log_probs.dtype, device=dev)
        alpha = TF.where(creation.tensor(pos < 2, device=dev) & valid, lpe[0], neg)
        alphas = [alpha]
        for t in range(1, steps):
            a2 = TF.where(skip, _shift(alpha, 2, _NEG_INF), neg)
            new = TF.where(valid, TF.add(_lse(alpha, _shift(alpha, 1, _NEG_INF), a2), lpe[t]),
                           neg)
            alpha = TF.where(live[t], new, alpha)
            alphas.append(alpha)
        last = creation.tensor(np.asarray(ext_lens)[:, None] - 1, dtype=dt.int64, device=dev)
        end1 = S.gather(alpha, 1, last)
        end2 = S.gather(alpha, 1, TF.clamp(TF.sub(last, 1), min=0))
        end2 = TF.where(last > 0, end2, creation.full_like(end2, _NEG_INF))
        nll = TF.neg(S.reshape(_lse(end1, end2), (batch,)))
        if 0 in in_lens:
            # no frames: only an empty target is reachable (-log 1), else inf
            empty = creation.tensor([n == 0 for n in in_lens], device=dev)
            none = creation.tensor([-0.0 if e == 1 else float("inf") for e in ext_lens],
                                   dtype=nll.dtype, device=dev)
            nll = TF.where(empty, none, nll)
        ctx.raw_nll = nll
        ctx.plan = plan
        ctx.alphas = alphas
        ctx.save_for_backward(log_probs, lpe, nll)
        return nll

    @staticmethod
    def backward(ctx, grad_nll):
        log_probs, lpe, nll = ctx.saved_tensors
        ext, skip, in_lens, ext_lens, zero_infinity = ctx.plan
        steps, batch, classes = log_probs.shape
        width = ext.shape[1]
        dev = log_probs.device
        pos = np.arange(width)
        in_np, ext_np = np.asarray(in_lens), np.asarray(ext_lens)
        valid = creation.tensor(pos[None, :] < ext_np[:, None], device=dev)
        ends = creation.tensor((pos[None, :] >= ext_np[:, None] - 2) & (pos[None, :] < ext_np[:, None]),
                               device=dev)
        neg = creation.full((batch, width), _NEG_INF, dtype=log_probs.dtype, device=dev)
        skip_from = _unshift(skip, 2, False)  # s -> s+2 allowed
        beta = neg
        lcab = [None] * steps
        for t in range(steps - 1, -1, -1):
            start = creation.tensor((t == in_np - 1)[:, None], device=dev)
            inside = creation.tensor((t < in_np - 1)[:, None], device=dev)
            b2 = TF.where(skip_from, _unshift(beta, 2, _NEG_INF), neg)
            rec = TF.add(_lse(beta, _unshift(beta, 1, _NEG_INF), b2), lpe[t])
            beta = TF.where(valid & ((start & ends) | inside),
                            TF.where(start, lpe[t], rec), neg)
            lcab[t] = TF.add(ctx.alphas[t], beta)
        lcab = S.stack(lcab, 0)  # [T, N, W]: log(alpha * beta) per extended position
        # sum over the extended positions holding each class, in a safe log scale
        m = TF.amax(lcab, -1, keepdim=True)
        m0 = TF.where(isfinite(m), m, creation.zeros_like(m))
        onehot = (S.unsqueeze(ext, -1) == creation.arange(classes, device=dev)) & \
            S.unsqueeze(valid, -1)
        summed = TF.matmul(S.permute(TF.exp(TF.sub(lcab, m0)), 1, 0, 2),
                           onehot.to(log_probs.dtype))  # [N, T, C]
        summed = S.permute(summed, 1, 0, 2)
        scale = TF.exp(TF.sub(TF.add(m0, S.reshape(ctx.raw_nll, (1, batch, 1))), log_probs))
        grad = TF.sub(TF.exp(log_probs), TF.mul(summed, scale))
        live = creation.tensor((np.arange(steps)[:, None] < in_np[None, :])[:, :, None],
                               device=dev)
        keep = live
        if zero_infinity:  # an impossible sample's loss was set to 0: no gradient
            keep = keep & S.reshape(isfinite(ctx.raw_nll), (1, batch, 1))
        grad = TF.where(keep, grad, creation.zeros_like(grad))
        return TF.mul(grad, S.reshape(grad_nll, (1, batch, 1))), None


def _plan(targets, in_lens, tgt_lens, blank, batch, dev, zero_infinity):
    """Extended labels ``[N, 2*S_max+1]`` and the skip mask (``s`` may come
    from ``s-2``: a label differing from the one two back)."""
    if RECORDERS:
        return _traced_plan(targets, in_lens, tgt_lens, blank, batch, dev, zero_infinity)
    tg = np.asarray(concrete(targets, _EAGER)).astype(np.int64)
    if tg.ndim == 1:
        offsets = np.concatenate([[0], np.cumsum(tgt_lens)])
        rows = [tg[offsets[i]:offsets[i + 1]] for i in range(batch)]
    else:
        rows = [tg[i, :tgt_lens[i]] for i in range(batch)]
    width = 2 * max(tgt_lens, default=0) + 1
    ext = np.full((batch, width), blank, np.int64)
    for i, r in enumerate(rows):
        ext[i, 1:2 * len(r):2] = r
    skip = np.zeros((batch, width), bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    ext_lens = [2 * n + 1 for n in tgt_lens]
    return (creation.tensor(ext, device=dev), creation.tensor(skip, device=dev), in_lens,
            ext_lens, zero_infinity)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """CTC loss of ``log_probs`` ``[T, N, C]`` (or ``[T, C]``) against
    ``targets`` ``[N, S]`` padded or 1-D concatenated (see module doc)."""
    reduction = _reduction(reduction)
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = S.unsqueeze(log_probs, 1)
        if targets.ndim == 1:
            targets = S.unsqueeze(targets, 0)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got "
                           f"{log_probs.ndim}-D")
    steps, batch, classes = log_probs.shape
    in_lens = _lengths(input_lengths)
    tgt_lens = _lengths(target_lengths)
    # PyTorch's checks, in its order
    where = " (while checking arguments for ctc_loss_allocate_outputs)"
    if targets.ndim not in (1, 2):
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.ndim}-dimensional "
                           f"tensor for argument #2 'targets'{where}")
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    if len(in_lens) != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tgt_lens) != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    for n in tgt_lens:
        if n < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value "
                               f"{n}{where}")
    if targets.ndim == 2 and max(tgt_lens, default=0) > targets.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {max(tgt_lens)} at dimension "
                           f"1, but got size {targets.shape[1]} for argument #2 'targets' (while "
                           "checking arguments for ctc_loss_allocate_outputs)")
    if targets.ndim == 1 and targets.shape[0] != sum(tgt_lens):
        raise RuntimeError(f"Expected tensor to have size {sum(tgt_lens)} at dimension 0, but "
                           f"got size {targets.shape[0]} for argument #2 'targets' (while "
                           "checking arguments for ctc_loss_allocate_outputs)")
    for n in in_lens:
        if n < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                               f"{n}{where}")
        if n > steps:
            raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got "
                               f"value {n}{where}")
    plan = _plan(targets, in_lens, tgt_lens, blank, batch, log_probs.device, zero_infinity)
    nll = _CTC.apply(log_probs, plan)
    if zero_infinity:  # outside the CTC node, as in PyTorch (its grad_fn: WhereBackward0)
        nll = TF.where(isinf(nll), creation.zeros_like(nll), nll)
    if reduction == "mean":
        denom = creation.tensor([max(n, 1) for n in tgt_lens], dtype=nll.dtype,
                                device=nll.device)
        return TF.mean(TF.div(nll, denom))
    if reduction == "sum":
        return TF.sum(nll)
    return S.squeeze(nll, 0) if unbatched else nll


def _traced_plan(targets, in_lens, tgt_lens, blank, batch, dev, zero_infinity):
    """``_plan`` in tensor ops on ``targets`` (the lengths are numbers: a
    traced call records the plan, so each compiled call builds it from its
    own targets; lengths given as tensors are read, eager only)."""
    s_max = max(tgt_lens, default=0)
    k = np.arange(s_max)
    have = creation.tensor(k[None, :] < np.asarray(tgt_lens, np.int64)[:, None], device=dev)
    if targets.ndim == 1:
        offsets = np.concatenate([[0], np.cumsum(tgt_lens)])[:-1].astype(np.int64)
        idx = np.minimum(offsets[:, None] + k[None, :], max(targets.shape[0] - 1, 0))
        labels = targets[creation.tensor(idx, device=dev)] if s_max and targets.shape[0] \
            else creation.zeros((batch, s_max), dtype=dt.int64, device=dev)
    else:
        labels = targets[:, :s_max]
    labels = TF.where(have, labels.to(dt.int64), creation.full((batch, s_max), blank,
                                                               dtype=dt.int64, device=dev))
    blanks = creation.full((batch, s_max), blank, dtype=dt.int64, device=dev)
    ext = S.cat([S.reshape(S.stack([blanks, labels], -1), (batch, 2 * s_max)),
                 creation.full((batch, 1), blank, dtype=dt.int64, device=dev)], 1)
    two_back = _shift(ext, 2, blank)
    skip = (ext != blank) & (ext != two_back) & \
        creation.tensor(np.arange(2 * s_max + 1) >= 2, device=dev)
    ext_lens = [2 * n + 1 for n in tgt_lens]
    return ext, skip, in_lens, ext_lens, zero_infinity
