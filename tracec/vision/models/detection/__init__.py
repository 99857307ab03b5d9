"""``torchvision.models.detection`` on tracec: the building blocks detection
programs import from it (``_utils``: BoxCoder, Matcher,
BalancedPositiveNegativeSampler; ``image_list.ImageList``;
``anchor_utils.AnchorGenerator``; ``rpn``: RPNHead, RegionProposalNetwork;
``roi_heads``: the box branch of RoIHeads, fastrcnn_loss; ``faster_rcnn``:
TwoMLPHead, FastRCNNConvFCHead, FastRCNNPredictor).  The assembled models
(Faster / Mask R-CNN, RetinaNet, SSD, FCOS, their transforms and builders)
are not provided: importing them raises ImportError naming the missing
name."""
from tracec.vision.models.detection import (_utils, anchor_utils, faster_rcnn, image_list,  # noqa: F401
                                            roi_heads, rpn)
