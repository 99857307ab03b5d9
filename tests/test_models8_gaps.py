"""Gaps the public programs of ``tests/programs/models8`` found, each against
torch: ``Tensor.stft`` / ``Tensor.istft`` and ``torch.stft`` inside a compiled
step (the speech-command tutorial's spectrogram front end); arithmetic on two
Python numbers (``torch.div(seq_len, w, rounding_mode="trunc")``, Longformer),
``divide``'s ``rounding_mode`` and ``add`` / ``sub``'s ``alpha`` with a
number; a differentiable ``as_strided`` of a non-contiguous view and 0-d
integer tensors in its sizes (Longformer's ``_chunk`` and
``_sliding_chunks_matmul_attn_probs_value``); ``new_ones(size=...)``; ``cat``'s
contiguous result from permuted inputs and ``.item()`` of a mask made from
factories inside a compiled function (Transformer-XL's ``_rel_shift`` and
``attn_mask.any().item()``); ``arange`` of 0-d tensors, ``unfold`` /
``masked_fill`` argument errors."""
import numpy as np
import pytest
import torch

import tracec


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type and message are compared
        return type(e), str(e)
    return None


def _wave(n=600, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("kw", [
    dict(n_fft=64, hop_length=16, return_complex=True),
    dict(n_fft=64, hop_length=16, win_length=32, return_complex=True, center=False),
    dict(n_fft=32, normalized=True, onesided=False, return_complex=True, pad_mode="constant"),
])
def test_tensor_stft_istft_match_torch(kw):
    a = _wave()
    x, t = tracec.tensor(a), torch.tensor(a)
    wl = kw.get("win_length", kw["n_fft"])
    s = x.stft(window=tracec.hann_window(wl), **kw)
    r = t.stft(window=torch.hann_window(wl), **kw)
    assert tuple(s.shape) == tuple(r.shape) and s.dtype.name == "complex64"
    np.testing.assert_allclose(s.numpy(), r.numpy(), rtol=1e-4, atol=1e-4)
    ikw = {k: v for k, v in kw.items() if k not in ("return_complex", "pad_mode")}
    if not kw.get("center", True):       # the window's zero edges: both refuse (NOLA)
        assert _err(lambda: s.istft(window=tracec.hann_window(wl), length=600, **ikw))[0] is \
            _err(lambda: r.istft(window=torch.hann_window(wl), length=600, **ikw))[0] is \
            RuntimeError
        return
    y = s.istft(window=tracec.hann_window(wl), length=600, **ikw)
    ry = r.istft(window=torch.hann_window(wl), length=600, **ikw)
    np.testing.assert_allclose(y.numpy(), ry.numpy(), rtol=1e-4, atol=1e-4)
    assert tracec.Tensor.stft.__name__ == "stft" and tracec.Tensor.istft.__name__ == "istft"
    assert _err(lambda: x.stft(64)) == _err(lambda: t.stft(64))


def test_stft_in_compiled_step_matches_eager_and_torch():
    # log-mel-like features and their gradient, in a compiled function
    a = _wave(512, 1)
    fb = np.abs(np.random.default_rng(2).standard_normal((33, 8))).astype(np.float32)

    def feats(lib, x, fb, normalized=False, onesided=True):
        spec = lib.stft(x, 64, hop_length=32, window=lib.hann_window(64), return_complex=True,
                        normalized=normalized, onesided=onesided)
        power = spec.abs() ** 2
        if not onesided:
            power = power[:33]
        return lib.log(lib.matmul(power.transpose(0, 1), fb) + 1e-6)

    for normalized, onesided in ((False, True), (True, False)):
        def step(x, fb):
            x = x.detach().requires_grad_()
            out = feats(tracec, x, fb, normalized, onesided)
            out.sum().backward()
            return out, x.grad

        cstep = tracec.compile(step)
        for _ in range(2):
            out, g = cstep(tracec.tensor(a), tracec.tensor(fb))
        t = torch.tensor(a, requires_grad=True)
        ref = feats(torch, t, torch.tensor(fb), normalized, onesided)
        ref.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-3)


def test_stft_compiled_step_does_not_fall_back(recwarn):
    def f(x):
        return tracec.stft(x, 16, window=tracec.hann_window(16), return_complex=True).abs().sum()

    cf = tracec.compile(f)
    a = _wave(128, 3)
    v = [cf(tracec.tensor(a)).item() for _ in range(2)]
    assert not [w for w in recwarn if "running eagerly" in str(w.message)]
    ref = torch.stft(torch.tensor(a), 16, window=torch.hann_window(16), return_complex=True)
    np.testing.assert_allclose(v, [ref.abs().sum().item()] * 2, rtol=1e-5)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "true_divide", "divide", "multiply",
                                  "subtract", "floor_divide"])
@pytest.mark.parametrize("args", [(8, 2), (7.5, 2), (True, 2), (3, 2.5), (-7, 2), (np.int64(8), 2),
                                  (np.float32(2.5), 2), (1j, 2), (2, 1j)])
def test_two_python_numbers_match_torch(name, args):
    r, g = _err(lambda: getattr(torch, name)(*args)), _err(lambda: getattr(tracec, name)(*args))
    assert (r is None) == (g is None), (r, g)
    if r is None:
        want, got = getattr(torch, name)(*args), getattr(tracec, name)(*args)
        assert got.dtype.name == str(want.dtype).split(".")[1] and got.ndim == 0
        assert got.item() == want.item()


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_mode_numbers_and_divide(mode):
    for a, b in ((8, 2), (-7, 2), (7.5, -2), (9, 4)):
        want = torch.div(a, b, rounding_mode=mode)
        got = tracec.div(a, b, rounding_mode=mode)
        assert got.item() == want.item() and got.dtype.name == str(want.dtype).split(".")[1]
    x = np.array([7.0, -7.0, 5.5], np.float32)
    for lib_fn in (lambda L, v: L.divide(v, 2, rounding_mode=mode),
                   lambda L, v: v.divide(2, rounding_mode=mode),
                   lambda L, v: v.div(-2, rounding_mode=mode)):
        np.testing.assert_array_equal(lib_fn(tracec, tracec.tensor(x)).numpy(),
                                      lib_fn(torch, torch.tensor(x)).numpy())
    assert _err(lambda: tracec.true_divide(tracec.tensor(x), 2, rounding_mode=mode))[0] is TypeError
    for a in (1j, np.array([1j, 2 + 1j], np.complex64)):
        assert _err(lambda: tracec.div(tracec.tensor(a), 2, rounding_mode=mode)) == \
            _err(lambda: torch.div(torch.tensor(a), 2, rounding_mode=mode))


def test_add_sub_alpha_with_number():
    xi, ti = tracec.tensor([1, 2]), torch.tensor([1, 2])
    for f in (lambda L, v: L.add(v, 2, alpha=3), lambda L, v: v.sub(2, alpha=2),
              lambda L, v: L.add(v.float(), 2.5, alpha=2), lambda L, v: L.add(3, 2, alpha=2),
              lambda L, v: L.sub(3.0, 2, alpha=2)):
        got, want = f(tracec, xi), f(torch, ti)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got.dtype.name == str(want.dtype).split(".")[1]
    assert _err(lambda: tracec.add(xi, 2, alpha=0.5)) == _err(lambda: torch.add(ti, 2, alpha=0.5))
    assert _err(lambda: tracec.add(xi, xi, alpha=1.5)) == _err(lambda: torch.add(ti, ti, alpha=1.5))


def _chunk(lib, q, w):
    # Longformer's _chunk on a transposed, reshaped (still a view) query
    h = q.transpose(1, 2).reshape(q.shape[0] * q.shape[2], q.shape[1], q.shape[3])
    h = h.view(h.size(0), lib.div(h.size(1), w * 2, rounding_mode="trunc"), w * 2, h.size(2))
    size, stride = list(h.size()), list(h.stride())
    size[1] = size[1] * 2 - 1
    stride[1] = stride[1] // 2
    return h.as_strided(size=size, stride=stride)


def test_as_strided_of_noncontiguous_view_values_and_grad():
    a = np.random.default_rng(0).standard_normal((2, 8, 2, 8)).astype(np.float32)
    outs = {}
    for lib in (tracec, torch):
        lin = lib.tensor(a, requires_grad=True)
        q = (lin * 2).view(8, 2, 2, 8).transpose(0, 1)         # (2, 8, 2, 8), not contiguous
        c = _chunk(lib, q, 2)
        (c * lib.arange(c.numel()).view(c.shape).float()).sum().backward()
        outs[lib.__name__] = (c.detach().numpy(), lin.grad.numpy(), tuple(c.shape))
    np.testing.assert_allclose(outs["tracec"][0], outs["torch"][0], rtol=1e-6)
    np.testing.assert_allclose(outs["tracec"][1], outs["torch"][1], rtol=1e-5)
    assert outs["tracec"][2] == outs["torch"][2]


def test_as_strided_view_compiled_matches_eager():
    a = np.random.default_rng(1).standard_normal((2, 8, 2, 8)).astype(np.float32)

    def f(x):
        x = x.detach().requires_grad_()
        c = _chunk(tracec, (x * 2).view(8, 2, 2, 8).transpose(0, 1), 2)
        c.pow(2).sum().backward()
        return c, x.grad

    c1, g1 = f(tracec.tensor(a))
    cf = tracec.compile(f)
    for _ in range(2):
        c2, g2 = cf(tracec.tensor(a))
    np.testing.assert_allclose(c2.detach().numpy(), c1.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(g2.numpy(), g1.numpy(), rtol=1e-6)


def test_as_strided_size_with_0d_tensor():
    a = np.arange(24, dtype=np.float32).reshape(2, 12)
    for lib in (tracec, torch):
        n = lib.div(12, 4, rounding_mode="trunc") - 1                     # a 0-d int64 tensor
        got = lib.tensor(a).as_strided((2, n + 1, 4), (12, 4, 1))
        assert tuple(got.shape) == (2, 3, 4)
    np.testing.assert_array_equal(
        tracec.tensor(a).as_strided((2, tracec.tensor(2), 4), (12, 4, 1)).numpy(),
        torch.tensor(a).as_strided((2, torch.tensor(2), 4), (12, 4, 1)).numpy())
    assert _err(lambda: tracec.tensor(a).as_strided((2, tracec.tensor(2.0)), (1, 1)))[0] is \
        _err(lambda: torch.tensor(a).as_strided((2, torch.tensor(2.0)), (1, 1)))[0]


@pytest.mark.parametrize("name", ["new_ones", "new_zeros", "new_empty"])
def test_new_factories_size_keyword(name):
    x, t = tracec.zeros(2, dtype=tracec.float64), torch.zeros(2, dtype=torch.float64)
    for kw in (dict(size=(2, 3)), dict(size=[1]), dict(size=x.size())):
        kt = {k: (torch.Size(v) if isinstance(v, tracec.Size) else v) for k, v in kw.items()}
        got, want = getattr(x, name)(**kw), getattr(t, name)(**kt)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == "float64"
    assert tuple(getattr(x, name)((2, 3)).shape) == tuple(getattr(x, name)(2, 3).shape) == (2, 3)
    for args, kw in (((2,), dict(size=(3,))), ((), dict(size=2)), ((), {})):
        assert _err(lambda: getattr(x, name)(*args, **kw)) == \
            _err(lambda: getattr(t, name)(*args, **kw))


def test_cat_of_permuted_tensors_is_contiguous():
    # Transformer-XL's _rel_shift: cat of a zero column and an einsum result, then view
    a = np.random.default_rng(0).standard_normal((6, 2, 2, 8)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((6, 2, 8)).astype(np.float32)
    res = {}
    for lib in (tracec, torch):
        bd = lib.einsum('ibnd,jnd->ijbn', (lib.tensor(a), lib.tensor(b)))
        zp = lib.zeros((bd.size(0), 1, *bd.size()[2:]))
        xp = lib.cat([zp, bd], dim=1)
        res[lib.__name__] = (xp.is_contiguous(), xp.stride(),
                             xp.view(bd.size(1) + 1, bd.size(0), *bd.size()[2:])[1:].reshape(-1))
    assert res["tracec"][:2] == res["torch"][:2]
    # (float32 sums of 8 products: the summation order may differ from torch's)
    np.testing.assert_allclose(res["tracec"][2].numpy(), res["torch"][2].numpy(), rtol=1e-5,
                               atol=1e-6)
    for lib in (tracec, torch):     # channels-last inputs keep their layout, mixed ones do not
        c = lib.arange(120.).view(2, 3, 4, 5).to(memory_format=lib.channels_last)
        res[lib.__name__] = (lib.cat([c, c], 1).stride(), lib.cat([c, c.contiguous()], 1).stride(),
                             lib.cat([c.transpose(2, 3)] * 2, 0).stride())
    assert res["tracec"] == res["torch"]


@pytest.mark.usefixtures("counter_rng")
def test_item_of_mask_from_factories_compiles(recwarn):
    # Transformer-XL: `if attn_mask is not None and attn_mask.any().item():` on a mask made
    # by triu(new_ones(...)) in the compiled function: a constant, so Python may read it
    def f(x, mlen):
        mask = tracec.triu(x.new_ones(x.size(0), x.size(0) + mlen), diagonal=1 + mlen).bool()
        if mask.any().item():
            x = x.masked_fill(mask[:, :x.size(0)], -1.0)
        return x * 2

    cf = tracec.compile(f)
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    for _ in range(2):
        got = cf(tracec.tensor(a), 0)
    assert not [w for w in recwarn if "running eagerly" in str(w.message)]
    t = torch.tensor(a)
    want = t.masked_fill(torch.triu(t.new_ones(3, 3), diagonal=1).bool(), -1.0) * 2
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # a random factory is not a constant: a comparison of its item() is a
    # decision each compiled call makes on its own draw (speculated)
    def g(x):
        return x * (2 if tracec.rand(()).item() > 0.5 else 3)
    cg = tracec.compile(g)
    tracec.manual_seed(0)
    want = [g(tracec.tensor(a)).sum().item() for _ in range(8)]
    tracec.manual_seed(0)
    got = [cg(tracec.tensor(a)).sum().item() for _ in range(8)]
    assert got == want and len(set(want)) == 2
    assert cg.cache_info().speculated


def test_arange_of_0d_tensors_keeps_their_kind():
    # the TFT's torch.arange(decoder_lengths.max()): an int64 range
    for args in ((lambda L: (L.tensor(3),)), (lambda L: (L.tensor(3.0),)),
                 (lambda L: (1, L.tensor(6), L.tensor(2))), (lambda L: (L.tensor([4, 5]).max(),))):
        got, want = tracec.arange(*args(tracec)), torch.arange(*args(torch))
        assert got.dtype.name == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert _err(lambda: tracec.arange(tracec.tensor([1, 2])))[0] is \
        _err(lambda: torch.arange(torch.tensor([1, 2])))[0]


def test_unfold_and_masked_fill_argument_errors():
    x, t = tracec.arange(6.0), torch.arange(6.0)
    for args in ((0, 2.0, 1), (0, 2, 1.0), (0.0, 2, 1)):
        assert _err(lambda: x.unfold(*args)) == _err(lambda: t.unfold(*args))
    for d in ("uint8", "int64", "float32", "int32"):
        m = np.array([1, 0, 1, 0, 1, 0], dtype=d)
        assert _err(lambda: x.masked_fill(tracec.tensor(m), 0.0)) == \
            _err(lambda: t.masked_fill(torch.tensor(m), 0.0))


def test_as_strided_of_view_written_in_place_grad():
    # the view's in-place history reaches the gather from its base
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    res = {}
    for lib in (tracec, torch):
        leaf = lib.tensor(a, requires_grad=True)
        x = leaf * 1.0
        v = x.t()
        v.mul_(lib.arange(4.0))
        c1 = v.as_strided((3, 2), (1, 4))
        (c1 * lib.arange(6.).view(3, 2)).sum().backward()
        g1 = leaf.grad.clone()
        leaf.grad = None
        x = leaf * 1.0
        v = x[1:3]
        v.add_(leaf[0:2] * 2)
        c2 = v.as_strided((2, 3), (4, 1), 5)
        (c2 * lib.arange(6.).view(2, 3)).sum().backward()
        res[lib.__name__] = [t.detach().numpy() for t in (c1, g1, c2, leaf.grad)]
    for got, want in zip(res["tracec"], res["torch"]):
        np.testing.assert_array_equal(got, want)

