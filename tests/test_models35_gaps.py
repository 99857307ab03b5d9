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


def _grid_fn(lib):
    import math

    def f(t, x, step_size):
        # torchdiffeq's _grid_constructor_from_step_size
        niters = lib.ceil((t[-1] - t[0]) / step_size + 1).item()
        grid = lib.arange(0, niters, dtype=t.dtype) * step_size + t[0]
        grid[-1] = t[-1]
        rows = math.floor(x.abs().sum().item())
        return grid, x[:rows].sum(0)
    return f


def test_compiled_ceil_floor_of_item_speculated_per_value():
    x0 = np.arange(12, dtype=np.float32).reshape(6, 2) / 10
    cases = [([0.0, 0.5], 0.25, 1.0), ([0.0, 0.5], 0.25, 0.5), ([0.0, 0.55], 0.25, 1.0),
             ([0.0, 1.0], 0.3, 0.2), ([0.0, 0.5], 0.25, 1.0)]
    ref = _grid_fn(torch)
    step = tracec.compile(_grid_fn(tracec))
    for t, step_size, scale in cases:
        want = ref(torch.tensor(t), torch.tensor(x0 * scale), step_size)
        got = step(tracec.tensor(t), tracec.tensor(x0 * scale), step_size)
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape), (t, step_size, scale)
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-7)
