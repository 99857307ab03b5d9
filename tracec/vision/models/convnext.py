"""ConvNeXt tiny / small / base / large (Liu et al., "A ConvNet for the
2020s") as torchvision builds it: the same module names, truncated-normal
initialization, layer scale and per-block stochastic depth."""
from __future__ import annotations

from functools import partial

from tracec import nn
from tracec.creation import ones
from tracec.nn import functional as F
from tracec.vision.models._weights import load_into, make_weights, resolve
from tracec.vision.ops.misc import Conv2dNormActivation, Permute
from tracec.vision.ops.stochastic_depth import StochasticDepth

_U = "https://download.pytorch.org/models/"


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, dim, layer_scale, stochastic_depth_prob, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]), norm_layer(dim),
            nn.Linear(in_features=dim, out_features=4 * dim, bias=True), nn.GELU(),
            nn.Linear(in_features=4 * dim, out_features=dim, bias=True),
            Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, input):
        result = self.stochastic_depth(self.layer_scale * self.block(input))
        result += input
        return result


class CNBlockConfig:
    """One stage: ``num_layers`` blocks at ``input_channels``, then (unless
    ``out_channels`` is None) a downsampling to ``out_channels``."""

    def __init__(self, input_channels, out_channels, num_layers):
        self.input_channels = input_channels
        self.out_channels = out_channels
        self.num_layers = num_layers

    def __repr__(self):
        return (f"{self.__class__.__name__}(input_channels={self.input_channels}, "
                f"out_channels={self.out_channels}, num_layers={self.num_layers})")


class ConvNeXt(nn.Module):
    def __init__(self, block_setting, stochastic_depth_prob=0.0, layer_scale=1e-6,
                 num_classes=1000, block=None, norm_layer=None, **kwargs):
        super().__init__()
        if not block_setting:
            raise ValueError("The block_setting should not be empty")
        if not (isinstance(block_setting, (list, tuple))
                and all(isinstance(s, CNBlockConfig) for s in block_setting)):
            raise TypeError("The block_setting should be List[CNBlockConfig]")
        block = block or CNBlock
        norm_layer = norm_layer or partial(LayerNorm2d, eps=1e-6)
        firstconv_output_channels = block_setting[0].input_channels
        layers = [Conv2dNormActivation(3, firstconv_output_channels, kernel_size=4, stride=4,
                                       padding=0, norm_layer=norm_layer, activation_layer=None,
                                       bias=True)]   # (the patchify stem)
        total_stage_blocks = sum(cnf.num_layers for cnf in block_setting)
        stage_block_id = 0
        for cnf in block_setting:
            stage = []
            for _ in range(cnf.num_layers):
                sd_prob = stochastic_depth_prob * stage_block_id / (total_stage_blocks - 1.0)
                stage.append(block(cnf.input_channels, layer_scale, sd_prob))
                stage_block_id += 1
            layers.append(nn.Sequential(*stage))
            if cnf.out_channels is not None:
                layers.append(nn.Sequential(norm_layer(cnf.input_channels),
                                            nn.Conv2d(cnf.input_channels, cnf.out_channels,
                                                      kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        lastblock = block_setting[-1]
        lastconv_output_channels = (lastblock.out_channels if lastblock.out_channels is not None
                                    else lastblock.input_channels)
        self.classifier = nn.Sequential(norm_layer(lastconv_output_channels), nn.Flatten(1),
                                        nn.Linear(lastconv_output_channels, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def _forward_impl(self, x):
        return self.classifier(self.avgpool(self.features(x)))

    def forward(self, x):
        return self._forward_impl(x)


ConvNeXt_Tiny_Weights = make_weights("ConvNeXt_Tiny_Weights",
                                     {"IMAGENET1K_V1": _U + "convnext_tiny-983f1562.pth"})
ConvNeXt_Small_Weights = make_weights("ConvNeXt_Small_Weights",
                                      {"IMAGENET1K_V1": _U + "convnext_small-0c510722.pth"})
ConvNeXt_Base_Weights = make_weights("ConvNeXt_Base_Weights",
                                     {"IMAGENET1K_V1": _U + "convnext_base-6075fbad.pth"})
ConvNeXt_Large_Weights = make_weights("ConvNeXt_Large_Weights",
                                      {"IMAGENET1K_V1": _U + "convnext_large-ea097f82.pth"})


def _convnext(widths, depth3, default_sd, weights_enum, weights, progress, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    w0, w1, w2, w3 = widths
    block_setting = [CNBlockConfig(w0, w1, 3), CNBlockConfig(w1, w2, 3),
                     CNBlockConfig(w2, w3, depth3), CNBlockConfig(w3, None, 3)]
    stochastic_depth_prob = kwargs.pop("stochastic_depth_prob", default_sd)
    model = ConvNeXt(block_setting, stochastic_depth_prob=stochastic_depth_prob, **kwargs)
    return load_into(model, weights, progress)


def convnext_tiny(*, weights=None, progress=True, **kwargs):
    return _convnext((96, 192, 384, 768), 9, 0.1, ConvNeXt_Tiny_Weights, weights, progress,
                     **kwargs)


def convnext_small(*, weights=None, progress=True, **kwargs):
    return _convnext((96, 192, 384, 768), 27, 0.4, ConvNeXt_Small_Weights, weights, progress,
                     **kwargs)


def convnext_base(*, weights=None, progress=True, **kwargs):
    return _convnext((128, 256, 512, 1024), 27, 0.5, ConvNeXt_Base_Weights, weights, progress,
                     **kwargs)


def convnext_large(*, weights=None, progress=True, **kwargs):
    return _convnext((192, 384, 768, 1536), 27, 0.5, ConvNeXt_Large_Weights, weights, progress,
                     **kwargs)
