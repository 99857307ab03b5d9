"""``torchvision.models.detection.faster_rcnn``: ``FasterRCNN`` over a
given backbone (an ``out_channels`` attribute and a dict of feature maps;
its defaults are torchvision's: five anchor sizes 32..512 at three aspect
ratios, 7x7 MultiScaleRoIAlign over maps "0".."3", a 1024-wide TwoMLPHead),
the Fast R-CNN box heads (``TwoMLPHead``, ``FastRCNNConvFCHead``) and
``FastRCNNPredictor`` (class scores and per-class box offsets), the pieces
fine-tuning programs swap in, and ``fasterrcnn_resnet50_fpn`` (ResNet-50
FPN backbone; ``weights=FasterRCNN_ResNet50_FPN_Weights.COCO_V1`` and the
ImageNet ``weights_backbone``, its default, load from torch.hub's cache
and are never downloaded).  The v2 and MobileNet builders are not
provided."""
from __future__ import annotations

from tracec import nn
from tracec.nn import functional as F
from tracec.vision.models._meta import _COCO_CATEGORIES
from tracec.vision.models._presets import ObjectDetection
from tracec.vision.models._weights import make_weights
from tracec.vision.models.detection._utils import overwrite_eps
from tracec.vision.models.detection.anchor_utils import AnchorGenerator
from tracec.vision.models.detection.backbone_utils import _resnet_fpn_extractor, _validate_trainable_layers
from tracec.vision.models.detection.generalized_rcnn import GeneralizedRCNN
from tracec.vision.models.detection.roi_heads import RoIHeads
from tracec.vision.models.detection.rpn import RegionProposalNetwork, RPNHead
from tracec.vision.models.detection.transform import GeneralizedRCNNTransform
from tracec.vision.models.resnet import ResNet50_Weights, resnet50
from tracec.vision.ops.misc import Conv2dNormActivation, FrozenBatchNorm2d
from tracec.vision.ops.poolers import MultiScaleRoIAlign


def _default_anchorgen():
    anchor_sizes = ((32,), (64,), (128,), (256,), (512,))
    return AnchorGenerator(anchor_sizes, ((0.5, 1.0, 2.0),) * len(anchor_sizes))


class FasterRCNN(GeneralizedRCNN):
    def __init__(self, backbone, num_classes=None, min_size=800, max_size=1333, image_mean=None, image_std=None,
                 rpn_anchor_generator=None, rpn_head=None, rpn_pre_nms_top_n_train=2000,
                 rpn_pre_nms_top_n_test=1000, rpn_post_nms_top_n_train=2000, rpn_post_nms_top_n_test=1000,
                 rpn_nms_thresh=0.7, rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3, rpn_batch_size_per_image=256,
                 rpn_positive_fraction=0.5, rpn_score_thresh=0.0, box_roi_pool=None, box_head=None,
                 box_predictor=None, box_score_thresh=0.05, box_nms_thresh=0.5, box_detections_per_img=100,
                 box_fg_iou_thresh=0.5, box_bg_iou_thresh=0.5, box_batch_size_per_image=512,
                 box_positive_fraction=0.25, bbox_reg_weights=None, **kwargs):
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the number of output "
                             "channels (assumed to be the same for all the levels)")
        if not isinstance(rpn_anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError("rpn_anchor_generator should be of type AnchorGenerator or None instead of "
                            f"{type(rpn_anchor_generator)}")
        if not isinstance(box_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"box_roi_pool should be of type MultiScaleRoIAlign or None instead of {type(box_roi_pool)}")
        if num_classes is not None:
            if box_predictor is not None:
                raise ValueError("num_classes should be None when box_predictor is specified")
        elif box_predictor is None:
            raise ValueError("num_classes should not be None when box_predictor is not specified")
        out_channels = backbone.out_channels
        if rpn_anchor_generator is None:
            rpn_anchor_generator = _default_anchorgen()
        if rpn_head is None:
            rpn_head = RPNHead(out_channels, rpn_anchor_generator.num_anchors_per_location()[0])
        rpn = RegionProposalNetwork(
            rpn_anchor_generator, rpn_head, rpn_fg_iou_thresh, rpn_bg_iou_thresh, rpn_batch_size_per_image,
            rpn_positive_fraction, dict(training=rpn_pre_nms_top_n_train, testing=rpn_pre_nms_top_n_test),
            dict(training=rpn_post_nms_top_n_train, testing=rpn_post_nms_top_n_test), rpn_nms_thresh,
            score_thresh=rpn_score_thresh)
        if box_roi_pool is None:
            box_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=7, sampling_ratio=2)
        if box_head is None:
            resolution = box_roi_pool.output_size[0]
            box_head = TwoMLPHead(out_channels * resolution ** 2, 1024)
        if box_predictor is None:
            box_predictor = FastRCNNPredictor(1024, num_classes)
        roi_heads = RoIHeads(box_roi_pool, box_head, box_predictor, box_fg_iou_thresh, box_bg_iou_thresh,
                             box_batch_size_per_image, box_positive_fraction, bbox_reg_weights, box_score_thresh,
                             box_nms_thresh, box_detections_per_img)
        image_mean = [0.485, 0.456, 0.406] if image_mean is None else image_mean
        image_std = [0.229, 0.224, 0.225] if image_std is None else image_std
        transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std, **kwargs)
        super().__init__(backbone, rpn, roi_heads, transform)


class TwoMLPHead(nn.Module):
    """Flatten, then two relu Linear layers (fc6, fc7)."""

    def __init__(self, in_channels, representation_size):
        super().__init__()
        self.fc6 = nn.Linear(in_channels, representation_size)
        self.fc7 = nn.Linear(representation_size, representation_size)

    def forward(self, x):
        x = x.flatten(start_dim=1)
        return F.relu(self.fc7(F.relu(self.fc6(x))))


class FastRCNNConvFCHead(nn.Sequential):
    """3x3 Conv2dNormActivation layers, Flatten, then relu Linear layers;
    convs initialized kaiming normal (fan_out, relu) with zero biases."""

    def __init__(self, input_size, conv_layers, fc_layers, norm_layer=None):
        in_channels, in_height, in_width = input_size
        blocks, previous = [], in_channels
        for current in conv_layers:
            blocks.append(Conv2dNormActivation(previous, current, norm_layer=norm_layer))
            previous = current
        blocks.append(nn.Flatten())
        previous = previous * in_height * in_width
        for current in fc_layers:
            blocks.append(nn.Linear(previous, current))
            blocks.append(nn.ReLU(inplace=True))
            previous = current
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


class FastRCNNPredictor(nn.Module):
    """``(class scores [N, num_classes], box offsets [N, num_classes * 4])``
    of pooled features ``[N, C]`` (or ``[N, C, 1, 1]``)."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, num_classes * 4)

    def forward(self, x):
        if x.dim() == 4 and list(x.shape[2:]) != [1, 1]:
            raise AssertionError(f"x has the wrong shape, expecting the last two dimensions to be [1,1] instead "
                                 f"of {list(x.shape[2:])}")
        x = x.flatten(start_dim=1)
        return self.cls_score(x), self.bbox_pred(x)


FasterRCNN_ResNet50_FPN_Weights = make_weights(
    "FasterRCNN_ResNet50_FPN_Weights",
    {"COCO_V1": "https://download.pytorch.org/models/fasterrcnn_resnet50_fpn_coco-258fb6c6.pth"},
    num_classes=len(_COCO_CATEGORIES), meta={"COCO_V1": {"categories": _COCO_CATEGORIES, "min_size": (1, 1)}},
    preset=ObjectDetection)


def fasterrcnn_resnet50_fpn(*, weights=None, progress: bool = True, num_classes=None,
                            weights_backbone=ResNet50_Weights.IMAGENET1K_V1, trainable_backbone_layers=None,
                            **kwargs) -> FasterRCNN:
    """Faster R-CNN with a ResNet-50 FPN backbone (torchvision's builder):
    91 COCO classes unless ``num_classes``; the backbone's BatchNorms are
    frozen when any weights are loaded, and then only the last
    ``trainable_backbone_layers`` (default 3) train."""
    weights = FasterRCNN_ResNet50_FPN_Weights.verify(weights)
    weights_backbone = ResNet50_Weights.verify(weights_backbone)
    if weights is not None:
        weights_backbone = None
        expected = len(weights.meta["categories"])
        if num_classes is not None and num_classes != expected:
            raise ValueError(f"The parameter 'num_classes' expected value {expected} but got {num_classes} "
                             "instead.")
        num_classes = expected
    elif num_classes is None:
        num_classes = 91
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained, trainable_backbone_layers, 5, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    model = FasterRCNN(_resnet_fpn_extractor(backbone, trainable_backbone_layers), num_classes=num_classes,
                       **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if weights == FasterRCNN_ResNet50_FPN_Weights.COCO_V1:
            overwrite_eps(model, 0.0)
    return model
