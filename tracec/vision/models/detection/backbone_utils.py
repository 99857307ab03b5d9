"""``torchvision.models.detection.backbone_utils``: a classification
backbone's intermediate layers (``IntermediateLayerGetter``) under a
FeaturePyramidNetwork (``BackboneWithFPN``; a ``LastLevelMaxPool`` "pool"
level by default); ``resnet_fpn_backbone`` / ``_resnet_fpn_extractor``
freeze all but the last ``trainable_layers`` of the ResNet (layer4,
layer3, ..., conv1, and bn1 when all five train) and return
``returned_layers`` (default 1-4) with 256 FPN channels."""
from __future__ import annotations

import warnings

from tracec import nn
from tracec.vision.models import resnet
from tracec.vision.models._utils import IntermediateLayerGetter
from tracec.vision.ops.feature_pyramid_network import FeaturePyramidNetwork, LastLevelMaxPool
from tracec.vision.ops.misc import FrozenBatchNorm2d


class BackboneWithFPN(nn.Module):
    def __init__(self, backbone, return_layers, in_channels_list, out_channels: int, extra_blocks=None,
                 norm_layer=None) -> None:
        super().__init__()
        if extra_blocks is None:
            extra_blocks = LastLevelMaxPool()
        self.body = IntermediateLayerGetter(backbone, return_layers=return_layers)
        self.fpn = FeaturePyramidNetwork(in_channels_list=in_channels_list, out_channels=out_channels,
                                         extra_blocks=extra_blocks, norm_layer=norm_layer)
        self.out_channels = out_channels

    def forward(self, x):
        return self.fpn(self.body(x))


def resnet_fpn_backbone(*, backbone_name: str, weights, norm_layer=FrozenBatchNorm2d, trainable_layers: int = 3,
                        returned_layers=None, extra_blocks=None) -> BackboneWithFPN:
    backbone = getattr(resnet, backbone_name)(weights=weights, norm_layer=norm_layer)
    return _resnet_fpn_extractor(backbone, trainable_layers, returned_layers, extra_blocks)


def _resnet_fpn_extractor(backbone, trainable_layers: int, returned_layers=None, extra_blocks=None,
                          norm_layer=None) -> BackboneWithFPN:
    if trainable_layers < 0 or trainable_layers > 5:
        raise ValueError(f"Trainable layers should be in the range [0,5], got {trainable_layers}")
    layers_to_train = ["layer4", "layer3", "layer2", "layer1", "conv1"][:trainable_layers]
    if trainable_layers == 5:
        layers_to_train.append("bn1")
    for name, parameter in backbone.named_parameters():
        if all(not name.startswith(layer) for layer in layers_to_train):
            parameter.requires_grad_(False)
    if extra_blocks is None:
        extra_blocks = LastLevelMaxPool()
    if returned_layers is None:
        returned_layers = [1, 2, 3, 4]
    if min(returned_layers) <= 0 or max(returned_layers) >= 5:
        raise ValueError(f"Each returned layer should be in the range [1,4]. Got {returned_layers}")
    return_layers = {f"layer{k}": str(v) for v, k in enumerate(returned_layers)}
    in_channels_stage2 = backbone.inplanes // 8
    in_channels_list = [in_channels_stage2 * 2 ** (i - 1) for i in returned_layers]
    return BackboneWithFPN(backbone, return_layers, in_channels_list, 256, extra_blocks=extra_blocks,
                           norm_layer=norm_layer)


def _validate_trainable_layers(is_trained: bool, trainable_backbone_layers, max_value: int, default_value: int):
    if not is_trained:
        if trainable_backbone_layers is not None:
            warnings.warn("Changing trainable_backbone_layers has no effect if neither pretrained nor "
                          "pretrained_backbone have been set to True, falling back to "
                          f"trainable_backbone_layers={max_value} so that all layers are trainable")
        trainable_backbone_layers = max_value
    if trainable_backbone_layers is None:
        trainable_backbone_layers = default_value
    if trainable_backbone_layers < 0 or trainable_backbone_layers > max_value:
        raise ValueError(f"Trainable backbone layers should be in the range [0,{max_value}], got "
                         f"{trainable_backbone_layers} ")
    return trainable_backbone_layers
