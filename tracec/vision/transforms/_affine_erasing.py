"""``RandomAffine`` and ``RandomErasing`` (with ``functional.erase``), drawing
their parameters from tracec's generator with torchvision's calls, in its
order."""
from __future__ import annotations

import math
import numbers

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.creation import empty, rand, randint, tensor as _tensor
from tracec.tensor import Tensor
from tracec.vision.transforms import functional as F


def _angles(value, name):
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be positive.")
        return [-float(value), float(value)]
    return [float(v) for v in value]


def erase(img: Tensor, i: int, j: int, h: int, w: int, v, inplace: bool = False) -> Tensor:
    """``img`` with the box rows i:i+h, columns j:j+w set to ``v``."""
    if not isinstance(img, Tensor):
        raise TypeError(f"img should be Tensor Image. Got {type(img)}")
    if not inplace:
        img = img.clone()
    img[..., i:i + h, j:j + w] = v
    return img


class RandomAffine(_nn.Module):
    def __init__(self, degrees, translate=None, scale=None, shear=None,
                 interpolation=F.InterpolationMode.NEAREST, fill=0, center=None):
        super().__init__()
        self.degrees = _angles(degrees, "degrees")
        if translate is not None and not all(0.0 <= t <= 1.0 for t in translate):
            raise ValueError("translation values should be between 0 and 1")
        if scale is not None and any(s <= 0 for s in scale):
            raise ValueError("scale values should be positive")
        self.translate, self.scale = translate, scale
        self.shear = None if shear is None else _angles(shear, "shear")
        self.interpolation = F._mode(interpolation)
        self.fill, self.center = fill, center

    @staticmethod
    def get_params(degrees, translate, scale_ranges, shears, img_size):
        angle = float(empty(1).uniform_(float(degrees[0]), float(degrees[1])).item())
        if translate is not None:
            max_dx, max_dy = float(translate[0] * img_size[0]), float(translate[1] * img_size[1])
            tx = int(round(empty(1).uniform_(-max_dx, max_dx).item()))
            ty = int(round(empty(1).uniform_(-max_dy, max_dy).item()))
            translations = (tx, ty)
        else:
            translations = (0, 0)
        scale = 1.0 if scale_ranges is None else float(
            empty(1).uniform_(scale_ranges[0], scale_ranges[1]).item())
        shear_x = shear_y = 0.0
        if shears is not None:
            shear_x = float(empty(1).uniform_(shears[0], shears[1]).item())
            if len(shears) == 4:
                shear_y = float(empty(1).uniform_(shears[2], shears[3]).item())
        return angle, translations, scale, (shear_x, shear_y)

    def forward(self, img):
        fill = self.fill
        channels, height, width = F.get_dimensions(img)
        if isinstance(img, Tensor):
            fill = [float(fill)] * channels if isinstance(fill, (int, float)) \
                else [float(f) for f in fill]
        params = self.get_params(self.degrees, self.translate, self.scale, self.shear,
                                 [width, height])
        return F.affine(img, *params, interpolation=self.interpolation, fill=fill,
                        center=self.center)


class RandomErasing(_nn.Module):
    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        super().__init__()
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError("Argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("Scale and ratio should be of kind (min, max)")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if p < 0 or p > 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace

    @staticmethod
    def get_params(img, scale, ratio, value=None):
        img_c, img_h, img_w = img.shape[-3], img.shape[-2], img.shape[-1]
        area = img_h * img_w
        log_ratio = _tensor(ratio).log()
        for _ in range(10):
            erase_area = area * empty(1).uniform_(scale[0], scale[1]).item()
            aspect = math.exp(empty(1).uniform_(log_ratio[0].item(), log_ratio[1].item()).item())
            h = int(round(math.sqrt(erase_area * aspect)))
            w = int(round(math.sqrt(erase_area / aspect)))
            if not (h < img_h and w < img_w):
                continue
            v = empty(img_c, h, w, dtype=dt.float32).normal_() if value is None \
                else _tensor(value)[:, None, None]
            i = randint(0, img_h - h + 1, size=(1,)).item()
            j = randint(0, img_w - w + 1, size=(1,)).item()
            return i, j, h, w, v
        return 0, 0, img_h, img_w, img

    def forward(self, img):
        if rand(1) < self.p:
            if isinstance(self.value, (int, float)):
                value = [float(self.value)]
            elif isinstance(self.value, str):
                value = None
            else:
                value = [float(v) for v in self.value]
            if value is not None and len(value) not in (1, img.shape[-3]):
                raise ValueError("If value is a sequence, it should have either a single value "
                                 f"or {img.shape[-3]} (number of input channels)")
            i, j, h, w, v = self.get_params(img, self.scale, self.ratio, value)
            return erase(img, i, j, h, w, v, self.inplace)
        return img
