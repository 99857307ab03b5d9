"""``torchvision.ops`` on tracec: the box operations (``boxes``), the
detection ops (``roi_align`` / ``RoIAlign``, ``roi_pool`` / ``RoIPool``,
``MultiScaleRoIAlign``,
``sigmoid_focal_loss``, the generalized / distance / complete IoU losses,
``FeaturePyramidNetwork``) and the layers torchvision's classifiers are built
from (``misc``: Conv2dNormActivation, SqueezeExcitation, MLP, Permute;
``stochastic_depth``)."""
from tracec.vision.ops import boxes, focal_loss, misc, poolers
from tracec.vision.ops.boxes import (batched_nms, box_area, box_convert, box_iou,
                                     clip_boxes_to_image, complete_box_iou, distance_box_iou,
                                     generalized_box_iou, masks_to_boxes, nms,
                                     remove_small_boxes)
from tracec.vision.ops.ciou_loss import complete_box_iou_loss
from tracec.vision.ops.diou_loss import distance_box_iou_loss
from tracec.vision.ops.giou_loss import generalized_box_iou_loss
from tracec.vision.ops.feature_pyramid_network import FeaturePyramidNetwork
from tracec.vision.ops.focal_loss import sigmoid_focal_loss
from tracec.vision.ops.poolers import MultiScaleRoIAlign
from tracec.vision.ops.roi_align import RoIAlign, roi_align
from tracec.vision.ops.roi_pool import RoIPool, roi_pool
from tracec.vision.ops.misc import (MLP, Conv2dNormActivation, Conv3dNormActivation,
                                    FrozenBatchNorm2d, Permute, SqueezeExcitation)
from tracec.vision.ops.stochastic_depth import StochasticDepth, stochastic_depth

__all__ = ["boxes", "focal_loss", "misc", "poolers", "roi_align", "RoIAlign", "roi_pool", "RoIPool",
           "MultiScaleRoIAlign",
           "sigmoid_focal_loss", "complete_box_iou", "distance_box_iou", "masks_to_boxes",
           "FeaturePyramidNetwork", "complete_box_iou_loss", "distance_box_iou_loss", "generalized_box_iou_loss", "batched_nms", "box_area", "box_convert", "box_iou",
           "clip_boxes_to_image", "generalized_box_iou", "nms", "remove_small_boxes", "MLP",
           "Conv2dNormActivation", "Conv3dNormActivation", "FrozenBatchNorm2d", "Permute",
           "SqueezeExcitation", "StochasticDepth", "stochastic_depth"]
