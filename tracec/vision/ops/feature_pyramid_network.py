"""``torchvision.ops.FeaturePyramidNetwork`` (Lin et al., "Feature Pyramid
Networks for Object Detection"): a 1x1 lateral conv per input level, the
coarser result upsampled (nearest) and added on the way down, a 3x3 conv
on each sum; optional extra levels (``LastLevelMaxPool``'s stride-2 "pool",
RetinaNet's ``LastLevelP6P7``).  Module names, initialization (kaiming
uniform with a=1, zero biases) and the state-dict layout (version 2: the
convs inside Conv2dNormActivation, ``inner_blocks.0.0.weight``; version-1
keys ``inner_blocks.0.weight`` are renamed on load) are torchvision's."""
from __future__ import annotations

from collections import OrderedDict

from tracec import nn
from tracec.nn import functional as F
from tracec.vision.ops.misc import Conv2dNormActivation


class ExtraFPNBlock(nn.Module):
    """Base class of the blocks that add levels after the FPN:
    ``forward(results, x, names) -> (results, names)``."""

    def forward(self, results, x, names):
        pass


class FeaturePyramidNetwork(nn.Module):
    _version = 2

    def __init__(self, in_channels_list, out_channels: int, extra_blocks=None, norm_layer=None):
        super().__init__()
        self.inner_blocks = nn.ModuleList()
        self.layer_blocks = nn.ModuleList()
        for in_channels in in_channels_list:
            if in_channels == 0:
                raise ValueError("in_channels=0 is currently not supported")
            self.inner_blocks.append(Conv2dNormActivation(in_channels, out_channels, kernel_size=1, padding=0,
                                                          norm_layer=norm_layer, activation_layer=None))
            self.layer_blocks.append(Conv2dNormActivation(out_channels, out_channels, kernel_size=3,
                                                          norm_layer=norm_layer, activation_layer=None))
        # initialized before extra_blocks is attached: its own init stays
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
        if extra_blocks is not None and not isinstance(extra_blocks, ExtraFPNBlock):
            raise TypeError(f"extra_blocks should be of type ExtraFPNBlock not {type(extra_blocks)}")
        self.extra_blocks = extra_blocks

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if version is None or version < 2:
            for block in ("inner_blocks", "layer_blocks"):
                for i in range(len(self.inner_blocks)):
                    for kind in ("weight", "bias"):
                        old_key, new_key = f"{prefix}{block}.{i}.{kind}", f"{prefix}{block}.{i}.0.{kind}"
                        if old_key in state_dict:
                            state_dict[new_key] = state_dict.pop(old_key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def get_result_from_inner_blocks(self, x, idx: int):
        return self.inner_blocks[idx](x)

    def get_result_from_layer_blocks(self, x, idx: int):
        return self.layer_blocks[idx](x)

    def forward(self, x):
        """``x``: an ordered dict of feature maps, finest first; returns the
        FPN's maps under the same names (plus the extra blocks' names)."""
        names = list(x.keys())
        x = list(x.values())
        last_inner = self.get_result_from_inner_blocks(x[-1], -1)
        results = [self.get_result_from_layer_blocks(last_inner, -1)]
        for idx in range(len(x) - 2, -1, -1):
            inner_lateral = self.get_result_from_inner_blocks(x[idx], idx)
            inner_top_down = F.interpolate(last_inner, size=inner_lateral.shape[-2:], mode="nearest")
            last_inner = inner_lateral + inner_top_down
            results.insert(0, self.get_result_from_layer_blocks(last_inner, idx))
        if self.extra_blocks is not None:
            results, names = self.extra_blocks(results, x, names)
        return OrderedDict(zip(names, results))


class LastLevelMaxPool(ExtraFPNBlock):
    """Adds "pool": the last level subsampled by 2 (max_pool2d, kernel 1)."""

    def forward(self, x, y, names):
        names.append("pool")
        x.append(F.max_pool2d(x[-1], kernel_size=1, stride=2, padding=0))
        return x, names


class LastLevelP6P7(ExtraFPNBlock):
    """RetinaNet's P6 and P7: stride-2 3x3 convs from P5 (when its width
    is ``out_channels``) or else from C5, P7 after a relu."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.p6 = nn.Conv2d(in_channels, out_channels, 3, 2, 1)
        self.p7 = nn.Conv2d(out_channels, out_channels, 3, 2, 1)
        for module in (self.p6, self.p7):
            nn.init.kaiming_uniform_(module.weight, a=1)
            nn.init.constant_(module.bias, 0)
        self.use_P5 = in_channels == out_channels

    def forward(self, p, c, names):
        x = p[-1] if self.use_P5 else c[-1]
        p6 = self.p6(x)
        p7 = self.p7(F.relu(p6))
        p.extend([p6, p7])
        names.extend(["p6", "p7"])
        return p, names
