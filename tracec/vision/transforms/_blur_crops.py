"""``GaussianBlur`` (with ``functional.gaussian_blur``), ``FiveCrop``,
``TenCrop``, ``RandomChoice`` and ``RandomOrder``, as torchvision: the blur
is a reflect-padded depthwise convolution with a normalized Gaussian, and a
PIL image is blurred as its uint8 tensor."""
from __future__ import annotations

import numbers
import random

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.creation import empty, linspace
from tracec.tensor import Tensor
from tracec.vision import _pil
from tracec.vision.transforms import functional as F


def _gaussian_kernel1d(size: int, sigma: float, dtype):
    half = (size - 1) * 0.5
    x = linspace(-half, half, steps=size, dtype=dtype)
    pdf = (-0.5 * (x / sigma).pow(2)).exp()
    return pdf / pdf.sum()


def gaussian_blur(img, kernel_size, sigma=None):
    if isinstance(kernel_size, int):
        kernel_size = [kernel_size, kernel_size]
    kernel_size = list(kernel_size)
    if len(kernel_size) == 1:
        kernel_size = kernel_size * 2
    if any(k % 2 == 0 or k <= 0 for k in kernel_size):
        raise ValueError(f"kernel_size should have odd and positive integers. Got {kernel_size}")
    if sigma is None:
        sigma = [k * 0.15 + 0.35 for k in kernel_size]
    elif isinstance(sigma, numbers.Number):
        sigma = [float(sigma), float(sigma)]
    sigma = [float(s) for s in sigma] * (2 if len(sigma) == 1 else 1)
    if any(s <= 0 for s in sigma):
        raise ValueError(f"sigma should have positive values. Got {sigma}")
    if _pil.is_pil_image(img):
        return F.to_pil_image(gaussian_blur(F.pil_to_tensor(img), kernel_size, sigma),
                              mode=img.mode)
    if not isinstance(img, Tensor):
        raise TypeError(f"img should be PIL Image or Tensor. Got {type(img)}")
    x = img if img.is_floating_point() else img.to(dt.float32)
    kx = _gaussian_kernel1d(kernel_size[0], sigma[0], x.dtype)
    ky = _gaussian_kernel1d(kernel_size[1], sigma[1], x.dtype)
    kernel = ky[:, None].mm(kx[None, :])
    lead = x.shape[:-3]
    x4 = x.reshape(-1, *x.shape[-3:]) if x.ndim > 3 else x.unsqueeze(0)
    c = x4.shape[1]
    pad = [kernel_size[0] // 2, kernel_size[0] // 2, kernel_size[1] // 2, kernel_size[1] // 2]
    x4 = _nn.functional.pad(x4, pad, mode="reflect")
    y = _nn.functional.conv2d(x4, kernel.expand(c, 1, *kernel.shape), groups=c)
    y = y.reshape(*lead, *y.shape[-3:]) if img.ndim > 3 else y[0]
    return y if img.is_floating_point() else y.round().to(img.dtype)


class GaussianBlur(_nn.Module):
    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        super().__init__()
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) \
            else tuple(kernel_size)
        if isinstance(sigma, numbers.Number):
            if sigma <= 0:
                raise ValueError("If sigma is a single number, it must be positive.")
            sigma = (sigma, sigma)
        self.sigma = tuple(sigma)

    @staticmethod
    def get_params(sigma_min: float, sigma_max: float) -> float:
        return empty(1).uniform_(sigma_min, sigma_max).item()

    def forward(self, img):
        s = self.get_params(self.sigma[0], self.sigma[1])
        return gaussian_blur(img, self.kernel_size, [s, s])


class FiveCrop(_nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = F._crop_size(size)

    def forward(self, img):
        return F.five_crop(img, self.size)


class TenCrop(FiveCrop):
    def __init__(self, size, vertical_flip=False):
        super().__init__(size)
        self.vertical_flip = vertical_flip

    def forward(self, img):
        return F.ten_crop(img, self.size, self.vertical_flip)


class RandomChoice:
    """One of ``transforms``, drawn by Python's ``random`` (as torchvision's)."""

    def __init__(self, transforms, p=None):
        if p is not None and len(p) != len(transforms):
            raise ValueError(f"Length of p doesn't match the number of transforms: {len(p)} != "
                             f"{len(transforms)}")
        self.transforms, self.p = transforms, p

    def __call__(self, *args):
        return random.choices(self.transforms, weights=self.p)[0](*args)


class RandomOrder:
    """``transforms`` in an order shuffled by Python's ``random`` (as torchvision's)."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        order = list(range(len(self.transforms)))
        random.shuffle(order)
        for i in order:
            img = self.transforms[i](img)
        return img
