"""``torchvision.transforms.v2.functional``: v1's functions for single
images, plus ``to_image`` and ``to_dtype``."""
from tracec.vision.transforms.functional import (  # noqa: F401
    InterpolationMode, adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation, affine,
    center_crop, convert_image_dtype, crop, five_crop, get_dimensions, get_image_size, hflip,
    normalize, pad, pil_to_tensor, rgb_to_grayscale, rotate, ten_crop,
    to_grayscale, to_pil_image, to_tensor, vflip)
from tracec.vision.transforms.v2._convert import to_dtype, to_image  # noqa: F401
from tracec.vision.transforms.v2._geometry import resize, resized_crop  # noqa: F401
