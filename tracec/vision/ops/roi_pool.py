"""``torchvision.ops.roi_pool`` / ``RoIPool`` (Girshick, Fast R-CNN):
max-pool each region of interest into an ``output_size`` grid of integer
pixel bins, as torchvision's CPU kernel does: the box corners times
``spatial_scale`` rounded (half away from zero), the region at least 1x1
pixel, bin ``ph`` spanning rows ``floor(ph * h / PH)`` to ``ceil((ph + 1) *
h / PH)`` (in the boxes' precision) clipped to the map, an empty bin 0.
The gradient goes to each bin's first maximal pixel (row-major), as the
kernel's argmax.  Regions are pooled bin by bin (slices of the map): the
bins' bounds come from the boxes' values, so under ``tracec.compile`` the
call runs eagerly."""
from __future__ import annotations

import numpy as np

from tracec import nn
from tracec.creation import zeros
from tracec.shape_ops import stack
from tracec.tensor import Tensor
from tracec.vision.ops._utils import _pair, check_roi_boxes_shape, convert_boxes_to_roi_format


def _bins(start, end, pooled, size, dtype):
    """(begin, end) pixel bounds of the ``pooled`` bins of a region from
    pixel ``start`` to ``end`` (inclusive), clipped to ``[0, size]``."""
    length = max(end - start + 1, 1)
    step = dtype.type(length) / dtype.type(pooled)
    out = []
    for p in range(pooled):
        lo = int(np.floor(dtype.type(p) * step)) + start
        hi = int(np.ceil(dtype.type(p + 1) * step)) + start
        out.append((min(max(lo, 0), size), min(max(hi, 0), size)))
    return out


def roi_pool(input: Tensor, boxes, output_size, spatial_scale: float = 1.0) -> Tensor:
    """``Tensor[K, C, output_size[0], output_size[1]]``: the max-pooled
    regions (see the module docstring)."""
    check_roi_boxes_shape(boxes)
    rois = boxes if isinstance(boxes, Tensor) else convert_boxes_to_roi_format(boxes)
    ph_n, pw_n = _pair(output_size)
    _, channels, height, width = input.shape
    r = rois.detach().numpy()
    dtype = np.dtype(r.dtype) if r.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    scale = dtype.type(spatial_scale)
    # std::round: half away from zero
    corners = np.sign(r[:, 1:] * scale) * np.floor(np.abs(r[:, 1:] * scale) + dtype.type(0.5))
    pooled = []
    for k in range(len(r)):
        x1, y1, x2, y2 = (int(v) for v in corners[k])
        fmap = input[int(r[k, 0])]
        rows = _bins(y1, y2, ph_n, height, dtype)
        cols = _bins(x1, x2, pw_n, width, dtype)
        cells = []
        for h0, h1 in rows:
            for w0, w1 in cols:
                if h1 <= h0 or w1 <= w0:
                    cells.append(zeros(channels, dtype=input.dtype, device=input.device))
                else:
                    cells.append(fmap[:, h0:h1, w0:w1].reshape(channels, -1).max(dim=1).values)
        pooled.append(stack(cells, dim=1).reshape(channels, ph_n, pw_n))
    if not pooled:
        return zeros((0, channels, ph_n, pw_n), dtype=input.dtype, device=input.device)
    return stack(pooled, dim=0)


class RoIPool(nn.Module):
    """See ``roi_pool``."""

    def __init__(self, output_size, spatial_scale: float):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale

    def forward(self, input: Tensor, rois) -> Tensor:
        return roi_pool(input, rois, self.output_size, self.spatial_scale)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale})"
