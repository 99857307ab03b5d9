"""``torchvision.models.detection.roi_heads``: Fast R-CNN's box branch.
``RoIHeads`` pools each proposal's features (``box_roi_pool``, e.g.
MultiScaleRoIAlign), runs ``box_head`` and ``box_predictor``; in training
it adds the ground-truth boxes to the proposals, matches them (IoU >=
fg_iou_thresh: the target's label; < bg_iou_thresh: background 0; between:
ignored), samples, encodes the regression targets (weights
``bbox_reg_weights``, default (10, 10, 5, 5)) and returns ``fastrcnn_loss``
(cross-entropy, and smooth-L1 (beta 1/9) of each positive's own class box
summed over the sampled count); in eval it decodes per-class boxes, clips
them, drops the background column, low scores and tiny boxes, runs NMS per
class and keeps ``detections_per_img``.  The mask and keypoint branches
(Mask / Keypoint R-CNN) are not provided: passing their modules raises
NotImplementedError."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import nn
from tracec.creation import arange, zeros
from tracec.nn import functional as F
from tracec.shape_ops import cat
from tracec.vision.models.detection._utils import BalancedPositiveNegativeSampler, BoxCoder, Matcher
from tracec.vision.ops import boxes as box_ops


def fastrcnn_loss(class_logits, box_regression, labels, regression_targets):
    """(classification loss, box loss) of the sampled proposals."""
    labels = cat(labels, dim=0)
    regression_targets = cat(regression_targets, dim=0)
    classification_loss = F.cross_entropy(class_logits, labels)
    pos = (labels > 0).nonzero(as_tuple=True)[0]
    labels_pos = labels[pos]
    N = class_logits.shape[0]
    box_regression = box_regression.reshape(N, box_regression.size(-1) // 4, 4)
    box_loss = F.smooth_l1_loss(box_regression[pos, labels_pos], regression_targets[pos], beta=1 / 9,
                                reduction="sum")
    return classification_loss, box_loss / labels.numel()


class RoIHeads(nn.Module):
    def __init__(self, box_roi_pool, box_head, box_predictor, fg_iou_thresh, bg_iou_thresh,
                 batch_size_per_image, positive_fraction, bbox_reg_weights, score_thresh, nms_thresh,
                 detections_per_img, mask_roi_pool=None, mask_head=None, mask_predictor=None,
                 keypoint_roi_pool=None, keypoint_head=None, keypoint_predictor=None):
        super().__init__()
        if any(m is not None for m in (mask_roi_pool, mask_head, mask_predictor, keypoint_roi_pool,
                                       keypoint_head, keypoint_predictor)):
            raise NotImplementedError("RoIHeads' mask and keypoint branches (Mask / Keypoint R-CNN) are not "
                                      "supported by tracec.vision; the box branch is")
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = Matcher(fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=False)
        self.fg_bg_sampler = BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)
        self.box_coder = BoxCoder((10.0, 10.0, 5.0, 5.0) if bbox_reg_weights is None else bbox_reg_weights)
        self.box_roi_pool = box_roi_pool
        self.box_head = box_head
        self.box_predictor = box_predictor
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.mask_roi_pool = self.mask_head = self.mask_predictor = None
        self.keypoint_roi_pool = self.keypoint_head = self.keypoint_predictor = None

    def has_mask(self):
        return False

    def has_keypoint(self):
        return False

    def assign_targets_to_proposals(self, proposals, gt_boxes, gt_labels):
        matched_idxs, labels = [], []
        for props, gt_b, gt_l in zip(proposals, gt_boxes, gt_labels):
            if gt_b.numel() == 0:
                clamped = zeros((props.shape[0],), dtype=dt.int64, device=props.device)
                labels_in_image = zeros((props.shape[0],), dtype=dt.int64, device=props.device)
            else:
                matched = self.proposal_matcher(box_ops.box_iou(gt_b, props))
                clamped = matched.clamp(min=0)
                labels_in_image = gt_l[clamped].to(dtype=dt.int64)
                labels_in_image[matched == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0
                labels_in_image[matched == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1
            matched_idxs.append(clamped)
            labels.append(labels_in_image)
        return matched_idxs, labels

    def subsample(self, labels):
        pos, neg = self.fg_bg_sampler(labels)
        return [(p | n).nonzero(as_tuple=True)[0] for p, n in zip(pos, neg)]

    def add_gt_proposals(self, proposals, gt_boxes):
        return [cat((p, g)) for p, g in zip(proposals, gt_boxes)]

    def check_targets(self, targets):
        if targets is None:
            raise ValueError("targets should not be None")
        if not all("boxes" in t for t in targets):
            raise ValueError("Every element of targets should have a boxes key")
        if not all("labels" in t for t in targets):
            raise ValueError("Every element of targets should have a labels key")

    def select_training_samples(self, proposals, targets):
        self.check_targets(targets)
        dtype, device = proposals[0].dtype, proposals[0].device
        gt_boxes = [t["boxes"].to(dtype) for t in targets]
        gt_labels = [t["labels"] for t in targets]
        proposals = self.add_gt_proposals(proposals, gt_boxes)
        matched_idxs, labels = self.assign_targets_to_proposals(proposals, gt_boxes, gt_labels)
        sampled_inds = self.subsample(labels)
        matched_gt_boxes = []
        for img_id, inds in enumerate(sampled_inds):
            proposals[img_id] = proposals[img_id][inds]
            labels[img_id] = labels[img_id][inds]
            matched_idxs[img_id] = matched_idxs[img_id][inds]
            gt = gt_boxes[img_id]
            if gt.numel() == 0:
                gt = zeros((1, 4), dtype=dtype, device=device)
            matched_gt_boxes.append(gt[matched_idxs[img_id]])
        regression_targets = self.box_coder.encode(matched_gt_boxes, proposals)
        return proposals, matched_idxs, labels, regression_targets

    def postprocess_detections(self, class_logits, box_regression, proposals, image_shapes):
        num_classes = class_logits.shape[-1]
        boxes_per_image = [p.shape[0] for p in proposals]
        pred_boxes = self.box_coder.decode(box_regression, proposals)
        pred_scores = F.softmax(class_logits, -1)
        all_boxes, all_scores, all_labels = [], [], []
        for boxes, scores, image_shape in zip(pred_boxes.split(boxes_per_image, 0),
                                              pred_scores.split(boxes_per_image, 0), image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, image_shape)
            labels = arange(num_classes, device=class_logits.device).view(1, -1).expand_as(scores)
            # column 0 is the background
            boxes, scores, labels = boxes[:, 1:].reshape(-1, 4), scores[:, 1:].reshape(-1), labels[:, 1:].reshape(-1)
            inds = (scores > self.score_thresh).nonzero(as_tuple=True)[0]
            boxes, scores, labels = boxes[inds], scores[inds], labels[inds]
            keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
            all_boxes.append(boxes[keep])
            all_scores.append(scores[keep])
            all_labels.append(labels[keep])
        return all_boxes, all_scores, all_labels

    def forward(self, features, proposals, image_shapes, targets=None):
        """``(detections, losses)``: per-image dicts of boxes / labels /
        scores in eval, the two losses in training."""
        if targets is not None:
            for t in targets:
                if t["boxes"].dtype not in (dt.float32, dt.float64, dt.float16):
                    raise TypeError(f"target boxes must of float type, instead got {t['boxes'].dtype}")
                if not t["labels"].dtype == dt.int64:
                    raise TypeError(f"target labels must of int64 type, instead got {t['labels'].dtype}")
        if self.training:
            proposals, matched_idxs, labels, regression_targets = self.select_training_samples(proposals, targets)
        box_features = self.box_head(self.box_roi_pool(features, proposals, image_shapes))
        class_logits, box_regression = self.box_predictor(box_features)
        result, losses = [], {}
        if self.training:
            loss_classifier, loss_box_reg = fastrcnn_loss(class_logits, box_regression, labels, regression_targets)
            losses = {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}
        else:
            boxes, scores, labels = self.postprocess_detections(class_logits, box_regression, proposals, image_shapes)
            result = [{"boxes": b, "labels": l, "scores": s} for b, s, l in zip(boxes, scores, labels)]
        return result, losses
