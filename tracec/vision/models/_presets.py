"""``ImageClassification``: the evaluation transform of the pretrained
classifiers (resize the short side, centre crop, scale to [0, 1],
normalize), and ``ObjectDetection``, the detectors' (a float image in
[0, 1]: the models normalize and resize themselves), as torchvision's
``weights.transforms()``."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import nn as _nn
from tracec.tensor import Tensor
from tracec.vision.transforms import functional as F


_BICUBIC = F.InterpolationMode.BICUBIC

# torchvision's evaluation sizes and interpolation per checkpoint file,
# where they differ from crop 224 / resize 256 / bilinear (each recipe
# evaluated at the resolution it was trained and tuned for)
PRESETS = {
    "convnext_base-6075fbad.pth": dict(resize_size=232),
    "convnext_large-ea097f82.pth": dict(resize_size=232),
    "convnext_small-0c510722.pth": dict(resize_size=230),
    "convnext_tiny-983f1562.pth": dict(resize_size=236),
    "efficientnet_b0_rwightman-7f5810bc.pth": dict(interpolation=_BICUBIC),
    "efficientnet_b1-c27df63c.pth": dict(crop_size=240, resize_size=255),
    "efficientnet_b1_rwightman-bac287d4.pth": dict(crop_size=240, interpolation=_BICUBIC),
    "efficientnet_b2_rwightman-c35c1473.pth":
        dict(crop_size=288, resize_size=288, interpolation=_BICUBIC),
    "efficientnet_b3_rwightman-b3899882.pth":
        dict(crop_size=300, resize_size=320, interpolation=_BICUBIC),
    "efficientnet_b4_rwightman-23ab8bcd.pth":
        dict(crop_size=380, resize_size=384, interpolation=_BICUBIC),
    "efficientnet_b5_lukemelas-1a07897c.pth":
        dict(crop_size=456, resize_size=456, interpolation=_BICUBIC),
    "efficientnet_b6_lukemelas-24a108a5.pth":
        dict(crop_size=528, resize_size=528, interpolation=_BICUBIC),
    "efficientnet_b7_lukemelas-c5b4e57e.pth":
        dict(crop_size=600, resize_size=600, interpolation=_BICUBIC),
    "efficientnet_v2_l-59c71312.pth": dict(crop_size=480, resize_size=480, interpolation=_BICUBIC,
                                           mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)),
    "efficientnet_v2_m-dc08266a.pth": dict(crop_size=480, resize_size=480),
    "efficientnet_v2_s-dd5fe13b.pth": dict(crop_size=384, resize_size=384),
    "inception_v3_google-0cc3c7bd.pth": dict(crop_size=299, resize_size=342),
    "maxvit_t-bc5ab103.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "mnasnet0_75-7090bc5f.pth": dict(resize_size=232),
    "mnasnet1_3-a4c69d6f.pth": dict(resize_size=232),
    "mobilenet_v2-7ebf99e0.pth": dict(resize_size=232),
    "mobilenet_v3_large-5c1a4163.pth": dict(resize_size=232),
    "regnet_x_16gf-ba3796d7.pth": dict(resize_size=232),
    "regnet_x_1_6gf-a12f2b72.pth": dict(resize_size=232),
    "regnet_x_32gf-6eb8fdc6.pth": dict(resize_size=232),
    "regnet_x_3_2gf-7071aa85.pth": dict(resize_size=232),
    "regnet_x_400mf-62229a5f.pth": dict(resize_size=232),
    "regnet_x_800mf-94a99ebd.pth": dict(resize_size=232),
    "regnet_x_8gf-2b70d774.pth": dict(resize_size=232),
    "regnet_y_128gf_lc_swag-cbe8ce12.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "regnet_y_128gf_swag-c8ce3e52.pth":
        dict(crop_size=384, resize_size=384, interpolation=_BICUBIC),
    "regnet_y_16gf-3e4a00f9.pth": dict(resize_size=232),
    "regnet_y_16gf_lc_swag-f3ec0043.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "regnet_y_16gf_swag-43afe44d.pth": dict(crop_size=384, resize_size=384, interpolation=_BICUBIC),
    "regnet_y_1_6gf-0d7bc02a.pth": dict(resize_size=232),
    "regnet_y_32gf-8db6d4b5.pth": dict(resize_size=232),
    "regnet_y_32gf_lc_swag-e1583746.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "regnet_y_32gf_swag-04fdfa75.pth": dict(crop_size=384, resize_size=384, interpolation=_BICUBIC),
    "regnet_y_3_2gf-9180c971.pth": dict(resize_size=232),
    "regnet_y_400mf-e6988f5f.pth": dict(resize_size=232),
    "regnet_y_800mf-58fc7688.pth": dict(resize_size=232),
    "regnet_y_8gf-dc2b1b54.pth": dict(resize_size=232),
    "resnet101-cd907fc2.pth": dict(resize_size=232),
    "resnet152-f82ba261.pth": dict(resize_size=232),
    "resnet50-11ad3fa6.pth": dict(resize_size=232),
    "resnext101_32x8d-110c445d.pth": dict(resize_size=232),
    "resnext101_64x4d-173b62eb.pth": dict(resize_size=232),
    "resnext50_32x4d-1a0047aa.pth": dict(resize_size=232),
    "shufflenetv2_x1_5-3c479a10.pth": dict(resize_size=232),
    "shufflenetv2_x2_0-8be3c8ee.pth": dict(resize_size=232),
    "swin_b-68c6b09e.pth": dict(resize_size=238, interpolation=_BICUBIC),
    "swin_s-5e29d889.pth": dict(resize_size=246, interpolation=_BICUBIC),
    "swin_t-704ceda3.pth": dict(resize_size=232, interpolation=_BICUBIC),
    "swin_v2_b-781e5279.pth": dict(crop_size=256, resize_size=272, interpolation=_BICUBIC),
    "swin_v2_s-637d8ceb.pth": dict(crop_size=256, resize_size=260, interpolation=_BICUBIC),
    "swin_v2_t-b137f0e2.pth": dict(crop_size=256, resize_size=260, interpolation=_BICUBIC),
    "vit_b_16_lc_swag-4e70ced5.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "vit_b_16_swag-9ac1b537.pth": dict(crop_size=384, resize_size=384, interpolation=_BICUBIC),
    "vit_h_14_lc_swag-c1eb923e.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "vit_h_14_swag-80465313.pth": dict(crop_size=518, resize_size=518, interpolation=_BICUBIC),
    "vit_l_16-852ce7e3.pth": dict(resize_size=242),
    "vit_l_16_lc_swag-4d563306.pth": dict(resize_size=224, interpolation=_BICUBIC),
    "vit_l_16_swag-4f3808c9.pth": dict(crop_size=512, resize_size=512, interpolation=_BICUBIC),
    "wide_resnet101_2-d733dc28.pth": dict(resize_size=232),
    "wide_resnet50_2-9ba9bcbe.pth": dict(resize_size=232),
}


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


class ObjectDetection(_nn.Module):
    def forward(self, img):
        if not isinstance(img, Tensor):
            img = F.pil_to_tensor(img)
        return F.convert_image_dtype(img, dt.float32)

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"
