"""tracec.load of files written by the real torch.save (zip and legacy
formats) and of plain pickles: state dicts, optimizer state, nested
containers, every dtype, views and shared storages; loading a torch state
dict into a tracec model; refusing pickles that would run code."""
from __future__ import annotations

import collections
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

import tracec
import tracec.nn as tnn
from tracec.serialization import CheckpointError

from nn_helpers import assert_same_containers

FORMATS = ["zip", "legacy"]


def _save(obj, path, fmt):
    torch.save(obj, path, _use_new_zipfile_serialization=(fmt == "zip"))
    return path


def _dtype_name(t):
    return str(t.dtype).removeprefix("torch.")


def _same_leaf(a, b):
    if isinstance(b, torch.Tensor):
        assert isinstance(a, tracec.Tensor), type(a)
        assert isinstance(a, tnn.Parameter) == isinstance(b, torch.nn.Parameter)
        assert a.requires_grad == b.requires_grad
        want = _dtype_name(b)
        assert a.dtype.name == want, (a.dtype, b.dtype)   # every integer width kept
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(np.asarray(a.detach().tolist()),
                                      np.asarray(b.detach().float().tolist()
                                                 if b.dtype == torch.bfloat16
                                                 else b.detach().tolist()))
    elif isinstance(b, torch.dtype):
        assert a.name == str(b).removeprefix("torch.")
    elif isinstance(b, torch.device):
        assert isinstance(a, tracec.device) and str(a) == str(b)
    elif isinstance(b, torch.Size):
        assert a == tuple(b)
    elif isinstance(b, float) and np.isnan(b):
        assert np.isnan(a)
    else:
        assert type(a) is type(b) and a == b


def _same(a, b):
    """tracec object ``a`` equals torch object ``b``."""
    assert_same_containers(a, b, _same_leaf)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(3)
        self.fc = torch.nn.Linear(3 * 4 * 4, 5)
        self.emb = torch.nn.Embedding(7, 4)


def _trained_net():
    torch.manual_seed(0)
    net = _Net()
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(2):
        x = torch.randn(6, 2, 4, 4)
        out = net.fc(torch.relu(net.bn(net.conv(x))).flatten(1)).sum()
        out = out + net.emb(torch.tensor([1, 3])).sum()
        opt.zero_grad()
        out.backward()
        opt.step()
    return net, opt


@pytest.mark.parametrize("fmt", FORMATS)
def test_state_dict_and_optimizer_state(fmt, tmp_path):
    net, opt = _trained_net()
    sd = net.state_dict()
    got = tracec.load(_save(sd, tmp_path / "sd.pt", fmt))
    assert isinstance(got, collections.OrderedDict) and list(got) == list(sd)
    _same(got, sd)
    assert got["bn.num_batches_tracked"].dtype is tracec.int64 and \
        got["bn.num_batches_tracked"].item() == 2

    osd = opt.state_dict()
    _same(tracec.load(_save(osd, tmp_path / "opt.pt", fmt)), osd)
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net.fc(torch.randn(1, 48)).sum().backward()
    sgd.step()
    _same(tracec.load(_save(sgd.state_dict(), tmp_path / "sgd.pt", fmt)), sgd.state_dict())

    ckpt = {"epoch": 3, "model": sd, "optimizer": osd, "best": 0.25}
    _same(tracec.load(_save(ckpt, tmp_path / "c.pt", fmt)),
          ckpt)


def test_torch_state_dict_loads_into_a_tracec_model(tmp_path):
    torch.manual_seed(1)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch.save(ref.state_dict(), tmp_path / "m.pt")
    model = tnn.Sequential(tnn.Linear(6, 8), tnn.ReLU(), tnn.Linear(8, 3))
    model.load_state_dict(tracec.load(tmp_path / "m.pt", map_location="cpu", weights_only=True))
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(model(tracec.tensor(x)).tolist()),
                               ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)

    net, _ = _trained_net()
    torch.save(net.bn.state_dict(), tmp_path / "bn.pt")
    bn = tnn.BatchNorm2d(3)
    bn.load_state_dict(tracec.load(tmp_path / "bn.pt"))
    np.testing.assert_allclose(np.asarray(bn.running_var.tolist()),
                               net.bn.running_var.numpy(), rtol=1e-6)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_dtype(fmt, tmp_path):
    obj = {
        "f32": torch.tensor([1.5, -2.25, float("inf")], dtype=torch.float32),
        "f64": torch.tensor([1e-300, -0.0, 3.141592653589793], dtype=torch.float64),
        "f16": torch.tensor([65504.0, -1e-4, float("nan")], dtype=torch.float16),
        "bf16": torch.tensor([1.5, -3.0e38, 0.0078125], dtype=torch.bfloat16),
        "i64": torch.tensor([-(2 ** 63), 2 ** 63 - 1], dtype=torch.int64),
        "i32": torch.tensor([-(2 ** 31), 7], dtype=torch.int32),
        "i16": torch.tensor([-32768, 32767], dtype=torch.int16),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([[True, False]]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
    }
    if fmt == "zip":
        obj["u16"] = torch.tensor([0, 65535], dtype=torch.uint16)
        obj["u32"] = torch.tensor([0, 2 ** 32 - 1], dtype=torch.uint32)
        obj["u64"] = torch.tensor([0, 2 ** 64 - 1], dtype=torch.uint64)
    got = tracec.load(_save(obj, tmp_path / "d.pt", fmt))
    for k in ("f32", "f64", "i64", "i32", "i16", "i8", "u8", "bool", "scalar", "empty",
              "u16", "u32", "u64"):
        if k in obj:
            _same(got[k], obj[k])
    np.testing.assert_array_equal(np.asarray(got["f16"].tolist()), obj["f16"].numpy())
    assert got["f16"].dtype is tracec.float16
    assert got["bf16"].dtype is tracec.bfloat16
    assert got["bf16"].tolist() == obj["bf16"].float().tolist()
    assert got["scalar"].shape == () and got["empty"].shape == (0, 3)


@pytest.mark.parametrize("fmt", FORMATS)
def test_views_shared_storage_and_non_contiguous(fmt, tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    obj = {
        "base": base,
        "slice": base[1:3, ::2],          # offset and strides into base's storage
        "t": base.t(),                    # a non-contiguous view
        "row": base[3],                   # storage offset only
        "flat": base.view(-1)[5:17],
        "expanded": torch.tensor([1.0, 2.0, 3.0]).expand(4, 3),   # stride 0
        "again": base,                    # the same tensor twice
    }
    got = tracec.load(_save(obj, tmp_path / "v.pt", fmt))
    for k in obj:
        _same(got[k], obj[k])
    alone = tracec.load(_save(base[:, 1::3].t(), tmp_path / "nc.pt", fmt))
    _same(alone, base[:, 1::3].t())


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_containers_and_parameters(fmt, tmp_path):
    p = torch.nn.Parameter(torch.ones(2, 2))
    frozen = torch.nn.Parameter(torch.zeros(3), requires_grad=False)
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    obj = {
        "params": [p, frozen, leaf],
        "tuple": (1, 2.5, "three", None, True, float("nan"), -7),
        "nested": {"a": [{"b": (torch.tensor([1, 2]),)}], 3: "int key", (1, 2): "tuple key"},
        "od": collections.OrderedDict([("z", 1), ("a", 2)]),
        "set": {1, 2, 3},
        "bytes": b"\x00\xffabc",
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "size": torch.Size([2, 3]),
        "big": 2 ** 70,
        "complex": 1 + 2j,
    }
    got = tracec.load(_save(obj, tmp_path / "n.pt", fmt))
    _same(got, obj)
    assert isinstance(got["params"][0], tnn.Parameter) and got["params"][0].requires_grad
    assert not got["params"][1].requires_grad and got["params"][2].requires_grad


def test_plain_pickle_of_allowed_objects(tmp_path):
    obj = {"lr": 0.1, "names": ["a", "b"], "od": collections.OrderedDict(x=(1, 2))}
    for proto in (0, 2, 5):
        path = tmp_path / f"p{proto}.pkl"
        path.write_bytes(pickle.dumps(obj, protocol=proto))
        assert tracec.load(path) == obj


def _touch(path):
    Path(path).touch()


class _Evil:
    """Unpickling this would create a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (_touch, (self.marker,))


@pytest.mark.parametrize("writer", ["zip", "legacy", "pickle", "pickle0"])
def test_malicious_pickles_are_refused_unless_trusted(writer, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / f"evil.{writer}"
    payload = {"w": torch.ones(2), "evil": _Evil(marker)}
    if writer in FORMATS:
        _save(payload, path, writer)
    else:
        payload = {"w": [1.0], "evil": _Evil(marker)}
        path.write_bytes(pickle.dumps(payload, protocol=0 if writer == "pickle0" else 4))
    for weights_only in (True, None):         # (None: PyTorch's default, True)
        with pytest.raises(CheckpointError) as e:
            tracec.load(path, weights_only=weights_only)
        msg = str(e.value)
        assert f"GLOBAL {__name__}._touch was not an allowed global" in msg, msg
        assert str(path) in msg and "Weights only load failed" in msg
        assert not marker.exists()
    # weights_only=False says the file is trusted: it runs, as in torch.load
    tracec.load(path, weights_only=False)
    assert marker.exists()
    marker.unlink()
    # the payload really is malicious: plain pickle runs it
    if writer.startswith("pickle"):
        pickle.loads(path.read_bytes())
        assert marker.exists()


def test_other_refusals_and_corrupt_files(tmp_path):
    import os
    torch.save({"f": os.system}, tmp_path / "sys.pt")
    with pytest.raises(CheckpointError, match=r"GLOBAL (posix|os|nt)\.system was not an allowed"):
        tracec.load(tmp_path / "sys.pt")
    torch.save(torch.zeros(2, dtype=torch.float8_e4m3fn), tmp_path / "f8.pt")
    with pytest.raises(CheckpointError, match="torch.float8_e4m3fn, which tracec does not "
                                              "support"):
        tracec.load(tmp_path / "f8.pt")
    torch.save(torch.tensor([1 + 2j, -3j]), tmp_path / "c.pt")   # complex tensors load
    c = tracec.load(tmp_path / "c.pt")
    assert c.dtype is tracec.complex64 and c.tolist() == [1 + 2j, -3j]

    torch.save({"w": torch.ones(1000)}, tmp_path / "ok.pt")
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="cut.pt"):
        tracec.load(tmp_path / "cut.pt")
    torch.save({"w": torch.ones(3)}, tmp_path / "leg.pt", _use_new_zipfile_serialization=False)
    data = (tmp_path / "leg.pt").read_bytes()
    (tmp_path / "legcut.pt").write_bytes(data[:-4])
    with pytest.raises(CheckpointError, match="truncated"):
        tracec.load(tmp_path / "legcut.pt")

    import zipfile
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(CheckpointError, match="no data.pkl"):
        tracec.load(tmp_path / "other.zip")


def test_map_location_and_file_objects(tmp_path):
    import io
    buf = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buf)
    buf.seek(0)
    got = tracec.load(buf, map_location=tracec.device("cpu"))
    assert got["w"].tolist() == [0.0, 1.0, 2.0]
    buf.seek(0)
    seen = []
    got = tracec.load(buf, map_location=lambda t, loc: seen.append(loc) or t * 2)
    assert got["w"].tolist() == [0.0, 2.0, 4.0] and seen == ["cpu"]
    buf.seek(0)
    assert tracec.load(buf, map_location={"cpu": "cpu"}, mmap=False)["w"].shape == (3,)
