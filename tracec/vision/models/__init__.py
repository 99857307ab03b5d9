"""``torchvision.models`` classifiers on tracec (ResNet family, VGG,
AlexNet, MobileNetV2, SqueezeNet), with torchvision's module names and
state-dict keys.  ``weights=`` loads only from torch.hub's cache."""
from tracec.vision.models._weights import Weights, WeightsEnum
from tracec.vision.models.mobilenetv2 import (
    MobileNet_V2_Weights, MobileNetV2, SqueezeNet, SqueezeNet1_0_Weights, SqueezeNet1_1_Weights,
    mobilenet_v2, squeezenet1_0, squeezenet1_1)
from tracec.vision.models.resnet import (
    BasicBlock, Bottleneck, ResNet, ResNet18_Weights, ResNet34_Weights, ResNet50_Weights,
    ResNet101_Weights, ResNet152_Weights, ResNeXt50_32X4D_Weights, Wide_ResNet50_2_Weights,
    resnet18, resnet34, resnet50, resnet101, resnet152, resnext50_32x4d, wide_resnet50_2)
from tracec.vision.models.vgg import (
    VGG, AlexNet, AlexNet_Weights, VGG11_BN_Weights, VGG11_Weights, VGG13_BN_Weights,
    VGG13_Weights, VGG16_BN_Weights, VGG16_Weights, VGG19_BN_Weights, VGG19_Weights, alexnet,
    vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn)

_BUILDERS = {f.__name__: f for f in (
    resnet18, resnet34, resnet50, resnet101, resnet152, resnext50_32x4d, wide_resnet50_2,
    vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn, alexnet, mobilenet_v2,
    squeezenet1_0, squeezenet1_1)}


def list_models(module=None, include=None, exclude=None):
    return sorted(_BUILDERS)


def get_model_builder(name: str):
    name = name.lower()
    if name not in _BUILDERS:
        raise ValueError(f"Unknown model {name}")
    return _BUILDERS[name]


def get_model(name: str, **config):
    return get_model_builder(name)(**config)
