"""``torchvision.transforms.functional`` on tracec: each function takes a
PIL image (handled by Pillow, ``_functional_pil``) or a tensor image of
shape ``[..., C, H, W]`` (handled here with tracec ops, so the tensor path
is differentiable and traceable), and returns the same kind.

Invariant: on the same input, the result equals torchvision 0.28's (PIL
paths exactly, since both call Pillow; tensor paths up to float rounding).
"""
from __future__ import annotations

import numbers
from enum import Enum

import numpy as np

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.creation import from_numpy
from tracec.tensor import Tensor
from tracec.vision import _pil
from tracec.vision.transforms import _functional_pil as F_pil
from tracec.vision.transforms._resize import resize_float


class InterpolationMode(Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_MODES = {InterpolationMode.NEAREST: 0, InterpolationMode.NEAREST_EXACT: 0,
              InterpolationMode.BILINEAR: 2, InterpolationMode.BICUBIC: 3,
              InterpolationMode.BOX: 4, InterpolationMode.HAMMING: 5,
              InterpolationMode.LANCZOS: 1}
_FROM_INT = {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR,
             3: InterpolationMode.BICUBIC, 4: InterpolationMode.BOX,
             5: InterpolationMode.HAMMING, 1: InterpolationMode.LANCZOS}


def _mode(interpolation) -> InterpolationMode:
    if isinstance(interpolation, int):
        return _FROM_INT[interpolation]
    if not isinstance(interpolation, InterpolationMode):
        raise TypeError("Argument interpolation should be a InterpolationMode or a "
                        "corresponding Pillow integer constant")
    return interpolation


def _check_image(img):
    # (torchvision's words: an input that is no tensor reaches its PIL
    # backend, which refuses it; get_dimensions says it differently)
    if not (isinstance(img, Tensor) or _pil.is_pil_image(img)):
        raise TypeError(f"img should be PIL Image. Got {type(img)}")


def _is_tensor(img) -> bool:
    _check_image(img)
    return isinstance(img, Tensor)


# ---- conversions -------------------------------------------------------

def to_tensor(pic) -> Tensor:
    """PIL image or HxW(xC) ndarray -> CxHxW tensor; uint8 becomes float in [0, 1]."""
    if not (_pil.is_pil_image(pic) or isinstance(pic, np.ndarray)):
        raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        if pic.ndim == 2:
            pic = pic[:, :, None]
        img = from_numpy(np.ascontiguousarray(pic.transpose((2, 0, 1))))
        return img.to(dt.get_default_dtype()).div(255) if img.dtype == dt.uint8 else img
    nptype = {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8)
    arr = np.array(pic, nptype, copy=True)
    if pic.mode == "1":
        arr = 255 * arr
    arr = arr.reshape(pic.size[1], pic.size[0], _pil.num_channels(pic))
    img = from_numpy(np.ascontiguousarray(arr.transpose((2, 0, 1))))
    return img.to(dt.get_default_dtype()).div(255) if img.dtype == dt.uint8 else img


def pil_to_tensor(pic) -> Tensor:
    if not _pil.is_pil_image(pic):
        raise TypeError(f"pic should be PIL Image. Got {type(pic)}")
    arr = np.array(pic, copy=True)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return from_numpy(np.ascontiguousarray(arr.transpose((2, 0, 1))))


_MODES_BY_CHANNELS = {1: None, 2: "LA", 3: "RGB", 4: "RGBA"}
_MODE_BY_DTYPE = {np.uint8: "L", np.int16: "I;16", np.int32: "I", np.float32: "F"}


def to_pil_image(pic, mode=None):
    """CxHxW tensor or HxWxC ndarray -> PIL image (floats are scaled by 255
    and truncated to uint8, as torchvision does)."""
    if isinstance(pic, Tensor):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        if pic.ndim == 2:
            pic = pic.unsqueeze(0)
        if pic.is_floating_point() and mode != "F":
            pic = pic.mul(255).byte()
        npimg = np.transpose(pic.numpy(), (1, 2, 0))
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        npimg = pic[:, :, None] if pic.ndim == 2 else pic
    else:
        raise TypeError(f"pic should be Tensor or ndarray. Got {type(pic)}.")
    channels = npimg.shape[2]
    if channels > 4:
        raise ValueError(f"pic should not have > 4 channels. Got {channels} channels.")
    if channels == 1:
        npimg = npimg[:, :, 0]
        expected = _MODE_BY_DTYPE.get(npimg.dtype.type)
        if expected is None:
            raise TypeError(f"Input type {npimg.dtype} is not supported")
        if mode is not None and mode != expected:
            raise ValueError(f"Incorrect mode ({mode}) supplied for input type "
                             f"{np.dtype(npimg.dtype)}. Should be {expected}")
        mode = expected
    elif mode is None:
        if npimg.dtype != np.uint8:
            raise TypeError(f"Input type {npimg.dtype} is not supported")
        mode = _MODES_BY_CHANNELS[channels]
    return _pil.from_array(npimg, mode)


def convert_image_dtype(image: Tensor, dtype=dt.float32) -> Tensor:
    """Rescale between integer ranges [0, max] and float [0, 1]."""
    if not isinstance(image, Tensor):
        raise TypeError("Input img should be Tensor Image")
    if image.dtype == dtype:
        return image
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        eps = 1e-3
        return image.mul(_max_value(dtype) + 1.0 - eps).to(dtype)
    if dtype.is_floating_point:
        return image.to(dtype).div(_max_value(image.dtype))
    in_max, out_max = _max_value(image.dtype), _max_value(dtype)
    if in_max > out_max:
        factor = (in_max + 1) // (out_max + 1)
        return (image // factor).to(dtype)
    factor = (out_max + 1) // (in_max + 1)
    return image.to(dtype) * factor


def _max_value(dtype) -> int:
    return {dt.uint8: 255, dt.int8: 127, dt.int16: 32767, dt.int32: 2 ** 31 - 1,
            dt.int64: 2 ** 63 - 1, dt.bool_: 1}.get(dtype, 1)


# ---- geometry ----------------------------------------------------------

def get_dimensions(img):
    if not (isinstance(img, Tensor) or _pil.is_pil_image(img)):
        raise TypeError(f"Unexpected type {type(img)}")
    if isinstance(img, Tensor):
        c = 1 if img.ndim == 2 else img.shape[-3]
        return [c, img.shape[-2], img.shape[-1]]
    return F_pil.get_dimensions(img)


def get_image_size(img):
    _, h, w = get_dimensions(img)
    return [w, h]


def get_image_num_channels(img) -> int:
    return get_dimensions(img)[0]


def _resized_size(image_size, size, max_size=None):
    if len(size) == 1:
        h, w = image_size
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size[0], int(size[0] * long / short)
        if max_size is not None:
            if max_size <= size[0]:
                raise ValueError(f"max_size = {max_size} must be strictly greater than the "
                                 f"requested size for the smaller edge size = {size}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return [new_long, new_short] if w <= h else [new_short, new_long]
    return [size[0], size[1]]


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    mode = _mode(interpolation)
    if isinstance(size, (list, tuple)):
        if len(size) not in (1, 2):
            raise ValueError("Size must be an int or a 1 or 2 element tuple/list, not a "
                             f"{len(size)} element tuple/list")
        if max_size is not None and len(size) != 1:
            raise ValueError("max_size should only be passed if size specifies the length of "
                             "the smaller edge, i.e. size should be an int or a sequence of "
                             "length 1 in torchscript mode.")
    _, h, w = get_dimensions(img)
    out = _resized_size((h, w), [size] if isinstance(size, int) else list(size), max_size)
    if [h, w] == out:
        return img
    if not _is_tensor(img):
        return F_pil.resize(img, out, _PIL_MODES[mode])
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.NEAREST_EXACT,
                    InterpolationMode.BILINEAR, InterpolationMode.BICUBIC):
        raise ValueError(f"tensor images support nearest, nearest-exact, bilinear and bicubic "
                         f"interpolation, not {mode.value}")
    x = img if img.is_floating_point() else img.to(dt.float32)
    y = resize_float(x, out, mode.value, bool(antialias))
    if mode == InterpolationMode.BICUBIC and img.dtype == dt.uint8:
        y = y.clamp(0, 255)
    return y if img.is_floating_point() else y.round().to(img.dtype)


def _parse_padding(padding):
    if isinstance(padding, numbers.Number):
        padding = [int(padding)]
    padding = list(padding)
    if len(padding) not in (1, 2, 4):
        raise ValueError("Padding must be an int or a 1, 2, or 4 element tuple, not a "
                         f"{len(padding)} element tuple")
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    return padding


def pad(img, padding, fill=0, padding_mode="constant"):
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
    left, top, right, bottom = _parse_padding(padding)
    if not _is_tensor(img):
        return F_pil.pad(img, [left, top, right, bottom], fill, padding_mode)
    if padding_mode == "constant":
        return _nn.functional.pad(img, [left, right, top, bottom], value=float(fill or 0))
    if padding_mode == "symmetric":
        h_idx = _symmetric_index(img.shape[-2], top, bottom)
        w_idx = _symmetric_index(img.shape[-1], left, right)
        return img[..., h_idx, :][..., w_idx]
    x = img if img.is_floating_point() else img.to(dt.float32)
    lead = x.shape[:-3] if x.ndim > 3 else ()
    x4 = x.reshape(-1, *x.shape[-3:]) if x.ndim >= 3 else x.reshape(1, 1, *x.shape)
    mode = {"edge": "replicate", "reflect": "reflect"}[padding_mode]
    y = _nn.functional.pad(x4, [left, right, top, bottom], mode=mode)
    y = y.reshape(*lead, *y.shape[-3:]) if img.ndim >= 3 else y[0, 0]
    return y if img.is_floating_point() else y.to(img.dtype)


def _symmetric_index(n, before, after):
    idx = np.arange(-before, n + after)
    idx = np.where(idx < 0, -idx - 1, idx)
    idx = np.where(idx >= n, 2 * n - idx - 1, idx)
    return from_numpy(idx.astype(np.int64))


def crop(img, top, left, height, width):
    if not _is_tensor(img):
        return F_pil.crop(img, top, left, height, width)
    _, h, w = get_dimensions(img)
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        inner = img[..., max(top, 0):min(bottom, h), max(left, 0):min(right, w)]
        pads = [max(-left, 0), max(-top, 0), max(right - w, 0), max(bottom - h, 0)]
        return pad(inner, pads, fill=0)
    return img[..., top:bottom, left:right]


def _crop_size(size):
    if isinstance(size, numbers.Number):
        return (int(size), int(size))
    if isinstance(size, (tuple, list)) and len(size) == 1:
        return (size[0], size[0])
    return tuple(size)


def center_crop(img, output_size):
    _, h, w = get_dimensions(img)
    ch, cw = _crop_size(output_size)
    if cw > w or ch > h:
        pads = [(cw - w) // 2 if cw > w else 0, (ch - h) // 2 if ch > h else 0,
                (cw - w + 1) // 2 if cw > w else 0, (ch - h + 1) // 2 if ch > h else 0]
        img = pad(img, pads, fill=0)
        _, h, w = get_dimensions(img)
        if cw == w and ch == h:
            return img
    top = int(round((h - ch) / 2.0))
    left = int(round((w - cw) / 2.0))
    return crop(img, top, left, ch, cw)


def resized_crop(img, top, left, height, width, size,
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def hflip(img):
    return img.flip(-1) if _is_tensor(img) else F_pil.hflip(img)


def vflip(img):
    return img.flip(-2) if _is_tensor(img) else F_pil.vflip(img)


def five_crop(img, size):
    _, h, w = get_dimensions(img)
    ch, cw = size = _crop_size(size)
    if ch > h or cw > w:
        raise ValueError(f"Requested crop size {size} is bigger than input size {(h, w)}")
    return (crop(img, 0, 0, ch, cw), crop(img, 0, w - cw, ch, cw),
            crop(img, h - ch, 0, ch, cw), crop(img, h - ch, w - cw, ch, cw),
            center_crop(img, [ch, cw]))


def ten_crop(img, size, vertical_flip=False):
    first = five_crop(img, size)
    return first + five_crop(vflip(img) if vertical_flip else hflip(img), size)


from tracec.vision.transforms._functional_geom import affine, rotate  # noqa: E402,F401
from tracec.vision.transforms._functional_color import (  # noqa: E402,F401
    adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation, normalize,
    rgb_to_grayscale, to_grayscale)
from tracec.vision.transforms._affine_erasing import erase  # noqa: E402,F401
from tracec.vision.transforms._blur_crops import gaussian_blur  # noqa: E402,F401
from tracec.vision.transforms._functional_photometric import (  # noqa: E402,F401
    adjust_gamma, adjust_sharpness, autocontrast, equalize, invert, posterize, solarize)
