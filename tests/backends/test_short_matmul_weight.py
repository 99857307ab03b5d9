"""A weight's transpose read by several short matmuls (an RNN's
``h @ W.T`` once per time step) is materialized once and each product runs
the unpacked small-M kernel (tracec/backends/cpu/lower.py
``_kept_for_short_matmuls``, gemm_small.py); equal to eager, odd sizes
included; one product alone still reads the weight transposed."""
import numpy as np
import pytest

import tracec


def _defined(comp, kernel: str) -> bool:
    """Whether the compiled code defines a kernel named ``kernel``."""
    return any(line.startswith("define") and f"_{kernel}" in line
               for line in comp.ir("llvm").splitlines())


def _rnn(T, W):
    H = W.shape[1]

    def f(xs, h):
        for t in range(T):
            h = (xs[t] + h @ W.T).tanh()[:, :H]
        return h
    return f


@pytest.mark.parametrize("B,H,G,dtype", [(20, 24, 96, tracec.float32),
                                         (7, 29, 45, tracec.float32),
                                         (5, 19, 47, tracec.float64)])
def test_rnn_loop_equals_eager(B, H, G, dtype):
    tracec.manual_seed(0)
    T = 4
    W = tracec.randn(G, H, dtype=dtype) * 0.3
    f = _rnn(T, W)
    xs, h = tracec.randn(T, B, G, dtype=dtype), tracec.randn(B, H, dtype=dtype)
    comp = tracec.compile(f, backend="cpu")
    tol = 1e-5 if dtype is tracec.float32 else 1e-12
    np.testing.assert_allclose(comp(xs, h).numpy(), f(xs, h).numpy(), rtol=tol, atol=tol)
    assert _defined(comp, "matmul_small") and _defined(comp, "transpose")


def test_single_product_reads_weight_transposed():
    tracec.manual_seed(0)
    W = tracec.randn(64, 16)
    f = lambda h: h @ W.T  # noqa: E731
    h = tracec.randn(8, 16)
    comp = tracec.compile(f, backend="cpu")
    np.testing.assert_allclose(comp(h).numpy(), f(h).numpy(), rtol=1e-5, atol=1e-5)
    assert not _defined(comp, "transpose")


def test_lstm_step_with_grads_equals_eager():
    """A compiled LSTM step (forward, backward, SGD) over a few time steps:
    nn.LSTM's recurrence is one rnn_scan (and one rnn_scan_grad) kernel,
    not a short matmul per step."""
    import tracec.nn as nn

    def make():
        tracec.manual_seed(3)
        lstm = nn.LSTM(10, 33, 1)
        return lstm, tracec.optim.SGD(lstm.parameters(), lr=0.1)

    def step_fn(lstm, opt):
        def step(x):
            opt.zero_grad()
            out, _ = lstm(x)
            loss = (out * out).mean()
            loss.backward()
            opt.step()
            return loss
        return step
    le, oe = make()
    lc, oc = make()
    eager, comp = step_fn(le, oe), tracec.compile(step_fn(lc, oc), backend="cpu")
    x = tracec.randn(5, 6, 10)
    for _ in range(3):
        np.testing.assert_allclose(comp(x).item(), eager(x).item(), rtol=1e-5)
    for a, b in zip(le.parameters(), lc.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert _defined(comp, "rnn_scan") and _defined(comp, "rnn_scan_grad")


@pytest.mark.parametrize("M", [1, 9, 13, 20, 25, 32])
@pytest.mark.parametrize("dtype,N", [(np.float32, 70), (np.float64, 37)])
def test_small_m_row_tiles(M, dtype, N):
    """Short products (gemm_small): balanced row tiles for every M up to
    its limit, a ragged last column panel, A read transposed too."""
    rng = np.random.default_rng(M)
    K = 129
    a = tracec.tensor(rng.standard_normal((M, K)).astype(dtype))
    at = tracec.tensor(rng.standard_normal((K, M)).astype(dtype))
    b = tracec.tensor(rng.standard_normal((K, N)).astype(dtype))
    f = lambda a, at, b: (a @ b, at.T @ b)  # noqa: E731
    comp = tracec.compile(f, backend="cpu")
    tol = 1e-4 if dtype is np.float32 else 1e-11
    for got, want in zip(comp(a, at, b), f(a, at, b)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    if M * N * K >= 16 ** 3:
        assert _defined(comp, "matmul_small")
