"""``torchvision.ops`` box functions (torchvision 0.28): areas, IoU and its
generalized / distance / complete variants, format conversion, clipping,
``masks_to_boxes``, and greedy non-maximum suppression (torchvision's
kernel: boxes by falling score, each kept box drops the later ones whose
IoU with it exceeds the threshold).  Pure tensor code, so the results are
torchvision's exactly.

As there, the pairwise functions take batched boxes ``[..., N, 4]`` and
``[..., M, 4]`` and give ``[..., N, M]``, and compute in at least 32 bits
(``_upcast``: float16 / bfloat16 boxes in float32, int8 / int16 / uint8 in
int32), so areas of half-precision boxes do not overflow."""
from __future__ import annotations

import math

import numpy as np

from tracec import dtypes as dt
from tracec.creation import from_numpy, zeros
from tracec.shape_ops import stack
from tracec.tensor import Tensor

_AXIS_ALIGNED = ("xyxy", "xywh", "cxcywh")
_ROTATED = ("cxcywhr", "xywhr", "xyxyxyxy")


def _upcast(t: Tensor) -> Tensor:
    if t.is_floating_point():
        return t if t.dtype in (dt.float32, dt.float64) else t.float()
    return t if t.dtype in (dt.int32, dt.int64) else t.int()


def box_area(boxes: Tensor, fmt: str = "xyxy") -> Tensor:
    """``[...]`` areas of ``[..., 4]`` boxes in ``fmt`` (xyxy, xywh or cxcywh)."""
    if fmt not in _AXIS_ALIGNED:
        raise ValueError(f"Unsupported Bounding Box area for given format {fmt}")
    boxes = _upcast(boxes)
    if fmt == "xyxy":
        return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
    return boxes[..., 2] * boxes[..., 3]


def _corners(boxes, fmt):
    """(top-left, bottom-right) ``[..., 2]`` corners of boxes in ``fmt``."""
    if fmt == "xyxy":
        return boxes[..., :2], boxes[..., 2:]
    if fmt == "xywh":
        return boxes[..., :2], boxes[..., :2] + boxes[..., 2:]
    return boxes[..., :2] - boxes[..., 2:] / 2, boxes[..., :2] + boxes[..., 2:] / 2


def _box_inter_union(boxes1: Tensor, boxes2: Tensor, fmt: str = "xyxy"):
    """Pairwise ``[..., N, M]`` intersections and unions."""
    area1, area2 = box_area(boxes1, fmt=fmt), box_area(boxes2, fmt=fmt)
    lt1, rb1 = _corners(boxes1, fmt)
    lt2, rb2 = _corners(boxes2, fmt)
    lt = lt1[..., None, :].maximum(lt2[..., None, :, :])
    rb = rb1[..., None, :].minimum(rb2[..., None, :, :])
    wh = _upcast(rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter, area1[..., None] + area2[..., None, :] - inter


def box_iou(boxes1: Tensor, boxes2: Tensor, fmt: str = "xyxy") -> Tensor:
    """``[..., N, M]`` pairwise IoU of axis-aligned boxes in ``fmt``."""
    if fmt in _AXIS_ALIGNED:
        inter, union = _box_inter_union(boxes1, boxes2, fmt=fmt)
        return inter / union
    if fmt in _ROTATED:
        # torchvision computes these with a compiled kernel only
        raise NotImplementedError(f"box_iou of rotated boxes (fmt={fmt!r}) is not supported by tracec.vision")
    raise ValueError(f"Unsupported format '{fmt}'. Supported axis-aligned formats: {_AXIS_ALIGNED}. "
                     f"Supported rotated formats: {_ROTATED}.")


def generalized_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union
    lti = boxes1[..., None, :2].minimum(boxes2[..., None, :, :2])
    rbi = boxes1[..., None, 2:].maximum(boxes2[..., None, :, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    areai = whi[..., 0] * whi[..., 1]
    return iou - (areai - union) / areai


def _box_diou_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7):
    iou = box_iou(boxes1, boxes2)
    lti = boxes1[..., None, :2].minimum(boxes2[..., None, :, :2])
    rbi = boxes1[..., None, 2:].maximum(boxes2[..., None, :, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    diagonal_distance_squared = (whi[..., 0] ** 2) + (whi[..., 1] ** 2) + eps
    x_p = (boxes1[..., 0] + boxes1[..., 2]) / 2
    y_p = (boxes1[..., 1] + boxes1[..., 3]) / 2
    x_g = (boxes2[..., 0] + boxes2[..., 2]) / 2
    y_g = (boxes2[..., 1] + boxes2[..., 3]) / 2
    centers_distance_squared = (_upcast(x_p[..., None] - x_g[..., None, :]) ** 2) + \
        (_upcast(y_p[..., None] - y_g[..., None, :]) ** 2)
    return iou - (centers_distance_squared / diagonal_distance_squared), iou


def distance_box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """``[..., N, M]`` distance IoU: IoU less the squared distance of the
    centres over the squared diagonal of the enclosing box."""
    return _box_diou_iou(_upcast(boxes1), _upcast(boxes2), eps=eps)[0]


def complete_box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """``[..., N, M]`` complete IoU: distance IoU less ``alpha * v``, ``v``
    the aspect-ratio consistency term and ``alpha`` (no gradient) its
    weight."""
    boxes1, boxes2 = _upcast(boxes1), _upcast(boxes2)
    diou, iou = _box_diou_iou(boxes1, boxes2, eps)
    w_pred = boxes1[..., None, 2] - boxes1[..., None, 0]
    h_pred = boxes1[..., None, 3] - boxes1[..., None, 1]
    w_gt = boxes2[..., None, :, 2] - boxes2[..., None, :, 0]
    h_gt = boxes2[..., None, :, 3] - boxes2[..., None, :, 1]
    v = (4 / (math.pi ** 2)) * ((w_pred / h_pred).atan() - (w_gt / h_gt).atan()) ** 2
    alpha = (v / (1 - iou + v + eps)).detach()
    return diou - alpha * v


def _box_xywh_to_xyxy(a, b, c, d):
    return a, b, a + c, b + d


def _box_cxcywh_to_xyxy(a, b, c, d):
    return a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d


def box_convert(boxes: Tensor, in_fmt: str, out_fmt: str) -> Tensor:
    """Axis-aligned boxes from ``in_fmt`` to ``out_fmt`` (xyxy, xywh,
    cxcywh); the rotated formats torchvision also names are refused."""
    allowed = _AXIS_ALIGNED + ("xywhr", "cxcywhr", "xyxyxyxy")
    if in_fmt not in allowed or out_fmt not in allowed:
        raise ValueError(f"Unsupported Bounding Box Conversions for given in_fmt {in_fmt} and out_fmt {out_fmt}")
    if in_fmt == out_fmt:
        return boxes.clone()
    if in_fmt not in _AXIS_ALIGNED or out_fmt not in _AXIS_ALIGNED:
        raise NotImplementedError(f"box_convert between rotated formats ({in_fmt} -> {out_fmt}) is not "
                                  "supported by tracec.vision")
    a, b, c, d = boxes.unbind(-1)
    if in_fmt == "xywh":
        a, b, c, d = _box_xywh_to_xyxy(a, b, c, d)
    elif in_fmt == "cxcywh":
        a, b, c, d = _box_cxcywh_to_xyxy(a, b, c, d)
    if out_fmt == "xywh":
        c, d = c - a, d - b
    elif out_fmt == "cxcywh":
        a, b, c, d = (a + c) / 2, (b + d) / 2, c - a, d - b
    return stack((a, b, c, d), dim=-1)


def masks_to_boxes(masks: Tensor) -> Tensor:
    """``[N, 4]`` float xyxy boxes around the nonzero pixels of ``[N, H, W]``
    masks (inclusive pixel indices; an empty mask gives zeros)."""
    if masks.numel() == 0:
        return zeros((0, 4), device=masks.device, dtype=dt.float32)
    n, h, w = masks.shape
    masks_bool = masks.bool()
    rows = masks_bool.any(dim=2)
    cols = masks_bool.any(dim=1)
    empty = ~rows.any(dim=1)
    rows_f, cols_f = rows.float(), cols.float()
    y1 = rows_f.argmax(dim=1)
    x1 = cols_f.argmax(dim=1)
    y2 = (h - 1) - rows_f.flip(dims=[1]).argmax(dim=1)
    x2 = (w - 1) - cols_f.flip(dims=[1]).argmax(dim=1)
    boxes = stack([x1, y1, x2, y2], dim=1).float()
    boxes[empty] = 0
    return boxes


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """int64 indices of the kept boxes, by decreasing score (ties: the
    earlier box first): the kernel's greedy rule, each kept box suppressing
    the later ones whose IoU with it exceeds the threshold.  The IoU is
    ``box_iou``'s operations in its order (in the boxes' precision, at
    least float32), one kept box against the later boxes at a time: memory
    stays linear in the number of boxes."""
    if boxes.numel() == 0:
        return from_numpy(np.zeros(0, dtype=np.int64))
    order = scores.detach().argsort(descending=True, stable=True).numpy()
    b = _upcast(boxes.detach()).numpy()[order]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    suppressed = np.zeros(len(order), dtype=bool)
    keep = []
    for pos in range(len(order)):
        if suppressed[pos]:
            continue
        keep.append(order[pos])
        rest = b[pos + 1:]
        wh = np.clip(np.minimum(b[pos, 2:], rest[:, 2:]) - np.maximum(b[pos, :2], rest[:, :2]), 0, None)
        inter = wh[:, 0] * wh[:, 1]
        suppressed[pos + 1:] |= inter / (area[pos] + area[pos + 1:] - inter) > iou_threshold
    return from_numpy(np.array(keep, dtype=np.int64))


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """``nms`` within each category of ``idxs`` (boxes of different
    categories never suppress each other), by offsetting each category."""
    if boxes.numel() == 0:
        return nms(boxes, scores, iou_threshold)
    offsets = idxs.to(boxes.dtype) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    ws, hs = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    keep = (ws >= min_size) & (hs >= min_size)
    return keep.nonzero(as_tuple=True)[0]


def clip_boxes_to_image(boxes: Tensor, size) -> Tensor:
    h, w = size
    x = boxes[..., 0::2].clamp(min=0, max=w)
    y = boxes[..., 1::2].clamp(min=0, max=h)
    return stack((x, y), dim=boxes.ndim).reshape(boxes.shape)
