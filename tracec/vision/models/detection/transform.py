"""``torchvision.models.detection.transform``: ``GeneralizedRCNNTransform``
normalizes each ``[C, H, W]`` image by ``image_mean`` / ``image_std``,
resizes it (bilinear, ``align_corners=False``, with the scale that brings
the short side to ``min_size`` unless the long side would pass
``max_size``; ``recompute_scale_factor=True``, so the output size is
``floor(side * scale)``) or to ``fixed_size``, scales its target boxes
(and keypoints, and masks by nearest) alike, and pads the batch with zeros
to multiples of ``size_divisible``; ``postprocess`` maps detections back
to the original image sizes.  Pasting predicted masks (Mask R-CNN) is not
provided."""
from __future__ import annotations

import math

from tracec import dtypes as dt
from tracec import nn
from tracec.creation import as_tensor, empty, tensor
from tracec.nn import functional as F
from tracec.shape_ops import stack
from tracec.vision.models.detection.image_list import ImageList


def _resize_image_and_masks(image, self_min_size, self_max_size, target=None, fixed_size=None):
    size = scale_factor = recompute_scale_factor = None
    if fixed_size is not None:
        size = [fixed_size[1], fixed_size[0]]
    else:
        im_shape = image.shape[-2:]
        scale_factor = min(self_min_size / min(im_shape), self_max_size / max(im_shape))
        recompute_scale_factor = True
    image = F.interpolate(image[None], size=size, scale_factor=scale_factor, mode="bilinear",
                          recompute_scale_factor=recompute_scale_factor, align_corners=False)[0]
    if target is None:
        return image, target
    if "masks" in target:
        target["masks"] = F.interpolate(target["masks"][:, None].float(), size=size, scale_factor=scale_factor,
                                        recompute_scale_factor=recompute_scale_factor)[:, 0].byte()
    return image, target


def resize_boxes(boxes, original_size, new_size):
    """xyxy boxes scaled from ``original_size`` to ``new_size`` (H, W)."""
    ratio_height, ratio_width = (tensor(s, dtype=dt.float32, device=boxes.device) /
                                 tensor(s_orig, dtype=dt.float32, device=boxes.device)
                                 for s, s_orig in zip(new_size, original_size))
    xmin, ymin, xmax, ymax = boxes.unbind(1)
    return stack((xmin * ratio_width, ymin * ratio_height, xmax * ratio_width, ymax * ratio_height), dim=1)


def resize_keypoints(keypoints, original_size, new_size):
    """``[N, K, 3]`` keypoints (x, y, visibility) scaled like the image."""
    ratio_h, ratio_w = (tensor(s, dtype=dt.float32, device=keypoints.device) /
                        tensor(s_orig, dtype=dt.float32, device=keypoints.device)
                        for s, s_orig in zip(new_size, original_size))
    resized = keypoints.clone()
    resized[..., 0] *= ratio_w
    resized[..., 1] *= ratio_h
    return resized


class GeneralizedRCNNTransform(nn.Module):
    def __init__(self, min_size, max_size, image_mean, image_std, size_divisible: int = 32, fixed_size=None,
                 **kwargs):
        super().__init__()
        if not isinstance(min_size, (list, tuple)):
            min_size = (min_size,)
        self.min_size = min_size
        self.max_size = max_size
        self.image_mean = image_mean
        self.image_std = image_std
        self.size_divisible = size_divisible
        self.fixed_size = fixed_size
        self._skip_resize = kwargs.pop("_skip_resize", False)

    def forward(self, images, targets=None):
        """``(ImageList, targets)``: the targets are shallow copies (the
        caller's dicts are not modified)."""
        images = list(images)
        if targets is not None:
            targets = [dict(t) for t in targets]
        for i, image in enumerate(images):
            if image.dim() != 3:
                raise ValueError(f"images is expected to be a list of 3d tensors of shape [C, H, W], got "
                                 f"{image.shape}")
            image, target = self.resize(self.normalize(image), targets[i] if targets is not None else None)
            images[i] = image
            if targets is not None and target is not None:
                targets[i] = target
        image_sizes = [tuple(img.shape[-2:]) for img in images]
        return ImageList(self.batch_images(images, size_divisible=self.size_divisible), image_sizes), targets

    def normalize(self, image):
        if not image.is_floating_point():
            raise TypeError(f"Expected input images to be of floating type (in range [0, 1]), but found type "
                            f"{image.dtype} instead")
        mean = as_tensor(self.image_mean, dtype=image.dtype, device=image.device)
        std = as_tensor(self.image_std, dtype=image.dtype, device=image.device)
        return (image - mean[:, None, None]) / std[:, None, None]

    def torch_choice(self, k):
        """A uniformly drawn element of ``k`` (tracec's generator)."""
        return k[int(empty(1).uniform_(0.0, float(len(k))).item())]

    def resize(self, image, target=None):
        h, w = image.shape[-2:]
        if self.training:
            if self._skip_resize:
                return image, target
            size = self.torch_choice(self.min_size)
        else:
            size = self.min_size[-1]
        image, target = _resize_image_and_masks(image, size, self.max_size, target, self.fixed_size)
        if target is None:
            return image, target
        target["boxes"] = resize_boxes(target["boxes"], (h, w), image.shape[-2:])
        if "keypoints" in target:
            target["keypoints"] = resize_keypoints(target["keypoints"], (h, w), image.shape[-2:])
        return image, target

    def max_by_axis(self, the_list):
        maxes = the_list[0]
        for sublist in the_list[1:]:
            for index, item in enumerate(sublist):
                maxes[index] = max(maxes[index], item)
        return maxes

    def batch_images(self, images, size_divisible: int = 32):
        max_size = self.max_by_axis([list(img.shape) for img in images])
        stride = float(size_divisible)
        max_size[1] = int(math.ceil(float(max_size[1]) / stride) * stride)
        max_size[2] = int(math.ceil(float(max_size[2]) / stride) * stride)
        batched = images[0].new_full([len(images)] + max_size, 0)
        for i, img in enumerate(images):
            batched[i, : img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
        return batched

    def postprocess(self, result, image_shapes, original_image_sizes):
        if self.training:
            return result
        for i, (pred, im_s, o_im_s) in enumerate(zip(result, image_shapes, original_image_sizes)):
            result[i]["boxes"] = resize_boxes(pred["boxes"], im_s, o_im_s)
            if "masks" in pred:
                raise NotImplementedError("pasting predicted masks (Mask R-CNN) is not supported by tracec.vision")
            if "keypoints" in pred:
                result[i]["keypoints"] = resize_keypoints(pred["keypoints"], im_s, o_im_s)
        return result

    def __repr__(self) -> str:
        indent = "\n    "
        return (f"{self.__class__.__name__}({indent}Normalize(mean={self.image_mean}, std={self.image_std})"
                f"{indent}Resize(min_size={self.min_size}, max_size={self.max_size}, mode='bilinear')\n)")
