"""``torchvision.io``'s image functions on tracec: files as uint8 byte
tensors, and PNG / JPEG (any format Pillow reads) decoded into uint8
``C x H x W`` tensors, written back as PNG.  Decoding goes through Pillow
(the ``vision`` extra): a PNG in its own channels decodes to its exact
pixels; channel conversions (``mode=GRAY`` of a color image) are Pillow's
(ITU-R 601-2 luma) and a JPEG's pixels are Pillow's decoder's, which may
differ slightly from torchvision's libpng / libjpeg-turbo.  Video
I/O needs torchvision's FFmpeg bindings and is not provided."""
from __future__ import annotations

import enum
import io as _io

import numpy as np

from tracec import dtypes as dt
from tracec.creation import from_numpy
from tracec.tensor import Tensor

__all__ = ["ImageReadMode", "read_file", "write_file", "decode_image", "decode_png",
           "decode_jpeg", "read_image", "encode_png", "write_png"]


class ImageReadMode(enum.Enum):
    """The channels ``decode_image`` returns (UNCHANGED: the file's own)."""
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = RGB_ALPHA


_PIL_MODE = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA", ImageReadMode.RGB: "RGB",
             ImageReadMode.RGB_ALPHA: "RGBA"}


def read_file(path) -> Tensor:
    """The file's bytes as a 1-D uint8 tensor."""
    with open(path, "rb") as f:
        data = f.read()
    return from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def write_file(filename, data: Tensor) -> None:
    """Write a 1-D uint8 tensor's bytes to ``filename``."""
    with open(filename, "wb") as f:
        f.write(np.asarray(data._data, dtype=np.uint8).tobytes())


def _mode(mode) -> ImageReadMode:
    if isinstance(mode, str):
        return ImageReadMode[mode.upper()]
    return ImageReadMode(mode.value if isinstance(mode, ImageReadMode) else mode)


def decode_image(input, mode=ImageReadMode.UNCHANGED,  # noqa: A002 - torchvision's name
                 apply_exif_orientation: bool = False) -> Tensor:
    """An encoded image (uint8 byte tensor, or a path) as a uint8
    ``C x H x W`` tensor, converted to ``mode``'s channels."""
    from PIL import Image, ImageOps
    if isinstance(input, Tensor):
        if input.dtype is not dt.uint8 or input.dim() != 1:
            raise RuntimeError("Expected a 1 dimensional uint8 tensor of the encoded image")
        img = Image.open(_io.BytesIO(np.asarray(input._data).tobytes()))
    else:
        img = Image.open(str(input))
    if apply_exif_orientation:
        img = ImageOps.exif_transpose(img)
    mode = _mode(mode)
    if mode is ImageReadMode.UNCHANGED:
        if img.mode not in ("L", "LA", "RGB", "RGBA"):
            img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
    else:
        img = img.convert(_PIL_MODE[mode])
    arr = np.array(img, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


decode_png = decode_jpeg = decode_image


def read_image(path, mode=ImageReadMode.UNCHANGED, apply_exif_orientation: bool = False) -> Tensor:
    """``decode_image(read_file(path), mode)``."""
    return decode_image(read_file(path), mode, apply_exif_orientation)


def encode_png(input: Tensor, compression_level: int = 6) -> Tensor:  # noqa: A002
    """A uint8 ``C x H x W`` tensor (1 or 3 channels, or with alpha) as PNG
    file bytes (a 1-D uint8 tensor)."""
    from PIL import Image
    if input.dtype is not dt.uint8 or input.dim() != 3 or input.shape[0] not in (1, 2, 3, 4):
        raise RuntimeError("encode_png: expected a uint8 tensor of shape C x H x W with "
                           "1 to 4 channels")
    arr = np.asarray(input._data).transpose(1, 2, 0)
    img = Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else np.ascontiguousarray(arr),
                          {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[arr.shape[2]])
    buf = _io.BytesIO()
    img.save(buf, format="PNG", compress_level=compression_level)
    return from_numpy(np.frombuffer(buf.getvalue(), dtype=np.uint8).copy())


def write_png(input: Tensor, filename, compression_level: int = 6) -> None:  # noqa: A002
    write_file(filename, encode_png(input, compression_level))
