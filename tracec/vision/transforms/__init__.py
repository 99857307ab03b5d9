"""``torchvision.transforms`` on tracec (see ``transforms.transforms`` and
``transforms.functional``)."""
from tracec.vision.transforms import functional
from tracec.vision.transforms.functional import InterpolationMode
from tracec.vision.transforms.transforms import (
    CenterCrop, ColorJitter, Compose, ConvertImageDtype, FiveCrop, GaussianBlur, Grayscale,
    Lambda, Normalize, PILToTensor, Pad, RandomAffine, RandomApply, RandomChoice, RandomCrop,
    RandomErasing, RandomGrayscale, RandomHorizontalFlip, RandomOrder, RandomResizedCrop,
    RandomRotation, RandomVerticalFlip, Resize, TenCrop, ToPILImage, ToTensor)
from tracec.vision.transforms._photometric import (
    RandomAdjustSharpness, RandomAutocontrast, RandomEqualize, RandomInvert, RandomPosterize,
    RandomSolarize)
from tracec.vision.transforms.autoaugment import (
    AugMix, AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide)

__all__ = ["functional", "InterpolationMode", "CenterCrop", "ColorJitter", "Compose",
           "ConvertImageDtype", "Grayscale", "Lambda", "Normalize", "Pad", "PILToTensor",
           "RandomAffine", "RandomApply", "RandomCrop", "RandomErasing", "RandomGrayscale",
           "RandomHorizontalFlip", "RandomResizedCrop", "RandomRotation", "RandomVerticalFlip",
           "Resize", "ToPILImage", "ToTensor", "FiveCrop", "GaussianBlur", "RandomChoice",
           "RandomOrder", "TenCrop", "RandomAdjustSharpness", "RandomAutocontrast",
           "RandomEqualize", "RandomInvert", "RandomPosterize", "RandomSolarize", "AugMix",
           "AutoAugment", "AutoAugmentPolicy", "RandAugment", "TrivialAugmentWide"]
