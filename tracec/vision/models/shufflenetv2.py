"""ShuffleNet V2 x0.5 / x1.0 / x1.5 / x2.0 (Ma et al.) as torchvision builds
it: the same module names, PyTorch's default initialization (torchvision
sets none) and forward, channel shuffle included."""
from __future__ import annotations

from tracec import nn
from tracec.shape_ops import cat, transpose
from tracec.vision.models._weights import load_into, make_weights, resolve

_U = "https://download.pytorch.org/models/"


def channel_shuffle(x, groups: int):
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = transpose(x, 1, 2).contiguous()
    return x.view(batchsize, num_channels, height, width)


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride):
        super().__init__()
        if not (1 <= stride <= 3):
            raise ValueError("illegal stride value")
        self.stride = stride
        branch_features = oup // 2
        if self.stride == 1 and inp != branch_features << 1:
            raise ValueError(f"Invalid combination of stride {stride}, inp {inp} and oup {oup} "
                             "values. If stride == 1 then inp should be equal to oup // 2 << 1.")
        if self.stride > 1:
            self.branch1 = nn.Sequential(
                self.depthwise_conv(inp, inp, kernel_size=3, stride=self.stride, padding=1),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if self.stride > 1 else branch_features, branch_features,
                      kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
            self.depthwise_conv(branch_features, branch_features, kernel_size=3,
                                stride=self.stride, padding=1),
            nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, kernel_size=1, stride=1, padding=0,
                      bias=False),
            nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True))

    @staticmethod
    def depthwise_conv(i, o, kernel_size, stride=1, padding=0, bias=False):
        return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = cat((x1, self.branch2(x2)), dim=1)
        else:
            out = cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, stages_repeats, stages_out_channels, num_classes=1000,
                 inverted_residual=InvertedResidual):
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError("expected stages_repeats as list of 3 positive ints")
        if len(stages_out_channels) != 5:
            raise ValueError("expected stages_out_channels as list of 5 positive ints")
        self._stage_out_channels = stages_out_channels
        input_channels, output_channels = 3, self._stage_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
                                   nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True))
        input_channels = output_channels
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for name, repeats, output_channels in zip(("stage2", "stage3", "stage4"), stages_repeats,
                                                  self._stage_out_channels[1:]):
            seq = [inverted_residual(input_channels, output_channels, 2)]
            for _ in range(repeats - 1):
                seq.append(inverted_residual(output_channels, output_channels, 1))
            setattr(self, name, nn.Sequential(*seq))
            input_channels = output_channels
        output_channels = self._stage_out_channels[-1]
        self.conv5 = nn.Sequential(nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
                                   nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True))
        self.fc = nn.Linear(output_channels, num_classes)

    def _forward_impl(self, x):
        x = self.stage4(self.stage3(self.stage2(self.maxpool(self.conv1(x)))))
        return self.fc(self.conv5(x).mean([2, 3]))      # global pooling

    def forward(self, x):
        return self._forward_impl(x)


ShuffleNet_V2_X0_5_Weights = make_weights(
    "ShuffleNet_V2_X0_5_Weights", {"IMAGENET1K_V1": _U + "shufflenetv2_x0.5-f707e7126e.pth"})
ShuffleNet_V2_X1_0_Weights = make_weights(
    "ShuffleNet_V2_X1_0_Weights", {"IMAGENET1K_V1": _U + "shufflenetv2_x1-5666bf0f80.pth"})
ShuffleNet_V2_X1_5_Weights = make_weights(
    "ShuffleNet_V2_X1_5_Weights", {"IMAGENET1K_V1": _U + "shufflenetv2_x1_5-3c479a10.pth"})
ShuffleNet_V2_X2_0_Weights = make_weights(
    "ShuffleNet_V2_X2_0_Weights", {"IMAGENET1K_V1": _U + "shufflenetv2_x2_0-8be3c8ee.pth"})


def _shufflenetv2(weights_enum, weights, progress, *args, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    return load_into(ShuffleNetV2(*args, **kwargs), weights, progress)


def shufflenet_v2_x0_5(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2(ShuffleNet_V2_X0_5_Weights, weights, progress, [4, 8, 4],
                         [24, 48, 96, 192, 1024], **kwargs)


def shufflenet_v2_x1_0(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2(ShuffleNet_V2_X1_0_Weights, weights, progress, [4, 8, 4],
                         [24, 116, 232, 464, 1024], **kwargs)


def shufflenet_v2_x1_5(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2(ShuffleNet_V2_X1_5_Weights, weights, progress, [4, 8, 4],
                         [24, 176, 352, 704, 1024], **kwargs)


def shufflenet_v2_x2_0(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2(ShuffleNet_V2_X2_0_Weights, weights, progress, [4, 8, 4],
                         [24, 244, 488, 976, 2048], **kwargs)
