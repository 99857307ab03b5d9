"""The PIL-image side of ``transforms.functional`` (torchvision's
``_functional_pil``): every function takes and returns a PIL image and
leaves the pixels to Pillow, as torchvision does."""
from __future__ import annotations

import numpy as np

from tracec.vision._pil import image_module, num_channels


def get_dimensions(img):
    w, h = img.size
    return [num_channels(img), h, w]


def crop(img, top, left, height, width):
    return img.crop((left, top, left + width, top + height))


def resize(img, size, interpolation):
    h, w = size
    return img.resize((w, h), interpolation)


def hflip(img):
    return img.transpose(image_module().Transpose.FLIP_LEFT_RIGHT)


def vflip(img):
    return img.transpose(image_module().Transpose.FLIP_TOP_BOTTOM)


def _fill_color(img, fill):
    if fill is None:
        fill = 0
    if isinstance(fill, (int, float)) and num_channels(img) > 1:
        return tuple([int(fill)] * num_channels(img))
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            fill = fill * num_channels(img)
        return tuple(int(v) for v in fill) if num_channels(img) > 1 else int(fill[0])
    return int(fill) if img.mode != "F" else float(fill)


def pad(img, padding, fill=0, padding_mode="constant"):
    left, top, right, bottom = padding
    if padding_mode == "constant":
        Image = image_module()
        out = Image.new(img.mode, (img.size[0] + left + right, img.size[1] + top + bottom),
                        _fill_color(img, fill))
        if img.mode == "P":
            out.putpalette(img.getpalette())
        out.paste(img, (left, top))
        return out
    # reflect / edge / symmetric: NumPy's modes of the same names
    np_mode = {"edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}[padding_mode]
    arr = np.asarray(img)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (arr.ndim - 2)
    out = image_module().fromarray(np.pad(arr, widths, np_mode))
    if img.mode == "P":
        out.putpalette(img.getpalette())
    return out


def rotate(img, angle, interpolation, expand=False, center=None, fill=None):
    kw = {"fillcolor": _fill_color(img, fill)} if fill is not None else {}
    return img.rotate(angle, interpolation, expand, center, **kw)


def affine(img, matrix, interpolation, fill=None):
    kw = {"fillcolor": _fill_color(img, fill)} if fill is not None else {}
    return img.transform(img.size, image_module().Transform.AFFINE, matrix, interpolation, **kw)


def to_grayscale(img, num_output_channels):
    if num_output_channels == 1:
        return img.convert("L")
    if num_output_channels == 3:
        gray = img.convert("L")
        return image_module().merge("RGB", [gray, gray, gray])
    raise ValueError("num_output_channels should be either 1 or 3")


def adjust_brightness(img, factor):
    from PIL import ImageEnhance
    return ImageEnhance.Brightness(img).enhance(factor)


def adjust_contrast(img, factor):
    from PIL import ImageEnhance
    return ImageEnhance.Contrast(img).enhance(factor)


def adjust_saturation(img, factor):
    from PIL import ImageEnhance
    return ImageEnhance.Color(img).enhance(factor)


def adjust_hue(img, hue_factor):
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    Image = image_module()
    mode = img.mode
    if mode in {"L", "1", "I", "F"}:
        return img
    h, s, v = img.convert("HSV").split()
    np_h = np.array(h, dtype=np.uint8)
    # uint8 addition wraps around: the hue is an angle
    with np.errstate(over="ignore"):
        np_h += np.uint8(np.int64(hue_factor * 255) & 0xFF)
    h = Image.fromarray(np_h)
    return Image.merge("HSV", (h, s, v)).convert(mode)
