"""``torchvision.ops`` on tracec: the box operations (``boxes``) and the
layers torchvision's classifiers are built from (``misc``:
Conv2dNormActivation, SqueezeExcitation, MLP, Permute; ``stochastic_depth``)."""
from tracec.vision.ops import boxes, misc
from tracec.vision.ops.boxes import (batched_nms, box_area, box_convert, box_iou,
                                     clip_boxes_to_image, generalized_box_iou, nms,
                                     remove_small_boxes)
from tracec.vision.ops.misc import (MLP, Conv2dNormActivation, Conv3dNormActivation,
                                    FrozenBatchNorm2d, Permute, SqueezeExcitation)
from tracec.vision.ops.stochastic_depth import StochasticDepth, stochastic_depth

__all__ = ["boxes", "misc", "batched_nms", "box_area", "box_convert", "box_iou",
           "clip_boxes_to_image", "generalized_box_iou", "nms", "remove_small_boxes", "MLP",
           "Conv2dNormActivation", "Conv3dNormActivation", "FrozenBatchNorm2d", "Permute",
           "SqueezeExcitation", "StochasticDepth", "stochastic_depth"]
