"""``F.scaled_dot_product_attention``, ``F.multi_head_attention_forward`` and
``nn.MultiheadAttention`` against PyTorch with copied weights: outputs,
attention weights, input gradients and every parameter's gradient, for every
option, in float32 and float64; bad masks raise naming both shapes."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tests.nn_helpers import close, compare_params_grads, copy_weights, tol

DTYPES = [np.float32, np.float64]
E, H, L, S_, N = 8, 2, 5, 4, 3        # embed, heads, target len, source len, batch


def _pair(a, grad=True):
    return (tracec.tensor(a.copy(), requires_grad=grad and a.dtype.kind == "f"),
            torch.tensor(a.copy(), requires_grad=grad and a.dtype.kind == "f"))


def _mask_pair(a):
    return tracec.tensor(a.copy()), torch.tensor(a.copy())


# --- scaled_dot_product_attention ----------------------------------------------------------

SDPA_CASES = [
    dict(),
    dict(is_causal=True),
    dict(mask="bool"),
    dict(mask="float"),
    dict(mask="bool4d"),
    dict(scale=0.3),
    dict(scale=0.0),
    dict(is_causal=True, scale=2.0),
    dict(gqa=True),
    dict(gqa=True, is_causal=True),
    dict(unbatched=True, mask="float"),
    dict(fully_masked=True),
]


def _sdpa_inputs(rng, dtype, case):
    if case.get("unbatched"):
        q, k, v = (rng.standard_normal(s).astype(dtype) for s in ((L, 4), (S_, 4), (S_, 6)))
    else:
        hk = 1 if case.get("gqa") else H
        q = rng.standard_normal((N, H * (2 if case.get("gqa") else 1), L, 4)).astype(dtype)
        k = rng.standard_normal((N, hk, S_, 4)).astype(dtype)
        v = rng.standard_normal((N, hk, S_, 6)).astype(dtype)
    mask = None
    kind = case.get("mask")
    if kind in ("bool", "bool4d") or case.get("fully_masked"):
        shape = (N, 1, L, S_) if kind == "bool4d" else (L, S_)
        mask = rng.random(shape) < 0.7
        mask[..., 0] = True
        if case.get("fully_masked"):
            mask[1] = False
    elif kind == "float":
        mask = rng.standard_normal((L, S_)).astype(dtype)
        mask[0, 1] = -np.inf
    return q, k, v, mask


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SDPA_CASES, ids=lambda c: "-".join(map(str, c)) or "plain")
def test_sdpa(dtype, case):
    rng = np.random.default_rng(0)
    q, k, v, mask = _sdpa_inputs(rng, dtype, case)
    kw = dict(is_causal=case.get("is_causal", False))
    if "scale" in case:
        kw["scale"] = case["scale"]
    if case.get("gqa"):
        kw["enable_gqa"] = True
    (q1, q2), (k1, k2), (v1, v2) = _pair(q), _pair(k), _pair(v)
    m1, m2 = (None, None) if mask is None else _mask_pair(mask)
    y1 = F.scaled_dot_product_attention(q1, k1, v1, attn_mask=m1, **kw)
    y2 = torch.nn.functional.scaled_dot_product_attention(q2, k2, v2, attn_mask=m2, **kw)
    assert y1.shape == tuple(y2.shape) and y1.dtype.name == str(y2.dtype)[6:]
    close(y1, y2, **tol(dtype, 5))
    g = rng.standard_normal(y2.shape).astype(dtype)
    y1.backward(tracec.tensor(g))
    y2.backward(torch.tensor(g))
    for a, b in ((q1, q2), (k1, k2), (v1, v2)):
        close(a.grad, b.grad, **tol(dtype, 10))


def test_sdpa_float32_mask_with_float64_query():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    m = rng.standard_normal((3, 3)).astype(np.float32)
    y1 = F.scaled_dot_product_attention(tracec.tensor(q), tracec.tensor(k), tracec.tensor(v),
                                        attn_mask=tracec.tensor(m))
    y2 = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=torch.tensor(m))
    assert y1.dtype is tracec.float64
    close(y1, y2, **tol(np.float32))


def test_sdpa_dropout():
    """dropout_p: the mask comes from tracec's generator (values differ from
    torch's), so check what it must satisfy: zero where dropped, scaled by
    1/(1-p), reproducible under the same seed, every row when p=1 zero."""
    rng = np.random.default_rng(2)
    q, k, v = (tracec.tensor(rng.standard_normal((2, 2, 5, 4))) for _ in range(3))
    eye = tracec.tensor(np.broadcast_to(np.eye(5), (2, 2, 5, 5)).copy())
    # value = identity reads the attention weights back out.
    plain = F.scaled_dot_product_attention(q, k, eye)
    tracec.manual_seed(3)
    a = F.scaled_dot_product_attention(q, k, eye, dropout_p=0.4)
    tracec.manual_seed(3)
    b = F.scaled_dot_product_attention(q, k, eye, dropout_p=0.4)
    close(a, b, atol=0, rtol=0)
    a, plain = a.numpy(), plain.numpy()
    kept = a != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(a[kept], plain[kept] / 0.6, rtol=1e-12)
    assert not F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy().any()


def test_sdpa_errors_like_torch():
    q, k, v = (tracec.randn(2, 3, 4) for _ in range(3))
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when "
                                           "is_causal=True"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=tracec.zeros(3, 3), is_causal=True)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(RuntimeError, match="attn_mask dtype to be bool or float"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=tracec.zeros(3, 3, dtype=tracec.int64))
    with pytest.raises(RuntimeError, match="at least 2 dimensional"):
        F.scaled_dot_product_attention(tracec.randn(4), tracec.randn(4), tracec.randn(4))
    with pytest.raises(RuntimeError, match="must divide the number of heads"):
        F.scaled_dot_product_attention(tracec.randn(1, 3, 2, 4), tracec.randn(1, 2, 2, 4),
                                       tracec.randn(1, 2, 2, 4), enable_gqa=True)
    with pytest.raises(ValueError, match="dropout probability"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)


# --- MultiheadAttention ----------------------------------------------------------------------

MHA_CASES = [
    dict(),
    dict(batch_first=True),
    dict(bias=False),
    dict(add_bias_kv=True),
    dict(add_zero_attn=True),
    dict(add_bias_kv=True, add_zero_attn=True, mask="bool2d", kpm="bool"),
    dict(kdim=6, vdim=3, qkv="distinct"),
    dict(kdim=6, vdim=6, qkv="kv", batch_first=True),
    dict(qkv="kv"),
    dict(qkv="distinct"),
    dict(mask="bool2d"),
    dict(mask="float2d"),
    dict(mask="float3d"),
    dict(mask="bool3d", batch_first=True),
    dict(kpm="bool"),
    dict(kpm="float"),
    dict(mask="float2d", kpm="float"),
    dict(need_weights=False),
    dict(need_weights=False, mask="bool2d", kpm="bool"),
    dict(need_weights=False, mask="float3d", batch_first=True),
    dict(average_attn_weights=False),
    dict(average_attn_weights=False, mask="bool2d"),
    dict(causal=True),
    dict(causal=True, need_weights=False),
    dict(causal=True, need_weights=False, kpm="bool"),
    dict(unbatched=True),
    dict(unbatched=True, mask="float3d", kpm="bool", need_weights=False),
    dict(unbatched=True, average_attn_weights=False, mask="bool2d"),
    dict(dropout=0.5, eval=True),
]


def _mha_pair(case, dtype):
    kw = {k: case[k] for k in ("bias", "add_bias_kv", "add_zero_attn", "kdim", "vdim",
                               "batch_first", "dropout") if k in case}
    torch.manual_seed(0)
    m2 = torch.nn.MultiheadAttention(E, H, **kw).to(torch.float64 if dtype == np.float64
                                                       else torch.float32)
    m1 = nn.MultiheadAttention(E, H, **kw).to(tracec.float64 if dtype == np.float64
                                                else tracec.float32)
    assert list(m1.state_dict()) == list(m2.state_dict())
    copy_weights(m1, m2)
    if case.get("eval"):
        m1.eval()
        m2.eval()
    return m1, m2


def _mha_inputs(rng, case, dtype):
    unb = case.get("unbatched")
    bf = case.get("batch_first") and not unb

    def shape(length, dim):
        if unb:
            return (length, dim)
        return (N, length, dim) if bf else (length, N, dim)

    kd, vd = case.get("kdim", E), case.get("vdim", E)
    q = rng.standard_normal(shape(L, E)).astype(dtype)
    qkv = case.get("qkv", "self")
    src = L if qkv == "self" else S_
    k = rng.standard_normal(shape(src, kd)).astype(dtype)
    v = rng.standard_normal(shape(src, vd)).astype(dtype)
    masks = {}
    kind = case.get("mask")
    if case.get("causal"):
        m = np.triu(np.full((L, src), -np.inf), 1).astype(dtype)
        masks["attn_mask"] = m
    elif kind:
        shp = (L, src) if kind.endswith("2d") else ((1 if unb else N) * H, L, src)
        if kind.startswith("bool"):
            m = rng.random(shp) < 0.3
            m[..., 0] = False          # no fully masked row (NaN in need_weights)
        else:
            m = rng.standard_normal(shp).astype(dtype)
        masks["attn_mask"] = m
    if case.get("kpm"):
        shp = (src,) if unb else (N, src)
        p = rng.random(shp) < 0.3
        p[..., 0], p[..., -1] = False, True
        masks["key_padding_mask"] = p if case["kpm"] == "bool" else \
            np.where(p, -np.inf, 0.0).astype(dtype)
    return q, k, v, qkv, masks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", MHA_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in
                                                                   c.items()) or "plain")
def test_multihead_attention(dtype, case):
    rng = np.random.default_rng(0)
    m1, m2 = _mha_pair(case, dtype)
    q, k, v, qkv, masks = _mha_inputs(rng, case, dtype)
    (q1, q2) = _pair(q)
    if qkv == "self":
        k1, k2, v1, v2 = q1, q2, q1, q2
    else:
        k1, k2 = _pair(k)
        v1, v2 = (k1, k2) if qkv == "kv" else _pair(v)
    kw = {name: _mask_pair(a) for name, a in masks.items()}
    opts = {o: case[o] for o in ("need_weights", "average_attn_weights") if o in case}
    if case.get("causal"):
        opts["is_causal"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o1, w1 = m1(q1, k1, v1, **{n: p[0] for n, p in kw.items()}, **opts)
        o2, w2 = m2(q2, k2, v2, **{n: p[1] for n, p in kw.items()}, **opts)
    assert o1.shape == tuple(o2.shape)
    close(o1, o2, **tol(dtype, 5))
    assert (w1 is None) == (w2 is None)
    loss1 = (o1 * tracec.tensor(g := rng.standard_normal(o2.shape).astype(dtype))).sum()
    loss2 = (o2 * torch.tensor(g)).sum()
    if w2 is not None:
        assert w1.shape == tuple(w2.shape)
        close(w1, w2, **tol(dtype, 5))
        g = rng.standard_normal(w2.shape).astype(dtype)
        loss1 = loss1 + (w1 * tracec.tensor(g)).sum()
        loss2 = loss2 + (w2 * torch.tensor(g)).sum()
    loss1.backward()
    loss2.backward()
    for a, b in ((q1, q2), (k1, k2), (v1, v2)):
        close(a.grad, b.grad, **tol(dtype, 10))
    compare_params_grads(m1, m2, **tol(dtype, 10))


def test_mha_fully_masked_rows_like_torch():
    """A query row with every key masked: NaN with need_weights=True (plain
    softmax), zeros with need_weights=False (SDPA's safe softmax)."""
    m1, m2 = _mha_pair({}, np.float64)
    x = np.random.default_rng(0).standard_normal((L, N, E))
    mask = np.zeros((L, L), bool)
    mask[2] = True
    for need in (True, False):
        o1, _ = m1(*[tracec.tensor(x)] * 3, attn_mask=tracec.tensor(mask), need_weights=need)
        o2, _ = m2(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(mask), need_weights=need)
        close(o1, o2, equal_nan=True, **tol(np.float64))


def test_mha_eval_no_grad_matches_torch_fast_path():
    """In eval mode without grad PyTorch takes its native fast path
    (batch-first self-attention); the values are the same."""
    m1, m2 = _mha_pair(dict(batch_first=True, eval=True), np.float32)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((N, L, E)).astype(np.float32)
    kpm = rng.random((N, L)) < 0.3
    kpm[:, 0] = False
    with tracec.no_grad(), torch.no_grad():
        o1, w1 = m1(*[tracec.tensor(x)] * 3, key_padding_mask=tracec.tensor(kpm))
        o2, w2 = m2(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(kpm))
    close(o1, o2, **tol(np.float32, 5))
    close(w1, w2, **tol(np.float32, 5))


def test_mha_dropout_in_training_is_random_and_seeded():
    """Training-mode dropout of the attention weights: reproducible under a
    seed; kept weights are the eval-mode ones scaled by 1/(1-p)."""
    m1, _ = _mha_pair(dict(dropout=0.5), np.float64)
    x = tracec.tensor(np.random.default_rng(0).standard_normal((L, N, E)))
    tracec.manual_seed(1)
    a, wa = m1(x, x, x, average_attn_weights=False)
    tracec.manual_seed(1)
    b, _ = m1(x, x, x, average_attn_weights=False)
    close(a, b, atol=0, rtol=0)
    m1.eval()
    _, we = m1(x, x, x, average_attn_weights=False)
    wa, we = wa.detach().numpy(), we.detach().numpy()
    kept = wa != 0
    assert 0.2 < kept.mean() < 0.8
    np.testing.assert_allclose(wa[kept], we[kept] / 0.5, rtol=1e-12)


def test_mha_init_like_torch():
    """Same distributions as PyTorch: xavier_uniform_ bound, zero biases,
    xavier_normal_ bias_k/bias_v."""
    tracec.manual_seed(0)
    m = nn.MultiheadAttention(64, 4, add_bias_kv=True)
    bound = math.sqrt(6.0 / (64 + 3 * 64))
    w = m.in_proj_weight.detach().numpy()
    assert w.shape == (192, 64) and np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not m.in_proj_bias.detach().numpy().any()
    assert not m.out_proj.bias.detach().numpy().any()
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(m.out_proj, nn.Linear)
    assert m.bias_k.shape == (1, 1, 64) and m.bias_k.detach().numpy().std() > 0
    m = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, bias=False)
    assert [(n, p.shape) for n, p in m.named_parameters()] == [
        ("q_proj_weight", (8, 8)), ("k_proj_weight", (8, 5)), ("v_proj_weight", (8, 3)),
        ("out_proj.weight", (8, 8))]
    assert m.in_proj_weight is None and m.bias_k is None
    from tracec.nn.modules.activation import MultiheadAttention
    assert MultiheadAttention is nn.MultiheadAttention


@pytest.mark.parametrize("bad,msg", [
    (np.zeros((4, 5), bool), r"The shape of the 2D attn_mask is \(4, 5\), but should be "
                             r"\(5, 5\)\."),
    (np.zeros((3, 5, 5), np.float32), r"The shape of the 3D attn_mask is \(3, 5, 5\), but "
                                      r"should be \(6, 5, 5\)\."),
    (np.zeros((1, 1, 5, 5), bool), r"expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                   r"4-D"),
])
def test_mha_bad_mask_shapes(bad, msg):
    m1, m2 = _mha_pair({}, np.float32)
    x = np.zeros((L, N, E), np.float32)
    with pytest.raises((RuntimeError, AssertionError)) as e2:
        m2(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(bad))
    with pytest.raises((RuntimeError, AssertionError), match=msg) as e1:
        m1(*[tracec.tensor(x)] * 3, attn_mask=tracec.tensor(bad))
    assert e1.type is e2.type


def test_mha_bad_key_padding_mask_and_inputs():
    m1, _ = _mha_pair({}, np.float32)
    x = tracec.zeros(L, N, E)
    with pytest.raises(AssertionError, match=r"key_padded_mask.shape\[1\] to be 5, but got 4"):
        m1(x, x, x, key_padding_mask=tracec.zeros(N, 4, dtype=tracec.bool))
    with pytest.raises(AssertionError, match="only bool and floating types of key_padding_mask"):
        m1(x, x, x, key_padding_mask=tracec.zeros(N, L, dtype=tracec.int64))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m1(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 8, but got 6"):
        y = tracec.zeros(L, N, 6)
        m1(y, y, y)
    with pytest.raises(AssertionError, match="query should be unbatched 2D or batched 3D"):
        y = tracec.zeros(1, L, N, E)
        m1(y, y, y)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(7, 2)


def test_mismatched_mask_types_warn_like_torch():
    m1, _ = _mha_pair({}, np.float32)
    x = tracec.zeros(L, N, E)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "
                                         "attn_mask is deprecated"):
        m1(x, x, x, key_padding_mask=tracec.zeros(N, L, dtype=tracec.bool),
           attn_mask=tracec.zeros(L, L))


def test_multi_head_attention_forward_functional():
    """``F.multi_head_attention_forward`` called directly (static_k/static_v
    too), against torch's."""
    rng = np.random.default_rng(5)
    _, m2 = _mha_pair({}, np.float64)
    sd = {k: v.detach().numpy() for k, v in m2.state_dict().items()}
    q = rng.standard_normal((L, N, E))
    sk = rng.standard_normal((N * H, 3, E // H))
    sv = rng.standard_normal((N * H, 3, E // H))

    def run(lib, f):
        t = [lib.tensor(a) for a in (q, sd["in_proj_weight"], sd["in_proj_bias"],
                                     sd["out_proj.weight"], sd["out_proj.bias"], sk, sv)]
        return f(t[0], t[0], t[0], E, H, t[1], t[2], None, None, False, 0.0, t[3], t[4],
                 static_k=t[5], static_v=t[6])

    o1, w1 = run(tracec, F.multi_head_attention_forward)
    o2, w2 = run(torch, torch.nn.functional.multi_head_attention_forward)
    close(o1, o2, **tol(np.float64))
    close(w1, w2, **tol(np.float64))


def test_merge_masks_like_torch():
    m1, m2 = _mha_pair(dict(batch_first=True), np.float64)
    rng = np.random.default_rng(6)
    q = rng.standard_normal((N, L, E))
    am = rng.standard_normal((L, L))
    am3 = rng.standard_normal((N * H, L, L))
    kpm = np.where(rng.random((N, L)) < 0.3, -np.inf, 0.0)
    for a, k in ((am, None), (None, kpm), (am, kpm), (am3, kpm), (None, None)):
        t = [None if v is None else tracec.tensor(v) for v in (a, k)]
        r1 = m1.merge_masks(t[0], t[1], tracec.tensor(q))
        t = [None if v is None else torch.tensor(v) for v in (a, k)]
        r2 = m2.merge_masks(t[0], t[1], torch.tensor(q))
        assert r1[1] == r2[1]
        if r2[0] is None:
            assert r1[0] is None
        else:
            close(r1[0], r2[0], atol=0, rtol=0)


def test_sdpa_without_grad_equals_the_grad_path_bit_for_bit():
    # Eagerly without grad, rows with a live score skip _safe_softmax's two
    # wheres (a plain softmax): the same bits as the path with grad, for
    # rows fully masked (zeros) and not, and PyTorch's values.
    import numpy as np
    import torch as real_torch
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 2, 5, 4)).astype(np.float32) for _ in range(3))
    mask = np.ones((5, 5), bool)
    mask[2] = False                      # a row that attends to nothing
    for m in (None, mask):
        args = [tracec.tensor(a) for a in (q, k, v)]
        mt = None if m is None else tracec.tensor(m)
        with tracec.no_grad():
            fast = tracec.nn.functional.scaled_dot_product_attention(*args, attn_mask=mt)
        slow = tracec.nn.functional.scaled_dot_product_attention(
            *[a.requires_grad_() for a in args], attn_mask=mt)
        np.testing.assert_array_equal(fast.numpy(), slow.detach().numpy())
        want = real_torch.nn.functional.scaled_dot_product_attention(
            *[real_torch.tensor(a) for a in (q, k, v)],
            attn_mask=None if m is None else real_torch.tensor(m))
        np.testing.assert_allclose(fast.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
