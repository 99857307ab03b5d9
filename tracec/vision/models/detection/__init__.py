"""``torchvision.models.detection`` on tracec: the building blocks detection
programs import from it (``_utils``: BoxCoder, Matcher,
BalancedPositiveNegativeSampler; ``image_list.ImageList``;
``anchor_utils.AnchorGenerator``; ``rpn``: RPNHead, RegionProposalNetwork;
``roi_heads``: the box branch of RoIHeads, fastrcnn_loss; ``transform``:
GeneralizedRCNNTransform; ``generalized_rcnn``; ``faster_rcnn``:
FasterRCNN over a given backbone, TwoMLPHead, FastRCNNConvFCHead,
FastRCNNPredictor).  Mask / Keypoint R-CNN, RetinaNet, SSD, FCOS and the
builders with their backbones and weights (``fasterrcnn_resnet50_fpn``
...) are not provided: importing them raises ImportError naming the
missing name."""
from tracec.vision.models.detection import (_utils, anchor_utils, faster_rcnn, generalized_rcnn,  # noqa: F401
                                            image_list, roi_heads, rpn, transform)
from tracec.vision.models.detection.faster_rcnn import FasterRCNN  # noqa: F401
