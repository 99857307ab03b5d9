"""CIFAR10 and CIFAR100 from the python pickle batches
(``root/cifar-10-batches-py``, ``root/cifar-100-python``).  The batches
are plain dicts of NumPy arrays and lists; they are read with an unpickler
that can build NumPy arrays and nothing else, so a tampered file cannot run
code.  Items are ``(RGB PIL image, int label)`` before the transforms.

Unlike torchvision, the files' MD5 sums are not checked (only presence), so
locally made batches load.
"""
from __future__ import annotations

import os
import pickle

import numpy as np

from tracec.vision import _pil
from tracec.vision.datasets.vision import VisionDataset

# (module, name) pairs a NumPy array's pickle refers to; nothing else loads
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
            ("numpy", "ndarray"), ("numpy", "dtype")}


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, f, path):
        super().__init__(f, encoding="latin1")
        self.path = path

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(
                f"{self.path}: refusing to load {module}.{name} (CIFAR batches hold only "
                "NumPy arrays, lists and strings)")
        if module == "numpy":
            return getattr(np, name)
        from numpy._core import multiarray
        return getattr(multiarray, name)


def load_batch(path: str):
    with open(path, "rb") as f:
        return _ArrayUnpickler(f, path).load()


class CIFAR10(VisionDataset):
    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    train_list = [[f"data_batch_{i}", None] for i in range(1, 6)]
    test_list = [["test_batch", None]]
    meta = {"filename": "batches.meta", "key": "label_names"}

    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_integrity():
            raise RuntimeError("Dataset not found or corrupted. You can use download=True to "
                               "download it")
        data, self.targets = [], []
        for name, _ in (self.train_list if train else self.test_list):
            entry = load_batch(os.path.join(self.root, self.base_folder, name))
            data.append(entry["data"])
            self.targets.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
        self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
        self._load_meta()

    def _load_meta(self):
        path = os.path.join(self.root, self.base_folder, self.meta["filename"])
        if not os.path.isfile(path):
            raise RuntimeError("Dataset metadata file not found or corrupted. You can use "
                               "download=True to download it")
        self.classes = load_batch(path)[self.meta["key"]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def _check_integrity(self) -> bool:
        return all(os.path.isfile(os.path.join(self.root, self.base_folder, name))
                   for name, _ in self.train_list + self.test_list)

    def download(self) -> None:
        if self._check_integrity():
            return
        import tarfile
        from tracec.hub import download_url_to_file
        os.makedirs(self.root, exist_ok=True)
        archive = os.path.join(self.root, self.filename)
        if not os.path.isfile(archive):
            download_url_to_file(self.url, archive, progress=False)
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(self.root, filter="data")

    def __getitem__(self, index):
        img, target = _pil.image_module().fromarray(self.data[index]), self.targets[index]
        return self._transformed(img, target)

    def __len__(self):
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train is True else 'Test'}"


class CIFAR100(CIFAR10):
    base_folder = "cifar-100-python"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    train_list = [["train", None]]
    test_list = [["test", None]]
    meta = {"filename": "meta", "key": "fine_label_names"}
