"""``torchvision.ops.complete_box_iou_loss``: the distance-IoU loss plus
``alpha * v``, ``v`` the aspect-ratio consistency term and ``alpha`` its
weight (no gradient), of matched xyxy box pairs (Zheng et al.).  As in
torchvision, the inner distance-IoU loss uses the default eps; ``eps``
enters only ``alpha``."""
from __future__ import annotations

import math

from tracec.vision.ops._utils import _reduce_loss, _upcast_non_float
from tracec.vision.ops.diou_loss import _diou_iou_loss


def complete_box_iou_loss(boxes1, boxes2, reduction: str = "none", eps: float = 1e-7):
    boxes1, boxes2 = _upcast_non_float(boxes1), _upcast_non_float(boxes2)
    diou_loss, iou = _diou_iou_loss(boxes1, boxes2)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    v = (4 / (math.pi ** 2)) * (((x2g - x1g) / (y2g - y1g)).atan() - ((x2 - x1) / (y2 - y1)).atan()) ** 2
    alpha = (v / (1 - iou + v + eps)).detach()
    return _reduce_loss(diou_loss + alpha * v, reduction)
