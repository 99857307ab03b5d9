"""``torchvision.transforms`` classes on tracec.  Random transforms draw
their parameters from tracec's global generator (``tracec.rand``,
``randint``, ``Tensor.uniform_``) in the same order and with the same calls
as torchvision draws from torch's, so ``tracec.manual_seed`` makes a
pipeline reproducible."""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from tracec import nn as _nn
from tracec.creation import empty, tensor as _tensor
from tracec.creation import rand, randint
from tracec.vision.transforms import functional as F
from tracec.vision.transforms.functional import InterpolationMode


def _pair(size, what="size"):
    if isinstance(size, numbers.Number):
        return (int(size), int(size))
    if isinstance(size, Sequence) and len(size) == 1:
        return (size[0], size[0])
    if len(size) != 2:
        raise ValueError(f"Please provide only two dimensions (h, w) for {what}.")
    return tuple(size)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{self.__class__.__name__}({body}\n)"


class ToTensor:
    def __call__(self, pic):
        return F.to_tensor(pic)

    def __repr__(self):
        return f"{self.__class__.__name__}()"


class PILToTensor(ToTensor):
    def __call__(self, pic):
        return F.pil_to_tensor(pic)


class ToPILImage:
    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)

    def __repr__(self):
        return f"{self.__class__.__name__}({'' if self.mode is None else f'mode={self.mode}'})"


class ConvertImageDtype(_nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, image):
        return F.convert_image_dtype(image, self.dtype)


class Normalize(_nn.Module):
    def __init__(self, mean, std, inplace=False):
        super().__init__()
        self.mean, self.std, self.inplace = mean, std, inplace

    def forward(self, tensor):
        return F.normalize(tensor, self.mean, self.std, self.inplace)

    def __repr__(self):
        return f"{self.__class__.__name__}(mean={self.mean}, std={self.std})"


class Lambda:
    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Argument lambd should be callable, got {repr(type(lambd).__name__)}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self):
        return f"{self.__class__.__name__}()"


class Resize(_nn.Module):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias=True):
        super().__init__()
        if not isinstance(size, (int, Sequence)):
            raise TypeError(f"Size should be int or sequence. Got {type(size)}")
        if isinstance(size, Sequence) and len(size) not in (1, 2):
            raise ValueError("If size is a sequence, it should have 1 or 2 values")
        self.size, self.max_size, self.antialias = size, max_size, antialias
        self.interpolation = F._mode(interpolation)

    def forward(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def __repr__(self):
        return (f"{self.__class__.__name__}(size={self.size}, interpolation="
                f"{self.interpolation.value}, max_size={self.max_size}, "
                f"antialias={self.antialias})")


class CenterCrop(_nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = _pair(size)

    def forward(self, img):
        return F.center_crop(img, self.size)

    def __repr__(self):
        return f"{self.__class__.__name__}(size={self.size})"


class Pad(_nn.Module):
    def __init__(self, padding, fill=0, padding_mode="constant"):
        super().__init__()
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def forward(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)


class RandomCrop(_nn.Module):
    @staticmethod
    def get_params(img, output_size):
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size "
                             f"{(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = randint(0, h - th + 1, size=(1,)).item()
        j = randint(0, w - tw + 1, size=(1,)).item()
        return i, j, th, tw

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        super().__init__()
        self.size = _pair(size)
        self.padding, self.pad_if_needed = padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode

    def forward(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, h, w = F.get_dimensions(img)
        if self.pad_if_needed and w < self.size[1]:
            img = F.pad(img, [self.size[1] - w, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and h < self.size[0]:
            img = F.pad(img, [0, self.size[0] - h], self.fill, self.padding_mode)
        i, j, h, w = self.get_params(img, self.size)
        return F.crop(img, i, j, h, w)

    def __repr__(self):
        return f"{self.__class__.__name__}(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip(_nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, img):
        return F.hflip(img) if rand(1) < self.p else img

    def __repr__(self):
        return f"{self.__class__.__name__}(p={self.p})"


class RandomVerticalFlip(RandomHorizontalFlip):
    def forward(self, img):
        return F.vflip(img) if rand(1) < self.p else img


class RandomResizedCrop(_nn.Module):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
        super().__init__()
        self.size = _pair(size)
        self.scale, self.ratio, self.antialias = scale, ratio, antialias
        self.interpolation = F._mode(interpolation)

    @staticmethod
    def get_params(img, scale, ratio):
        _, height, width = F.get_dimensions(img)
        area = height * width
        log_ratio = _tensor(ratio).log()
        for _ in range(10):
            target_area = area * empty(1).uniform_(scale[0], scale[1]).item()
            aspect = math.exp(empty(1).uniform_(log_ratio[0].item(), log_ratio[1].item()).item())
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                i = randint(0, height - h + 1, size=(1,)).item()
                j = randint(0, width - w + 1, size=(1,)).item()
                return i, j, h, w
        # fallback to a central crop
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def forward(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(img, i, j, h, w, self.size, self.interpolation,
                              antialias=self.antialias)

    def __repr__(self):
        return (f"{self.__class__.__name__}(size={self.size}, scale={self.scale}, "
                f"ratio={self.ratio}, interpolation={self.interpolation.value}, "
                f"antialias={self.antialias})")


class RandomRotation(_nn.Module):
    def __init__(self, degrees, interpolation=InterpolationMode.NEAREST, expand=False,
                 center=None, fill=0):
        super().__init__()
        if isinstance(degrees, numbers.Number):
            if degrees < 0:
                raise ValueError("If degrees is a single number, it must be positive.")
            degrees = [-degrees, degrees]
        self.degrees = [float(d) for d in degrees]
        self.interpolation = F._mode(interpolation)
        self.expand, self.center, self.fill = expand, center, fill

    @staticmethod
    def get_params(degrees):
        return float(empty(1).uniform_(float(degrees[0]), float(degrees[1])).item())

    def forward(self, img):
        fill = self.fill
        channels, _, _ = F.get_dimensions(img)
        if F._is_tensor(img) and isinstance(fill, (int, float)):
            fill = [float(fill)] * channels
        angle = self.get_params(self.degrees)
        return F.rotate(img, angle, self.interpolation, self.expand, self.center, fill)


class Grayscale(_nn.Module):
    def __init__(self, num_output_channels=1):
        super().__init__()
        self.num_output_channels = num_output_channels

    def forward(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)


class RandomGrayscale(_nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p

    def forward(self, img):
        c = F.get_dimensions(img)[0]
        return F.rgb_to_grayscale(img, c) if rand(1) < self.p else img


class RandomApply(_nn.Module):
    def __init__(self, transforms, p=0.5):
        super().__init__()
        self.transforms, self.p = transforms, p

    def forward(self, img):
        if self.p < rand(1):
            return img
        for t in self.transforms:
            img = t(img)
        return img


from tracec.vision.transforms._color_jitter import ColorJitter  # noqa: E402,F401
from tracec.vision.transforms._affine_erasing import RandomAffine, RandomErasing  # noqa: E402,F401
from tracec.vision.transforms._blur_crops import (  # noqa: E402,F401
    FiveCrop, GaussianBlur, RandomChoice, RandomOrder, TenCrop)
