"""``torchvision.models.detection.image_list.ImageList``: a batch of images
padded into one tensor, with each image's size before padding."""
from __future__ import annotations


class ImageList:
    def __init__(self, tensors, image_sizes) -> None:
        self.tensors = tensors
        self.image_sizes = image_sizes

    def to(self, device) -> "ImageList":
        return ImageList(self.tensors.to(device), self.image_sizes)
