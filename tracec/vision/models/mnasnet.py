"""MNASNet 0.5 / 0.75 / 1.0 / 1.3 (Tan et al., the B1 variant) as
torchvision builds it: the same module names, initialization and forward,
and its checkpoint versions (version 1 checkpoints of alpha != 1 had a
fixed-width stem, rebuilt on load)."""
from __future__ import annotations

import warnings

from tracec import nn
from tracec.vision.models._weights import load_into, make_weights, resolve

_U = "https://download.pytorch.org/models/"
# Paper's BatchNorm momentum (TensorFlow's 0.9997 decay)
_BN_MOMENTUM = 1 - 0.9997


class _InvertedResidual(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size, stride, expansion_factor, bn_momentum=0.1):
        super().__init__()
        if stride not in [1, 2]:
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if kernel_size not in [3, 5]:
            raise ValueError(f"kernel_size should be 3 or 5 instead of {kernel_size}")
        mid_ch = in_ch * expansion_factor
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid_ch, 1, bias=False),
            nn.BatchNorm2d(mid_ch, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, mid_ch, kernel_size, padding=kernel_size // 2, stride=stride,
                      groups=mid_ch, bias=False),
            nn.BatchNorm2d(mid_ch, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch, momentum=bn_momentum))

    def forward(self, input):
        if self.apply_residual:
            return self.layers(input) + input
        return self.layers(input)


def _stack(in_ch, out_ch, kernel_size, stride, exp_factor, repeats, bn_momentum):
    if repeats < 1:
        raise ValueError(f"repeats should be >= 1, instead got {repeats}")
    first = _InvertedResidual(in_ch, out_ch, kernel_size, stride, exp_factor,
                              bn_momentum=bn_momentum)
    remaining = [_InvertedResidual(out_ch, out_ch, kernel_size, 1, exp_factor,
                                   bn_momentum=bn_momentum) for _ in range(1, repeats)]
    return nn.Sequential(first, *remaining)


def _round_to_multiple_of(val, divisor, round_up_bias=0.9):
    """Round ``val`` to a multiple of ``divisor``, up unless that is more
    than 10% above it: (83, 8) -> 80, (84, 8) -> 88."""
    if not 0.0 < round_up_bias < 1.0:
        raise ValueError("round_up_bias should be greater than 0.0 and smaller than 1.0 "
                         f"instead of {round_up_bias}")
    new_val = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return new_val if new_val >= round_up_bias * val else new_val + divisor


def _get_depths(alpha):
    return [_round_to_multiple_of(d * alpha, 8) for d in [32, 16, 24, 40, 80, 96, 192, 320]]


def _stem(d0, d1):
    return [nn.Conv2d(3, d0, 3, padding=1, stride=2, bias=False),
            nn.BatchNorm2d(d0, momentum=_BN_MOMENTUM), nn.ReLU(inplace=True),
            nn.Conv2d(d0, d0, 3, padding=1, stride=1, groups=d0, bias=False),
            nn.BatchNorm2d(d0, momentum=_BN_MOMENTUM), nn.ReLU(inplace=True),
            nn.Conv2d(d0, d1, 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(d1, momentum=_BN_MOMENTUM)]


class MNASNet(nn.Module):
    _version = 2

    def __init__(self, alpha, num_classes=1000, dropout=0.2):
        super().__init__()
        if alpha <= 0.0:
            raise ValueError(f"alpha should be greater than 0.0 instead of {alpha}")
        self.alpha = alpha
        self.num_classes = num_classes
        depths = _get_depths(alpha)
        layers = _stem(depths[0], depths[1]) + [
            _stack(depths[1], depths[2], 3, 2, 3, 3, _BN_MOMENTUM),
            _stack(depths[2], depths[3], 5, 2, 3, 3, _BN_MOMENTUM),
            _stack(depths[3], depths[4], 5, 2, 6, 3, _BN_MOMENTUM),
            _stack(depths[4], depths[5], 3, 1, 6, 2, _BN_MOMENTUM),
            _stack(depths[5], depths[6], 5, 2, 6, 4, _BN_MOMENTUM),
            _stack(depths[6], depths[7], 3, 1, 6, 1, _BN_MOMENTUM),
            nn.Conv2d(depths[7], 1280, 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(1280, momentum=_BN_MOMENTUM), nn.ReLU(inplace=True)]
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(1280, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight, mode="fan_out", nonlinearity="sigmoid")
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.layers(x).mean([2, 3]))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if version not in [1, 2]:
            raise ValueError(f"version should be set to 1 or 2 instead of {version}")
        if version == 1 and not self.alpha == 1.0:
            depths = _get_depths(self.alpha)
            v1_stem = _stem(32, 16) + [_stack(16, depths[2], 3, 2, 3, 3, _BN_MOMENTUM)]
            for idx, layer in enumerate(v1_stem):
                self.layers[idx] = layer
            self._version = 1
            warnings.warn(
                "A new version of MNASNet model has been implemented. Your checkpoint was saved "
                "using the previous version. This checkpoint will load and work as before, but "
                "you may want to upgrade by training a newer model or transfer learning from an "
                "updated ImageNet checkpoint.", UserWarning)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


MNASNet0_5_Weights = make_weights(
    "MNASNet0_5_Weights", {"IMAGENET1K_V1": _U + "mnasnet0.5_top1_67.823-3ffadce67e.pth"})
MNASNet0_75_Weights = make_weights(
    "MNASNet0_75_Weights", {"IMAGENET1K_V1": _U + "mnasnet0_75-7090bc5f.pth"})
MNASNet1_0_Weights = make_weights(
    "MNASNet1_0_Weights", {"IMAGENET1K_V1": _U + "mnasnet1.0_top1_73.512-f206786ef8.pth"})
MNASNet1_3_Weights = make_weights(
    "MNASNet1_3_Weights", {"IMAGENET1K_V1": _U + "mnasnet1_3-a4c69d6f.pth"})


def _mnasnet(alpha, weights_enum, weights, progress, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    return load_into(MNASNet(alpha, **kwargs), weights, progress)


def mnasnet0_5(*, weights=None, progress=True, **kwargs):
    return _mnasnet(0.5, MNASNet0_5_Weights, weights, progress, **kwargs)


def mnasnet0_75(*, weights=None, progress=True, **kwargs):
    return _mnasnet(0.75, MNASNet0_75_Weights, weights, progress, **kwargs)


def mnasnet1_0(*, weights=None, progress=True, **kwargs):
    return _mnasnet(1.0, MNASNet1_0_Weights, weights, progress, **kwargs)


def mnasnet1_3(*, weights=None, progress=True, **kwargs):
    return _mnasnet(1.3, MNASNet1_3_Weights, weights, progress, **kwargs)
