"""``transforms.ColorJitter``: factors drawn uniformly, applied in an order
from ``randperm(4)``, exactly as torchvision draws them."""
from __future__ import annotations

import numbers

from tracec import nn as _nn
from tracec.creation import empty
from tracec.creation import randperm
from tracec.vision.transforms import functional as F


class ColorJitter(_nn.Module):
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(hue, "hue", center=0, bound=(-0.5, 0.5),
                                     clip_first_on_zero=False)

    @staticmethod
    def _check_input(value, name, center=1, bound=(0, float("inf")), clip_first_on_zero=True):
        if isinstance(value, numbers.Number):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            value = [float(value[0]), float(value[1])]
        else:
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"{name} values should be between {bound}, but got {value}.")
        return None if value[0] == value[1] == center else tuple(value)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        order = randperm(4)

        def draw(r):
            return None if r is None else float(empty(1).uniform_(r[0], r[1]))
        return order, draw(brightness), draw(contrast), draw(saturation), draw(hue)

    def forward(self, img):
        order, b, c, s, h = self.get_params(self.brightness, self.contrast, self.saturation,
                                            self.hue)
        for fn_id in order.tolist():
            if fn_id == 0 and b is not None:
                img = F.adjust_brightness(img, b)
            elif fn_id == 1 and c is not None:
                img = F.adjust_contrast(img, c)
            elif fn_id == 2 and s is not None:
                img = F.adjust_saturation(img, s)
            elif fn_id == 3 and h is not None:
                img = F.adjust_hue(img, h)
        return img

    def __repr__(self):
        return (f"{self.__class__.__name__}(brightness={self.brightness}, contrast="
                f"{self.contrast}, saturation={self.saturation}, hue={self.hue})")
