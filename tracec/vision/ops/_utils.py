"""``torchvision.ops._utils``: the helpers the ops share (boxes given as a
list per image turned into one ``[K, 5]`` tensor of regions, its shape
checks, and the elementwise box-pair intersection / union of the IoU
losses)."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.creation import full_like
from tracec.functions import where
from tracec.shape_ops import cat
from tracec.tensor import Tensor


def _pair(v):
    """An int output size as (v, v); a pair as a tuple."""
    return (v, v) if isinstance(v, int) else tuple(v)


def _cat(tensors, dim=0):
    return tensors[0] if len(tensors) == 1 else cat(tensors, dim)


def convert_boxes_to_roi_format(boxes) -> Tensor:
    """A list of per-image ``Tensor[L, 4]`` as one ``Tensor[K, 5]`` whose
    first column is the image's index (``torchvision.ops._utils``)."""
    concat_boxes = _cat(list(boxes), dim=0)
    ids = _cat([full_like(b[:, :1], i) for i, b in enumerate(boxes)], dim=0)
    return cat([ids, concat_boxes], dim=1)


def check_roi_boxes_shape(boxes) -> None:
    """torchvision's checks of ``boxes`` (AssertionError, its messages)."""
    if isinstance(boxes, (list, tuple)):
        for t in boxes:
            if t.size(1) != 4:
                raise AssertionError("The shape of the tensor in the boxes list is not correct as List[Tensor[L, 4]]")
    elif isinstance(boxes, Tensor):
        if boxes.size(1) != 5:
            raise AssertionError("The boxes tensor shape is not correct as Tensor[K, 5]")
    else:
        raise AssertionError("boxes is expected to be a Tensor[L, 5] or a List[Tensor[K, 4]]")


def _upcast_non_float(t: Tensor) -> Tensor:
    return t if t.dtype in (dt.float32, dt.float64) else t.float()


def _loss_inter_union(boxes1: Tensor, boxes2: Tensor):
    """Elementwise intersection and union of matched ``[..., 4]`` xyxy box
    pairs (an empty overlap intersects in 0)."""
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    xkis1, ykis1 = x1.maximum(x1g), y1.maximum(y1g)
    xkis2, ykis2 = x2.minimum(x2g), y2.minimum(y2g)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsctk = where(mask, (xkis2 - xkis1) * (ykis2 - ykis1), 0.0)
    unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk
    return intsctk, unionk


def _reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    """The box losses' ``reduction`` (``mean`` of no boxes is 0, with a
    gradient path)."""
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(
        f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: 'none', 'mean', 'sum'")
