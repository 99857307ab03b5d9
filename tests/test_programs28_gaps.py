"""What programs28 found missing, against PyTorch 2.13:

* ``torch._inductor.config.fallback_random = True`` (set by programs that
  want a compiled step's random numbers to be eager's: Inductor then calls
  the eager random kernels) was recorded and ignored: a compiled step drew
  from tracec's counter-based stream, and a Growing-NCA update's
  stochastic mask (``torch.rand(...) > fire_rate``) came out unlike the
  eager step's, silently.  With the flag set, a compiled function that
  draws random numbers now draws PyTorch's eager numbers while it is
  traced and runs eagerly from then on for that signature (saying so);
  one that draws nothing still compiles."""
import warnings

import numpy as np
import pytest
import torch

import tracec
from tracec import torch_rng


@pytest.fixture
def fallback_random():
    tracec._inductor.config.fallback_random = True
    try:
        yield
    finally:
        tracec._inductor.config.fallback_random = False


def _nca_step(lib, x, w):
    """A cellular-automaton update: a stochastic mask, dropout, a normal
    draw and a Bernoulli draw, then a loss."""
    mask = (lib.rand([x.size(0), x.size(1), 1]) > 0.5).float()
    h = lib.nn.functional.dropout(x @ w, 0.25) * mask
    noise = lib.randn(x.shape[0], w.shape[1]) * 0.1 + lib.bernoulli(lib.full((x.shape[0], 1), 0.3))
    return ((h.sum(1) + noise) ** 2).mean()


def _torch_losses(x, w, calls):
    torch.manual_seed(3)
    tx, tw = torch.tensor(x), torch.tensor(w, requires_grad=True)
    out = []
    for _ in range(calls):
        loss = _nca_step(torch, tx, tw)
        loss.backward()
        out.append((loss.item(), tw.grad.numpy().copy()))
        tw.grad = None
    return out


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_fallback_random_compiled_draws_are_torchs(fallback_random, backend):
    rng = np.random.RandomState(0)
    x = rng.randn(4, 5, 3).astype(np.float32)
    w = rng.randn(3, 6).astype(np.float32)
    want = _torch_losses(x, w, 3)
    tw = tracec.tensor(w, requires_grad=True)

    def step(x):
        loss = _nca_step(tracec, x, tw)
        loss.backward()
        return loss

    f = tracec.compile(step, backend=backend)
    tracec.manual_seed(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for loss_t, grad_t in want:
            loss = f(tracec.tensor(x))
            np.testing.assert_allclose(loss.item(), loss_t, rtol=1e-5)
            np.testing.assert_allclose(tw.grad.numpy(), grad_t, rtol=1e-5, atol=1e-6)
            tw.grad = None
    msgs = [str(c.message) for c in caught if "running eagerly" in str(c.message)]
    assert len(msgs) == 1 and "fallback_random" in msgs[0], msgs


def test_fallback_random_dynamic_sizes_draw_torchs(fallback_random):
    """A symbolic trace would draw from the counter-based stream: with the
    flag set the trace is static, and each size's draws are PyTorch's."""
    def f(lib, x):
        return x * lib.rand(x.size(0), 1) + lib.randn(x.shape).mul(0.1)

    torch.manual_seed(1)
    want = [f(torch, torch.ones(n, 2)).numpy() for n in (3, 4, 5)]
    cf = tracec.compile(lambda x: f(tracec, x), dynamic=True)
    tracec.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [cf(tracec.ones(n, 2)).numpy() for n in (3, 4, 5)]
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g, e)


def test_fallback_random_without_draws_still_compiles(fallback_random):
    f = tracec.compile(lambda x: (x * 2).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(tracec.ones(3)).item() == 6.0
        assert f(tracec.ones(3)).item() == 6.0
    assert len(f._cache) == 1 and not f._eager_keys


def test_fallback_random_flag_reads_back_and_resets():
    cfg = tracec._inductor.config
    assert cfg.fallback_random is False and torch_rng.FALLBACK_RANDOM[0] is False
    cfg.fallback_random = True
    try:
        assert cfg.fallback_random is True and torch_rng.FALLBACK_RANDOM[0] is True
    finally:
        cfg.fallback_random = False
    assert torch_rng.FALLBACK_RANDOM[0] is False
    # (the default: compiled draws come from the counter-based stream, as
    # torch.compile's Philox kernels: not eager's)
    cf = tracec.compile(lambda x: x + tracec.rand(4))
    tracec.manual_seed(0)
    got = cf(tracec.zeros(4)).numpy()
    torch.manual_seed(0)
    assert not np.array_equal(got, torch.rand(4).numpy())
