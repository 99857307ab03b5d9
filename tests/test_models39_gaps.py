"""Gaps the public programs of ``tests/programs/models39`` found, each
against torch: karpathy/build-nanogpt's bfloat16 autocast forward (its
``F.scaled_dot_product_attention(..., is_causal=True)`` on the bfloat16
outputs of ``c_attn`` and the tanh GELU of its MLP) rounded every
intermediate to bfloat16, where PyTorch's CPU kernels compute in float32
and round once, so the sampled tokens of its top-k generation loop
differed.  The flash kernel's softmax also uses ATen's fast ``fexp_u20``
(``tracec.aten_vec``) on whole vectors of a row, and its backward rounds
the attention and its gradient to the input type before its products,
block by block: rows longer than a vector and several query / key blocks
are checked bit for bit too."""
import numpy as np
import pytest
import torch

import tracec


def _both(fn, *arrays, dtype="bfloat16"):
    """fn(lib, *tensors) under torch and tracec, the inputs ``arrays`` cast
    to ``dtype`` in each: (torch result, tracec result) as float64 arrays."""
    out = []
    for lib in (torch, tracec):
        ts = [lib.tensor(a).to(getattr(lib, dtype)) for a in arrays]
        out.append(fn(lib, *ts).double().numpy())
    return out


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_half_gelu_rounds_once_as_torch(approximate, dtype):
    # away from the far negative tail, where float32 tanh / erf
    # implementations differ by an ulp of a value near zero
    x = np.random.default_rng(0).uniform(-2.5, 4, 4000).astype(np.float32)
    want, got = _both(lambda lib, t: lib.nn.functional.gelu(t, approximate=approximate), x,
                      dtype=dtype)
    # Rounded once from float32, the two agree but where the float32 values
    # straddle a rounding tie by their last bits (a few in a thousand, one
    # ulp); rounded at every step, about 40% differ.
    ulp = (np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
           if dtype == "float16" else np.abs(want) * 2.0 ** -7)
    differ = got != want
    assert differ.mean() < 0.005, differ.mean()
    assert (np.abs(got - want)[differ] <= ulp[differ] * 1.01).all()


def test_half_gelu_backward_matches_torch():
    x = np.random.default_rng(1).uniform(-2.5, 3, 512).astype(np.float32)
    g = np.random.default_rng(2).normal(size=512).astype(np.float32)
    grads = []
    for lib in (torch, tracec):
        t = lib.tensor(x).bfloat16().requires_grad_()
        y = lib.nn.functional.gelu(t, approximate="tanh")
        assert y.dtype == lib.bfloat16
        y.backward(lib.tensor(g).bfloat16())
        grads.append(t.grad.double().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=2 ** -7, atol=1e-6)


def _qkv(seed, L=7, S=7, D=16):
    r = np.random.default_rng(seed)
    return [r.normal(size=(2, 3, n, D)).astype(np.float32) for n in (L, S, S)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_sdpa_causal_matches_torch_flash_kernel_bitwise(dtype):
    want, got = _both(lambda lib, q, k, v: lib.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True), *_qkv(0), dtype=dtype)
    np.testing.assert_array_equal(got, want)


def test_half_sdpa_masks_and_scale_match_torch():
    q, k, v = _qkv(1, L=5, S=6)
    mask = np.random.default_rng(3).random((5, 6)) > 0.4
    mask[2] = False                                  # a fully masked row: zeros
    fmask = np.where(mask, 0.0, -np.inf).astype(np.float32) + 0.25
    for m in (mask, fmask):
        want, got = _both(lambda lib, q_, k_, v_: lib.nn.functional.scaled_dot_product_attention(
            q_, k_, v_, attn_mask=lib.tensor(m), scale=0.3), q, k, v)
        np.testing.assert_array_equal(got, want)
        assert not np.isnan(got).any()


def test_sdpa_under_autocast_casts_float32_inputs_as_torch():
    q, k, v = _qkv(2)
    res = []
    for lib in (torch, tracec):
        with lib.autocast(device_type="cpu", dtype=lib.bfloat16):
            y = lib.nn.functional.scaled_dot_product_attention(
                lib.tensor(q), lib.tensor(k), lib.tensor(v), is_causal=True)
        assert y.dtype == lib.bfloat16
        res.append(y.double().numpy())
    np.testing.assert_array_equal(res[1], res[0])


def test_half_sdpa_backward_matches_torch():
    q, k, v = _qkv(4)
    g = np.random.default_rng(5).normal(size=q.shape).astype(np.float32)
    grads = []
    for lib in (torch, tracec):
        ts = [lib.tensor(a).bfloat16().requires_grad_() for a in (q, k, v)]
        y = lib.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
        y.backward(lib.tensor(g).bfloat16())
        grads.append([t.grad.double().numpy() for t in ts])
    for a, b in zip(grads[1], grads[0]):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("L,S,causal,masked", [(40, 40, True, False), (70, 600, False, False),
                                               (33, 530, True, False), (20, 37, False, True)])
def test_half_sdpa_long_rows_and_blocks_match_torch(L, S, causal, masked):
    r = np.random.default_rng(L * S)
    q = r.normal(size=(1, 2, L, 8)).astype(np.float32)
    k, v = (r.normal(size=(1, 2, S, 8)).astype(np.float32) * 2 for _ in range(2))
    go = r.normal(size=(1, 2, L, 8)).astype(np.float32)
    mask = r.random((L, S)) > 0.3 if masked else None
    res = []
    for lib in (torch, tracec):
        ts = [lib.tensor(a).bfloat16().requires_grad_() for a in (q, k, v)]
        y = lib.nn.functional.scaled_dot_product_attention(
            *ts, attn_mask=None if mask is None else lib.tensor(mask), is_causal=causal)
        y.backward(lib.tensor(go).bfloat16())
        res.append([y.detach().double().numpy()] + [t.grad.double().numpy() for t in ts])
    for name, a, b in zip(("out", "dq", "dk", "dv"), res[1], res[0]):
        # bit for bit but for a float32 gemm's summation order (a few
        # elements in ten thousand, one ulp)
        assert (a != b).mean() < 1e-3, name
        np.testing.assert_allclose(a, b, rtol=2 ** -7, atol=1e-6, err_msg=name)
    assert type(y.grad_fn).__name__ == "ScaledDotProductFlashAttentionForCpuBackward0"


def test_compiled_half_sdpa_step_close_to_float32():
    # a trace records the flash forward's primitives (``exp``, not the
    # kernel's fexp_u20) and the autodiff pass differentiates them: the
    # values of float32 attention on the same inputs, to bfloat16 precision
    q, k, v = _qkv(6, L=20, S=20)

    def step(q, k, v):
        y = tracec.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.float().square().sum().backward()
        return y

    outs = []
    for fn, d in ((tracec.compile(step), tracec.bfloat16), (step, tracec.float32)):
        ts = [tracec.tensor(a).bfloat16().to(d).requires_grad_() for a in (q, k, v)]
        y = fn(*ts)
        assert y.dtype == d
        outs.append([y.detach().double().numpy()] + [t.grad.double().numpy() for t in ts])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2 * np.abs(b).max())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tanh_backward_rounds_one_minus_square_once_as_torch(dtype):
    # karpathy's makemore part 4 prints whether its manual (1.0 - h**2) * dh
    # equals autograd's bit for bit: PyTorch's tanh_backward fuses 1 - y*y
    # (one rounding), so it is not, for about a third of the elements; and
    # its float32 tanh is SLEEF's (NumPy's float32 one is an ulp off for a
    # third of the values)
    # (PyTorch's float32 tanh itself is MKL's vsTanh, whose last bit
    # depends on the processor: the forward is checked to an ulp, and the
    # backward bit for bit from tracec's own forward value)
    r = np.random.default_rng(7)
    x = r.normal(size=5003).astype(np.float32)
    g = r.normal(size=5003).astype(np.float32)
    d = getattr(torch, dtype)
    t = tracec.tensor(x).to(getattr(tracec, dtype)).requires_grad_()
    y = tracec.tanh(t)
    y.backward(tracec.tensor(g).to(getattr(tracec, dtype)))
    ty = torch.tanh(torch.tensor(x).to(d)).double().numpy()
    np.testing.assert_allclose(y.detach().double().numpy(), ty, rtol=0,
                               atol=float(np.spacing(np.float32(1))) * (1 if dtype == "float32" else 2 ** 16))
    want = torch.ops.aten.tanh_backward(torch.tensor(g).to(d),
                                        torch.tensor(y.detach().float().numpy()).to(d))
    np.testing.assert_array_equal(t.grad.double().numpy(), want.double().numpy())


def test_compiled_tanh_backward_matches_eager_bitwise():
    x = np.random.default_rng(8).normal(size=(6, 5)).astype(np.float32)

    def f(t):
        t.grad = None
        (tracec.tanh(t) * 3.0).sum().backward()
        return t.grad.clone()

    want = f(tracec.tensor(x, requires_grad=True)).numpy()
    got = tracec.compile(f)(tracec.tensor(x, requires_grad=True)).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("math_only", [False, True])
def test_half_sdpa_math_kernel_computes_in_float32_as_torch(math_only):
    # 3-d inputs (or the math backend chosen) take PyTorch's math kernel,
    # which upcasts a reduced type on the CPU and rounds the result once
    r = np.random.default_rng(9)
    shape = (1, 2, 12, 8) if math_only else (3, 12, 8)
    q, k, v = (r.normal(size=shape).astype(np.float32) for _ in range(3))
    g = r.normal(size=shape).astype(np.float32)
    res = []
    for lib in (torch, tracec):
        from contextlib import nullcontext
        ctx = nullcontext()
        if math_only:
            ctx = lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.MATH)
        ts = [lib.tensor(a).bfloat16().requires_grad_() for a in (q, k, v)]
        with ctx:
            y = lib.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
        y.backward(lib.tensor(g).bfloat16())
        res.append([y.detach().double().numpy()] + [t.grad.double().numpy() for t in ts])
    for name, a, b in zip(("out", "dq", "dk", "dv"), res[1], res[0]):
        assert (a != b).mean() < 0.01, name
        np.testing.assert_allclose(a, b, rtol=2 ** -7, atol=1e-6, err_msg=name)


def test_sdpa_head_mismatch_without_gqa_raises_torch_error():
    q, k = np.zeros((1, 4, 5, 8), np.float32), np.zeros((1, 2, 5, 8), np.float32)
    for lib in (torch, tracec):
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(4\) must match the size "
                                               r"of tensor b \(2\) at non-singleton dimension 1"):
            lib.nn.functional.scaled_dot_product_attention(lib.tensor(q), lib.tensor(k),
                                                           lib.tensor(k))
