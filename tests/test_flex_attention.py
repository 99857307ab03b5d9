"""``torch.nn.attention.flex_attention`` (tracec/nn/attention/flex_attention.py)
against torch 2.13: block masks (their block lists, sparsity, dense form and
printing), flex_attention with score_mod / mask_mod / GQA / scale /
log-sum-exp, fully masked rows, gradients (torch has no CPU backward for
flex_attention: checked against the same attention written out in torch)
and a compiled call equal to eager."""
import math

import numpy as np
import pytest

import tracec
import tracec.nn.attention.flex_attention as tfa

torch = pytest.importorskip("torch")
import torch.nn.attention.flex_attention as ffa  # noqa: E402

B, H, HKV, L, E = 2, 4, 2, 10, 8
DOC = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]


def qkv(lib):
    q = (lib.arange(B * H * L * E, dtype=lib.float32).view(B, H, L, E) % 7 - 3) / 5
    k = (lib.arange(B * HKV * L * E, dtype=lib.float32).view(B, HKV, L, E) % 5 - 2) / 4
    v = (lib.arange(B * HKV * L * E, dtype=lib.float32).view(B, HKV, L, E) % 3 - 1) / 2
    return q, k, v


def mods(lib):
    doc = lib.tensor(DOC)
    bias = lib.linspace(-1, 1, H)

    def causal(b, h, qi, ki):
        return qi >= ki

    def same_doc(b, h, qi, ki):
        return doc[qi] == doc[ki]

    def window(b, h, qi, ki):
        return (qi - ki).abs() <= 3

    def alibi(score, b, h, qi, ki):
        return score + bias[h] * (ki - qi)

    def softcap(score, b, h, qi, ki):
        return 5 * lib.tanh(score / 5)
    return causal, same_doc, window, alibi, softcap


def both(fn):
    return fn(tfa, tracec), fn(ffa, torch)


def _np(x):
    return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x)


@pytest.mark.parametrize("block", [4, (2, 5), 128])
def test_block_masks_match_torch(block):
    def make(fa, lib):
        causal, same_doc, window, _, _ = mods(lib)
        m = fa.create_block_mask(fa.and_masks(causal, fa.or_masks(same_doc, window)), None, H,
                                 L, L, device="cpu", BLOCK_SIZE=block)
        return (m.shape, round(m.sparsity(), 6), m.kv_num_blocks.tolist(), m.kv_indices.tolist(),
                m.full_kv_num_blocks.tolist(), m.q_num_blocks.tolist(), m.to_dense().tolist(),
                str(m), repr(m).replace("tracec.", "torch."))
    ours, theirs = both(make)
    assert ours == theirs


def test_create_mask_of_mask_and_score_mods():
    def make(fa, lib):
        causal, _, window, alibi, _ = mods(lib)
        a = fa.create_mask(fa.or_masks(causal, window), 1, 1, 6, 6, device="cpu")
        b = fa.create_mask(alibi, None, H, 3, 5, device="cpu")
        return a.tolist(), tuple(b.shape), b.dtype.__repr__().split(".")[-1]
    ours, theirs = both(make)
    assert ours == theirs


@pytest.mark.parametrize("case", ["alibi_doc_gqa", "softcap_scale_lse", "plain", "float64"])
def test_flex_attention_matches_torch(case):
    def run(fa, lib):
        q, k, v = qkv(lib)
        causal, same_doc, _, alibi, softcap = mods(lib)
        if case == "alibi_doc_gqa":
            bm = fa.create_block_mask(fa.and_masks(causal, same_doc), None, None, L, L,
                                      device="cpu", BLOCK_SIZE=4)
            return [fa.flex_attention(q, k, v, score_mod=alibi, block_mask=bm, enable_gqa=True)]
        k2, v2 = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        if case == "softcap_scale_lse":
            return list(fa.flex_attention(q, k2, v2, score_mod=softcap, scale=0.5,
                                          return_aux=fa.AuxRequest(lse=True)))
        if case == "float64":
            return [fa.flex_attention(q.double(), k2.double(), v2.double())]
        return [fa.flex_attention(q, k2, v2)]
    ours, theirs = both(run)
    for a, b in zip(ours, theirs):
        b = b.lse if hasattr(b, "lse") else b
        a = a.lse if hasattr(a, "lse") else a
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(a), _np(b), rtol=2e-6, atol=2e-6)


def test_a_row_the_mask_empties_gives_zeros_and_minus_inf_lse():
    def run(fa, lib):
        q, k, v = qkv(lib)
        k2, v2 = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        bm = fa.create_block_mask(lambda b, h, qi, ki: qi > 0, B, 1, L, L, device="cpu")
        out, lse = fa.flex_attention(q, k2, v2, block_mask=bm, return_lse=True)
        return _np(out), _np(lse)
    (o1, l1), (o2, l2) = both(run)
    assert np.all(o1[:, :, 0] == 0) and np.all(np.isneginf(l1[:, :, 0]))
    np.testing.assert_allclose(o1, o2, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(l1, l2, rtol=2e-6, atol=2e-6)


def test_gradients_equal_the_written_out_attention():
    def written_out(lib, q, k, v):
        causal, same_doc, _, alibi, _ = mods(lib)
        kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        qi, ki = lib.arange(L).view(L, 1), lib.arange(L).view(1, L)
        s = alibi((q @ kk.transpose(-2, -1)) / math.sqrt(E), None, lib.arange(H).view(1, H, 1, 1),
                  qi, ki)
        return s.masked_fill(~(causal(0, 0, qi, ki) & same_doc(0, 0, qi, ki)), -math.inf) \
            .softmax(-1) @ vv

    def grads(lib, f):
        q, k, v = (t.clone().requires_grad_() for t in qkv(lib))
        f(q, k, v).square().sum().backward()
        return [_np(t.grad) for t in (q, k, v)]
    causal, same_doc, _, alibi, _ = mods(tracec)
    bm = tfa.create_block_mask(tfa.and_masks(causal, same_doc), None, None, L, L, device="cpu",
                               BLOCK_SIZE=4)
    ours = grads(tracec, lambda q, k, v: tfa.flex_attention(q, k, v, score_mod=alibi,
                                                             block_mask=bm, enable_gqa=True))
    want = grads(torch, lambda q, k, v: written_out(torch, q, k, v))
    for a, b in zip(ours, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_compiled_flex_attention_equals_eager():
    causal, same_doc, _, alibi, _ = mods(tracec)
    bm = tfa.create_block_mask(tfa.and_masks(causal, same_doc), None, None, L, L, device="cpu",
                               BLOCK_SIZE=4)
    w = tracec.ones(E, requires_grad=True)

    def step(q, k, v):
        out = tfa.flex_attention(q * w, k, v, score_mod=alibi, block_mask=bm, enable_gqa=True)
        loss = out.square().sum()
        loss.backward()
        return loss
    q, k, v = qkv(tracec)
    want = step(q, k, v).item()
    g = _np(w.grad).copy()
    w.grad = None
    f = tracec.compile(step)
    for _ in range(3):
        got = f(q, k, v).item()
        np.testing.assert_allclose(_np(w.grad), g, rtol=1e-5, atol=1e-6)
        w.grad = None
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert f.cache_info().traces == 1 and not f.cache_info().eager_reasons


def test_bad_shapes_name_torchs_errors():
    q, k, v = qkv(tracec)
    with pytest.raises(ValueError, match="Try setting enable_gqa=True for GQA"):
        tfa.flex_attention(q, k, v)
    bm = tfa.create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, L + 2, L + 2,
                               device="cpu")
    with pytest.raises(ValueError, match="created for a larger length"):
        tfa.flex_attention(q, k, v, block_mask=bm, enable_gqa=True)
