"""``torchvision.models.detection._utils``: the box codec of Faster R-CNN
(``BoxCoder``: weighted centre offsets and log size ratios, the decoded
sizes clamped at ``log(1000 / 16)``), the IoU ``Matcher`` (each prediction
to its best ground truth, -1 below ``low_threshold``, -2 between the
thresholds, optionally every ground truth's best predictions kept), and the
``BalancedPositiveNegativeSampler`` (uint8 masks of a random subset of at
most ``batch_size_per_image * positive_fraction`` positives, filled up with
negatives; the subsets are drawn with tracec's ``randperm``, so which
elements a run picks differs from torch whenever it draws fewer than all)."""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec.creation import as_tensor, randperm, tensor, zeros_like
from tracec.jit import _script_if_tracing
from tracec.shape_ops import cat, stack
from tracec.tensor import Tensor


class BalancedPositiveNegativeSampler:
    """Samples, per image, positives (``matched_idxs >= 1``) and negatives
    (``== 0``) in a fixed proportion; ``-1`` entries are ignored."""

    def __init__(self, batch_size_per_image: int, positive_fraction: float) -> None:
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction

    def __call__(self, matched_idxs):
        pos_idx, neg_idx = [], []
        for matched in matched_idxs:
            positive = (matched >= 1).nonzero(as_tuple=True)[0]
            negative = (matched == 0).nonzero(as_tuple=True)[0]
            num_pos = min(positive.numel(), int(self.batch_size_per_image * self.positive_fraction))
            num_neg = min(negative.numel(), self.batch_size_per_image - num_pos)
            pos = positive[randperm(positive.numel(), device=positive.device)[:num_pos]]
            neg = negative[randperm(negative.numel(), device=negative.device)[:num_neg]]
            pos_mask = zeros_like(matched, dtype=dt.uint8)
            neg_mask = zeros_like(matched, dtype=dt.uint8)
            pos_mask[pos] = 1
            neg_mask[neg] = 1
            pos_idx.append(pos_mask)
            neg_idx.append(neg_mask)
        return pos_idx, neg_idx


@_script_if_tracing
def encode_boxes(reference_boxes: Tensor, proposals: Tensor, weights: Tensor) -> Tensor:
    """``[N, 4]`` regression targets of ``reference_boxes`` relative to
    ``proposals`` (both xyxy): ``wx * dx / w``, ``wy * dy / h``,
    ``ww * log(w_ref / w)``, ``wh * log(h_ref / h)``."""
    wx, wy, ww, wh = weights[0], weights[1], weights[2], weights[3]
    px1, py1, px2, py2 = (proposals[:, i].unsqueeze(1) for i in range(4))
    rx1, ry1, rx2, ry2 = (reference_boxes[:, i].unsqueeze(1) for i in range(4))
    ex_widths, ex_heights = px2 - px1, py2 - py1
    ex_ctr_x, ex_ctr_y = px1 + 0.5 * ex_widths, py1 + 0.5 * ex_heights
    gt_widths, gt_heights = rx2 - rx1, ry2 - ry1
    gt_ctr_x, gt_ctr_y = rx1 + 0.5 * gt_widths, ry1 + 0.5 * gt_heights
    targets_dx = wx * (gt_ctr_x - ex_ctr_x) / ex_widths
    targets_dy = wy * (gt_ctr_y - ex_ctr_y) / ex_heights
    targets_dw = ww * (gt_widths / ex_widths).log()
    targets_dh = wh * (gt_heights / ex_heights).log()
    return cat((targets_dx, targets_dy, targets_dw, targets_dh), dim=1)


class BoxCoder:
    """Encodes boxes as regression targets against reference boxes and
    decodes predicted offsets back into boxes."""

    def __init__(self, weights, bbox_xform_clip: float = math.log(1000.0 / 16)) -> None:
        self.weights = weights
        self.bbox_xform_clip = bbox_xform_clip

    def encode(self, reference_boxes, proposals):
        boxes_per_image = [len(b) for b in reference_boxes]
        targets = self.encode_single(cat(reference_boxes, dim=0), cat(proposals, dim=0))
        return targets.split(boxes_per_image, 0)

    def encode_single(self, reference_boxes: Tensor, proposals: Tensor) -> Tensor:
        weights = as_tensor(self.weights, dtype=reference_boxes.dtype, device=reference_boxes.device)
        return encode_boxes(reference_boxes, proposals, weights)

    def decode(self, rel_codes: Tensor, boxes) -> Tensor:
        if not isinstance(boxes, (list, tuple)):
            raise AssertionError("This function expects boxes of type list or tuple.")
        if not isinstance(rel_codes, Tensor):
            raise AssertionError("This function expects rel_codes of type torch.Tensor.")
        box_sum = sum(b.size(0) for b in boxes)
        if box_sum > 0:
            rel_codes = rel_codes.reshape(box_sum, -1)
        pred_boxes = self.decode_single(rel_codes, cat(boxes, dim=0))
        if box_sum > 0:
            pred_boxes = pred_boxes.reshape(box_sum, -1, 4)
        return pred_boxes

    def decode_single(self, rel_codes: Tensor, boxes: Tensor) -> Tensor:
        """Boxes ``[N, 4 * k]`` from offsets ``rel_codes`` ``[N, 4 * k]``
        against ``boxes`` ``[N, 4]``."""
        boxes = boxes.to(rel_codes.dtype)
        widths = boxes[:, 2] - boxes[:, 0]
        heights = boxes[:, 3] - boxes[:, 1]
        ctr_x = boxes[:, 0] + 0.5 * widths
        ctr_y = boxes[:, 1] + 0.5 * heights
        wx, wy, ww, wh = self.weights
        dx = rel_codes[:, 0::4] / wx
        dy = rel_codes[:, 1::4] / wy
        # no exp of too large a log size ratio
        dw = (rel_codes[:, 2::4] / ww).clamp(max=self.bbox_xform_clip)
        dh = (rel_codes[:, 3::4] / wh).clamp(max=self.bbox_xform_clip)
        pred_ctr_x = dx * widths[:, None] + ctr_x[:, None]
        pred_ctr_y = dy * heights[:, None] + ctr_y[:, None]
        pred_w = dw.exp() * widths[:, None]
        pred_h = dh.exp() * heights[:, None]
        c_to_c_h = tensor(0.5, dtype=pred_ctr_y.dtype) * pred_h
        c_to_c_w = tensor(0.5, dtype=pred_ctr_x.dtype) * pred_w
        pred_boxes = stack((pred_ctr_x - c_to_c_w, pred_ctr_y - c_to_c_h, pred_ctr_x + c_to_c_w,
                            pred_ctr_y + c_to_c_h), dim=2)
        return pred_boxes.flatten(1)


class Matcher:
    """Assigns each prediction (column of an ``[M gt, N pred]`` quality
    matrix) its best ground truth, or ``BELOW_LOW_THRESHOLD`` (-1) /
    ``BETWEEN_THRESHOLDS`` (-2); with ``allow_low_quality_matches``, the
    predictions that are some ground truth's best (ties included) keep that
    match whatever their quality."""

    BELOW_LOW_THRESHOLD = -1
    BETWEEN_THRESHOLDS = -2

    def __init__(self, high_threshold: float, low_threshold: float, allow_low_quality_matches: bool = False):
        self.BELOW_LOW_THRESHOLD = -1
        self.BETWEEN_THRESHOLDS = -2
        if not low_threshold <= high_threshold:
            raise AssertionError("low_threshold should be <= high_threshold")
        self.high_threshold = high_threshold
        self.low_threshold = low_threshold
        self.allow_low_quality_matches = allow_low_quality_matches

    def __call__(self, match_quality_matrix: Tensor) -> Tensor:
        if match_quality_matrix.numel() == 0:
            if match_quality_matrix.shape[0] == 0:
                raise ValueError("No ground-truth boxes available for one of the images during training")
            raise ValueError("No proposal boxes available for one of the images during training")
        matched_vals, matches = match_quality_matrix.max(dim=0)
        all_matches = matches.clone() if self.allow_low_quality_matches else None
        below_low_threshold = matched_vals < self.low_threshold
        between_thresholds = (matched_vals >= self.low_threshold) & (matched_vals < self.high_threshold)
        matches[below_low_threshold] = self.BELOW_LOW_THRESHOLD
        matches[between_thresholds] = self.BETWEEN_THRESHOLDS
        if self.allow_low_quality_matches:
            self.set_low_quality_matches_(matches, all_matches, match_quality_matrix)
        return matches

    def set_low_quality_matches_(self, matches: Tensor, all_matches: Tensor, match_quality_matrix: Tensor) -> None:
        highest_quality_foreach_gt, _ = match_quality_matrix.max(dim=1)
        pairs = (match_quality_matrix == highest_quality_foreach_gt[:, None]).nonzero(as_tuple=True)
        pred_inds_to_update = pairs[1]
        matches[pred_inds_to_update] = all_matches[pred_inds_to_update]


def overwrite_eps(model, eps: float) -> None:
    """Sets the eps of every FrozenBatchNorm2d in ``model`` (torchvision
    loads its first COCO checkpoints with eps 0, as they were trained)."""
    from tracec.vision.ops.misc import FrozenBatchNorm2d
    for module in model.modules():
        if isinstance(module, FrozenBatchNorm2d):
            module.eps = eps


def _topk_min(input: Tensor, orig_kval: int, axis: int) -> int:
    """``min(orig_kval, input.size(axis))`` (torchvision's ONNX-export
    variant does not apply: there is no tracing export here)."""
    return min(orig_kval, input.size(axis))
