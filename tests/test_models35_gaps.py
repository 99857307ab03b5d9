"""Gaps the public programs of ``tests/programs/models35`` found, each
against torch: a compiled training step whose graph holds a custom
``autograd.Function`` (VICReg's FullGatherLayer) and an in-place op that
overwrites a tensor its own backward saved (``off_diagonal(cov).pow_(2)``)
replayed the first call's saved values as constants on later calls."""
import numpy as np
import torch

import tracec


def _step_fn(lib, w, tuple_out):
    class Gather(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x.clone(),) if tuple_out else x.clone()

        @staticmethod
        def backward(ctx, *grads):
            return lib.stack(grads)[0]

    def step(x):
        w.grad = None
        z = Gather.apply(x @ w)
        if tuple_out:
            z = lib.cat(z, dim=0)
        z = z - z.mean(dim=0)
        cov = z.T @ z / 3
        loss = cov.pow_(2).sum()
        loss.backward()
        with lib.no_grad():
            w.add_(w.grad, alpha=-0.01)
        return loss
    return step


def test_compiled_custom_function_then_inplace_pow_matches_torch_each_call():
    r = np.random.default_rng(0)
    w0 = r.normal(0, 0.5, (3, 3)).astype(np.float32)
    x0 = r.normal(0, 1, (4, 3)).astype(np.float32)
    for tuple_out in (False, True):
        wt = torch.nn.Parameter(torch.tensor(w0))
        ref = _step_fn(torch, wt, tuple_out)
        want = [(ref(torch.tensor(x0)).item(), wt.grad.numpy().copy()) for _ in range(3)]
        wc = tracec.nn.Parameter(tracec.tensor(w0))
        step = tracec.compile(_step_fn(tracec, wc, tuple_out))
        for i, (loss, grad) in enumerate(want):
            got = step(tracec.tensor(x0)).item()
            np.testing.assert_allclose(got, loss, rtol=1e-5, err_msg=f"call {i}")
            np.testing.assert_allclose(wc.grad.numpy(), grad, rtol=1e-4, atol=1e-5,
                                       err_msg=f"call {i}")
        np.testing.assert_allclose(wc.detach().numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)
