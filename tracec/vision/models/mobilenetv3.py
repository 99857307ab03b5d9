"""MobileNetV3 small / large (Howard et al.) as torchvision builds them:
the same module names, initialization and forward; ``width_mult``,
``reduced_tail`` and ``dilated`` as in torchvision's ``_mobilenet_v3_conf``."""
from __future__ import annotations

from functools import partial

from tracec import nn
from tracec.shape_ops import flatten
from tracec.vision.models._weights import load_into, make_weights, resolve
from tracec.vision.models.mobilenetv2 import _make_divisible, init_mobile_weights
from tracec.vision.ops.misc import Conv2dNormActivation
from tracec.vision.ops.misc import SqueezeExcitation as SElayer

_U = "https://download.pytorch.org/models/"


class InvertedResidualConfig:
    def __init__(self, input_channels, kernel, expanded_channels, out_channels, use_se,
                 activation, stride, dilation, width_mult):
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels, width_mult):
        return _make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    def __init__(self, cnf, norm_layer, se_layer=partial(SElayer, scale_activation=nn.Hardsigmoid)):
        super().__init__()
        if not (1 <= cnf.stride <= 2):
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers = []
        activation_layer = nn.Hardswish if cnf.use_hs else nn.ReLU
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels,
                                               kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=activation_layer))
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels,
                                           kernel_size=cnf.kernel, stride=stride,
                                           dilation=cnf.dilation, groups=cnf.expanded_channels,
                                           norm_layer=norm_layer,
                                           activation_layer=activation_layer))
        if cnf.use_se:
            squeeze_channels = _make_divisible(cnf.expanded_channels // 4, 8)
            layers.append(se_layer(cnf.expanded_channels, squeeze_channels))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels,
                                           kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input):
        result = self.block(input)
        if self.use_res_connect:
            result += input
        return result


class MobileNetV3(nn.Module):
    def __init__(self, inverted_residual_setting, last_channel, num_classes=1000, block=None,
                 norm_layer=None, dropout=0.2, **kwargs):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not (isinstance(inverted_residual_setting, (list, tuple))
                and all(isinstance(s, InvertedResidualConfig)
                        for s in inverted_residual_setting)):
            raise TypeError("The inverted_residual_setting should be "
                            "List[InvertedResidualConfig]")
        block = block or InvertedResidual
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        firstconv_output_channels = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, firstconv_output_channels, kernel_size=3, stride=2,
                                       norm_layer=norm_layer, activation_layer=nn.Hardswish)]
        for cnf in inverted_residual_setting:
            layers.append(block(cnf, norm_layer))
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = 6 * lastconv_input_channels
        layers.append(Conv2dNormActivation(lastconv_input_channels, lastconv_output_channels,
                                           kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(lastconv_output_channels, last_channel), nn.Hardswish(inplace=True),
            nn.Dropout(p=dropout, inplace=True), nn.Linear(last_channel, num_classes))
        init_mobile_weights(self)

    def _forward_impl(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))

    def forward(self, x):
        return self._forward_impl(x)


def _mobilenet_v3_conf(arch, width_mult=1.0, reduced_tail=False, dilated=False, **kwargs):
    rd = 2 if reduced_tail else 1
    dil = 2 if dilated else 1
    c = partial(InvertedResidualConfig, width_mult=width_mult)
    adjust_channels = partial(InvertedResidualConfig.adjust_channels, width_mult=width_mult)
    if arch == "mobilenet_v3_large":
        setting = [
            c(16, 3, 16, 16, False, "RE", 1, 1), c(16, 3, 64, 24, False, "RE", 2, 1),
            c(24, 3, 72, 24, False, "RE", 1, 1), c(24, 5, 72, 40, True, "RE", 2, 1),
            c(40, 5, 120, 40, True, "RE", 1, 1), c(40, 5, 120, 40, True, "RE", 1, 1),
            c(40, 3, 240, 80, False, "HS", 2, 1), c(80, 3, 200, 80, False, "HS", 1, 1),
            c(80, 3, 184, 80, False, "HS", 1, 1), c(80, 3, 184, 80, False, "HS", 1, 1),
            c(80, 3, 480, 112, True, "HS", 1, 1), c(112, 3, 672, 112, True, "HS", 1, 1),
            c(112, 5, 672, 160 // rd, True, "HS", 2, dil),
            c(160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dil),
            c(160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dil)]
        last_channel = adjust_channels(1280 // rd)
    elif arch == "mobilenet_v3_small":
        setting = [
            c(16, 3, 16, 16, True, "RE", 2, 1), c(16, 3, 72, 24, False, "RE", 2, 1),
            c(24, 3, 88, 24, False, "RE", 1, 1), c(24, 5, 96, 40, True, "HS", 2, 1),
            c(40, 5, 240, 40, True, "HS", 1, 1), c(40, 5, 240, 40, True, "HS", 1, 1),
            c(40, 5, 120, 48, True, "HS", 1, 1), c(48, 5, 144, 48, True, "HS", 1, 1),
            c(48, 5, 288, 96 // rd, True, "HS", 2, dil),
            c(96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dil),
            c(96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dil)]
        last_channel = adjust_channels(1024 // rd)
    else:
        raise ValueError(f"Unsupported model type {arch}")
    return setting, last_channel


MobileNet_V3_Large_Weights = make_weights(
    "MobileNet_V3_Large_Weights", {"IMAGENET1K_V1": _U + "mobilenet_v3_large-8738ca79.pth",
                                   "IMAGENET1K_V2": _U + "mobilenet_v3_large-5c1a4163.pth"},
    default="IMAGENET1K_V2")
MobileNet_V3_Small_Weights = make_weights(
    "MobileNet_V3_Small_Weights", {"IMAGENET1K_V1": _U + "mobilenet_v3_small-047dcff4.pth"})


def _mobilenet_v3(arch, weights_enum, weights, progress, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    setting, last_channel = _mobilenet_v3_conf(arch, **kwargs)
    return load_into(MobileNetV3(setting, last_channel, **kwargs), weights, progress)


def mobilenet_v3_large(*, weights=None, progress=True, **kwargs):
    return _mobilenet_v3("mobilenet_v3_large", MobileNet_V3_Large_Weights, weights, progress,
                         **kwargs)


def mobilenet_v3_small(*, weights=None, progress=True, **kwargs):
    return _mobilenet_v3("mobilenet_v3_small", MobileNet_V3_Small_Weights, weights, progress,
                         **kwargs)
