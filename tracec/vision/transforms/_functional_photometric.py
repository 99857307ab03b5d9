"""The photometric functions AutoAugment and its kin use (``invert``,
``posterize``, ``solarize``, ``adjust_sharpness``, ``autocontrast``,
``equalize``, ``adjust_gamma``), as torchvision 0.29 writes them: tensors
as its ``_functional_tensor`` (uint8 and float images, results in the
input's dtype and range), PIL images through Pillow's ``ImageOps`` /
``ImageEnhance`` as its ``_functional_pil``."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.creation import ones
from tracec.functions import where
from tracec.shape_ops import stack
from tracec.tensor import Tensor
from tracec.vision import _pil
from tracec.vision.transforms import functional as F

_MAX = {"uint8": 255, "int8": 127, "int16": 32767, "uint16": 65535, "int32": 2147483647,
        "int64": 9223372036854775807}


def _max_value(d) -> float:
    return _MAX.get(d.name, 1.0)


def _image(img, name: str, min_dims: int = 3, channels=(1, 3)) -> None:
    if not isinstance(img, Tensor):
        raise TypeError("Tensor is not a torch image.")
    if img.ndim < min_dims:
        raise TypeError(f"Input image tensor should have at least {min_dims} dimensions, but "
                        f"found {img.ndim}")
    c = F.get_dimensions(img)[0]
    if c not in channels:
        raise TypeError(f"Input image tensor permitted channel values are {list(channels)}, "
                        f"but found {c}")


def _pil_or_none(img, op: str, *args):
    """The Pillow result for a PIL image (None for a tensor)."""
    if isinstance(img, Tensor):
        return None
    if not _pil.is_pil_image(img):
        raise TypeError(f"img should be PIL Image. Got {type(img)}")
    from PIL import ImageEnhance, ImageOps
    if op == "sharpness":
        return ImageEnhance.Sharpness(img).enhance(*args)
    return getattr(ImageOps, op)(img, *args)


def invert(img):
    pil = _pil_or_none(img, "invert")
    if pil is not None:
        return pil
    _image(img, "invert")
    return _max_value(img.dtype) - img


def posterize(img, bits: int):
    if not 0 <= bits <= 8:
        raise ValueError(f"The number if bits should be between 0 and 8. Got {bits}")
    pil = _pil_or_none(img, "posterize", bits)
    if pil is not None:
        return pil
    _image(img, "posterize")
    if img.dtype is not dt.uint8:
        raise TypeError(f"Only torch.uint8 image tensors are supported, but found {img.dtype}")
    return img & -int(2 ** (8 - bits))


def solarize(img, threshold: float):
    pil = _pil_or_none(img, "solarize", threshold)
    if pil is not None:
        return pil
    _image(img, "solarize")
    if threshold > _max_value(img.dtype):
        raise TypeError("Threshold should be less than bound of img.")
    return where(img >= threshold, invert(img), img)


def _blurred_degenerate_image(img):
    d = img.dtype if img.is_floating_point() else dt.float32
    kernel = ones((3, 3), dtype=d)
    kernel[1, 1] = 5.0
    kernel = kernel / kernel.sum()
    c = img.shape[-3]
    kernel = kernel.expand(c, 1, 3, 3)
    x = img.reshape(-1, *img.shape[-3:]) if img.ndim != 4 else img
    y = _nn.functional.conv2d(x.to(d), kernel, groups=c)
    if not img.is_floating_point():      # torchvision's _cast_squeeze_out: round, then cast
        y = y.round()
    y = y.to(img.dtype)
    out = img.clone()
    out[..., 1:-1, 1:-1] = y.reshape(*img.shape[:-2], *y.shape[-2:])
    return out


def adjust_sharpness(img, sharpness_factor: float):
    if sharpness_factor < 0:
        raise ValueError(f"sharpness_factor ({sharpness_factor}) is not non-negative.")
    pil = _pil_or_none(img, "sharpness", sharpness_factor)
    if pil is not None:
        return pil
    _image(img, "adjust_sharpness", min_dims=2)
    if img.shape[-1] <= 2 or img.shape[-2] <= 2:
        return img
    bound = _max_value(img.dtype)
    r = float(sharpness_factor)
    return (r * img + (1.0 - r) * _blurred_degenerate_image(img)).clamp(0, bound).to(img.dtype)


def autocontrast(img):
    pil = _pil_or_none(img, "autocontrast")
    if pil is not None:
        return pil
    _image(img, "autocontrast")
    bound = _max_value(img.dtype)
    d = img.dtype if img.is_floating_point() else dt.float32
    lo = img.amin(dim=(-2, -1), keepdim=True).to(d)
    hi = img.amax(dim=(-2, -1), keepdim=True).to(d)
    scale = bound / (hi - lo)
    flat = scale.isfinite().logical_not()
    lo = lo.masked_fill(flat, 0)
    scale = scale.masked_fill(flat, 1)
    return ((img - lo) * scale).clamp(0, bound).to(img.dtype)


def _scale_channel(chan):
    from tracec.binning import bincount
    from tracec.rearrange import cumsum
    hist = bincount(chan.reshape(-1), minlength=256)
    nonzero = hist[hist != 0]
    step = nonzero[:-1].sum().div(255, rounding_mode="floor")
    if step == 0:
        return chan
    lut = (cumsum(hist, 0) + step.div(2, rounding_mode="floor")).div(step, rounding_mode="floor")
    lut = _nn.functional.pad(lut, [1, 0])[:-1].clamp(0, 255)
    return lut[chan.to(dt.int64)].to(dt.uint8)


def equalize(img):
    pil = _pil_or_none(img, "equalize")
    if pil is not None:
        return pil
    _image(img, "equalize")
    if not 3 <= img.ndim <= 4:
        raise TypeError(f"Input image tensor should have 3 or 4 dimensions, but found {img.ndim}")
    if img.dtype is not dt.uint8:
        raise TypeError(f"Only torch.uint8 image tensors are supported, but found {img.dtype}")

    def one(x):
        return stack([_scale_channel(x[c]) for c in range(x.shape[0])])
    return one(img) if img.ndim == 3 else stack([one(x) for x in img])


def adjust_gamma(img, gamma: float, gain: float = 1):
    if not isinstance(img, Tensor):
        if not _pil.is_pil_image(img):
            raise TypeError(f"img should be PIL Image. Got {type(img)}")
        if gamma < 0:
            raise ValueError("Gamma should be a non-negative real number")
        mode = img.mode
        table = [int((255 + 1 - 1e-3) * gain * pow(v / 255.0, gamma)) for v in range(256)] * 3
        return img.convert("RGB").point(table).convert(mode)
    _image(img, "adjust_gamma", min_dims=2)
    if gamma < 0:
        raise ValueError("Gamma should be a non-negative real number")
    d = img.dtype
    x = img if img.is_floating_point() else F.convert_image_dtype(img, dt.float32)
    return F.convert_image_dtype((gain * x.pow(gamma)).clamp(0, 1), d)
