"""VGG 11/13/16/19 with and without BatchNorm, and AlexNet, as torchvision
builds them (same module names and initialization)."""
from __future__ import annotations

from tracec import nn
from tracec.shape_ops import flatten
from tracec.vision.models._weights import load_into, make_weights, resolve

_U = "https://download.pytorch.org/models/"

cfgs = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
          512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes))
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))


def make_layers(cfg, batch_norm=False):
    layers, in_channels = [], 3
    for v in cfg:
        if v == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            conv = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)] if batch_norm \
                else [conv, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


def _w(name, file):
    return make_weights(name, {"IMAGENET1K_V1": _U + file})


VGG11_Weights = _w("VGG11_Weights", "vgg11-8a719046.pth")
VGG11_BN_Weights = _w("VGG11_BN_Weights", "vgg11_bn-6002323d.pth")
VGG13_Weights = _w("VGG13_Weights", "vgg13-19584684.pth")
VGG13_BN_Weights = _w("VGG13_BN_Weights", "vgg13_bn-abd245e5.pth")
VGG16_Weights = _w("VGG16_Weights", "vgg16-397923af.pth")
VGG16_BN_Weights = _w("VGG16_BN_Weights", "vgg16_bn-6c64b313.pth")
VGG19_Weights = _w("VGG19_Weights", "vgg19-dcbb9e9d.pth")
VGG19_BN_Weights = _w("VGG19_BN_Weights", "vgg19_bn-c79401a0.pth")
AlexNet_Weights = _w("AlexNet_Weights", "alexnet-owt-7be5be79.pth")


def _vgg(cfg, batch_norm, weights_enum, weights, progress, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    if weights is not None:
        kwargs["init_weights"] = False
    return load_into(VGG(make_layers(cfgs[cfg], batch_norm), **kwargs), weights, progress)


def vgg11(*, weights=None, progress=True, **kwargs):
    return _vgg("A", False, VGG11_Weights, weights, progress, **kwargs)


def vgg11_bn(*, weights=None, progress=True, **kwargs):
    return _vgg("A", True, VGG11_BN_Weights, weights, progress, **kwargs)


def vgg13(*, weights=None, progress=True, **kwargs):
    return _vgg("B", False, VGG13_Weights, weights, progress, **kwargs)


def vgg13_bn(*, weights=None, progress=True, **kwargs):
    return _vgg("B", True, VGG13_BN_Weights, weights, progress, **kwargs)


def vgg16(*, weights=None, progress=True, **kwargs):
    return _vgg("D", False, VGG16_Weights, weights, progress, **kwargs)


def vgg16_bn(*, weights=None, progress=True, **kwargs):
    return _vgg("D", True, VGG16_BN_Weights, weights, progress, **kwargs)


def vgg19(*, weights=None, progress=True, **kwargs):
    return _vgg("E", False, VGG19_Weights, weights, progress, **kwargs)


def vgg19_bn(*, weights=None, progress=True, **kwargs):
    return _vgg("E", True, VGG19_BN_Weights, weights, progress, **kwargs)


class AlexNet(nn.Module):
    def __init__(self, num_classes=1000, dropout=0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def forward(self, x):
        return self.classifier(flatten(self.avgpool(self.features(x)), 1))


def alexnet(*, weights=None, progress=True, **kwargs):
    weights = resolve(AlexNet_Weights, weights, kwargs)
    return load_into(AlexNet(**kwargs), weights, progress)
