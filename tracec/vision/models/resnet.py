"""ResNet (BasicBlock / Bottleneck) as torchvision builds it: the same
module names, so state dicts load both ways, the same initialization
(kaiming-normal convolutions, unit BatchNorm), the same forward."""
from __future__ import annotations

from tracec import nn
from tracec.shape_ops import flatten
from tracec.vision.models._weights import (load_into, make_weights, overwrite_named_param,
                                           resolve)

_U = "https://download.pytorch.org/models/"


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1,
                 width_per_group=64, replace_stride_with_dilation=None, norm_layer=None):
        super().__init__()
        self._norm_layer = norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes, self.dilation = 64, 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element tuple, "
                             f"got {replace_stride_with_dilation}")
        self.groups, self.base_width = groups, width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], 2, replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], 2, replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], 2, replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer, downsample, previous_dilation = self._norm_layer, None, self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(flatten(self.avgpool(x), 1))

    def forward(self, x):
        return self._forward_impl(x)


def _v1_v2(name, v1, v2):
    """Weights with torchvision's two ImageNet recipes, V2 the default."""
    return make_weights(name, {"IMAGENET1K_V1": _U + v1, "IMAGENET1K_V2": _U + v2},
                        default="IMAGENET1K_V2")


ResNet18_Weights = make_weights("ResNet18_Weights", {"IMAGENET1K_V1": _U + "resnet18-f37072fd.pth"})
ResNet34_Weights = make_weights("ResNet34_Weights", {"IMAGENET1K_V1": _U + "resnet34-b627a593.pth"})
ResNet50_Weights = _v1_v2("ResNet50_Weights", "resnet50-0676ba61.pth", "resnet50-11ad3fa6.pth")
ResNet101_Weights = _v1_v2("ResNet101_Weights", "resnet101-63fe2227.pth",
                           "resnet101-cd907fc2.pth")
ResNet152_Weights = _v1_v2("ResNet152_Weights", "resnet152-394f9c45.pth",
                           "resnet152-f82ba261.pth")
ResNeXt50_32X4D_Weights = _v1_v2("ResNeXt50_32X4D_Weights", "resnext50_32x4d-7cdf4587.pth",
                                 "resnext50_32x4d-1a0047aa.pth")
ResNeXt101_32X8D_Weights = _v1_v2("ResNeXt101_32X8D_Weights", "resnext101_32x8d-8ba56ff5.pth",
                                  "resnext101_32x8d-110c445d.pth")
ResNeXt101_64X4D_Weights = make_weights("ResNeXt101_64X4D_Weights",
                                        {"IMAGENET1K_V1": _U + "resnext101_64x4d-173b62eb.pth"})
Wide_ResNet50_2_Weights = _v1_v2("Wide_ResNet50_2_Weights", "wide_resnet50_2-95faca4d.pth",
                                 "wide_resnet50_2-9ba9bcbe.pth")
Wide_ResNet101_2_Weights = _v1_v2("Wide_ResNet101_2_Weights", "wide_resnet101_2-32ee1156.pth",
                                  "wide_resnet101_2-d733dc28.pth")

def _resnet(block, layers, weights_enum, weights, progress, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    return load_into(ResNet(block, layers, **kwargs), weights, progress)


def resnet18(*, weights=None, progress=True, **kwargs):
    return _resnet(BasicBlock, [2, 2, 2, 2], ResNet18_Weights, weights, progress, **kwargs)


def resnet34(*, weights=None, progress=True, **kwargs):
    return _resnet(BasicBlock, [3, 4, 6, 3], ResNet34_Weights, weights, progress, **kwargs)


def resnet50(*, weights=None, progress=True, **kwargs):
    return _resnet(Bottleneck, [3, 4, 6, 3], ResNet50_Weights, weights, progress, **kwargs)


def resnet101(*, weights=None, progress=True, **kwargs):
    return _resnet(Bottleneck, [3, 4, 23, 3], ResNet101_Weights, weights, progress, **kwargs)


def resnet152(*, weights=None, progress=True, **kwargs):
    return _resnet(Bottleneck, [3, 8, 36, 3], ResNet152_Weights, weights, progress, **kwargs)


def _grouped(layers, groups, width_per_group, weights_enum, weights, progress, kwargs):
    """ResNeXt / wide ResNet: ``groups`` and ``width_per_group`` fixed by
    the architecture (a different value passed is an error, as in
    torchvision)."""
    if groups is not None:
        overwrite_named_param(kwargs, "groups", groups)
    overwrite_named_param(kwargs, "width_per_group", width_per_group)
    return _resnet(Bottleneck, layers, weights_enum, weights, progress, **kwargs)


def resnext50_32x4d(*, weights=None, progress=True, **kwargs):
    return _grouped([3, 4, 6, 3], 32, 4, ResNeXt50_32X4D_Weights, weights, progress, kwargs)


def resnext101_32x8d(*, weights=None, progress=True, **kwargs):
    return _grouped([3, 4, 23, 3], 32, 8, ResNeXt101_32X8D_Weights, weights, progress, kwargs)


def resnext101_64x4d(*, weights=None, progress=True, **kwargs):
    return _grouped([3, 4, 23, 3], 64, 4, ResNeXt101_64X4D_Weights, weights, progress, kwargs)


def wide_resnet50_2(*, weights=None, progress=True, **kwargs):
    return _grouped([3, 4, 6, 3], None, 64 * 2, Wide_ResNet50_2_Weights, weights, progress,
                    kwargs)


def wide_resnet101_2(*, weights=None, progress=True, **kwargs):
    return _grouped([3, 4, 23, 3], None, 64 * 2, Wide_ResNet101_2_Weights, weights, progress,
                    kwargs)
