"""``torchvision.ops`` basics on boxes ``(x1, y1, x2, y2)``: areas, IoU,
and greedy non-maximum suppression (torchvision's kernel: boxes by falling
score, each kept box drops the later ones whose IoU with it exceeds the
threshold).  Pure tensor code, so the results are torchvision's exactly."""
from __future__ import annotations

import numpy as np

from tracec.creation import from_numpy
from tracec.shape_ops import stack
from tracec.tensor import Tensor


def box_area(boxes: Tensor) -> Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _inter_union(boxes1, boxes2):
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = boxes1[:, None, :2].maximum(boxes2[:, :2])
    rb = boxes1[:, None, 2:].minimum(boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter, area1[:, None] + area2 - inter


def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """(N, M) pairwise IoU."""
    inter, union = _inter_union(boxes1, boxes2)
    return inter / union


def generalized_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / union
    lti = boxes1[:, None, :2].minimum(boxes2[:, :2])
    rbi = boxes1[:, None, 2:].maximum(boxes2[:, 2:])
    whi = (rbi - lti).clamp(min=0)
    areai = whi[:, :, 0] * whi[:, :, 1]
    return iou - (areai - union) / areai


def box_convert(boxes: Tensor, in_fmt: str, out_fmt: str) -> Tensor:
    fmts = ("xyxy", "xywh", "cxcywh")
    if in_fmt not in fmts or out_fmt not in fmts:
        raise ValueError("Unsupported Bounding Box Conversions for given in_fmt and out_fmt")
    if in_fmt == out_fmt:
        return boxes.clone()
    a, b, c, d = boxes.unbind(-1)
    if in_fmt == "xywh":
        a, b, c, d = a, b, a + c, b + d
    elif in_fmt == "cxcywh":
        a, b, c, d = a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d
    if out_fmt == "xywh":
        c, d = c - a, d - b
    elif out_fmt == "cxcywh":
        a, b, c, d = (a + c) / 2, (b + d) / 2, c - a, d - b
    return stack((a, b, c, d), dim=-1)


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """int64 indices of the kept boxes, by decreasing score."""
    if boxes.numel() == 0:
        return from_numpy(np.zeros(0, dtype=np.int64))
    order = scores.argsort(descending=True, stable=True).tolist()
    iou = box_iou(boxes, boxes).tolist()
    removed = [False] * len(order)
    keep = []
    for pos, i in enumerate(order):
        if removed[pos]:
            continue
        keep.append(i)
        for later in range(pos + 1, len(order)):
            if iou[i][order[later]] > iou_threshold:
                removed[later] = True
    return from_numpy(np.array(keep, dtype=np.int64))


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """``nms`` within each category of ``idxs`` (boxes of different
    categories never suppress each other), by offsetting each category."""
    if boxes.numel() == 0:
        return nms(boxes, scores, iou_threshold)
    offsets = idxs.to(boxes.dtype) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    keep = ((ws >= min_size) & (hs >= min_size)).nonzero().reshape(-1)
    return keep


def clip_boxes_to_image(boxes: Tensor, size) -> Tensor:
    h, w = size
    x = boxes[..., 0::2].clamp(min=0, max=w)
    y = boxes[..., 1::2].clamp(min=0, max=h)
    return stack((x, y), dim=boxes.ndim).reshape(boxes.shape)
