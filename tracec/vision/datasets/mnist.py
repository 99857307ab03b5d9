"""MNIST, FashionMNIST and KMNIST from the idx files in
``root/<ClassName>/raw`` (plain, or gzipped with ``.gz``), as torchvision
reads them; items are ``(PIL image of mode "L", int label)`` before the
transforms.  ``download=True`` fetches only missing files (nothing touches
the network when they are all there) and fails with a RuntimeError naming
each URL tried."""
from __future__ import annotations

import gzip
import os
import shutil

import numpy as np

from tracec.creation import from_numpy
from tracec.vision import _pil
from tracec.vision.datasets.vision import VisionDataset

_IDX_TYPES = {8: np.uint8, 9: np.int8, 11: ">i2", 12: ">i4", 13: ">f4", 14: ">f8"}


def read_idx(path: str) -> np.ndarray:
    """An idx ("sn3 pascalvincent") file as an array; ``path`` or ``path.gz``."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            data = f.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    nd, ty = magic % 256, magic // 256
    if not (1 <= nd <= 3 and ty in _IDX_TYPES):
        raise ValueError(f"{path}: not an idx file (magic {magic:#x})")
    shape = [int.from_bytes(data[4 * (i + 1):4 * (i + 2)], "big") for i in range(nd)]
    arr = np.frombuffer(data, dtype=_IDX_TYPES[ty], offset=4 * (nd + 1))
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape} but holds {arr.size} values")
    return arr.astype(arr.dtype.newbyteorder("=")).reshape(shape)


class MNIST(VisionDataset):
    mirrors = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
               "http://yann.lecun.com/exdb/mnist/"]
    resources = [("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
                 ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
                 ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
                 ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c")]
    training_file = "training.pt"
    test_file = "test.pt"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_exists():
            raise RuntimeError("Dataset not found. You can use download=True to download it")
        self.data, self.targets = self._load_data()

    @property
    def raw_folder(self) -> str:
        return os.path.join(self.root, self.__class__.__name__, "raw")

    @property
    def processed_folder(self) -> str:
        return os.path.join(self.root, self.__class__.__name__, "processed")

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def _files(self):
        prefix = "train" if self.train else "t10k"
        return [os.path.join(self.raw_folder, f"{prefix}-{kind}") for kind in
                ("images-idx3-ubyte", "labels-idx1-ubyte")]

    def _check_exists(self) -> bool:
        return all(os.path.isfile(os.path.join(self.raw_folder, os.path.splitext(f)[0]))
                   or os.path.isfile(os.path.join(self.raw_folder, f))
                   for f, _ in self.resources)

    def _load_data(self):
        images_file, labels_file = self._files()
        images = read_idx(images_file)
        if images.dtype != np.uint8 or images.ndim != 3:
            raise ValueError(f"{images_file}: expected uint8 images of 3 dimensions, got "
                             f"{images.dtype} of {images.ndim}")
        labels = read_idx(labels_file)
        if labels.ndim != 1:
            raise ValueError(f"{labels_file}: expected 1 dimension, got {labels.ndim}")
        return from_numpy(images.copy()), from_numpy(labels.astype(np.int64))

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        img = _pil.from_array(img.numpy(), "L")
        return self._transformed(img, target)

    def __len__(self):
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train is True else 'Test'}"

    def download(self) -> None:
        """Fetch each missing file from the mirrors and unpack it."""
        if self._check_exists():
            return
        from tracec.hub import download_url_to_file
        os.makedirs(self.raw_folder, exist_ok=True)
        for filename, _md5 in self.resources:
            gz = os.path.join(self.raw_folder, filename)
            plain = os.path.splitext(gz)[0]
            if os.path.isfile(plain) or os.path.isfile(gz):
                continue
            errors = []
            for mirror in self.mirrors:
                try:
                    download_url_to_file(f"{mirror}{filename}", gz, progress=False)
                    break
                except RuntimeError as e:
                    errors.append(str(e))
            else:
                raise RuntimeError(f"Error downloading {filename}:\n" + "\n".join(errors))
            with gzip.open(gz, "rb") as src, open(plain, "wb") as out:
                shutil.copyfileobj(src, out)


class FashionMNIST(MNIST):
    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = [("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
                 ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
                 ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
                 ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310")]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


class KMNIST(MNIST):
    mirrors = ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"]
    resources = [("train-images-idx3-ubyte.gz", "bdb82020997e1d708af4cf47b453dcf7"),
                 ("train-labels-idx1-ubyte.gz", "e144d726b3acfaa3e44228e80efcd344"),
                 ("t10k-images-idx3-ubyte.gz", "5c965bf0a639b31b8f53240b1b52f4d7"),
                 ("t10k-labels-idx1-ubyte.gz", "7320c461ea6c1c855c0b718fb2a4b134")]
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
