"""Image summaries as ``torch.utils.tensorboard`` writes them: an array in
``dataformats`` (``CHW``, ``HWC``, ``HW``; ``NCHW`` and the like tiled into
one grid of up to 8 columns) turned to height x width x 3 (one channel
repeated), floats scaled by 255 (uint8 as is), clipped, and PNG-encoded
with Pillow (PyTorch's ``make_image``; Pillow is needed, as there).
"""
from __future__ import annotations

import io

import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary

__all__ = ["image"]


def _grid(batch: np.ndarray, ncols: int = 8) -> np.ndarray:
    """N x C x H x W (C 1 or 3) as one 3 x H' x W' canvas, row by row."""
    if batch.shape[1] == 1:
        batch = np.concatenate([batch, batch, batch], 1)
    if batch.ndim != 4 or batch.shape[1] != 3:
        raise AssertionError("Input should be a 4D numpy array with 3 channels")
    n, _, h, w = batch.shape
    ncols = min(n, ncols)
    nrows = int(np.ceil(float(n) / ncols))
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=batch.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = batch[i]
    return canvas


def _to_hwc(a: np.ndarray, fmt: str) -> np.ndarray:
    if len(set(fmt)) != len(fmt):
        raise AssertionError(f"You can not use the same dimension shorthand twice. "
                             f"input_format: {fmt}")
    if a.ndim != len(fmt):
        raise AssertionError(f"size of input tensor and input format are different. "
                             f"tensor shape: {a.shape}, input_format: {fmt}")
    fmt = fmt.upper()
    if len(fmt) == 4:
        return _grid(a.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = a.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc, hwc, hwc], 2) if hwc.shape[2] == 1 else hwc
    hw = a.transpose([fmt.find(c) for c in "HW"])
    return np.stack([hw, hw, hw], 2)


def image(tag: str, array: np.ndarray, dataformats: str = "NCHW") -> Summary:
    """The ``Summary`` of one image value (PyTorch's ``summary.image``)."""
    from PIL import Image
    hwc = _to_hwc(np.asarray(array), dataformats)
    scale = 1 if hwc.dtype == np.uint8 else 255
    pixels = (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    height, width, channels = pixels.shape
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return Summary(value=[Summary.Value(tag=tag, image=Summary.Image(
        height=height, width=width, colorspace=channels,
        encoded_image_string=out.getvalue()))])
