"""``torchvision.ops.generalized_box_iou_loss``: ``1 - GIoU`` of matched
xyxy box pairs (Rezatofighi et al.)."""
from __future__ import annotations

from tracec.vision.ops._utils import _loss_inter_union, _reduce_loss, _upcast_non_float


def generalized_box_iou_loss(boxes1, boxes2, reduction: str = "none", eps: float = 1e-7):
    boxes1, boxes2 = _upcast_non_float(boxes1), _upcast_non_float(boxes2)
    intsctk, unionk = _loss_inter_union(boxes1, boxes2)
    iouk = intsctk / (unionk + eps)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    area_c = (x2.maximum(x2g) - x1.minimum(x1g)) * (y2.maximum(y2g) - y1.minimum(y1g))
    miouk = iouk - ((area_c - unionk) / (area_c + eps))
    return _reduce_loss(1 - miouk, reduction)
