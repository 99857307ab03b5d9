"""``VisionDataset`` and ``StandardTransform``: the base of every dataset
(root, transform / target_transform, torchvision's ``repr``)."""
from __future__ import annotations

import os

from tracec.utils.data import Dataset


class StandardTransform:
    def __init__(self, transform=None, target_transform=None):
        self.transform, self.target_transform = transform, target_transform

    def __call__(self, input, target):  # noqa: A002
        if self.transform is not None:
            input = self.transform(input)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return input, target

    @staticmethod
    def _format(transform, head):
        lines = repr(transform).splitlines()
        return [f"{head}{lines[0]}"] + [" " * len(head) + line for line in lines[1:]]

    def __repr__(self):
        body = [self.__class__.__name__]
        if self.transform is not None:
            body += self._format(self.transform, "Transform: ")
        if self.target_transform is not None:
            body += self._format(self.target_transform, "Target transform: ")
        return "\n".join(body)


class VisionDataset(Dataset):
    _repr_indent = 4

    def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
        if isinstance(root, str):
            root = os.path.expanduser(root)
        self.root = root
        separate = transform is not None or target_transform is not None
        if transforms is not None and separate:
            raise ValueError("Only transforms or transform/target_transform can be passed as "
                             "argument")
        self.transform, self.target_transform = transform, target_transform
        if separate:
            transforms = StandardTransform(transform, target_transform)
        self.transforms = transforms

    def _transformed(self, sample, target):
        """``(transform(sample), target_transform(target))``, each when given."""
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        body = [f"Number of datapoints: {self.__len__()}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        if self.transforms is not None:
            body += [repr(self.transforms)]
        return "\n".join([f"Dataset {self.__class__.__name__}"]
                         + [" " * self._repr_indent + line for line in body])
