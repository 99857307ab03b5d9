"""``tracec.vision.datasets`` against torchvision 0.28 reading the same small
files written here (idx files, CIFAR pickle batches, an image folder):
the same items, targets, classes and reprs.  Nothing is downloaded: the
download path is exercised from ``file://`` mirrors."""
import gzip
import pickle

import numpy as np
import pytest

import tracec
from tracec.vision import datasets, transforms
from vision_oracle import needs_torchvision, optional

tv, torch = optional()
Image = pytest.importorskip("PIL.Image")

FILES = {True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def idx_bytes(arr):
    code = {np.uint8: 8, np.int32: 12}[arr.dtype.type]
    head = (code << 8 | arr.ndim).to_bytes(4, "big")
    head += b"".join(int(n).to_bytes(4, "big") for n in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_mnist(root, name="MNIST", n=(12, 5), gz=False, seed=0):
    rng = np.random.default_rng(seed)
    raw = root / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for train, count in zip((True, False), n):
        images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=count).astype(np.uint8)
        for fname, arr in zip(FILES[train], (images, labels)):
            if gz:
                with gzip.open(raw / (fname + ".gz"), "wb") as f:
                    f.write(idx_bytes(arr))
            else:
                (raw / fname).write_bytes(idx_bytes(arr))
    return raw


def assert_same_item(a, b):
    (ia, ta), (ib, tb) = a, b
    assert ta == tb and type(ta) is type(tb)
    if isinstance(ib, Image.Image):
        assert ia.mode == ib.mode and ia.size == ib.size
        np.testing.assert_array_equal(np.asarray(ia), np.asarray(ib))
    else:
        np.testing.assert_allclose(ia.numpy(), ib.numpy(), rtol=0, atol=1e-6)


@needs_torchvision
@pytest.mark.parametrize("name", ["MNIST", "FashionMNIST", "KMNIST"])
def test_mnist_family_items_match_torchvision(tmp_path, name):
    write_mnist(tmp_path, name)
    for train in (True, False):
        ours = getattr(datasets, name)(str(tmp_path), train=train, download=True)
        theirs = getattr(tv.datasets, name)(str(tmp_path), train=train, download=True)
        assert len(ours) == len(theirs) and ours.classes == theirs.classes
        assert ours.class_to_idx == theirs.class_to_idx
        np.testing.assert_array_equal(ours.data.numpy(), theirs.data.numpy())
        np.testing.assert_array_equal(ours.targets.numpy(), theirs.targets.numpy())
        assert ours.targets.dtype == tracec.int64
        for i in (0, len(ours) - 1):
            assert_same_item(ours[i], theirs[i])
        assert repr(ours) == repr(theirs)
    t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    tt = tv.transforms.Compose([tv.transforms.ToTensor(),
                                tv.transforms.Normalize((0.1307,), (0.3081,))])
    ours = getattr(datasets, name)(str(tmp_path), transform=t, target_transform=lambda y: y + 1)
    theirs = getattr(tv.datasets, name)(str(tmp_path), transform=tt,
                                        target_transform=lambda y: y + 1)
    assert_same_item(ours[3], theirs[3])
    assert repr(ours).splitlines()[:4] == repr(theirs).splitlines()[:4]


def test_mnist_reads_gzipped_files_and_loads_in_a_dataloader(tmp_path):
    write_mnist(tmp_path / "gz", gz=True)
    write_mnist(tmp_path / "plain")
    a = datasets.MNIST(str(tmp_path / "gz"), train=False)
    b = datasets.MNIST(str(tmp_path / "plain"), train=False)
    np.testing.assert_array_equal(a.data.numpy(), b.data.numpy())
    loader = tracec.utils.data.DataLoader(
        datasets.MNIST(str(tmp_path / "gz"), transform=transforms.ToTensor()), batch_size=5)
    x, y = next(iter(loader))
    assert tuple(x.shape) == (5, 1, 28, 28) and x.dtype == tracec.float32
    assert y.dtype == tracec.int64 and tuple(y.shape) == (5,)


def test_mnist_missing_files_and_download(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="Dataset not found. You can use download=True to "
                                           "download it"):
        datasets.MNIST(str(tmp_path / "none"))
    # files present: download=True must not touch the network
    write_mnist(tmp_path / "have")

    def no_network(*a, **k):
        raise AssertionError("network touched")
    monkeypatch.setattr("urllib.request.urlopen", no_network)
    assert len(datasets.MNIST(str(tmp_path / "have"), download=True)) == 12
    monkeypatch.undo()
    # missing: fetched from the mirrors (a file:// one here) and unpacked
    src = write_mnist(tmp_path / "mirror", gz=True)
    monkeypatch.setattr(datasets.MNIST, "mirrors", ["file:///nonexistent/", src.as_uri() + "/"])
    got = datasets.MNIST(str(tmp_path / "fetched"), download=True)
    assert (tmp_path / "fetched" / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file()
    np.testing.assert_array_equal(got.data.numpy(),
                                  datasets.MNIST(str(tmp_path / "mirror")).data.numpy())
    monkeypatch.setattr(datasets.MNIST, "mirrors", ["file:///nonexistent/"])
    with pytest.raises(RuntimeError, match="Error downloading train-images-idx3-ubyte.gz"):
        datasets.MNIST(str(tmp_path / "offline"), download=True)


def write_cifar(root, hundred=False, seed=0):
    rng = np.random.default_rng(seed)
    folder = root / ("cifar-100-python" if hundred else "cifar-10-batches-py")
    folder.mkdir(parents=True)
    key = "fine_labels" if hundred else "labels"
    names = ["train", "test"] if hundred else [f"data_batch_{i}" for i in range(1, 6)] + [
        "test_batch"]
    for name in names:
        n = 3
        batch = {"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
                 key: [int(v) for v in rng.integers(0, 10, size=n)], "batch_label": name}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
    meta = {"fine_label_names" if hundred else "label_names": [f"c{i}" for i in range(10)]}
    with open(folder / ("meta" if hundred else "batches.meta"), "wb") as f:
        pickle.dump(meta, f)
    return folder


@needs_torchvision
@pytest.mark.parametrize("hundred", [False, True])
def test_cifar_items_match_torchvision(tmp_path, monkeypatch, hundred):
    write_cifar(tmp_path, hundred)
    # torchvision checks the real files' MD5 sums; these are made here
    monkeypatch.setattr(tv.datasets.cifar, "check_integrity", lambda *a, **k: True)
    monkeypatch.setattr(tv.datasets.CIFAR10, "_check_integrity", lambda self: True)
    cls = "CIFAR100" if hundred else "CIFAR10"
    for train in (True, False):
        ours = getattr(datasets, cls)(str(tmp_path), train=train)
        theirs = getattr(tv.datasets, cls)(str(tmp_path), train=train)
        assert len(ours) == len(theirs) and ours.targets == theirs.targets
        assert ours.classes == theirs.classes and ours.class_to_idx == theirs.class_to_idx
        np.testing.assert_array_equal(ours.data, theirs.data)
        for i in range(len(ours)):
            assert_same_item(ours[i], theirs[i])
        assert repr(ours) == repr(theirs)


def test_cifar_unpickler_refuses_code(tmp_path):
    folder = write_cifar(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    with open(folder / "data_batch_3", "wb") as f:
        pickle.dump({"data": Evil(), "labels": []}, f)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load builtins.print"):
        datasets.CIFAR10(str(tmp_path))
    with pytest.raises(RuntimeError, match="Dataset not found or corrupted"):
        datasets.CIFAR10(str(tmp_path / "none"))


@needs_torchvision
def test_image_folder_matches_torchvision(tmp_path):
    rng = np.random.default_rng(1)
    for cls, n in (("dog", 2), ("cat", 3)):
        (tmp_path / cls / "sub").mkdir(parents=True)
        for i in range(n):
            arr = rng.integers(0, 256, size=(6 + i, 5, 3), dtype=np.uint8)
            where = tmp_path / cls / ("sub" if i == 2 else "")
            Image.fromarray(arr).save(where / f"im{i}.png")
        (tmp_path / cls / "notes.txt").write_text("not an image")
    ours = datasets.ImageFolder(str(tmp_path), transform=transforms.ToTensor())
    theirs = tv.datasets.ImageFolder(str(tmp_path), transform=tv.transforms.ToTensor())
    assert ours.classes == theirs.classes == ["cat", "dog"]
    assert ours.samples == theirs.samples and ours.imgs == theirs.imgs
    assert ours.targets == theirs.targets
    for i in range(len(ours)):
        assert_same_item(ours[i], theirs[i])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes empty"):
        datasets.ImageFolder(str(tmp_path))
    assert len(datasets.ImageFolder(str(tmp_path), allow_empty=True)) == 5


def test_fake_data_is_reproducible_and_leaves_the_stream_alone():
    tracec.manual_seed(5)
    before = tracec.rand(3)
    tracec.manual_seed(5)
    ds = datasets.FakeData(size=4, image_size=(3, 8, 6), num_classes=3,
                           transform=transforms.ToTensor())
    a, b = ds[2], ds[2]
    assert tracec.rand(3).equal(before)
    assert a[0].equal(b[0]) and a[1] == b[1] and isinstance(a[1], int) and 0 <= a[1] < 3
    assert tuple(a[0].shape) == (3, 8, 6) and not a[0].equal(ds[1][0])
    img, _ = datasets.FakeData(size=1, image_size=(1, 5, 7))[0]
    assert isinstance(img, Image.Image) and img.mode == "L" and img.size == (7, 5)
    with pytest.raises(IndexError, match="FakeData index out of range"):
        ds[4]
