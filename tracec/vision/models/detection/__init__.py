"""``torchvision.models.detection`` on tracec: the building blocks detection
programs import from it (``_utils``: BoxCoder, Matcher,
BalancedPositiveNegativeSampler; ``image_list.ImageList``;
``anchor_utils.AnchorGenerator``; ``rpn``: RPNHead, RegionProposalNetwork;
``roi_heads``: the box branch of RoIHeads, fastrcnn_loss; ``transform``:
GeneralizedRCNNTransform; ``generalized_rcnn``; ``faster_rcnn``:
FasterRCNN, fasterrcnn_resnet50_fpn and its weights, TwoMLPHead,
FastRCNNConvFCHead, FastRCNNPredictor; ``backbone_utils``:
BackboneWithFPN, resnet_fpn_backbone).  Mask / Keypoint R-CNN, RetinaNet,
SSD, FCOS and the other Faster R-CNN builders are not provided: importing
them raises ImportError naming the missing name."""
from tracec.vision.models.detection import (_utils, anchor_utils, backbone_utils, faster_rcnn,  # noqa: F401
                                            generalized_rcnn, image_list, roi_heads, rpn, transform)
from tracec.vision.models.detection.faster_rcnn import (FasterRCNN,  # noqa: F401
                                                        FasterRCNN_ResNet50_FPN_Weights,
                                                        fasterrcnn_resnet50_fpn)
