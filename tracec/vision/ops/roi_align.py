"""``torchvision.ops.roi_align`` / ``RoIAlign`` (He et al., Mask R-CNN):
average-pool each region of interest into an ``output_size`` grid, every
bin the mean of ``grid_h x grid_w`` bilinear samples of the feature map.

Semantics are torchvision's CPU kernel's:

- ``boxes`` is a ``Tensor[K, 5]`` (batch index, x1, y1, x2, y2) or a list
  of ``Tensor[L, 4]``, one per image (``convert_boxes_to_roi_format``).
- Box coordinates are multiplied by ``spatial_scale``; ``aligned=True``
  shifts them by -0.5 (pixel centres); otherwise a region is at least 1x1.
- ``sampling_ratio > 0`` samples exactly that many points per bin side;
  ``<= 0`` samples ``ceil(roi_side / bins)`` per side, per region.
- A sample with ``y < -1``, ``y > H``, ``x < -1`` or ``x > W`` contributes
  zero (it still counts in the mean); the others are clamped into the map
  (coordinates below 0 read row / column 0, at or past the last index read
  the last).

The computation is tensor ops (gathers and weighted sums), so gradients
flow to ``input``; the boxes get none (``rois`` is detached), as with
torchvision's kernel.  With ``sampling_ratio <= 0`` every region evaluates
as many candidate samples per bin side as the largest region's grid has
and masks the ones past its own grid; inside ``tracec.compile`` shapes
stay static, so the candidates are the map's ``H x W`` (enough for any
region inside the map: a region whose grid outruns the map then samples
fewer points than the kernel, as torchvision's own Python fallback)."""
from __future__ import annotations

from tracec import nn
from tracec.creation import arange
from tracec.functions import where
from tracec.tensor import RECORDERS, Tensor
from tracec.vision.ops._utils import _pair, check_roi_boxes_shape, convert_boxes_to_roi_format


def _sample_axis(coord, size):
    """For sample coordinates ``coord`` along an axis of ``size`` pixels:
    (low index, high index, weight of low, weight of high, inside), the
    kernel's clamping (below 0 reads 0; at or past size - 1 reads the
    last pixel with all the weight on it) and its validity range
    ``[-1, size]``."""
    inside = (coord >= -1.0) & (coord <= size)
    c = coord.clamp(min=0)
    low = c.long()
    at_end = low >= size - 1
    high = where(at_end, size - 1, low + 1)
    low = where(at_end, size - 1, low)
    c = where(at_end, low.to(coord.dtype), c)
    frac = c - low
    return low, high, 1.0 - frac, frac, inside


def roi_align(input: Tensor, boxes, output_size, spatial_scale: float = 1.0,
              sampling_ratio: int = -1, aligned: bool = False) -> Tensor:
    """``Tensor[K, C, output_size[0], output_size[1]]``: the pooled regions
    (see the module docstring for the exact sampling)."""
    check_roi_boxes_shape(boxes)
    rois = boxes if isinstance(boxes, Tensor) else convert_boxes_to_roi_format(boxes)
    ph_n, pw_n = _pair(output_size)
    rois = rois.detach()
    _, channels, height, width = input.shape
    dtype = input.dtype
    k = rois.shape[0]
    batch_ind = rois[:, 0].long()
    offset = 0.5 if aligned else 0.0
    start_w = rois[:, 1] * spatial_scale - offset
    start_h = rois[:, 2] * spatial_scale - offset
    roi_w = rois[:, 3] * spatial_scale - offset - start_w
    roi_h = rois[:, 4] * spatial_scale - offset - start_h
    if not aligned:
        roi_w = roi_w.clamp(min=1.0)
        roi_h = roi_h.clamp(min=1.0)
    bin_h, bin_w = roi_h / ph_n, roi_w / pw_n
    if sampling_ratio > 0:
        grid_h = grid_w = sampling_ratio
        iy, ix = arange(sampling_ratio), arange(sampling_ratio)
        ymask = xmask = None
        count = float(max(sampling_ratio * sampling_ratio, 1))
        step_h, step_w = bin_h / grid_h, bin_w / grid_w
    else:
        grid_h, grid_w = (roi_h / ph_n).ceil(), (roi_w / pw_n).ceil()
        if RECORDERS or k == 0:
            # a trace keeps static shapes: as many candidates as the map
            # has pixels (enough for any region inside the map)
            iy, ix = arange(height), arange(width)
        else:
            # eagerly: exactly the largest region's grid, so regions
            # larger than the map sample as the kernel does, and the
            # candidates stay few on large maps
            iy, ix = arange(max(int(grid_h.max()), 1)), arange(max(int(grid_w.max()), 1))
        ymask = iy[None, :] < grid_h[:, None]           # [K, IY]
        xmask = ix[None, :] < grid_w[:, None]           # [K, IX]
        count = (grid_h * grid_w).clamp(min=1)[:, None, None, None]
        # (a zero-height region has no samples: no 0 / 0 in its coordinates)
        step_h, step_w = bin_h / grid_h.clamp(min=1), bin_w / grid_w.clamp(min=1)
    ph, pw = arange(ph_n), arange(pw_n)
    # sample coordinates: [K, PH, IY] and [K, PW, IX]
    y = start_h[:, None, None] + ph[None, :, None] * bin_h[:, None, None] \
        + (iy[None, None, :] + 0.5).to(dtype) * step_h[:, None, None]
    x = start_w[:, None, None] + pw[None, :, None] * bin_w[:, None, None] \
        + (ix[None, None, :] + 0.5).to(dtype) * step_w[:, None, None]
    y_low, y_high, hy, ly, y_in = _sample_axis(y.to(dtype), height)
    x_low, x_high, hx, lx, x_in = _sample_axis(x.to(dtype), width)
    if ymask is not None:
        y_in = y_in & ymask[:, None, :]
        x_in = x_in & xmask[:, None, :]
        # indices of masked-out samples may lie anywhere: read pixel 0
        y_low, y_high = where(ymask[:, None, :], y_low, 0), where(ymask[:, None, :], y_high, 0)
        x_low, x_high = where(xmask[:, None, :], x_low, 0), where(xmask[:, None, :], x_high, 0)
    b = batch_ind[:, None, None, None, None, None]
    c = arange(channels)[None, :, None, None, None, None]

    def gather(yi, xi):       # -> [K, C, PH, PW, IY, IX]
        return input[b, c, yi[:, None, :, None, :, None], xi[:, None, None, :, None, :]]

    def outer(wy, wx):
        return wy[:, None, :, None, :, None] * wx[:, None, None, :, None, :]

    val = outer(hy, hx) * gather(y_low, x_low) + outer(hy, lx) * gather(y_low, x_high) \
        + outer(ly, hx) * gather(y_high, x_low) + outer(ly, lx) * gather(y_high, x_high)
    valid = outer(y_in, x_in)
    val = where(valid, val, 0.0)
    out = val.sum((-1, -2)) / count
    return out.to(dtype) if k else out.reshape(0, channels, ph_n, pw_n)


class RoIAlign(nn.Module):
    """See ``roi_align``."""

    def __init__(self, output_size, spatial_scale: float, sampling_ratio: int, aligned: bool = False):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input: Tensor, rois) -> Tensor:
        return roi_align(input, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})")
