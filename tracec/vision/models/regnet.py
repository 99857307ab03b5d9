"""RegNet X and Y (Radosavovic et al., "Designing Network Design Spaces"),
400MF to 128GF, as torchvision builds them: the same module names
(``trunk_output.block1.block1-0.f.a`` ...), initialization and forward, and
the same per-stage widths (``BlockParams.from_init_params`` computes them in
float32, as torchvision does with torch tensors, so the rounding agrees)."""
from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial

import numpy as np

from tracec import nn
from tracec.vision.models._weights import load_into, make_weights, resolve
from tracec.vision.models.mobilenetv2 import _make_divisible
from tracec.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation

_U = "https://download.pytorch.org/models/"


class SimpleStemIN(Conv2dNormActivation):
    """Simple stem for ImageNet: 3x3, BN, ReLU."""

    def __init__(self, width_in, width_out, norm_layer, activation_layer):
        super().__init__(width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer,
                         activation_layer=activation_layer)


class BottleneckTransform(nn.Sequential):
    """Bottleneck transformation: 1x1, 3x3 [+SE], 1x1."""

    def __init__(self, width_in, width_out, stride, norm_layer, activation_layer, group_width,
                 bottleneck_multiplier, se_ratio):
        layers = OrderedDict()
        w_b = int(round(width_out * bottleneck_multiplier))
        g = w_b // group_width
        layers["a"] = Conv2dNormActivation(width_in, w_b, kernel_size=1, stride=1,
                                           norm_layer=norm_layer,
                                           activation_layer=activation_layer)
        layers["b"] = Conv2dNormActivation(w_b, w_b, kernel_size=3, stride=stride, groups=g,
                                           norm_layer=norm_layer,
                                           activation_layer=activation_layer)
        if se_ratio:
            layers["se"] = SqueezeExcitation(input_channels=w_b,
                                             squeeze_channels=int(round(se_ratio * width_in)),
                                             activation=activation_layer)
        layers["c"] = Conv2dNormActivation(w_b, width_out, kernel_size=1, stride=1,
                                           norm_layer=norm_layer, activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """Residual bottleneck block: x + F(x), F = bottleneck transform."""

    def __init__(self, width_in, width_out, stride, norm_layer, activation_layer, group_width=1,
                 bottleneck_multiplier=1.0, se_ratio=None):
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, kernel_size=1, stride=stride,
                                             norm_layer=norm_layer, activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, norm_layer, activation_layer,
                                     group_width, bottleneck_multiplier, se_ratio)
        self.activation = activation_layer(inplace=True)

    def forward(self, x):
        x = self.proj(x) + self.f(x) if self.proj is not None else x + self.f(x)
        return self.activation(x)


class AnyStage(nn.Sequential):
    """AnyNet stage (sequence of blocks w/ the same output shape)."""

    def __init__(self, width_in, width_out, stride, depth, block_constructor, norm_layer,
                 activation_layer, group_width, bottleneck_multiplier, se_ratio=None,
                 stage_index=0):
        super().__init__()
        for i in range(depth):
            block = block_constructor(width_in if i == 0 else width_out, width_out,
                                      stride if i == 0 else 1, norm_layer, activation_layer,
                                      group_width, bottleneck_multiplier, se_ratio)
            self.add_module(f"block{stage_index}-{i}", block)


class BlockParams:
    def __init__(self, depths, widths, group_widths, bottleneck_multipliers, strides,
                 se_ratio=None):
        self.depths = depths
        self.widths = widths
        self.group_widths = group_widths
        self.bottleneck_multipliers = bottleneck_multipliers
        self.strides = strides
        self.se_ratio = se_ratio

    @classmethod
    def from_init_params(cls, depth, w_0, w_a, w_m, group_width, bottleneck_multiplier=1.0,
                         se_ratio=None, **kwargs):
        """Per-stage settings from the RegNet parameters: block widths
        w_0 + w_a * i quantized in log space (step w_m) to multiples of 8;
        consecutive blocks of one width form a stage."""
        QUANT, STRIDE = 8, 2
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError("Invalid RegNet settings")
        f32 = np.float32
        widths_cont = np.arange(depth).astype(f32) * f32(w_a) + f32(w_0)
        block_capacity = np.round(np.log(widths_cont / f32(w_0)) / f32(math.log(w_m)))
        block_widths = (np.round((f32(w_0) * np.power(f32(w_m), block_capacity)) / f32(QUANT))
                        * f32(QUANT)).astype(np.int32).tolist()
        num_stages = len(set(block_widths))
        split_helper = zip(block_widths + [0], [0] + block_widths, block_widths + [0],
                           [0] + block_widths)
        splits = [w != wp or r != rp for w, wp, r, rp in split_helper]
        stage_widths = [w for w, t in zip(block_widths, splits[:-1]) if t]
        stage_depths = np.diff([d for d, t in enumerate(splits) if t]).astype(int).tolist()
        strides = [STRIDE] * num_stages
        bottleneck_multipliers = [bottleneck_multiplier] * num_stages
        group_widths = [group_width] * num_stages
        stage_widths, group_widths = cls._adjust_widths_groups_compatibilty(
            stage_widths, bottleneck_multipliers, group_widths)
        return cls(depths=stage_depths, widths=stage_widths, group_widths=group_widths,
                   bottleneck_multipliers=bottleneck_multipliers, strides=strides,
                   se_ratio=se_ratio)

    def _get_expanded_params(self):
        return zip(self.widths, self.strides, self.depths, self.group_widths,
                   self.bottleneck_multipliers)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths, bottleneck_ratios, group_widths):
        """Widths and groups made compatible for the bottleneck ratio."""
        widths = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        group_widths_min = [min(g, w_bot) for g, w_bot in zip(group_widths, widths)]
        ws_bot = [_make_divisible(w_bot, g) for w_bot, g in zip(widths, group_widths_min)]
        stage_widths = [int(w_bot / b) for w_bot, b in zip(ws_bot, bottleneck_ratios)]
        return stage_widths, group_widths_min


class RegNet(nn.Module):
    def __init__(self, block_params, num_classes=1000, stem_width=32, stem_type=None,
                 block_type=None, norm_layer=None, activation=None):
        super().__init__()
        stem_type = stem_type or SimpleStemIN
        norm_layer = norm_layer or nn.BatchNorm2d
        block_type = block_type or ResBottleneckBlock
        activation = activation or nn.ReLU
        self.stem = stem_type(3, stem_width, norm_layer, activation)
        current_width = stem_width
        blocks = []
        for i, (width_out, stride, depth, group_width, bottleneck_multiplier) in enumerate(
                block_params._get_expanded_params()):
            blocks.append((f"block{i + 1}", AnyStage(
                current_width, width_out, stride, depth, block_type, norm_layer, activation,
                group_width, bottleneck_multiplier, block_params.se_ratio, stage_index=i + 1)))
            current_width = width_out
        self.trunk_output = nn.Sequential(OrderedDict(blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_features=current_width, out_features=num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                # (He et al.'s fan-out normal init)
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.avgpool(self.trunk_output(self.stem(x)))
        return self.fc(x.flatten(start_dim=1))


# name: (depth, w_0, w_a, w_m, group_width, se_ratio, {weights: checkpoint}); the default
# weights are IMAGENET1K_V2 where there are such, else the first
_CONFIGS = {
    "regnet_y_400mf": (16, 48, 27.89, 2.09, 8, 0.25, {
        "IMAGENET1K_V1": "regnet_y_400mf-c65dace8.pth",
        "IMAGENET1K_V2": "regnet_y_400mf-e6988f5f.pth"}),
    "regnet_y_800mf": (14, 56, 38.84, 2.4, 16, 0.25, {
        "IMAGENET1K_V1": "regnet_y_800mf-1b27b58c.pth",
        "IMAGENET1K_V2": "regnet_y_800mf-58fc7688.pth"}),
    "regnet_y_1_6gf": (27, 48, 20.71, 2.65, 24, 0.25, {
        "IMAGENET1K_V1": "regnet_y_1_6gf-b11a554e.pth",
        "IMAGENET1K_V2": "regnet_y_1_6gf-0d7bc02a.pth"}),
    "regnet_y_3_2gf": (21, 80, 42.63, 2.66, 24, 0.25, {
        "IMAGENET1K_V1": "regnet_y_3_2gf-b5a9779c.pth",
        "IMAGENET1K_V2": "regnet_y_3_2gf-9180c971.pth"}),
    "regnet_y_8gf": (17, 192, 76.82, 2.19, 56, 0.25, {
        "IMAGENET1K_V1": "regnet_y_8gf-d0d0e4a8.pth",
        "IMAGENET1K_V2": "regnet_y_8gf-dc2b1b54.pth"}),
    "regnet_y_16gf": (18, 200, 106.23, 2.48, 112, 0.25, {
        "IMAGENET1K_V1": "regnet_y_16gf-9e6ed7dd.pth",
        "IMAGENET1K_V2": "regnet_y_16gf-3e4a00f9.pth",
        "IMAGENET1K_SWAG_E2E_V1": "regnet_y_16gf_swag-43afe44d.pth",
        "IMAGENET1K_SWAG_LINEAR_V1": "regnet_y_16gf_lc_swag-f3ec0043.pth"}),
    "regnet_y_32gf": (20, 232, 115.89, 2.53, 232, 0.25, {
        "IMAGENET1K_V1": "regnet_y_32gf-4dee3f7a.pth",
        "IMAGENET1K_V2": "regnet_y_32gf-8db6d4b5.pth",
        "IMAGENET1K_SWAG_E2E_V1": "regnet_y_32gf_swag-04fdfa75.pth",
        "IMAGENET1K_SWAG_LINEAR_V1": "regnet_y_32gf_lc_swag-e1583746.pth"}),
    "regnet_y_128gf": (27, 456, 160.83, 2.52, 264, 0.25, {
        "IMAGENET1K_SWAG_E2E_V1": "regnet_y_128gf_swag-c8ce3e52.pth",
        "IMAGENET1K_SWAG_LINEAR_V1": "regnet_y_128gf_lc_swag-cbe8ce12.pth"}),
    "regnet_x_400mf": (22, 24, 24.48, 2.54, 16, None, {
        "IMAGENET1K_V1": "regnet_x_400mf-adf1edd5.pth",
        "IMAGENET1K_V2": "regnet_x_400mf-62229a5f.pth"}),
    "regnet_x_800mf": (16, 56, 35.73, 2.28, 16, None, {
        "IMAGENET1K_V1": "regnet_x_800mf-ad17e45c.pth",
        "IMAGENET1K_V2": "regnet_x_800mf-94a99ebd.pth"}),
    "regnet_x_1_6gf": (18, 80, 34.01, 2.25, 24, None, {
        "IMAGENET1K_V1": "regnet_x_1_6gf-e3633e7f.pth",
        "IMAGENET1K_V2": "regnet_x_1_6gf-a12f2b72.pth"}),
    "regnet_x_3_2gf": (25, 88, 26.31, 2.25, 48, None, {
        "IMAGENET1K_V1": "regnet_x_3_2gf-f342aeae.pth",
        "IMAGENET1K_V2": "regnet_x_3_2gf-7071aa85.pth"}),
    "regnet_x_8gf": (23, 80, 49.56, 2.88, 120, None, {
        "IMAGENET1K_V1": "regnet_x_8gf-03ceed89.pth",
        "IMAGENET1K_V2": "regnet_x_8gf-2b70d774.pth"}),
    "regnet_x_16gf": (22, 216, 55.59, 2.1, 128, None, {
        "IMAGENET1K_V1": "regnet_x_16gf-2007eb11.pth",
        "IMAGENET1K_V2": "regnet_x_16gf-ba3796d7.pth"}),
    "regnet_x_32gf": (23, 320, 69.86, 2.0, 168, None, {
        "IMAGENET1K_V1": "regnet_x_32gf-9d47f8d0.pth",
        "IMAGENET1K_V2": "regnet_x_32gf-6eb8fdc6.pth"}),
}


def _enum_name(name):
    # regnet_y_1_6gf -> RegNet_Y_1_6GF_Weights
    return "RegNet_" + name[len("regnet_"):].upper() + "_Weights"


_WEIGHTS = {name: make_weights(_enum_name(name), {k: _U + v for k, v in cfg[6].items()},
                               default="IMAGENET1K_V2" if "IMAGENET1K_V2" in cfg[6] else None)
            for name, cfg in _CONFIGS.items()}


def _regnet(name, weights, progress, **kwargs):
    depth, w_0, w_a, w_m, group_width, se_ratio, _ = _CONFIGS[name]
    weights = resolve(_WEIGHTS[name], weights, kwargs)
    se = {} if se_ratio is None else {"se_ratio": se_ratio}
    params = BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m,
                                          group_width=group_width, **se, **kwargs)
    norm_layer = kwargs.pop("norm_layer", partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1))
    return load_into(RegNet(params, norm_layer=norm_layer, **kwargs), weights, progress)


def _builder(name):
    def build(*, weights=None, progress=True, **kwargs):
        return _regnet(name, weights, progress, **kwargs)
    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"torchvision's ``{name}`` (weights: ``{_enum_name(name)}``)."
    return build


RegNet_Y_400MF_Weights = _WEIGHTS["regnet_y_400mf"]
RegNet_Y_800MF_Weights = _WEIGHTS["regnet_y_800mf"]
RegNet_Y_1_6GF_Weights = _WEIGHTS["regnet_y_1_6gf"]
RegNet_Y_3_2GF_Weights = _WEIGHTS["regnet_y_3_2gf"]
RegNet_Y_8GF_Weights = _WEIGHTS["regnet_y_8gf"]
RegNet_Y_16GF_Weights = _WEIGHTS["regnet_y_16gf"]
RegNet_Y_32GF_Weights = _WEIGHTS["regnet_y_32gf"]
RegNet_Y_128GF_Weights = _WEIGHTS["regnet_y_128gf"]
RegNet_X_400MF_Weights = _WEIGHTS["regnet_x_400mf"]
RegNet_X_800MF_Weights = _WEIGHTS["regnet_x_800mf"]
RegNet_X_1_6GF_Weights = _WEIGHTS["regnet_x_1_6gf"]
RegNet_X_3_2GF_Weights = _WEIGHTS["regnet_x_3_2gf"]
RegNet_X_8GF_Weights = _WEIGHTS["regnet_x_8gf"]
RegNet_X_16GF_Weights = _WEIGHTS["regnet_x_16gf"]
RegNet_X_32GF_Weights = _WEIGHTS["regnet_x_32gf"]

regnet_y_400mf = _builder("regnet_y_400mf")
regnet_y_800mf = _builder("regnet_y_800mf")
regnet_y_1_6gf = _builder("regnet_y_1_6gf")
regnet_y_3_2gf = _builder("regnet_y_3_2gf")
regnet_y_8gf = _builder("regnet_y_8gf")
regnet_y_16gf = _builder("regnet_y_16gf")
regnet_y_32gf = _builder("regnet_y_32gf")
regnet_y_128gf = _builder("regnet_y_128gf")
regnet_x_400mf = _builder("regnet_x_400mf")
regnet_x_800mf = _builder("regnet_x_800mf")
regnet_x_1_6gf = _builder("regnet_x_1_6gf")
regnet_x_3_2gf = _builder("regnet_x_3_2gf")
regnet_x_8gf = _builder("regnet_x_8gf")
regnet_x_16gf = _builder("regnet_x_16gf")
regnet_x_32gf = _builder("regnet_x_32gf")
