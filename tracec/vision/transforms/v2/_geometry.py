"""v2's resize: the same as v1's except on uint8 tensors, which v2 hands to
ATen's native uint8 kernel (bilinear, bicubic) instead of
resizing in float: emulated here in fixed point, bit for bit."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.creation import from_numpy
from tracec.tensor import Tensor
from tracec.vision.transforms import functional as F
from tracec.vision.transforms import transforms as T
from tracec.vision.transforms._resize import resize_uint8


def resize(img, size, interpolation=F.InterpolationMode.BILINEAR, max_size=None,
           antialias=True):
    mode = F._mode(interpolation)
    native = mode in (F.InterpolationMode.BILINEAR, F.InterpolationMode.BICUBIC)
    if not (isinstance(img, Tensor) and img.dtype == dt.uint8 and native):
        return F.resize(img, size, mode, max_size, antialias)
    _, h, w = F.get_dimensions(img)
    out = F._resized_size((h, w), [size] if isinstance(size, int) else list(size), max_size)
    if [h, w] == out:
        return img
    return from_numpy(resize_uint8(img.numpy(), out, mode.value, bool(antialias)))


def resized_crop(img, top, left, height, width, size,
                 interpolation=F.InterpolationMode.BILINEAR, antialias=True):
    return resize(F.crop(img, top, left, height, width), size, interpolation,
                  antialias=antialias)


class Resize(T.Resize):
    def forward(self, img):
        return resize(img, self.size, self.interpolation, self.max_size, self.antialias)


class RandomResizedCrop(T.RandomResizedCrop):
    def forward(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return resized_crop(img, i, j, h, w, self.size, self.interpolation,
                            antialias=self.antialias)
