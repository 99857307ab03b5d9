"""v2's ``ToImage`` (PIL image / HxWxC array / tensor -> CxHxW tensor of
the same dtype) and ``ToDtype`` (a cast; with ``scale=True`` the value
range is rescaled as ``convert_image_dtype`` does)."""
from __future__ import annotations

import numpy as np

from tracec import nn as _nn
from tracec.creation import from_numpy
from tracec.tensor import Tensor
from tracec.vision import _pil
from tracec.vision.transforms import functional as F


def to_image(inpt) -> Tensor:
    if isinstance(inpt, np.ndarray):
        arr = inpt[:, :, None] if inpt.ndim == 2 else inpt
        return from_numpy(np.ascontiguousarray(arr.transpose((2, 0, 1))))
    if _pil.is_pil_image(inpt):
        return F.pil_to_tensor(inpt)
    if isinstance(inpt, Tensor):
        return inpt
    raise TypeError(f"Input can either be a pure Tensor, a numpy array, or a PIL image, but got "
                    f"{type(inpt)} instead.")


def to_dtype(inpt: Tensor, dtype, scale: bool = False) -> Tensor:
    if isinstance(dtype, dict):
        raise TypeError("tracec.vision: ToDtype takes one dtype (no per-tv_tensor dict)")
    return F.convert_image_dtype(inpt, dtype) if scale else inpt.to(dtype)


class ToImage(_nn.Module):
    def forward(self, inpt):
        return to_image(inpt)


class ToDtype(_nn.Module):
    def __init__(self, dtype, scale: bool = False):
        super().__init__()
        self.dtype, self.scale = dtype, scale

    def forward(self, inpt):
        return to_dtype(inpt, self.dtype, self.scale)
