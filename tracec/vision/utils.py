"""``torchvision.utils``: ``make_grid`` (a batch of images tiled into one
image, ``nrow`` per row, separated by ``padding`` pixels of ``pad_value``)
and ``save_image`` (that grid written by Pillow, each value ``v`` in [0, 1]
stored as ``clamp(v * 255 + 0.5, 0, 255)`` truncated to uint8)."""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec.graph import no_grad
from tracec.shape_ops import cat, stack
from tracec.tensor import Tensor
from tracec.vision import _pil


def _normalize_range(t, low, high):
    t.clamp_(min=low, max=high)
    t.sub_(low).div_(max(high - low, 1e-5))


@no_grad()
def make_grid(tensor, nrow: int = 8, padding: int = 2, normalize: bool = False,
              value_range=None, scale_each: bool = False, pad_value: float = 0.0) -> Tensor:
    if isinstance(tensor, list):
        tensor = stack(tensor, dim=0)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"tensor or list of tensors expected, got {type(tensor)}")
    if tensor.ndim == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.ndim == 3:
        if tensor.shape[0] == 1:
            tensor = cat((tensor, tensor, tensor), 0)
        tensor = tensor.unsqueeze(0)
    if tensor.ndim == 4 and tensor.shape[1] == 1:
        tensor = cat((tensor, tensor, tensor), 1)
    if normalize:
        tensor = tensor.clone()
        if value_range is not None and not isinstance(value_range, tuple):
            raise TypeError("value_range has to be a tuple (min, max) if specified. "
                            "min and max are numbers")
        parts = list(tensor) if scale_each else [tensor]
        for t in parts:
            low, high = value_range if value_range is not None else (float(t.min()),
                                                                     float(t.max()))
            _normalize_range(t, low, high)
    if tensor.shape[0] == 1:
        return tensor.squeeze(0)
    nmaps = tensor.shape[0]
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.shape[2] + padding), int(tensor.shape[3] + padding)
    grid = tensor.new_full((tensor.shape[1], height * ymaps + padding, width * xmaps + padding),
                           pad_value)
    for k in range(nmaps):
        y, x = divmod(k, xmaps)
        top, left = y * height + padding, x * width + padding
        grid[:, top:top + height - padding, left:left + width - padding] = tensor[k]
    return grid


@no_grad()
def save_image(tensor, fp, format=None, **kwargs) -> None:  # noqa: A002
    grid = make_grid(tensor, **kwargs)
    ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(dt.uint8).numpy()
    _pil.image_module().fromarray(ndarr).save(fp, format=format)


__all__ = ["make_grid", "save_image"]
