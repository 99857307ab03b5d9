"""``torchvision.transforms.v2`` for single images: the v1 classes (whose
behaviour on one PIL image or plain tensor is v2's), ``Resize`` and
``RandomResizedCrop`` with v2's native uint8 resizing, ``ToImage`` and
``ToDtype``.  Not provided: v2's ``tv_tensors`` (bounding boxes, masks,
videos carried through the same call) and multi-input calls such as
``transform(image, target)``."""
from tracec.vision.transforms.transforms import (
    CenterCrop, ColorJitter, Compose, ConvertImageDtype, FiveCrop, GaussianBlur, Grayscale,
    Lambda, Normalize, PILToTensor, Pad, RandomAffine, RandomApply, RandomChoice, RandomCrop,
    RandomErasing, RandomGrayscale, RandomHorizontalFlip, RandomOrder, RandomRotation,
    RandomVerticalFlip, TenCrop, ToPILImage, ToTensor)
from tracec.vision.transforms.v2 import functional
from tracec.vision.transforms.v2._geometry import RandomResizedCrop, Resize
from tracec.vision.transforms.v2._convert import ToDtype, ToImage
from tracec.vision.transforms.functional import InterpolationMode

__all__ = ["functional", "InterpolationMode", "CenterCrop", "ColorJitter", "Compose",
           "ConvertImageDtype", "Grayscale", "Lambda", "Normalize", "Pad", "PILToTensor",
           "RandomAffine", "RandomApply", "RandomCrop", "RandomErasing", "RandomGrayscale",
           "RandomHorizontalFlip", "RandomResizedCrop", "RandomRotation", "RandomVerticalFlip",
           "Resize", "ToPILImage", "ToTensor", "ToDtype", "ToImage", "FiveCrop", "GaussianBlur",
           "RandomChoice", "RandomOrder", "TenCrop"]
