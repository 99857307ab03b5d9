"""``ImageClassification``: the evaluation transform of the pretrained
classifiers (resize the short side, centre crop, scale to [0, 1],
normalize), as torchvision's ``weights.transforms()``."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.tensor import Tensor
from tracec.vision.transforms import functional as F


class ImageClassification(_nn.Module):
    def __init__(self, *, crop_size=224, resize_size=256, mean=(0.485, 0.456, 0.406),
                 std=(0.229, 0.224, 0.225), interpolation=F.InterpolationMode.BILINEAR,
                 antialias=True):
        super().__init__()
        self.crop_size, self.resize_size = [crop_size], [resize_size]
        self.mean, self.std = list(mean), list(std)
        self.interpolation, self.antialias = interpolation, antialias

    def forward(self, img):
        img = F.resize(img, self.resize_size, interpolation=self.interpolation,
                       antialias=self.antialias)
        img = F.center_crop(img, self.crop_size)
        if not isinstance(img, Tensor):
            img = F.pil_to_tensor(img)
        img = F.convert_image_dtype(img, dt.float32)
        return F.normalize(img, mean=self.mean, std=self.std)
