"""``torchvision.models.detection.rpn``: the Region Proposal Network of
Faster R-CNN.  ``RPNHead`` scores and regresses every anchor of every
level (a shared 3x3 conv, 1x1 objectness and box convs, init normal(0.01)
and zero biases); ``RegionProposalNetwork`` decodes the anchors' offsets
into proposals, keeps each level's ``pre_nms_top_n`` by objectness, clips
them to the image, drops tiny boxes and low scores, runs NMS per level and
keeps ``post_nms_top_n``; in training it matches anchors to the targets
(IoU >= fg_iou_thresh foreground, < bg_iou_thresh background, the rest
ignored, every target's best anchors kept), samples them and returns the
objectness BCE and the smooth-L1 (beta 1/9) box loss over the sampled
anchors.  State-dict layout and names are torchvision's (version-1 head
keys ``conv.weight`` are renamed on load)."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import nn
from tracec.creation import arange, full, zeros
from tracec.nn import functional as F
from tracec.shape_ops import cat
from tracec.vision.models.detection._utils import BalancedPositiveNegativeSampler, BoxCoder, Matcher, _topk_min
from tracec.vision.models.detection.anchor_utils import AnchorGenerator  # noqa: F401 (torchvision re-exports it)
from tracec.vision.models.detection.image_list import ImageList  # noqa: F401
from tracec.vision.ops import boxes as box_ops
from tracec.vision.ops.misc import Conv2dNormActivation


class RPNHead(nn.Module):
    _version = 2

    def __init__(self, in_channels: int, num_anchors: int, conv_depth=1) -> None:
        super().__init__()
        self.conv = nn.Sequential(*[Conv2dNormActivation(in_channels, in_channels, kernel_size=3, norm_layer=None)
                                    for _ in range(conv_depth)])
        self.cls_logits = nn.Conv2d(in_channels, num_anchors, kernel_size=1, stride=1)
        self.bbox_pred = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=1, stride=1)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, std=0.01)
                if layer.bias is not None:
                    nn.init.constant_(layer.bias, 0)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if version is None or version < 2:
            for kind in ("weight", "bias"):
                old_key, new_key = f"{prefix}conv.{kind}", f"{prefix}conv.0.0.{kind}"
                if old_key in state_dict:
                    state_dict[new_key] = state_dict.pop(old_key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def forward(self, x):
        logits, bbox_reg = [], []
        for feature in x:
            t = self.conv(feature)
            logits.append(self.cls_logits(t))
            bbox_reg.append(self.bbox_pred(t))
        return logits, bbox_reg


def permute_and_flatten(layer, N: int, A: int, C: int, H: int, W: int):
    """``[N, A * C, H, W]`` -> ``[N, H * W * A, C]`` (position-major)."""
    return layer.view(N, -1, C, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, C)


def concat_box_prediction_layers(box_cls, box_regression):
    """Every level's scores and offsets flattened and concatenated:
    ``[N * sum(H * W * A), C]`` and ``[N * sum(H * W * A), 4]``."""
    cls_flat, reg_flat = [], []
    for cls_level, reg_level in zip(box_cls, box_regression):
        N, AxC, H, W = cls_level.shape
        A = reg_level.shape[1] // 4
        C = AxC // A
        cls_flat.append(permute_and_flatten(cls_level, N, A, C, H, W))
        reg_flat.append(permute_and_flatten(reg_level, N, A, 4, H, W))
    return cat(cls_flat, dim=1).flatten(0, -2), cat(reg_flat, dim=1).reshape(-1, 4)


class RegionProposalNetwork(nn.Module):
    def __init__(self, anchor_generator, head, fg_iou_thresh: float, bg_iou_thresh: float,
                 batch_size_per_image: int, positive_fraction: float, pre_nms_top_n, post_nms_top_n,
                 nms_thresh: float, score_thresh: float = 0.0) -> None:
        super().__init__()
        self.anchor_generator = anchor_generator
        self.head = head
        self.box_coder = BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = Matcher(fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=True)
        self.fg_bg_sampler = BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)
        self._pre_nms_top_n = pre_nms_top_n
        self._post_nms_top_n = post_nms_top_n
        self.nms_thresh = nms_thresh
        self.score_thresh = score_thresh
        self.min_size = 1e-3

    def pre_nms_top_n(self) -> int:
        return self._pre_nms_top_n["training" if self.training else "testing"]

    def post_nms_top_n(self) -> int:
        return self._post_nms_top_n["training" if self.training else "testing"]

    def assign_targets_to_anchors(self, anchors, targets):
        """Per image: anchor labels (1 foreground, 0 background, -1
        ignored; float32) and each anchor's matched target box."""
        labels, matched_gt_boxes = [], []
        for anchors_per_image, targets_per_image in zip(anchors, targets):
            gt_boxes = targets_per_image["boxes"]
            if gt_boxes.numel() == 0:
                matched = zeros(anchors_per_image.shape, dtype=dt.float32, device=anchors_per_image.device)
                labels_per_image = zeros((anchors_per_image.shape[0],), dtype=dt.float32,
                                         device=anchors_per_image.device)
            else:
                matched_idxs = self.proposal_matcher(self.box_similarity(gt_boxes, anchors_per_image))
                matched = gt_boxes[matched_idxs.clamp(min=0)]
                labels_per_image = (matched_idxs >= 0).to(dtype=dt.float32)
                labels_per_image[matched_idxs == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0.0
                labels_per_image[matched_idxs == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1.0
            labels.append(labels_per_image)
            matched_gt_boxes.append(matched)
        return labels, matched_gt_boxes

    def _get_top_n_idx(self, objectness, num_anchors_per_level):
        r, offset = [], 0
        for ob in objectness.split(num_anchors_per_level, 1):
            _, top_n_idx = ob.topk(_topk_min(ob, self.pre_nms_top_n(), 1), dim=1)
            r.append(top_n_idx + offset)
            offset += ob.shape[1]
        return cat(r, dim=1)

    def filter_proposals(self, proposals, objectness, image_shapes, num_anchors_per_level):
        num_images = proposals.shape[0]
        device = proposals.device
        objectness = objectness.detach().reshape(num_images, -1)
        levels = cat([full((n,), idx, dtype=dt.int64, device=device)
                      for idx, n in enumerate(num_anchors_per_level)], 0)
        levels = levels.reshape(1, -1).expand_as(objectness)
        top_n_idx = self._get_top_n_idx(objectness, num_anchors_per_level)
        batch_idx = arange(num_images, device=device)[:, None]
        objectness = objectness[batch_idx, top_n_idx]
        levels = levels[batch_idx, top_n_idx]
        proposals = proposals[batch_idx, top_n_idx]
        objectness_prob = objectness.sigmoid()
        final_boxes, final_scores = [], []
        for boxes, scores, lvl, img_shape in zip(proposals, objectness_prob, levels, image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, img_shape)
            keep = box_ops.remove_small_boxes(boxes, self.min_size)
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = (scores >= self.score_thresh).nonzero(as_tuple=True)[0]
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = box_ops.batched_nms(boxes, scores, lvl, self.nms_thresh)[: self.post_nms_top_n()]
            final_boxes.append(boxes[keep])
            final_scores.append(scores[keep])
        return final_boxes, final_scores

    def compute_loss(self, objectness, pred_bbox_deltas, labels, regression_targets):
        sampled_pos_inds, sampled_neg_inds = self.fg_bg_sampler(labels)
        sampled_pos_inds = cat(sampled_pos_inds, dim=0).nonzero(as_tuple=True)[0]
        sampled_neg_inds = cat(sampled_neg_inds, dim=0).nonzero(as_tuple=True)[0]
        sampled_inds = cat([sampled_pos_inds, sampled_neg_inds], dim=0)
        objectness = objectness.flatten()
        labels = cat(labels, dim=0)
        regression_targets = cat(regression_targets, dim=0)
        box_loss = F.smooth_l1_loss(pred_bbox_deltas[sampled_pos_inds], regression_targets[sampled_pos_inds],
                                    beta=1 / 9, reduction="sum") / sampled_inds.numel()
        objectness_loss = F.binary_cross_entropy_with_logits(objectness[sampled_inds], labels[sampled_inds])
        return objectness_loss, box_loss

    def forward(self, images, features, targets=None):
        """``(proposals per image, losses)``; ``features`` a dict of maps."""
        features = list(features.values())
        objectness, pred_bbox_deltas = self.head(features)
        anchors = self.anchor_generator(images, features)
        num_images = len(anchors)
        num_anchors_per_level = [o[0].shape[0] * o[0].shape[1] * o[0].shape[2] for o in objectness]
        objectness, pred_bbox_deltas = concat_box_prediction_layers(objectness, pred_bbox_deltas)
        # proposals are not differentiated (Faster R-CNN's approximate training)
        proposals = self.box_coder.decode(pred_bbox_deltas.detach(), anchors).view(num_images, -1, 4)
        boxes, scores = self.filter_proposals(proposals, objectness, images.image_sizes, num_anchors_per_level)
        losses = {}
        if self.training:
            if targets is None:
                raise ValueError("targets should not be None")
            labels, matched_gt_boxes = self.assign_targets_to_anchors(anchors, targets)
            regression_targets = self.box_coder.encode(matched_gt_boxes, anchors)
            loss_objectness, loss_rpn_box_reg = self.compute_loss(objectness, pred_bbox_deltas, labels,
                                                                  regression_targets)
            losses = {"loss_objectness": loss_objectness, "loss_rpn_box_reg": loss_rpn_box_reg}
        return boxes, losses
