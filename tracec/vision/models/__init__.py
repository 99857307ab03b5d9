"""``torchvision.models`` classifiers on tracec, with torchvision 0.29's
module names and state-dict keys, initialization, forward and repr: every
classifier of ``torchvision.models.list_models()`` (AlexNet, VGG, ResNet /
ResNeXt / wide ResNet, SqueezeNet, DenseNet, GoogLeNet, Inception v3,
MobileNet V2/V3, EfficientNet V1/V2, ShuffleNet V2, MNASNet, RegNet, ViT,
ConvNeXt, Swin V1/V2, MaxViT).  ``weights=`` loads only from torch.hub's
cache."""
import fnmatch

from tracec.vision.models._weights import Weights, WeightsEnum
from tracec.vision.models.convnext import (
    ConvNeXt, ConvNeXt_Base_Weights, ConvNeXt_Large_Weights, ConvNeXt_Small_Weights,
    ConvNeXt_Tiny_Weights, convnext_base, convnext_large, convnext_small, convnext_tiny)
from tracec.vision.models.densenet import (
    DenseNet, DenseNet121_Weights, DenseNet161_Weights, DenseNet169_Weights, DenseNet201_Weights,
    densenet121, densenet161, densenet169, densenet201)
from tracec.vision.models.efficientnet import (
    EfficientNet, EfficientNet_B0_Weights, EfficientNet_B1_Weights, EfficientNet_B2_Weights,
    EfficientNet_B3_Weights, EfficientNet_B4_Weights, EfficientNet_B5_Weights,
    EfficientNet_B6_Weights, EfficientNet_B7_Weights, EfficientNet_V2_L_Weights,
    EfficientNet_V2_M_Weights, EfficientNet_V2_S_Weights, efficientnet_b0, efficientnet_b1,
    efficientnet_b2, efficientnet_b3, efficientnet_b4, efficientnet_b5, efficientnet_b6,
    efficientnet_b7, efficientnet_v2_l, efficientnet_v2_m, efficientnet_v2_s)
from tracec.vision.models.googlenet import (
    GoogLeNet, GoogLeNet_Weights, GoogLeNetOutputs, googlenet)
from tracec.vision.models.inception import (
    Inception3, Inception_V3_Weights, InceptionOutputs, inception_v3)
from tracec.vision.models.maxvit import MaxVit, MaxVit_T_Weights, maxvit_t
from tracec.vision.models.mnasnet import (
    MNASNet, MNASNet0_5_Weights, MNASNet0_75_Weights, MNASNet1_0_Weights, MNASNet1_3_Weights,
    mnasnet0_5, mnasnet0_75, mnasnet1_0, mnasnet1_3)
from tracec.vision.models.mobilenetv2 import (
    MobileNet_V2_Weights, MobileNetV2, SqueezeNet, SqueezeNet1_0_Weights, SqueezeNet1_1_Weights,
    mobilenet_v2, squeezenet1_0, squeezenet1_1)
from tracec.vision.models.mobilenetv3 import (
    MobileNet_V3_Large_Weights, MobileNet_V3_Small_Weights, MobileNetV3, mobilenet_v3_large,
    mobilenet_v3_small)
from tracec.vision.models.regnet import (
    RegNet, RegNet_X_1_6GF_Weights, RegNet_X_3_2GF_Weights, RegNet_X_8GF_Weights,
    RegNet_X_16GF_Weights, RegNet_X_32GF_Weights, RegNet_X_400MF_Weights, RegNet_X_800MF_Weights,
    RegNet_Y_1_6GF_Weights, RegNet_Y_3_2GF_Weights, RegNet_Y_8GF_Weights, RegNet_Y_16GF_Weights,
    RegNet_Y_32GF_Weights, RegNet_Y_128GF_Weights, RegNet_Y_400MF_Weights,
    RegNet_Y_800MF_Weights, regnet_x_1_6gf, regnet_x_3_2gf, regnet_x_8gf, regnet_x_16gf,
    regnet_x_32gf, regnet_x_400mf, regnet_x_800mf, regnet_y_1_6gf, regnet_y_3_2gf, regnet_y_8gf,
    regnet_y_16gf, regnet_y_32gf, regnet_y_128gf, regnet_y_400mf, regnet_y_800mf)
from tracec.vision.models.resnet import (
    BasicBlock, Bottleneck, ResNet, ResNet18_Weights, ResNet34_Weights, ResNet50_Weights,
    ResNet101_Weights, ResNet152_Weights, ResNeXt50_32X4D_Weights, ResNeXt101_32X8D_Weights,
    ResNeXt101_64X4D_Weights, Wide_ResNet50_2_Weights, Wide_ResNet101_2_Weights, resnet18,
    resnet34, resnet50, resnet101, resnet152, resnext50_32x4d, resnext101_32x8d, resnext101_64x4d,
    wide_resnet50_2, wide_resnet101_2)
from tracec.vision.models.shufflenetv2 import (
    ShuffleNet_V2_X0_5_Weights, ShuffleNet_V2_X1_0_Weights, ShuffleNet_V2_X1_5_Weights,
    ShuffleNet_V2_X2_0_Weights, ShuffleNetV2, shufflenet_v2_x0_5, shufflenet_v2_x1_0,
    shufflenet_v2_x1_5, shufflenet_v2_x2_0)
from tracec.vision.models.vision_transformer import (
    ViT_B_16_Weights, ViT_B_32_Weights, ViT_H_14_Weights, ViT_L_16_Weights, ViT_L_32_Weights,
    VisionTransformer, vit_b_16, vit_b_32, vit_h_14, vit_l_16, vit_l_32)
from tracec.vision.models.swin_transformer import (
    Swin_B_Weights, Swin_S_Weights, Swin_T_Weights, Swin_V2_B_Weights, Swin_V2_S_Weights,
    Swin_V2_T_Weights, SwinTransformer, swin_b, swin_s, swin_t, swin_v2_b, swin_v2_s, swin_v2_t)
from tracec.vision.models.vgg import (
    VGG, AlexNet, AlexNet_Weights, VGG11_BN_Weights, VGG11_Weights, VGG13_BN_Weights,
    VGG13_Weights, VGG16_BN_Weights, VGG16_Weights, VGG19_BN_Weights, VGG19_Weights, alexnet,
    vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn)
# torchvision.models.detection: reachable as an attribute after `import torchvision`
from tracec.vision.models import detection  # noqa: E402,F401



# builder name -> its pretrained-weights enum
_WEIGHTS_OF = {
    "alexnet": AlexNet_Weights,
    "convnext_base": ConvNeXt_Base_Weights,
    "convnext_large": ConvNeXt_Large_Weights,
    "convnext_small": ConvNeXt_Small_Weights,
    "convnext_tiny": ConvNeXt_Tiny_Weights,
    "densenet121": DenseNet121_Weights,
    "densenet161": DenseNet161_Weights,
    "densenet169": DenseNet169_Weights,
    "densenet201": DenseNet201_Weights,
    "efficientnet_b0": EfficientNet_B0_Weights,
    "efficientnet_b1": EfficientNet_B1_Weights,
    "efficientnet_b2": EfficientNet_B2_Weights,
    "efficientnet_b3": EfficientNet_B3_Weights,
    "efficientnet_b4": EfficientNet_B4_Weights,
    "efficientnet_b5": EfficientNet_B5_Weights,
    "efficientnet_b6": EfficientNet_B6_Weights,
    "efficientnet_b7": EfficientNet_B7_Weights,
    "efficientnet_v2_l": EfficientNet_V2_L_Weights,
    "efficientnet_v2_m": EfficientNet_V2_M_Weights,
    "efficientnet_v2_s": EfficientNet_V2_S_Weights,
    "googlenet": GoogLeNet_Weights,
    "inception_v3": Inception_V3_Weights,
    "maxvit_t": MaxVit_T_Weights,
    "mnasnet0_5": MNASNet0_5_Weights,
    "mnasnet0_75": MNASNet0_75_Weights,
    "mnasnet1_0": MNASNet1_0_Weights,
    "mnasnet1_3": MNASNet1_3_Weights,
    "mobilenet_v2": MobileNet_V2_Weights,
    "mobilenet_v3_large": MobileNet_V3_Large_Weights,
    "mobilenet_v3_small": MobileNet_V3_Small_Weights,
    "regnet_x_16gf": RegNet_X_16GF_Weights,
    "regnet_x_1_6gf": RegNet_X_1_6GF_Weights,
    "regnet_x_32gf": RegNet_X_32GF_Weights,
    "regnet_x_3_2gf": RegNet_X_3_2GF_Weights,
    "regnet_x_400mf": RegNet_X_400MF_Weights,
    "regnet_x_800mf": RegNet_X_800MF_Weights,
    "regnet_x_8gf": RegNet_X_8GF_Weights,
    "regnet_y_128gf": RegNet_Y_128GF_Weights,
    "regnet_y_16gf": RegNet_Y_16GF_Weights,
    "regnet_y_1_6gf": RegNet_Y_1_6GF_Weights,
    "regnet_y_32gf": RegNet_Y_32GF_Weights,
    "regnet_y_3_2gf": RegNet_Y_3_2GF_Weights,
    "regnet_y_400mf": RegNet_Y_400MF_Weights,
    "regnet_y_800mf": RegNet_Y_800MF_Weights,
    "regnet_y_8gf": RegNet_Y_8GF_Weights,
    "resnet101": ResNet101_Weights,
    "resnet152": ResNet152_Weights,
    "resnet18": ResNet18_Weights,
    "resnet34": ResNet34_Weights,
    "resnet50": ResNet50_Weights,
    "resnext101_32x8d": ResNeXt101_32X8D_Weights,
    "resnext101_64x4d": ResNeXt101_64X4D_Weights,
    "resnext50_32x4d": ResNeXt50_32X4D_Weights,
    "shufflenet_v2_x0_5": ShuffleNet_V2_X0_5_Weights,
    "shufflenet_v2_x1_0": ShuffleNet_V2_X1_0_Weights,
    "shufflenet_v2_x1_5": ShuffleNet_V2_X1_5_Weights,
    "shufflenet_v2_x2_0": ShuffleNet_V2_X2_0_Weights,
    "squeezenet1_0": SqueezeNet1_0_Weights,
    "squeezenet1_1": SqueezeNet1_1_Weights,
    "swin_b": Swin_B_Weights,
    "swin_s": Swin_S_Weights,
    "swin_t": Swin_T_Weights,
    "swin_v2_b": Swin_V2_B_Weights,
    "swin_v2_s": Swin_V2_S_Weights,
    "swin_v2_t": Swin_V2_T_Weights,
    "vgg11": VGG11_Weights,
    "vgg11_bn": VGG11_BN_Weights,
    "vgg13": VGG13_Weights,
    "vgg13_bn": VGG13_BN_Weights,
    "vgg16": VGG16_Weights,
    "vgg16_bn": VGG16_BN_Weights,
    "vgg19": VGG19_Weights,
    "vgg19_bn": VGG19_BN_Weights,
    "vit_b_16": ViT_B_16_Weights,
    "vit_b_32": ViT_B_32_Weights,
    "vit_h_14": ViT_H_14_Weights,
    "vit_l_16": ViT_L_16_Weights,
    "vit_l_32": ViT_L_32_Weights,
    "wide_resnet101_2": Wide_ResNet101_2_Weights,
    "wide_resnet50_2": Wide_ResNet50_2_Weights,
}
_BUILDERS = {name: globals()[name] for name in _WEIGHTS_OF}


def list_models(module=None, include=None, exclude=None):
    """The builders' names, sorted: those of ``module`` (a models module
    such as ``tracec.vision.models``) when given, kept when they match any
    ``include`` pattern (fnmatch) and dropped when they match any ``exclude``."""
    names = {k for k, f in _BUILDERS.items()
             if module is None or f.__module__.rsplit(".", 1)[0] == module.__name__}
    if include:
        include = [include] if isinstance(include, str) else include
        names = set().union(*(fnmatch.filter(names, p) for p in include))
    if exclude:
        exclude = [exclude] if isinstance(exclude, str) else exclude
        for p in exclude:
            names -= set(fnmatch.filter(names, p))
    return sorted(names)


def get_model_builder(name: str):
    name = name.lower()
    if name not in _BUILDERS:
        raise ValueError(f"Unknown model {name}")
    return _BUILDERS[name]


def get_model(name: str, **config):
    return get_model_builder(name)(**config)


def get_model_weights(name):
    """The weights enum of a builder, given by name or as the function."""
    name = name.__name__ if callable(name) else name.lower()
    if name not in _WEIGHTS_OF:
        raise ValueError(f"Unknown model {name}")
    return _WEIGHTS_OF[name]


def get_weight(name: str):
    """The weights named ``"<Enum>.<member>"``, e.g. ``"ResNet50_Weights.IMAGENET1K_V1"``."""
    enum_name, _, member = name.partition(".")
    enum = next((e for e in _WEIGHTS_OF.values() if e.__name__ == enum_name), None)
    if enum is None:
        raise ValueError(f"The weight enum '{enum_name}' for the specific method couldn't be "
                         "retrieved.")
    return enum[member] if member != "DEFAULT" else enum.DEFAULT
