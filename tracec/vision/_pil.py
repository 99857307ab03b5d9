"""Pillow, loaded on first use: ``tracec.vision`` imports without it (tensor
transforms, models, ops need none), and whatever needs an image raises an
``ImportError`` naming the ``vision`` extra that provides it."""
from __future__ import annotations

import sys

import numpy as np


def image_module():
    """``PIL.Image``, or an ImportError that says how to get it."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("tracec.vision needs Pillow for PIL images: "
                          "pip install 'tracec[vision]' (or pip install pillow)") from None
    return Image


def is_pil_image(x) -> bool:
    # without importing PIL: an object can only be a PIL image once PIL is loaded
    mod = sys.modules.get("PIL.Image")
    return mod is not None and isinstance(x, mod.Image)


def from_array(arr: np.ndarray, mode: str):
    """A PIL image of ``mode`` reading ``arr``'s bytes as that mode, as
    torchvision's ``_Image_fromarray`` does (Pillow >= 11.3 no longer takes
    ``mode=`` in ``fromarray``)."""
    Image = image_module()
    arr = np.ascontiguousarray(arr)
    img = Image.fromarray(arr)
    if img.mode == mode:
        return img
    return Image.frombuffer(mode, (arr.shape[1], arr.shape[0]), arr.tobytes(), "raw", mode, 0, 1)


def num_channels(img) -> int:
    return len(img.getbands())
