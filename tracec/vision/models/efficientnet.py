"""EfficientNet B0-B7 (MBConv) and V2 S/M/L (FusedMBConv + MBConv) as
torchvision builds them: the same module names, initialization, per-block
stochastic depth (linearly rising to ``stochastic_depth_prob``) and
forward."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import partial
from typing import Callable

from tracec import nn
from tracec.shape_ops import flatten
from tracec.vision.models._weights import load_into, make_weights, resolve
from tracec.vision.models.mobilenetv2 import _make_divisible, init_mobile_weights
from tracec.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation
from tracec.vision.ops.stochastic_depth import StochasticDepth

_U = "https://download.pytorch.org/models/"


@dataclass
class _MBConvConfig:
    expand_ratio: float
    kernel: int
    stride: int
    input_channels: int
    out_channels: int
    num_layers: int
    block: Callable

    @staticmethod
    def adjust_channels(channels, width_mult, min_value=None):
        return _make_divisible(channels * width_mult, 8, min_value)


class MBConvConfig(_MBConvConfig):
    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 width_mult=1.0, depth_mult=1.0, block=None):
        input_channels = self.adjust_channels(input_channels, width_mult)
        out_channels = self.adjust_channels(out_channels, width_mult)
        num_layers = self.adjust_depth(num_layers, depth_mult)
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                         block or MBConv)

    @staticmethod
    def adjust_depth(num_layers, depth_mult):
        return int(math.ceil(num_layers * depth_mult))


class FusedMBConvConfig(_MBConvConfig):
    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 block=None):
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                         block or FusedMBConv)


class MBConv(nn.Module):
    def __init__(self, cnf, stochastic_depth_prob, norm_layer, se_layer=SqueezeExcitation):
        super().__init__()
        if not (1 <= cnf.stride <= 2):
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers = []
        activation_layer = nn.SiLU
        expanded_channels = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded_channels,
                                               kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=activation_layer))
        layers.append(Conv2dNormActivation(expanded_channels, expanded_channels,
                                           kernel_size=cnf.kernel, stride=cnf.stride,
                                           groups=expanded_channels, norm_layer=norm_layer,
                                           activation_layer=activation_layer))
        squeeze_channels = max(1, cnf.input_channels // 4)
        layers.append(se_layer(expanded_channels, squeeze_channels,
                               activation=partial(nn.SiLU, inplace=True)))
        layers.append(Conv2dNormActivation(expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, input):
        result = self.block(input)
        if self.use_res_connect:
            result = self.stochastic_depth(result)
            result += input
        return result


class FusedMBConv(nn.Module):
    def __init__(self, cnf, stochastic_depth_prob, norm_layer):
        super().__init__()
        if not (1 <= cnf.stride <= 2):
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers = []
        activation_layer = nn.SiLU
        expanded_channels = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded_channels,
                                               kernel_size=cnf.kernel, stride=cnf.stride,
                                               norm_layer=norm_layer,
                                               activation_layer=activation_layer))
            layers.append(Conv2dNormActivation(expanded_channels, cnf.out_channels,
                                               kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=None))
        else:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.out_channels,
                                               kernel_size=cnf.kernel, stride=cnf.stride,
                                               norm_layer=norm_layer,
                                               activation_layer=activation_layer))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    forward = MBConv.forward


def _linear_uniform(m):
    init_range = 1.0 / math.sqrt(m.out_features)
    nn.init.uniform_(m.weight, -init_range, init_range)


class EfficientNet(nn.Module):
    def __init__(self, inverted_residual_setting, dropout, stochastic_depth_prob=0.2,
                 num_classes=1000, norm_layer=None, last_channel=None):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not (isinstance(inverted_residual_setting, (list, tuple))
                and all(isinstance(s, _MBConvConfig) for s in inverted_residual_setting)):
            raise TypeError("The inverted_residual_setting should be List[MBConvConfig]")
        norm_layer = norm_layer or nn.BatchNorm2d
        firstconv_output_channels = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, firstconv_output_channels, kernel_size=3, stride=2,
                                       norm_layer=norm_layer, activation_layer=nn.SiLU)]
        total_stage_blocks = sum(cnf.num_layers for cnf in inverted_residual_setting)
        stage_block_id = 0
        for cnf in inverted_residual_setting:
            stage = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                if stage:
                    block_cnf.input_channels = block_cnf.out_channels
                    block_cnf.stride = 1
                sd_prob = stochastic_depth_prob * float(stage_block_id) / total_stage_blocks
                stage.append(block_cnf.block(block_cnf, sd_prob, norm_layer))
                stage_block_id += 1
            layers.append(nn.Sequential(*stage))
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = (last_channel if last_channel is not None
                                    else 4 * lastconv_input_channels)
        layers.append(Conv2dNormActivation(lastconv_input_channels, lastconv_output_channels,
                                           kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(lastconv_output_channels, num_classes))
        init_mobile_weights(self, _linear_uniform)

    def _forward_impl(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))

    def forward(self, x):
        return self._forward_impl(x)


def _efficientnet_conf(arch, **kwargs):
    if arch.startswith("efficientnet_b"):
        c = partial(MBConvConfig, width_mult=kwargs.pop("width_mult"),
                    depth_mult=kwargs.pop("depth_mult"))
        setting = [c(1, 3, 1, 32, 16, 1), c(6, 3, 2, 16, 24, 2), c(6, 5, 2, 24, 40, 2),
                   c(6, 3, 2, 40, 80, 3), c(6, 5, 1, 80, 112, 3), c(6, 5, 2, 112, 192, 4),
                   c(6, 3, 1, 192, 320, 1)]
        return setting, None
    F, M = FusedMBConvConfig, MBConvConfig
    if arch.startswith("efficientnet_v2_s"):
        setting = [F(1, 3, 1, 24, 24, 2), F(4, 3, 2, 24, 48, 4), F(4, 3, 2, 48, 64, 4),
                   M(4, 3, 2, 64, 128, 6), M(6, 3, 1, 128, 160, 9), M(6, 3, 2, 160, 256, 15)]
    elif arch.startswith("efficientnet_v2_m"):
        setting = [F(1, 3, 1, 24, 24, 3), F(4, 3, 2, 24, 48, 5), F(4, 3, 2, 48, 80, 5),
                   M(4, 3, 2, 80, 160, 7), M(6, 3, 1, 160, 176, 14), M(6, 3, 2, 176, 304, 18),
                   M(6, 3, 1, 304, 512, 5)]
    elif arch.startswith("efficientnet_v2_l"):
        setting = [F(1, 3, 1, 32, 32, 4), F(4, 3, 2, 32, 64, 7), F(4, 3, 2, 64, 96, 7),
                   M(4, 3, 2, 96, 192, 10), M(6, 3, 1, 192, 224, 19), M(6, 3, 2, 224, 384, 25),
                   M(6, 3, 1, 384, 640, 7)]
    else:
        raise ValueError(f"Unsupported model type {arch}")
    return setting, 1280


def _weights(name, default=None, **urls):
    return make_weights(name, {k: _U + v for k, v in urls.items()}, default=default)


EfficientNet_B0_Weights = _weights("EfficientNet_B0_Weights",
                                   IMAGENET1K_V1="efficientnet_b0_rwightman-7f5810bc.pth")
EfficientNet_B1_Weights = _weights("EfficientNet_B1_Weights", default="IMAGENET1K_V2",
                                   IMAGENET1K_V1="efficientnet_b1_rwightman-bac287d4.pth",
                                   IMAGENET1K_V2="efficientnet_b1-c27df63c.pth")
EfficientNet_B2_Weights = _weights("EfficientNet_B2_Weights",
                                   IMAGENET1K_V1="efficientnet_b2_rwightman-c35c1473.pth")
EfficientNet_B3_Weights = _weights("EfficientNet_B3_Weights",
                                   IMAGENET1K_V1="efficientnet_b3_rwightman-b3899882.pth")
EfficientNet_B4_Weights = _weights("EfficientNet_B4_Weights",
                                   IMAGENET1K_V1="efficientnet_b4_rwightman-23ab8bcd.pth")
EfficientNet_B5_Weights = _weights("EfficientNet_B5_Weights",
                                   IMAGENET1K_V1="efficientnet_b5_lukemelas-1a07897c.pth")
EfficientNet_B6_Weights = _weights("EfficientNet_B6_Weights",
                                   IMAGENET1K_V1="efficientnet_b6_lukemelas-24a108a5.pth")
EfficientNet_B7_Weights = _weights("EfficientNet_B7_Weights",
                                   IMAGENET1K_V1="efficientnet_b7_lukemelas-c5b4e57e.pth")
EfficientNet_V2_S_Weights = _weights("EfficientNet_V2_S_Weights",
                                     IMAGENET1K_V1="efficientnet_v2_s-dd5fe13b.pth")
EfficientNet_V2_M_Weights = _weights("EfficientNet_V2_M_Weights",
                                     IMAGENET1K_V1="efficientnet_v2_m-dc08266a.pth")
EfficientNet_V2_L_Weights = _weights("EfficientNet_V2_L_Weights",
                                     IMAGENET1K_V1="efficientnet_v2_l-59c71312.pth")


def _efficientnet(arch, weights_enum, weights, progress, default_dropout, conf=None,
                  **kwargs):
    """``conf``: width/depth multipliers (V1); the V1 B5-B7 and V2 builders
    also fix ``norm_layer`` (passing one too is a TypeError, as in
    torchvision)."""
    weights = resolve(weights_enum, weights, kwargs)
    setting, last_channel = _efficientnet_conf(arch, **(conf or {}))
    model = EfficientNet(setting, kwargs.pop("dropout", default_dropout),
                         last_channel=last_channel, **kwargs)
    return load_into(model, weights, progress)


_BN_V1_LATE = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
_BN_V2 = partial(nn.BatchNorm2d, eps=1e-03)


def efficientnet_b0(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b0", EfficientNet_B0_Weights, weights, progress, 0.2,
                         dict(width_mult=1.0, depth_mult=1.0), **kwargs)


def efficientnet_b1(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b1", EfficientNet_B1_Weights, weights, progress, 0.2,
                         dict(width_mult=1.0, depth_mult=1.1), **kwargs)


def efficientnet_b2(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b2", EfficientNet_B2_Weights, weights, progress, 0.3,
                         dict(width_mult=1.1, depth_mult=1.2), **kwargs)


def efficientnet_b3(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b3", EfficientNet_B3_Weights, weights, progress, 0.3,
                         dict(width_mult=1.2, depth_mult=1.4), **kwargs)


def efficientnet_b4(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b4", EfficientNet_B4_Weights, weights, progress, 0.4,
                         dict(width_mult=1.4, depth_mult=1.8), **kwargs)


def efficientnet_b5(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b5", EfficientNet_B5_Weights, weights, progress, 0.4,
                         dict(width_mult=1.6, depth_mult=2.2), norm_layer=_BN_V1_LATE, **kwargs)


def efficientnet_b6(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b6", EfficientNet_B6_Weights, weights, progress, 0.5,
                         dict(width_mult=1.8, depth_mult=2.6), norm_layer=_BN_V1_LATE, **kwargs)


def efficientnet_b7(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b7", EfficientNet_B7_Weights, weights, progress, 0.5,
                         dict(width_mult=2.0, depth_mult=3.1), norm_layer=_BN_V1_LATE, **kwargs)


def efficientnet_v2_s(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_v2_s", EfficientNet_V2_S_Weights, weights, progress, 0.2,
                         norm_layer=_BN_V2, **kwargs)


def efficientnet_v2_m(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_v2_m", EfficientNet_V2_M_Weights, weights, progress, 0.3,
                         norm_layer=_BN_V2, **kwargs)


def efficientnet_v2_l(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_v2_l", EfficientNet_V2_L_Weights, weights, progress, 0.4,
                         norm_layer=_BN_V2, **kwargs)
