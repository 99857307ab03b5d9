"""The random photometric transforms of ``torchvision.transforms``
(``RandomInvert``, ``RandomPosterize``, ``RandomSolarize``,
``RandomAdjustSharpness``, ``RandomAutocontrast``, ``RandomEqualize``):
each applies its functional with probability ``p``, drawn as torchvision
draws it (``torch.rand(1) < p``, tracec's generator)."""
from __future__ import annotations

from tracec import nn
from tracec.creation import rand
from tracec.vision.transforms import functional as F

__all__ = ["RandomInvert", "RandomPosterize", "RandomSolarize", "RandomAdjustSharpness",
           "RandomAutocontrast", "RandomEqualize"]


class _RandomApply(nn.Module):
    _fn = None
    _args: tuple = ()

    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, img):
        if rand(1).item() < self.p:
            return type(self)._fn(img, *(getattr(self, a) for a in self._args))
        return img

    def __repr__(self) -> str:
        args = "".join(f"{a}={getattr(self, a)}," for a in self._args)
        return f"{self.__class__.__name__}({args}p={self.p})"


class RandomInvert(_RandomApply):
    _fn = staticmethod(F.invert)


class RandomAutocontrast(_RandomApply):
    _fn = staticmethod(F.autocontrast)


class RandomEqualize(_RandomApply):
    _fn = staticmethod(F.equalize)


class RandomPosterize(_RandomApply):
    _fn, _args = staticmethod(F.posterize), ("bits",)

    def __init__(self, bits, p=0.5):
        super().__init__(p)
        self.bits = bits


class RandomSolarize(_RandomApply):
    _fn, _args = staticmethod(F.solarize), ("threshold",)

    def __init__(self, threshold, p=0.5):
        super().__init__(p)
        self.threshold = threshold


class RandomAdjustSharpness(_RandomApply):
    _fn, _args = staticmethod(F.adjust_sharpness), ("sharpness_factor",)

    def __init__(self, sharpness_factor, p=0.5):
        super().__init__(p)
        self.sharpness_factor = sharpness_factor
