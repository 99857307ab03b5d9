"""``torchvision.models.detection.faster_rcnn``: the Fast R-CNN box heads
(``TwoMLPHead``, ``FastRCNNConvFCHead``) and ``FastRCNNPredictor`` (class
scores and per-class box offsets), the pieces fine-tuning programs swap in.
The ``FasterRCNN`` model and its builders are not provided."""
from __future__ import annotations

from tracec import nn
from tracec.nn import functional as F
from tracec.vision.ops.misc import Conv2dNormActivation


class TwoMLPHead(nn.Module):
    """Flatten, then two relu Linear layers (fc6, fc7)."""

    def __init__(self, in_channels, representation_size):
        super().__init__()
        self.fc6 = nn.Linear(in_channels, representation_size)
        self.fc7 = nn.Linear(representation_size, representation_size)

    def forward(self, x):
        x = x.flatten(start_dim=1)
        return F.relu(self.fc7(F.relu(self.fc6(x))))


class FastRCNNConvFCHead(nn.Sequential):
    """3x3 Conv2dNormActivation layers, Flatten, then relu Linear layers;
    convs initialized kaiming normal (fan_out, relu) with zero biases."""

    def __init__(self, input_size, conv_layers, fc_layers, norm_layer=None):
        in_channels, in_height, in_width = input_size
        blocks, previous = [], in_channels
        for current in conv_layers:
            blocks.append(Conv2dNormActivation(previous, current, norm_layer=norm_layer))
            previous = current
        blocks.append(nn.Flatten())
        previous = previous * in_height * in_width
        for current in fc_layers:
            blocks.append(nn.Linear(previous, current))
            blocks.append(nn.ReLU(inplace=True))
            previous = current
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


class FastRCNNPredictor(nn.Module):
    """``(class scores [N, num_classes], box offsets [N, num_classes * 4])``
    of pooled features ``[N, C]`` (or ``[N, C, 1, 1]``)."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, num_classes * 4)

    def forward(self, x):
        if x.dim() == 4 and list(x.shape[2:]) != [1, 1]:
            raise AssertionError(f"x has the wrong shape, expecting the last two dimensions to be [1,1] instead "
                                 f"of {list(x.shape[2:])}")
        x = x.flatten(start_dim=1)
        return self.cls_score(x), self.bbox_pred(x)
