"""``torchvision.ops.MultiScaleRoIAlign``: RoIAlign over a feature
pyramid, each box pooled from the level the FPN paper's eq. 1 assigns it:
``floor(canonical_level + log2(sqrt(area) / canonical_scale) + 1e-6)``,
clamped to the pyramid's levels.  The levels' scales are inferred on the
first call from the feature maps' sizes against the largest image size
(each rounded to a power of two), and kept, as torchvision does."""
from __future__ import annotations

from tracec import nn
from tracec.creation import tensor, zeros
from tracec.shape_ops import cat
from tracec.vision.ops.boxes import box_area
from tracec.vision.ops.roi_align import convert_boxes_to_roi_format, roi_align

import math


class LevelMapper:
    """Maps boxes (a list of per-image ``Tensor[L, 4]``) to their pyramid
    level, as int64 offsets from ``k_min``."""

    def __init__(self, k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4,
                 eps: float = 1e-6):
        self.k_min = k_min
        self.k_max = k_max
        self.s0 = canonical_scale
        self.lvl0 = canonical_level
        self.eps = eps

    def __call__(self, boxlists):
        s = cat([box_area(b) for b in boxlists]).sqrt()
        target = (self.lvl0 + (s / self.s0).log2() + tensor(self.eps, dtype=s.dtype)).floor()
        target = target.clamp(min=self.k_min, max=self.k_max)
        return target.long() - self.k_min


def initLevelMapper(k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4,
                    eps: float = 1e-6) -> LevelMapper:
    return LevelMapper(k_min, k_max, canonical_scale, canonical_level, eps)


def _infer_scale(feature, original_size) -> float:
    scales = [2 ** round(math.log2(float(s1) / float(s2))) for s1, s2 in zip(feature.shape[-2:], original_size)]
    return float(scales[0])


def _setup_scales(features, image_shapes, canonical_scale: int, canonical_level: int):
    if not image_shapes:
        raise ValueError("images list should not be empty")
    original = (max(s[0] for s in image_shapes), max(s[1] for s in image_shapes))
    scales = [_infer_scale(f, original) for f in features]
    lvl_min = -math.log2(scales[0])
    lvl_max = -math.log2(scales[-1])
    return scales, initLevelMapper(int(lvl_min), int(lvl_max), canonical_scale=canonical_scale,
                                   canonical_level=canonical_level)


def _filter_input(x, featmap_names):
    return [v for k, v in x.items() if k in featmap_names]


def _multiscale_roi_align(x_filtered, boxes, output_size, sampling_ratio, scales, mapper):
    if scales is None or mapper is None:
        raise ValueError("scales and mapper should not be None")
    rois = convert_boxes_to_roi_format(boxes)
    if len(x_filtered) == 1:
        return roi_align(x_filtered[0], rois, output_size=output_size, spatial_scale=scales[0],
                         sampling_ratio=sampling_ratio)
    levels = mapper(boxes)
    first = x_filtered[0]
    result = zeros((len(rois), first.shape[1]) + tuple(output_size), dtype=first.dtype, device=first.device)
    for level, (feature, scale) in enumerate(zip(x_filtered, scales)):
        idx = (levels == level).nonzero().reshape(-1)
        pooled = roi_align(feature, rois[idx], output_size=output_size, spatial_scale=scale,
                           sampling_ratio=sampling_ratio)
        result[idx] = pooled.to(result.dtype)
    return result


class MultiScaleRoIAlign(nn.Module):
    """``MultiScaleRoIAlign(featmap_names, output_size, sampling_ratio, *,
    canonical_scale=224, canonical_level=4)``; ``forward(x, boxes,
    image_shapes)`` with ``x`` a dict of feature maps (those named in
    ``featmap_names`` are used, in ``x``'s order), ``boxes`` a list of
    per-image ``Tensor[L, 4]`` in image coordinates."""

    def __init__(self, featmap_names, output_size, sampling_ratio: int, *, canonical_scale: int = 224,
                 canonical_level: int = 4):
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.featmap_names = featmap_names
        self.sampling_ratio = sampling_ratio
        self.output_size = tuple(output_size)
        self.scales = None
        self.map_levels = None
        self.canonical_scale = canonical_scale
        self.canonical_level = canonical_level

    def forward(self, x, boxes, image_shapes):
        x_filtered = _filter_input(x, self.featmap_names)
        if self.scales is None or self.map_levels is None:
            self.scales, self.map_levels = _setup_scales(x_filtered, image_shapes, self.canonical_scale,
                                                         self.canonical_level)
        return _multiscale_roi_align(x_filtered, boxes, self.output_size, self.sampling_ratio, self.scales,
                                     self.map_levels)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(featmap_names={self.featmap_names}, "
                f"output_size={self.output_size}, sampling_ratio={self.sampling_ratio})")
