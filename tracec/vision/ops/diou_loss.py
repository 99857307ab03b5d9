"""``torchvision.ops.distance_box_iou_loss``: ``1 - IoU`` plus the squared
centre distance over the enclosing box's squared diagonal, of matched xyxy
box pairs (Zheng et al.)."""
from __future__ import annotations

from tracec.vision.ops._utils import _loss_inter_union, _reduce_loss, _upcast_non_float


def _diou_iou_loss(boxes1, boxes2, eps: float = 1e-7):
    intsct, union = _loss_inter_union(boxes1, boxes2)
    iou = intsct / (union + eps)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    diagonal_distance_squared = ((x2.maximum(x2g) - x1.minimum(x1g)) ** 2) + \
        ((y2.maximum(y2g) - y1.minimum(y1g)) ** 2) + eps
    centers_distance_squared = (((x2 + x1) / 2 - (x1g + x2g) / 2) ** 2) + (((y2 + y1) / 2 - (y1g + y2g) / 2) ** 2)
    return 1 - iou + (centers_distance_squared / diagonal_distance_squared), iou


def distance_box_iou_loss(boxes1, boxes2, reduction: str = "none", eps: float = 1e-7):
    boxes1, boxes2 = _upcast_non_float(boxes1), _upcast_non_float(boxes2)
    loss, _ = _diou_iou_loss(boxes1, boxes2, eps)
    return _reduce_loss(loss, reduction)
