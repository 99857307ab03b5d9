"""autograd.grad inside a symbolic trace, op by op: the eager tape runs
each VJP while the trace records it, so a VJP that read a traced size as a
number (mean's 1/T was one) would bake it into code that serves every size.
Each op's gradient, compiled once with every size symbolic, must equal the
eager gradient at three sizes (retraces and specializations are allowed:
they are guarded; a wrong number is not)."""
from __future__ import annotations

import numpy as np
import pytest

import tracec

F = tracec.nn.functional

OPS = {
 "sum": lambda x: x.sum(-1),
 "mean_all": lambda x: x.mean(),
 "var": lambda x: x.var(-1),
 "std_all": lambda x: x.std(),
 "softmax": lambda x: F.softmax(x, -1),
 "log_softmax0": lambda x: F.log_softmax(x, 0),
 "cumsum": lambda x: x.cumsum(-1),
 "flip": lambda x: x.flip(-1),
 "t": lambda x: x.t() * 2,
 "view": lambda x: x.reshape(-1) * 2,
 "expand": lambda x: x[:, :1].expand(-1, x.shape[1]) * x,
 "matmul": lambda x: x @ x.t(),
 "max": lambda x: x.max(-1).values,
 "amax": lambda x: x.amax(0),
 "norm": lambda x: x.norm(dim=-1),
 "logsumexp": lambda x: x.logsumexp(-1),
 "slice": lambda x: x[:, 1:] * x[:, :-1],
 "cat": lambda x: tracec.cat([x, x * 2], -1),
 "stack": lambda x: tracec.stack([x, x * 2]).sum(0),
 "pad": lambda x: F.pad(x, (1, 2)),
 "repeat": lambda x: x.repeat(2, 1),
 "mse": lambda x: F.mse_loss(x, x.detach() * 0.5),
 "ce": lambda x: F.cross_entropy(x, tracec.zeros(x.shape[0], dtype=tracec.long)),
 "l1": lambda x: F.l1_loss(x, x.detach() * 0.5),
 "sm_l1": lambda x: F.smooth_l1_loss(x, x.detach() * 0.5),
 "bce": lambda x: F.binary_cross_entropy_with_logits(x, tracec.ones_like(x) * 0.3),
 "kl": lambda x: F.kl_div(F.log_softmax(x, -1), F.softmax(x.detach(), -1), reduction="batchmean"),
 "nll": lambda x: F.nll_loss(F.log_softmax(x, -1), tracec.zeros(x.shape[0], dtype=tracec.long)),
 "group_norm": lambda x: F.group_norm(x.unsqueeze(0), 1),
 "rms_norm": lambda x: F.rms_norm(x, (x.shape[-1],)),
 "normalize": lambda x: F.normalize(x, dim=-1),
 "cosine": lambda x: F.cosine_similarity(x, x.flip(0), dim=-1),
 "avg_pool1d": lambda x: F.avg_pool1d(x.unsqueeze(0), 2),
 "adaptive_avg": lambda x: F.adaptive_avg_pool1d(x.unsqueeze(0), 1),
 "interp": lambda x: F.interpolate(x.unsqueeze(0), scale_factor=2, mode="linear"),
 "triu": lambda x: x.triu(),
 "tril": lambda x: x.tril(-1),
 "diag": lambda x: (x @ x.t()).diagonal(),
 "unfold": lambda x: x.unfold(1, 2, 1).sum(-1),
 "roll": lambda x: x.roll(1, -1),
 "where": lambda x: tracec.where(x > 0, x, x * 0.1),
 "prod": lambda x: x.prod(-1),
 "cumprod": lambda x: x.cumprod(-1),
 "sort": lambda x: x.sort(-1).values,
 "topk": lambda x: x.topk(2, -1).values,
 "gather": lambda x: x.gather(1, tracec.zeros(x.shape[0], 1, dtype=tracec.long)),
 "index_select": lambda x: x.index_select(0, tracec.arange(x.shape[0]).flip(0)),
 "masked_fill": lambda x: x.masked_fill(x > 0.5, 0.0),
 "softplus": lambda x: F.softplus(x),
 "dropout_eval": lambda x: F.dropout(x, 0.5, training=False),
 "batchnorm": lambda x: F.batch_norm(x, None, None, training=True),
 "einsum": lambda x: tracec.einsum("ij,ij->i", x, x),
 "chunk": lambda x: x.chunk(2, -1)[0] * 3,
 "split": lambda x: x.split(2, -1)[-1] * 3,
 "var_mean": lambda x: tracec.var_mean(x, 0)[0],
}


@pytest.mark.parametrize("name", list(OPS))
def test_tape_gradient_under_symbolic_sizes(name):
    op = OPS[name]

    def vjp(x, g):
        with tracec.enable_grad():
            x = x.detach().requires_grad_()
            return tracec.autograd.grad(op(x), (x,), g)[0]

    cf = tracec.compile(vjp, dynamic=True, backend="interp")
    rng = np.random.default_rng(0)
    for m, n in ((4, 8), (6, 10), (3, 12)):
        x = tracec.from_numpy(rng.standard_normal((m, n)).astype(np.float32))
        g = tracec.from_numpy(rng.standard_normal(tuple(op(x).shape)).astype(np.float32))
        got, want = cf(x, g), vjp(x, g)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=f"{name} at {(m, n)}")
