"""What programs31 found missing, against PyTorch 2.13:

* ``F.scaled_dot_product_attention``'s output layout.  PyTorch's CPU flash
  kernel (4-D inputs, unit last strides, no dropout, flash enabled)
  allocates its output in the query's memory layout, so the SDPA
  tutorial's ``y.transpose(1, 2).view(B, -1, H * E)`` (a query that is a
  projection ``view``-ed into heads and transposed) works; tracec returned
  a contiguous output and that ``view`` raised.  The math kernel (dropout,
  3-D inputs, ``sdpa_kernel(SDPBackend.MATH)``, a non-unit last stride)
  still gives a contiguous result, as PyTorch's does."""
import numpy as np
import pytest
import torch

import tracec

B, H, L, E = 2, 4, 6, 8
# physical orders of the logical (B, H, L, E) dims
LAYOUTS = {"BHLE": (0, 1, 2, 3), "BLHE": (0, 2, 1, 3), "HBLE": (1, 0, 2, 3),
           "LBHE": (2, 0, 1, 3), "BHEL": (0, 1, 3, 2)}


def _laid_out(lib, arr, perm):
    """``arr`` (B, H, L, E) as a ``lib`` tensor stored in the order ``perm``."""
    inv = [perm.index(d) for d in range(4)]
    return lib.tensor(np.ascontiguousarray(arr.transpose(perm))).permute(*inv)


def _inputs(perm, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randn(B, H, L, E).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"dropout_p": 0.0, "scale": 0.3},
                                {"math": True}], ids=["plain", "causal", "scale", "math"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sdpa_output_follows_query_layout(layout, kw):
    perm, arrays = LAYOUTS[layout], _inputs(LAYOUTS[layout])
    kw = dict(kw)
    math = kw.pop("math", False)
    outs = []
    for lib in (torch, tracec):
        q, k, v = (_laid_out(lib, a, perm) for a in arrays)
        if math:
            with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.MATH):
                o = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
        else:
            o = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
        outs.append(o)
    want, got = outs
    assert got.stride() == want.stride()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sdpa_dropout_and_3d_stay_contiguous():
    q, k, v = (_laid_out(tracec, a, LAYOUTS["BLHE"]) for a in _inputs(None))
    F = tracec.nn.functional
    assert F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).is_contiguous()
    q3 = tracec.rand(B, E, L).transpose(1, 2)
    assert F.scaled_dot_product_attention(q3, q3, q3).is_contiguous()


def _heads_attention(lib, w_attn, w_proj, x):
    """The SDPA tutorial's CausalSelfAttention.forward, functional."""
    F = lib.nn.functional
    qkv = F.linear(x, w_attn)
    b, t, c3 = qkv.shape
    hd = c3 // (H * 3)
    q, k, v = (s.view(b, -1, H, hd).transpose(1, 2) for s in qkv.chunk(3, -1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(y.transpose(1, 2).view(b, -1, H * hd), w_proj)


@pytest.fixture(scope="module")
def heads_compiled():
    return tracec.compile(lambda w1, w2, x: _heads_attention(tracec, w1, w2, x).square().mean())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_sdpa_tutorial_heads_view_matches_torch(compiled, heads_compiled):
    rng = np.random.RandomState(1)
    arrays = [rng.randn(3 * H * 4, H * 4).astype(np.float32) * 0.3,
              rng.randn(H * 4, H * 4).astype(np.float32) * 0.3,
              rng.randn(B, L, H * 4).astype(np.float32)]
    tw = [torch.tensor(a, requires_grad=True) for a in arrays]
    _heads_attention(torch, *tw).square().mean().backward()
    rw = [tracec.tensor(a, requires_grad=True) for a in arrays]
    f = heads_compiled if compiled else (lambda *a: _heads_attention(tracec, *a).square().mean())
    loss = f(*rw)
    loss.backward()
    want = _heads_attention(torch, *[t.detach() for t in tw]).square().mean()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    for t, r in zip(tw, rw):
        np.testing.assert_allclose(r.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)
