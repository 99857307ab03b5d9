"""``AdaptiveLogSoftmaxWithLoss`` (Grave et al. 2016): a head over the
shortlist plus one token per cluster, and a low-rank tail per cluster,
with PyTorch's constructor checks, parameter names (``head.weight``,
``tail.i.0.weight``, ``tail.i.1.weight``), forward, ``log_prob`` and
``predict``.

Invariant: ``forward`` returns ``(output, loss)`` where ``output[i]`` is the
log-probability of ``target[i]`` (head log-prob of its cluster plus its
log-prob within the cluster) and ``loss = -output.mean()``; every row's
log-probabilities from ``log_prob`` sum (in probability) to 1.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import shape_ops as S
from tracec.scatter_ops import scatter
from tracec.nn import functional as F
from tracec.nn.modules.container import ModuleList, Sequential
from tracec.nn.modules.linear import Linear
from tracec.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax approximation for large output spaces."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0,
                 head_bias: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        kw = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.ndim
        if targ_dim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.ndim != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs "
                                   f"with size {input_.size()}")
        elif targ_dim == 0:
            if input_.ndim != 1:
                raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs "
                                   f"with size {input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else S.unsqueeze(input_, 0)
        target = target_ if batched else S.unsqueeze(target_, 0)
        tg = target.detach().cpu().numpy().astype(np.int64)
        batch = tg.shape[0]
        output = creation.zeros(batch, dtype=input.dtype, device=input.device)
        gather_inds = np.zeros(batch, np.int64)
        used = 0
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            rows = np.nonzero((tg >= low) & (tg < high))[0]
            if rows.size == 0:
                continue
            used += rows.size
            if i == 0:
                gather_inds[rows] = tg[rows]
                continue
            gather_inds[rows] = self.shortlist_size + i - 1
            rows_t = creation.tensor(rows, dtype=dt.int64, device=input.device)
            rel = creation.tensor(tg[rows] - low, dtype=dt.int64, device=input.device)
            cluster_logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows_t)), 1)
            local = S.squeeze(S.gather(cluster_logprob, 1, S.unsqueeze(rel, 1)), 1)
            output = S.scatter_add(output, 0, rows_t, local)
        if used != batch:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{tg.min()}, {tg.max()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), 1)
        idx = creation.tensor(gather_inds[:, None], dtype=dt.int64, device=input.device)
        output = TF.add(output, S.reshape(S.gather(head_logprob, 1, idx), (batch,)))
        loss = TF.mean(TF.neg(output))
        if not batched:
            output = S.squeeze(output, 0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, 1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), 1)
            parts.append(TF.add(cluster_logprob,
                                S.unsqueeze(head_logprob[:, self.shortlist_size + i], 1)))
        return S.cat(parts, 1)

    def log_prob(self, input):
        """Log-probabilities of every class, ``[N, n_classes]``."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class per row (the full distribution is computed
        only for rows whose head argmax is a cluster)."""
        head_output = self.head(input)
        output = TF.argmax(head_output, 1)
        outside = (output >= self.shortlist_size).detach().cpu().numpy()
        if not outside.any():
            return output
        if outside.all():
            return TF.argmax(self._get_full_log_prob(input, head_output), 1)
        rows = creation.tensor(np.nonzero(outside)[0], dtype=dt.int64, device=input.device)
        best = TF.argmax(self._get_full_log_prob(input.index_select(0, rows),
                                                 head_output.index_select(0, rows)), 1)
        return scatter(output, 0, rows, best)
