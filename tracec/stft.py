"""``torch.stft`` and ``torch.istft``: short-time Fourier transforms as
composites (padding, framing, windowing and ``tracec.fft``), so their
gradients come from those ops' rules.

Invariant: arguments, defaults, shapes and errors are PyTorch's: frames of
``n_fft`` samples every ``hop_length`` (default ``n_fft // 4``), a window of
``win_length`` (default ``n_fft``) samples zero-padded to ``n_fft`` in the
middle, ``center`` padding of ``n_fft // 2`` on both sides; ``istft`` is the
window-normalized overlap-add that inverts ``stft``.
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import fft as _fft
from tracec import functions as F
from tracec import shape_ops as S
from tracec.complex_ops import complex as _complex, view_as_real
from tracec.contraction import matmul
from tracec.creation import arange, from_numpy, ones, zeros
from tracec.functions import tensor_arg
from tracec.nn import functional as NF
from tracec.scatter_ops import index_add
from tracec.tensor import CONCRETE_CHECKS, Tensor

__all__ = ["stft", "istft"]


_RECTANGULAR = {
    "stft": "A window was not provided. A rectangular window will be applied,which is known "
            "to cause spectral leakage. Other windows such as torch.hann_window or "
            "torch.hamming_window are recommended to reduce spectral leakage.To suppress this "
            "warning and use a rectangular window, explicitly set "
            "`window=torch.ones(n_fft, device=<device>)`.",
    "istft": "A window was not provided. A rectangular window will be applied.Please provide "
             "the same window used by stft to make the inversion lossless.To suppress this "
             "warning and use a rectangular window, explicitly set "
             "`window=torch.ones(n_fft, device=<device>)`.",
}


def _window(window, win_length, n_fft, like, caller):
    if win_length <= 0 or win_length > n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    if window is None:
        warnings.warn(_RECTANGULAR[caller], UserWarning, stacklevel=3)
        window = ones(win_length, dtype=dt.real_of(like.dtype))
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length="
                           f"{win_length}, but got window with size {list(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = NF.pad(window, (left, n_fft - win_length - left))
    return window


def _dft(frames, n_fft, onesided, normalized):
    """The DFT of real ``frames`` over their last axis as two matmuls with
    cosine and sine bases, for a trace being recorded (the transforms are
    eager only; the IR has ``complex`` of real parts): values agree with the
    FFT to rounding, and autodiff differentiates the matmuls."""
    bins = n_fft // 2 + 1 if onesided else n_fft
    ang = (np.outer(np.arange(n_fft), np.arange(bins)) % n_fft) * (2 * np.pi / n_fft)
    scale = n_fft ** -0.5 if normalized else 1.0
    npd = np.float64 if frames.dtype == dt.float64 else np.float32
    cos = from_numpy((scale * np.cos(ang)).astype(npd))
    sin = from_numpy((-scale * np.sin(ang)).astype(npd))
    return _complex(matmul(frames, cos), matmul(frames, sin))


def stft(input, n_fft, hop_length=None, win_length=None, window=None,  # noqa: A002
         center=True, pad_mode="reflect", normalized=False, onesided=None,
         return_complex=None, align_to_window=None):
    """The short-time Fourier transform: ``[..., n_fft // 2 + 1, frames]``
    (``onesided``) complex values of windowed frames.  ``align_to_window``
    (with ``center=False``): frames start where their window does, not
    where its ``n_fft`` frame does."""
    x = tensor_arg(input, "stft")
    if return_complex is None:
        if x.dtype.category != 3 and (window is None or window.dtype.category != 3):
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in "
                               "a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch "
                      "release, stft will return complex tensors for all inputs, and "
                      "return_complex=False will raise an error.\nNote: you can still call "
                      "torch.view_as_real on the complex output to recover the old return "
                      "format.", UserWarning, stacklevel=2)
    if x.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {x.ndim}D")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if hop_length <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    batched = x.ndim == 2
    if not batched:
        x = S.unsqueeze(x, 0)
    if center:
        if align_to_window is not None:
            raise RuntimeError("stft align_to_window should only be set when center = false")
        pad = n_fft // 2
        x = S.squeeze(NF.pad(S.unsqueeze(x, 0), (pad, pad), mode=pad_mode), 0)
    elif align_to_window and win_length < n_fft:
        left = (n_fft - win_length) // 2
        x = NF.pad(x, (left, n_fft - win_length - left))
    if n_fft <= 0 or n_fft > x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    w = _window(window, win_length, n_fft, x, "stft")
    frames = F.mul(x.unfold(-1, n_fft, hop_length), w)          # [B, frames, n_fft]
    onesided = (x.dtype.category != 3 and w.dtype.category != 3) if onesided is None \
        else onesided
    if CONCRETE_CHECKS and frames.dtype.category != 3:
        spec = _dft(frames, n_fft, onesided, normalized)
    else:
        norm = "ortho" if normalized else "backward"
        spec = _fft.rfft(frames, norm=norm) if onesided else _fft.fft(frames, norm=norm)
    spec = S.transpose(spec, -1, -2)                           # [B, freq, frames]
    if not batched:
        spec = S.squeeze(spec, 0)
    return spec if return_complex else view_as_real(spec)


def istft(input, n_fft, hop_length=None, win_length=None, window=None,  # noqa: A002
          center=True, normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of ``stft``: windowed inverse FFTs of the frames,
    overlap-added and divided by the summed squared window."""
    spec = tensor_arg(input, "istft")
    if spec.dtype.category != 3:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    batched = spec.ndim == 3
    if not batched:
        spec = S.unsqueeze(spec, 0)
    n_freq, n_frames = spec.shape[-2], spec.shape[-1]
    onesided = (n_freq != n_fft) if onesided is None else onesided
    if onesided and n_freq != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                           f"{n_freq}")
    w = _window(window, win_length, n_fft, spec, "istft")
    norm = "ortho" if normalized else "backward"
    frames = S.transpose(spec, -1, -2)                         # [B, frames, freq]
    if onesided:
        if return_complex:
            raise RuntimeError("cannot have onesided output if window or input is complex")
        frames = _fft.irfft(frames, n=n_fft, norm=norm)
    elif return_complex:
        frames = _fft.ifft(frames, n=n_fft, norm=norm)
    else:
        # As PyTorch: a real result from a two-sided spectrum reads its
        # first n_fft // 2 + 1 bins as one-sided (irfft), not ifft(...).real
        # (the two differ when the spectrum is not Hermitian).
        frames = _fft.irfft(frames[..., :n_fft // 2 + 1], n=n_fft, norm=norm)
    frames = F.mul(frames, w)
    total = n_fft + hop_length * (n_frames - 1)
    # Overlap-add: sample t of frame f lands at f * hop + t.
    pos = F.add(S.unsqueeze(F.mul(arange(n_frames), hop_length), 1), arange(n_fft))
    pos = S.reshape(pos, (-1,))
    b = frames.shape[0]
    y = index_add(zeros(b, total, dtype=frames.dtype), 1, pos,
                  S.reshape(frames, (b, n_frames * n_fft)))
    envelope = index_add(zeros(total, dtype=w.dtype), 0, pos,
                         S.reshape(S.expand(S.unsqueeze(F.mul(w, w), 0), n_frames, n_fft),
                                   (-1,)))
    start = n_fft // 2 if center else 0
    end = total if length is None else start + length
    if center and length is None:
        end = total - n_fft // 2
    y = y[:, start:min(end, total)]
    envelope = envelope[start:min(end, total)]
    if F.lt(envelope.abs(), 1e-11).any().item():
        raise RuntimeError("istft: window overlap add min: 0")   # PyTorch's NOLA check
    y = F.div(y, envelope)
    if length is not None and y.shape[-1] < length:
        warnings.warn("The length of signal is shorter than the length parameter. Result is "
                      "being padded with zeros in the tail. Please check your center and "
                      "hop_length settings.", UserWarning, stacklevel=2)
        y = NF.pad(y, (0, length - y.shape[-1]))
    return y if batched else S.squeeze(y, 0)


def _tensor_stft(self, n_fft, hop_length=None, win_length=None, window=None, center=True,
                 pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
                 align_to_window=None):
    return stft(self, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
                onesided, return_complex, align_to_window)


def _tensor_istft(self, n_fft, hop_length=None, win_length=None, window=None, center=True,
                  normalized=False, onesided=None, length=None, return_complex=False):
    return istft(self, n_fft, hop_length, win_length, window, center, normalized, onesided,
                 length, return_complex)


_tensor_stft.__name__ = _tensor_stft.__qualname__ = "stft"
_tensor_istft.__name__ = _tensor_istft.__qualname__ = "istft"
Tensor.stft = _tensor_stft
Tensor.istft = _tensor_istft
