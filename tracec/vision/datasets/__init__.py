"""``torchvision.datasets`` on tracec: MNIST family, CIFAR, image folders,
FakeData (no network unless ``download=True`` and files are missing)."""
from tracec.vision.datasets.cifar import CIFAR10, CIFAR100
from tracec.vision.datasets.fakedata import FakeData
from tracec.vision.datasets.folder import DatasetFolder, ImageFolder
from tracec.vision.datasets.mnist import KMNIST, MNIST, FashionMNIST
from tracec.vision.datasets.vision import StandardTransform, VisionDataset

__all__ = ["CIFAR10", "CIFAR100", "FakeData", "DatasetFolder", "ImageFolder", "KMNIST",
           "MNIST", "FashionMNIST", "StandardTransform", "VisionDataset"]
