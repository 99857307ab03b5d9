"""``torchvision.models.detection.generalized_rcnn.GeneralizedRCNN``: the
two-stage detector's forward: transform the images (and targets), run the
backbone (a single tensor becomes the feature dict ``{"0": ...}``), the
RPN and the RoI heads, map the detections back to the original sizes;
returns the losses in training and the detections in eval."""
from __future__ import annotations

from collections import OrderedDict

from tracec import nn
from tracec.tensor import Tensor


class GeneralizedRCNN(nn.Module):
    def __init__(self, backbone, rpn, roi_heads, transform) -> None:
        super().__init__()
        self.transform = transform
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = roi_heads
        self._has_warned = False

    def eager_outputs(self, losses, detections):
        return losses if self.training else detections

    def forward(self, images, targets=None):
        if self.training:
            if targets is None:
                raise AssertionError("targets should not be none when in training mode")
            for target in targets:
                boxes = target["boxes"]
                if not isinstance(boxes, Tensor):
                    raise AssertionError(f"Expected target boxes to be of type Tensor, got {type(boxes)}.")
                if not (len(boxes.shape) == 2 and boxes.shape[-1] == 4):
                    raise AssertionError(f"Expected target boxes to be a tensor of shape [N, 4], got {boxes.shape}.")
        original_image_sizes = []
        for img in images:
            val = img.shape[-2:]
            if len(val) != 2:
                raise AssertionError(f"expecting the last two dimensions of the Tensor to be H and W instead got "
                                     f"{img.shape[-2:]}")
            original_image_sizes.append((val[0], val[1]))
        images, targets = self.transform(images, targets)
        if targets is not None:
            for target_idx, target in enumerate(targets):
                boxes = target["boxes"]
                degenerate = boxes[:, 2:] <= boxes[:, :2]
                if degenerate.any():
                    bb_idx = degenerate.any(dim=1).nonzero(as_tuple=True)[0][0]
                    raise AssertionError("All bounding boxes should have positive height and width. Found invalid "
                                         f"box {boxes[bb_idx].tolist()} for target at index {target_idx}.")
        features = self.backbone(images.tensors)
        if isinstance(features, Tensor):
            features = OrderedDict([("0", features)])
        proposals, proposal_losses = self.rpn(images, features, targets)
        detections, detector_losses = self.roi_heads(features, proposals, images.image_sizes, targets)
        detections = self.transform.postprocess(detections, images.image_sizes, original_image_sizes)
        losses = {}
        losses.update(detector_losses)
        losses.update(proposal_losses)
        return self.eager_outputs(losses, detections)
