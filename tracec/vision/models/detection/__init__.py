"""``torchvision.models.detection`` on tracec: the building blocks detection
programs import from it (``_utils``: BoxCoder, Matcher,
BalancedPositiveNegativeSampler; ``image_list.ImageList``;
``anchor_utils.AnchorGenerator``; ``rpn``: RPNHead, RegionProposalNetwork).
The assembled models (Faster / Mask R-CNN, RetinaNet, SSD, FCOS, their
RoI heads, transforms and builders) are not provided: importing them
raises ImportError naming the missing name."""
from tracec.vision.models.detection import _utils, anchor_utils, image_list, rpn  # noqa: F401
