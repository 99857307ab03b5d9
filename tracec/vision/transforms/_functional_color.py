"""Colour functions of ``transforms.functional`` (normalize, grayscale,
brightness/contrast/saturation/hue), tensor side as torchvision's
``_functional_tensor``: blends clamp to the image's range and keep its
dtype; hue goes through HSV."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.creation import arange, as_tensor, ones_like, zeros_like
from tracec.shape_ops import stack
from tracec.tensor import Tensor
from tracec.vision.transforms import _functional_pil as F_pil
from tracec.vision.transforms import functional as F


def normalize(tensor: Tensor, mean, std, inplace: bool = False) -> Tensor:
    """``(tensor - mean) / std`` per channel of a float [..., C, H, W] tensor."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"img should be Tensor Image. Got {type(tensor)}")
    if not tensor.is_floating_point():
        raise TypeError(f"Input tensor should be a float tensor. Got {tensor.dtype}.")
    if tensor.ndim < 3:
        raise ValueError("Expected tensor to be a tensor image of size (..., C, H, W). Got "
                         f"tensor.size() = {tuple(tensor.shape)}")
    # as torchvision: torch.as_tensor (a mean / std given as a tensor, as
    # airbench's CIFAR_MEAN, is converted without torch.tensor's copy warning)
    mean = as_tensor(mean, dtype=tensor.dtype)
    std = as_tensor(std, dtype=tensor.dtype)
    if (std == 0).any():
        raise ValueError(f"std evaluated to zero after conversion to {tensor.dtype}, "
                         "leading to division by zero.")
    if mean.ndim == 1:
        mean = mean.view(-1, 1, 1)
    if std.ndim == 1:
        std = std.view(-1, 1, 1)
    if inplace:
        return tensor.sub_(mean).div_(std)
    return tensor.sub(mean).div(std)


def rgb_to_grayscale(img, num_output_channels: int = 1):
    if num_output_channels not in (1, 3):
        raise ValueError("num_output_channels should be either 1 or 3")
    if not F._is_tensor(img):
        return F_pil.to_grayscale(img, num_output_channels)
    c = F.get_dimensions(img)[0]
    if c == 1:
        gray = img
    elif c == 3:
        r, g, b = img.unbind(dim=-3)
        gray = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(dim=-3)
    else:
        raise TypeError(f"Input image tensor permitted channel values are [1, 3], but found {c}")
    if num_output_channels == 3:
        return gray.expand(*img.shape)
    return gray


def to_grayscale(img, num_output_channels: int = 1):
    if F._is_tensor(img):
        raise TypeError("Input should be PIL Image")
    return F_pil.to_grayscale(img, num_output_channels)


def _blend(img1, img2, ratio):
    bound = 1.0 if img1.is_floating_point() else 255.0
    return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, bound).to(img1.dtype)


def _check_factor(name, factor):
    if factor < 0:
        raise ValueError(f"{name}_factor ({factor}) is not non-negative.")


def adjust_brightness(img, brightness_factor: float):
    _check_factor("brightness", brightness_factor)
    if not F._is_tensor(img):
        return F_pil.adjust_brightness(img, brightness_factor)
    return _blend(img, zeros_like(img), brightness_factor)


def adjust_contrast(img, contrast_factor: float):
    _check_factor("contrast", contrast_factor)
    if not F._is_tensor(img):
        return F_pil.adjust_contrast(img, contrast_factor)
    dtype = img.dtype if img.is_floating_point() else dt.float32
    src = rgb_to_grayscale(img) if F.get_dimensions(img)[0] == 3 else img
    mean = src.to(dtype).mean(dim=(-3, -2, -1), keepdim=True)
    return _blend(img, mean, contrast_factor)


def adjust_saturation(img, saturation_factor: float):
    _check_factor("saturation", saturation_factor)
    if not F._is_tensor(img):
        return F_pil.adjust_saturation(img, saturation_factor)
    if F.get_dimensions(img)[0] == 1:
        return img
    return _blend(img, rgb_to_grayscale(img), saturation_factor)


def adjust_hue(img, hue_factor: float):
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    if not F._is_tensor(img):
        return F_pil.adjust_hue(img, hue_factor)
    if F.get_dimensions(img)[0] == 1:
        return img
    orig = img.dtype
    x = F.convert_image_dtype(img, dt.float32)
    h, s, v = _rgb2hsv(x).unbind(dim=-3)
    h = (h + hue_factor) % 1.0
    return F.convert_image_dtype(_hsv2rgb(stack((h, s, v), dim=-3)), orig)


def _rgb2hsv(img):
    r, g, b = img.unbind(dim=-3)
    maxc = img.max(dim=-3).values
    minc = img.min(dim=-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = ones_like(maxc)
    s = cr / ones.where(eqc, maxc)
    cr_div = ones.where(eqc, cr)
    rc, gc, bc = (maxc - r) / cr_div, (maxc - g) / cr_div, (maxc - b) / cr_div
    hr = (maxc == r).to(img.dtype) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)).to(img.dtype) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)).to(img.dtype) * (4.0 + gc - rc)
    h = ((hr + hg + hb) / 6.0 + 1.0).fmod(1.0)
    return stack((h, s, maxc), dim=-3)


def _hsv2rgb(img):
    h, s, v = img.unbind(dim=-3)
    i = (h * 6.0).floor()
    f = h * 6.0 - i
    i = i.to(dt.int32) % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    mask = (i.unsqueeze(dim=-3) == arange(6, dtype=dt.int32).view(-1, 1, 1)).to(img.dtype)
    a = stack((stack((v, q, p, p, t, v), dim=-3), stack((t, v, v, q, p, p), dim=-3),
               stack((p, p, t, v, v, q), dim=-3)), dim=-4)
    return (mask.unsqueeze(dim=-4) * a).sum(dim=-3)
