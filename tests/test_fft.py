"""tracec.fft against PyTorch: values, dtypes, errors and gradients (real
losses of every transform, with n/s, dim and norm), and a Fourier Neural
Operator layer trained three steps under identical weights."""
import warnings

import numpy as np
import pytest
import torch

import tracec

NORMS = [None, "backward", "ortho", "forward"]


def _np(t):
    return t.resolve_conj().detach().numpy()


def _pair(a, requires_grad=True):
    return (torch.tensor(a, requires_grad=requires_grad),
            tracec.tensor(a, requires_grad=requires_grad))


def _loss(L, y, w):
    """A real loss reading every component of ``y`` (complex or real)."""
    if y.is_complex():
        y = L.view_as_real(y.resolve_conj())
    return (y * L.tensor(w[: y.numel()].reshape(tuple(y.shape)))).sum()


def _check(fn_name, a, kwargs, rng):
    tx, cx = _pair(a)
    ty = getattr(torch.fft, fn_name)(tx, **kwargs)
    cy = getattr(tracec.fft, fn_name)(cx, **kwargs)
    assert str(cy.dtype).split(".")[1] == str(ty.dtype).split(".")[1]
    assert tuple(cy.shape) == tuple(ty.shape)
    np.testing.assert_allclose(_np(cy), _np(ty), rtol=1e-10, atol=1e-10)
    w = rng.standard_normal(2 * ty.numel())
    _loss(torch, ty, w).backward()
    _loss(tracec, cy, w).backward()
    assert cx.grad.dtype.name == str(tx.grad.dtype).split(".")[1]
    np.testing.assert_allclose(_np(cx.grad), _np(tx.grad), rtol=1e-9, atol=1e-10)


def _real(rng, *shape):
    return rng.standard_normal(shape)


def _cplx(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 5, 8, 11])
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_1d_transforms_and_gradients(name, n, norm):
    rng = np.random.default_rng(0)
    kw = {"n": n, "norm": norm, "dim": 0 if name in ("fft", "irfft") else -1}
    if name in ("rfft", "ihfft"):
        inputs = [_real(rng, 8, 3) if kw["dim"] == 0 else _real(rng, 3, 8)]
    elif name in ("fft", "ifft"):
        inputs = [_real(rng, 8, 3), _cplx(rng, 8, 3)] if kw["dim"] == 0 else \
            [_real(rng, 3, 8), _cplx(rng, 3, 8)]
    else:   # irfft / hfft: Hermitian half spectra, of odd and even lengths
        inputs = [_cplx(rng, 5, 2), _cplx(rng, 6, 2)] if kw["dim"] == 0 else \
            [_cplx(rng, 2, 5), _cplx(rng, 2, 6)]
    for a in inputs:
        _check(name, a, kw, rng)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("s", [None, (4, 6), (7, 5)])
@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
                                  "irfftn", "hfft2", "ihfft2", "hfftn", "ihfftn"])
def test_nd_transforms_and_gradients(name, s, norm):
    rng = np.random.default_rng(1)
    real_in = name.startswith(("rfft", "ihfft"))
    a = _real(rng, 2, 5, 6) if real_in else _cplx(rng, 2, 5, 6)
    kw = {"s": s, "norm": norm}
    if name.endswith("n") and s is not None:
        kw["dim"] = (0, 2) if name in ("fftn", "irfftn", "hfftn") else None
    _check(name, a, kw, rng)
    if not real_in:
        _check(name, _real(rng, 2, 5, 6), kw, rng)   # a real input is promoted


def test_float32_dtypes_and_int_input():
    x = np.arange(8)
    for name in ("fft", "rfft", "ihfft"):
        t, c = getattr(torch.fft, name)(torch.tensor(x)), getattr(tracec.fft, name)(tracec.tensor(x))
        assert c.dtype is tracec.complex64 and t.dtype is torch.complex64
        np.testing.assert_allclose(_np(c), _np(t), rtol=1e-6, atol=1e-5)
    y = tracec.fft.irfft(tracec.fft.rfft(tracec.tensor(x, dtype=tracec.float32)))
    assert y.dtype is tracec.float32
    np.testing.assert_allclose(y.numpy(), x, atol=1e-5)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda L, x: L.fft.fft(x, norm="foo"), RuntimeError, 'Invalid normalization mode: "foo"'),
    (lambda L, x: L.fft.fft(x, n=0), RuntimeError, r"Invalid number of data points \(0\)"),
    (lambda L, x: L.fft.rfft(x * 1j), RuntimeError, "rfft expects a real input tensor, but "
                                                   "got ComplexFloat"),
    (lambda L, x: L.fft.ihfft(x * 1j), RuntimeError, "ihfft expects a real input tensor"),
    (lambda L, x: L.fft.fft(x, dim=3), IndexError, "Dimension out of range"),
    (lambda L, x: L.fft.fftn(x, s=(2, 3)), RuntimeError, "Got shape with 2 values but input "
                                                         "tensor only has 1 dimensions."),
    (lambda L, x: L.fft.fftn(x.reshape(2, 2), dim=(0, 0)), RuntimeError,
     "FFT dims must be unique"),
])
def test_errors_as_torch(call, exc, msg):
    for L in (torch, tracec):
        with pytest.raises(exc, match=msg):
            call(L, L.ones(4))


@pytest.mark.parametrize("n,d", [(5, 1.0), (6, 0.5), (1, 2.0)])
def test_frequencies_and_shifts(n, d):
    np.testing.assert_allclose(tracec.fft.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy())
    np.testing.assert_allclose(tracec.fft.rfftfreq(n, d).numpy(),
                               torch.fft.rfftfreq(n, d).numpy())
    assert tracec.fft.fftfreq(n, dtype=tracec.float64).dtype is tracec.float64
    a = np.arange(30.0).reshape(5, 6)
    for dim in (None, 0, (0, 1), -1):
        for name in ("fftshift", "ifftshift"):
            np.testing.assert_array_equal(
                getattr(tracec.fft, name)(tracec.tensor(a), dim=dim).numpy(),
                getattr(torch.fft, name)(torch.tensor(a), dim=dim).numpy())


def test_grad_fn_names():
    x = tracec.randn(8, requires_grad=True)
    assert tracec.fft.rfft(x).grad_fn.name() == "FftR2CBackward0"
    assert tracec.fft.irfft(tracec.fft.rfft(x)).grad_fn.name() == "FftC2RBackward0"
    assert tracec.fft.ifft(tracec.fft.rfft(x)).grad_fn.name() == "FftC2CBackward0"


COMPILED_CASES = [
    ("rfft", (2, 3, 8), {}), ("rfft", (2, 7), dict(n=5, norm="ortho")),
    ("rfft", (3, 6), dict(n=9, dim=0, norm="forward")), ("irfft", (2, 5), {}),
    ("irfft", (2, 5), dict(n=7, norm="ortho")), ("irfft", (4, 3), dict(n=3, dim=0)),
    ("irfft", (2, 5), dict(n=12, norm="forward")), ("rfft2", (2, 4, 6), {}),
    ("rfft2", (2, 4, 6), dict(s=(3, 8))), ("irfft2", (2, 4, 5), dict(s=(4, 7))),
    ("irfft2", (2, 4, 5), dict(norm="ortho")), ("fft", (2, 6), dict(n=4)),
    ("ifft", (2, 6), dict(norm="forward")), ("fftn", (2, 3, 4), dict(dim=(0, 2))),
    ("ifftn", (2, 3, 4), {}), ("rfftn", (2, 3, 4), dict(s=(2, 5))), ("irfftn", (2, 3, 4), {}),
    ("hfft", (2, 5), {}), ("ihfft", (2, 6), dict(norm="ortho")),
]


@pytest.mark.parametrize("name,shape,kw", COMPILED_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(COMPILED_CASES)])
def test_fft_inside_compile_matches_eager(name, shape, kw):
    """Compiled, every transform is a product with DFT matrices: the values
    and the gradients (of a real and a complex input) are eager's."""
    rng = np.random.default_rng(0)
    w = tracec.tensor(rng.standard_normal(2 * 2 * 3 * 8 * 4).astype(np.float32))

    def step(x, y):
        z = x if name in ("rfft", "rfft2", "rfftn", "ihfft", "fft") else tracec.complex(x, y)
        out = getattr(tracec.fft, name)(z, **kw)
        if out.is_complex():
            out = tracec.view_as_real(out.resolve_conj())
        loss = (out * w[:out.numel()].reshape(out.shape)).sum()
        loss.backward()
        return out

    f = tracec.compile(step, backend="interp")
    for k in range(2):
        a = rng.standard_normal((2,) + shape).astype(np.float32)
        xe, ye = [tracec.tensor(v, requires_grad=True) for v in a]
        xc, yc = [tracec.tensor(v, requires_grad=True) for v in a]
        want, got = step(xe, ye), f(xc, yc)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
        for e, c in ((xe, xc), (ye, yc)):
            assert (e.grad is None) == (c.grad is None)
            if e.grad is not None:
                np.testing.assert_allclose(c.grad.numpy(), e.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert f.cache_info().traces == 1


def test_fft_layer_compiled_on_the_cpu_backend():
    """An FNO-style spectral layer with real weights (rfft, the low modes
    mixed, irfft) trained compiled: the losses and weights eager gives."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((2, 3, 3, 4)).astype(np.float32) / 3

    def make():
        wr = tracec.tensor(w0[0], requires_grad=True)
        wi = tracec.tensor(w0[1], requires_grad=True)
        opt = tracec.optim.SGD([wr, wi], lr=0.1)

        def step(x):
            x_ft = tracec.fft.rfft(x)
            out_ft = tracec.zeros(x.shape[0], 3, x.size(-1) // 2 + 1, dtype=tracec.cfloat)
            out_ft[:, :, :4] = tracec.einsum("bix,iox->box", x_ft[:, :, :4], tracec.complex(wr, wi))
            loss = tracec.fft.irfft(out_ft, n=x.size(-1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, wr
    eager, we = make()
    step, wc = make()
    compiled = tracec.compile(step)
    for k in range(3):
        x = tracec.tensor(rng.standard_normal((2, 3, 10)).astype(np.float32))
        np.testing.assert_allclose(compiled(x).item(), eager(x).item(), rtol=1e-5)
    np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.cache_info().traces == 1


def test_fft_over_a_symbolic_size_inside_compile_fails_naming_the_line():
    def step(x):
        return tracec.fft.rfft(x).abs().sum()   # the line the error names

    line = step.__code__.co_firstlineno + 1
    f = tracec.compile(step, backend="interp", dynamic=True)
    with pytest.raises(tracec.TraceError, match=rf"test_fft.py:{line}: a torch.fft transform over "
                       "a transformed dimension of symbolic size cannot be compiled"):
        f(tracec.randn(8))
    g = tracec.compile(step, backend="interp", dynamic=True, fallback="eager")
    x = tracec.randn(8)
    with pytest.warns(UserWarning, match="torch.fft"):
        got = g(x)
    np.testing.assert_allclose(got.item(), np.abs(np.fft.rfft(x.numpy())).sum(), rtol=1e-5)


# --- stft / istft ----------------------------------------------------------------------------

STFT_CASES = [
    dict(n_fft=16), dict(n_fft=16, hop_length=5, win_length=12, window="hann"),
    dict(n_fft=15, hop_length=3, center=False, window="hamming"),
    dict(n_fft=16, normalized=True, window="hann", onesided=False),
    dict(n_fft=16, pad_mode="constant", window="hamming", hop_length=8),
    dict(n_fft=16, hop_length=4, win_length=8, center=False, align_to_window=True,
         window="hamming"),
]


def _stft_kwargs(L, kw):
    kw = dict(kw)
    if kw.get("window") == "hann":
        kw["window"] = L.hann_window(kw.get("win_length", kw["n_fft"]), dtype=L.float64)
    elif kw.get("window") == "hamming":
        kw["window"] = L.hamming_window(kw.get("win_length", kw["n_fft"]), dtype=L.float64)
    return kw


@pytest.mark.filterwarnings("ignore:A window was not provided")
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("case", range(len(STFT_CASES)))
def test_stft_istft_values_and_gradients(case, batched):
    rng = np.random.default_rng(case)
    a = rng.standard_normal((2, 100) if batched else (100,))
    out = {}
    for L in (torch, tracec):
        kw = _stft_kwargs(L, STFT_CASES[case])
        x = L.tensor(a, requires_grad=True)
        spec = L.stft(x, return_complex=True, **kw)
        w = L.tensor(np.random.default_rng(9).standard_normal(tuple(spec.shape) + (2,)))
        (L.view_as_real(spec) * w).sum().backward()
        ikw = {k: v for k, v in kw.items() if k not in ("pad_mode", "align_to_window")}
        if kw.get("onesided") is False:
            ikw["return_complex"] = True
        z = L.tensor(spec.detach().numpy(), requires_grad=True)
        if "align_to_window" in kw:   # istft has no such alignment
            out[L] = (spec.detach().numpy(), x.grad.numpy())
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            back = L.istft(z, length=100, **ikw)
        short = [str(c.message) for c in caught if "shorter than the length" in str(c.message)]
        if L is tracec:   # torch warns once per process: tracec's own warning is checked
            assert bool(short) == (not kw.get("center", True))
        back = back.real if back.is_complex() else back
        (back * L.tensor(np.linspace(-1, 1, 100))).sum().backward()
        out[L] = (spec.detach().numpy(), x.grad.numpy(), back.detach().numpy(), z.grad.numpy())
    for got, want in zip(out[tracec], out[torch]):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    if STFT_CASES[case].get("center", True) and STFT_CASES[case]["n_fft"] % 2 == 0:
        np.testing.assert_allclose(out[tracec][2], a, atol=1e-10)   # istft inverts stft


def test_stft_errors_as_torch():
    for L in (torch, tracec):
        x = L.randn(100)
        with pytest.raises(RuntimeError, match="stft requires the return_complex parameter"):
            L.stft(x, 16)
        with pytest.raises(RuntimeError, match="expected 0 < win_length <= n_fft, but got "
                                               "win_length=20"):
            L.stft(x, 16, win_length=20, return_complex=True)
        with pytest.raises(RuntimeError, match="expected a 1D window tensor of size equal to "
                                               r"win_length=16, but got window with size \[5\]"):
            L.stft(x, 16, window=L.ones(5), return_complex=True)
        with pytest.raises(RuntimeError, match="align_to_window should only be set when "
                                               "center = false"):
            L.stft(x, 16, center=True, align_to_window=True, return_complex=True)
        with pytest.raises(RuntimeError, match="istft requires a complex-valued input tensor"):
            L.istft(L.randn(9, 7), 16)
        w = L.hann_window(16)   # zero at its ends: no overlap covers the first sample
        spec = L.stft(x, 16, window=w, center=False, return_complex=True)
        with pytest.raises(RuntimeError, match="window overlap add min"):
            L.istft(spec, 16, window=w, center=False)
