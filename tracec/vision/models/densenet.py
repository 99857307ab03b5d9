"""DenseNet-BC 121/161/169/201 (Huang et al.) as torchvision builds them:
the same module names (``features.denseblockN.denselayerM.norm1`` ...),
initialization and forward; ``memory_efficient`` recomputes each layer's
bottleneck in backward (``tracec.utils.checkpoint``)."""
from __future__ import annotations

import re
from collections import OrderedDict

from tracec import nn
from tracec.nn import functional as F
from tracec.shape_ops import cat, flatten
from tracec.tensor import Tensor
from tracec.utils import checkpoint as cp
from tracec.vision.models._weights import make_weights, resolve

_U = "https://download.pytorch.org/models/"


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate,
                 memory_efficient=False):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1,
                               stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1,
                               padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient

    def bn_function(self, inputs):
        return self.conv1(self.relu1(self.norm1(cat(list(inputs), 1))))

    def any_requires_grad(self, input):
        return any(t.requires_grad for t in input)

    def call_checkpoint_bottleneck(self, input):
        def closure(*inputs):
            return self.bn_function(inputs)
        return cp.checkpoint(closure, *input, use_reentrant=False)

    def forward(self, input):
        prev_features = [input] if isinstance(input, Tensor) else input
        if self.memory_efficient and self.any_requires_grad(prev_features):
            bottleneck_output = self.call_checkpoint_bottleneck(prev_features)
        else:
            bottleneck_output = self.bn_function(prev_features)
        new_features = self.conv2(self.relu2(self.norm2(bottleneck_output)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    _version = 2

    def __init__(self, num_layers, num_input_features, bn_size, growth_rate, drop_rate,
                 memory_efficient=False):
        super().__init__()
        for i in range(num_layers):
            layer = _DenseLayer(num_input_features + i * growth_rate, growth_rate=growth_rate,
                                bn_size=bn_size, drop_rate=drop_rate,
                                memory_efficient=memory_efficient)
            self.add_module("denselayer%d" % (i + 1), layer)

    def forward(self, init_features):
        features = [init_features]
        for _, layer in self.items():
            features.append(layer(features))
        return cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1,
                              bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64,
                 bn_size=4, drop_rate=0, num_classes=1000, memory_efficient=False):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3,
                                bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(num_layers=num_layers, num_input_features=num_features,
                                bn_size=bn_size, growth_rate=growth_rate, drop_rate=drop_rate,
                                memory_efficient=memory_efficient)
            self.features.add_module("denseblock%d" % (i + 1), block)
            num_features = num_features + num_layers * growth_rate
            if i != len(block_config) - 1:
                trans = _Transition(num_input_features=num_features,
                                    num_output_features=num_features // 2)
                self.features.add_module("transition%d" % (i + 1), trans)
                num_features = num_features // 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        out = F.relu(self.features(x), inplace=True)
        out = flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


# The published checkpoints predate the module names: "norm.1" for "norm1"
_OLD_KEY = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\."
                      r"((?:[12])\.(?:weight|bias|running_mean|running_var))$")


def _load_state_dict(model, weights, progress):
    state_dict = weights.get_state_dict(progress=progress, check_hash=True)
    for key in list(state_dict.keys()):
        res = _OLD_KEY.match(key)
        if res:
            state_dict[res.group(1) + res.group(2)] = state_dict.pop(key)
    model.load_state_dict(state_dict)


def _densenet(growth_rate, block_config, num_init_features, weights_enum, weights, progress,
              **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    model = DenseNet(growth_rate, block_config, num_init_features, **kwargs)
    if weights is not None:
        _load_state_dict(model, weights, progress)
    return model


DenseNet121_Weights = make_weights("DenseNet121_Weights",
                                   {"IMAGENET1K_V1": _U + "densenet121-a639ec97.pth"})
DenseNet161_Weights = make_weights("DenseNet161_Weights",
                                   {"IMAGENET1K_V1": _U + "densenet161-8d451a50.pth"})
DenseNet169_Weights = make_weights("DenseNet169_Weights",
                                   {"IMAGENET1K_V1": _U + "densenet169-b2777c0a.pth"})
DenseNet201_Weights = make_weights("DenseNet201_Weights",
                                   {"IMAGENET1K_V1": _U + "densenet201-c1103571.pth"})


def densenet121(*, weights=None, progress=True, **kwargs):
    return _densenet(32, (6, 12, 24, 16), 64, DenseNet121_Weights, weights, progress, **kwargs)


def densenet161(*, weights=None, progress=True, **kwargs):
    return _densenet(48, (6, 12, 36, 24), 96, DenseNet161_Weights, weights, progress, **kwargs)


def densenet169(*, weights=None, progress=True, **kwargs):
    return _densenet(32, (6, 12, 32, 32), 64, DenseNet169_Weights, weights, progress, **kwargs)


def densenet201(*, weights=None, progress=True, **kwargs):
    return _densenet(32, (6, 12, 48, 32), 64, DenseNet201_Weights, weights, progress, **kwargs)
