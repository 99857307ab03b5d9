"""tracec.save / tracec.load: round trips, sharing, safetensors interop,
refusal of pickles, truncated and corrupt files, atomic saves."""
import io
import json
import math
import os
import pickle
import re
import struct
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

import tracec
import tracec.optim  # noqa: F401
from tracec.serialization import CheckpointError, CheckpointNotFoundError, load, save

ALL_DTYPES = [tracec.float32, tracec.float64, tracec.float16, tracec.bfloat16, tracec.int32,
              tracec.int64, tracec.int16, tracec.int8, tracec.uint8, tracec.uint16,
              tracec.uint32, tracec.uint64, tracec.bool]


def _sample(dtype, shape=(3, 4)):
    rng = np.random.default_rng(hash(dtype.name) % 1000)
    if dtype.is_floating_point:
        return tracec.tensor(rng.standard_normal(shape) * 10, dtype=dtype)
    if dtype is tracec.bool:
        return tracec.tensor(rng.standard_normal(shape) > 0)
    return tracec.tensor(rng.integers(-2**30, 2**30, shape), dtype=dtype)


def assert_same_tensor(a, b):
    assert isinstance(b, tracec.Tensor)
    assert a.dtype is b.dtype, (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, tracec.Tensor):
        assert_same_tensor(a, b)
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        for k in a:
            assert type(k) is type(next(x for x in b if x == k))
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_round_trip_every_dtype_and_python_values(tmp_path):
    obj = {
        "tensors": {d.name: _sample(d) for d in ALL_DTYPES},
        "scalars": {d.name: _sample(d, ()) for d in ALL_DTYPES},
        "empty": tracec.zeros(0, 5),
        "noncontig": _sample(tracec.float32, (4, 6)).T[1:, ::2],
        "epoch": 7, "big": 2**70, "neg": -3, "lr": 0.1, "nan": float("nan"),
        "inf": float("inf"), "minf": float("-inf"), "name": "rés€au ✓", "flag": True,
        "off": False, "none": None, "tuple": (1, "a", (2.5, None)), "list": [1, [2, [3]]],
        "ints": {0: "zero", 1: {"deep": [tracec.ones(2)]}, -5: 2},
        "ordered": OrderedDict([("b", 1), ("a", 2)]),
        "empties": [[], (), {}],
        "dtype": tracec.bfloat16,
        3: "int key at top level",
        (1, 2): "tuple key",
    }
    path = tmp_path / "ck.tcs"
    save(obj, path)
    out = load(path)
    assert_same(obj, out)
    assert out["big"] == 2**70 and isinstance(out["ordered"], OrderedDict)
    # bfloat16 values survive exactly; they are stored as real BF16
    assert out["tensors"]["bfloat16"].dtype is tracec.bfloat16
    header = _header(path)
    assert header["tensors.bfloat16"]["dtype"] == "BF16"
    assert header["tensors.float16"]["dtype"] == "F16"
    assert header["tensors.bool"]["dtype"] == "BOOL"


def _header(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])


def test_path_kinds_and_file_objects(tmp_path):
    obj = {"w": _sample(tracec.float32), "step": 3}
    save(obj, str(tmp_path / "a.tcs"))
    assert_same(obj, load(str(tmp_path / "a.tcs")))
    save(obj, tmp_path / "b.tcs")
    assert_same(obj, load(tmp_path / "b.tcs"))
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    assert_same(obj, load(buf))
    with open(tmp_path / "c.tcs", "wb") as f:
        save(obj, f)
    with open(tmp_path / "c.tcs", "rb") as f:
        assert_same(obj, load(f))
    assert_same(obj, load(tmp_path / "c.tcs", map_location="cpu", weights_only=True))
    assert_same(obj, load(tmp_path / "c.tcs", map_location=tracec.device("cpu")))


def test_map_location_cuda_is_refused_clearly(tmp_path):
    save({"w": tracec.ones(2)}, tmp_path / "a.tcs")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        load(tmp_path / "a.tcs", map_location="cuda")


def test_shared_tensors(tmp_path):
    base = _sample(tracec.float32, (4, 3))
    other = _sample(tracec.float32, (5,))
    obj = {"w": base, "tied": base, "wT": base.T, "rows": base[1:3], "col": base[:, 1],
           "alias": base.detach(), "other": other, "list": [other, base]}
    save(obj, tmp_path / "s.tcs")
    out = load(tmp_path / "s.tcs")
    assert_same(obj, out)
    # the same object saved twice loads as one object
    assert out["tied"] is out["w"] and out["list"][1] is out["w"] and out["list"][0] is out["other"]
    # views of one array load as views sharing memory
    for k in ("wT", "rows", "col", "alias"):
        assert out[k] is not out["w"]
        assert np.shares_memory(out[k]._data, out["w"]._data), k
    assert not np.shares_memory(out["other"]._data, out["w"]._data)
    with tracec.no_grad():
        out["w"][1, 1] = 1000.0
    assert out["rows"][0, 1].item() == 1000.0 and out["wT"][1, 1].item() == 1000.0
    assert out["col"][1].item() == 1000.0 and out["alias"][1, 1].item() == 1000.0
    # the stored entry is the weight itself, readable by name elsewhere
    header = _header(tmp_path / "s.tcs")
    assert header["w"]["shape"] == [4, 3]
    # a small slice of a big array is stored alone, not with its whole base
    big = tracec.zeros(1000)
    save({"piece": big[:3]}, tmp_path / "p.tcs")
    assert os.path.getsize(tmp_path / "p.tcs") < 1000


def test_requires_grad_and_parameters_survive(tmp_path):
    p = tracec.randn(3, requires_grad=True)
    save({"p": p, "d": p.detach()}, tmp_path / "g.tcs")
    out = load(tmp_path / "g.tcs")
    assert out["p"].requires_grad and out["p"].is_leaf and not out["d"].requires_grad
    try:
        from tracec.nn.parameter import Parameter
    except ImportError:
        return
    w = Parameter(tracec.randn(2, 2))
    save([w], tmp_path / "param.tcs")
    (w2,) = load(tmp_path / "param.tcs")
    assert isinstance(w2, Parameter) and w2.requires_grad
    assert_same_tensor(w, w2)


def test_optimizer_state_dict_checkpoint(tmp_path):
    ps = [tracec.randn(3, 2, requires_grad=True), tracec.randn(2, requires_grad=True)]
    opt = tracec.optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.1}], amsgrad=True)
    ((ps[0] ** 2).sum() + ps[1].sum()).backward()
    opt.step()
    ck = {"epoch": 3, "optimizer": opt.state_dict(),
          "model": OrderedDict(w=ps[0].detach(), b=ps[1].detach())}
    save(ck, tmp_path / "ck.tcs")
    out = load(tmp_path / "ck.tcs")
    assert_same(ck, out)
    assert set(out["optimizer"]["state"]) == {0, 1}
    assert out["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert out["optimizer"]["param_groups"][0]["foreach"] is None


def test_safetensors_interop(tmp_path):
    from safetensors.numpy import load_file as np_load_file
    from safetensors.numpy import save_file as np_save_file
    from safetensors.torch import load_file as th_load_file
    from safetensors.torch import save_file as th_save_file

    obj = {"w": _sample(tracec.float32), "i": _sample(tracec.int64),
           "h": _sample(tracec.bfloat16)}
    save(obj, tmp_path / "a.tcs")
    th = th_load_file(str(tmp_path / "a.tcs"))
    assert th["h"].dtype == torch.bfloat16
    np.testing.assert_array_equal(th["h"].float().numpy(), obj["h"].numpy())
    np.testing.assert_array_equal(th["w"].numpy(), obj["w"].numpy())
    save({"w": obj["w"], "i": obj["i"]}, tmp_path / "b.tcs")
    npd = np_load_file(str(tmp_path / "b.tcs"))
    np.testing.assert_array_equal(npd["i"], obj["i"].numpy())

    # plain safetensors files (no tracec metadata) load as dicts of tensors
    np_save_file({"x": np.arange(6, dtype=np.int32).reshape(2, 3),
                  "y": np.ones(3, np.float16), "m": np.array([True, False])},
                 str(tmp_path / "plain.safetensors"))
    plain = load(tmp_path / "plain.safetensors")
    assert set(plain) == {"x", "y", "m"} and plain["x"].dtype is tracec.int32
    assert plain["y"].dtype is tracec.float16 and plain["m"].dtype is tracec.bool
    assert plain["x"].tolist() == [[0, 1, 2], [3, 4, 5]]
    th_save_file({"b": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)},
                 str(tmp_path / "bf.safetensors"))
    bf = load(tmp_path / "bf.safetensors")
    assert bf["b"].dtype is tracec.bfloat16 and bf["b"].tolist() == [1.5, -2.0]


# --- refusing files ------------------------------------------------------------------

class _Evil:
    """Unpickling this creates a marker file (it must never happen)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("writer", ["pickle", "pickle0", "torch", "torch_legacy"])
def test_pickle_files_are_refused_without_running_code(writer, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / f"evil.{writer}"
    payload = {"weights": [1, 2], "evil": _Evil(marker)}
    if writer == "pickle":
        with open(path, "wb") as f:
            pickle.dump(payload, f)
    elif writer == "pickle0":
        with open(path, "wb") as f:
            pickle.dump(payload, f, protocol=0)
    elif writer == "torch":
        torch.save(payload, path)
    else:
        torch.save(payload, path, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError) as e:
        load(path)
    msg = str(e.value)
    # Pickles go through an allow-list (tests/test_torch_checkpoints.py);
    # the code this one would run is refused by name.
    # (the first global the pickle names: Path.touch, or getattr(Path, "touch") below protocol 4)
    assert "Weights only load failed" in msg and re.search(
        r"GLOBAL (builtins\.getattr|pathlib\.Path\.touch) was not an allowed", msg), msg
    assert str(path) in msg
    assert not marker.exists()
    # weights_only=False is the caller's statement that the file is trusted:
    # the pickle runs, as torch.load(weights_only=False) runs it.
    got = load(path, weights_only=False)
    assert got["weights"] == [1, 2] and marker.exists()


def test_nonexistent_path(tmp_path):
    path = tmp_path / "missing.tcs"
    with pytest.raises(CheckpointNotFoundError) as e:
        load(path)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, ValueError)
    assert str(path) in str(e.value)
    with pytest.raises(CheckpointError, match="directory"):
        load(tmp_path)


def test_truncated_files(tmp_path):
    path = tmp_path / "ck.tcs"
    save({"w": _sample(tracec.float32, (16, 16)), "epoch": 1}, path)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    cut = tmp_path / "cut.tcs"
    for size in [0, 1, 5, 8, 9, 8 + n // 2, 8 + n, 8 + n + 1, len(data) // 2, len(data) - 1]:
        cut.write_bytes(data[:size])
        with pytest.raises(CheckpointError) as e:
            load(cut)
        msg = str(e.value)
        assert str(cut) in msg
        assert ("truncated" in msg) or (size == 0 and "empty" in msg), (size, msg)
        assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)


def test_corrupt_files(tmp_path):
    path = tmp_path / "ck.tcs"
    save({"w": _sample(tracec.float32, (8, 8)), "epoch": 1, "name": "abc"}, path)
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    bad = tmp_path / "bad.tcs"

    def expect(blob, *words):
        bad.write_bytes(bytes(blob))
        with pytest.raises(CheckpointError) as e:
            load(bad)
        assert str(bad) in str(e.value)
        assert any(w in str(e.value) for w in words), str(e.value)

    flipped = bytearray(data)
    flipped[-5] ^= 0x40  # a tensor byte
    expect(flipped, "checksum")
    # a digit of the epoch inside the structure text
    i = data.index(b'[\\"epoch\\",1]') + len(b'[\\"epoch\\",')
    flipped = bytearray(data)
    flipped[i:i + 1] = b"7"
    expect(flipped, "checksum")
    flipped = bytearray(data)
    flipped[8 + 1] ^= 0x01  # the header's JSON
    expect(flipped, "corrupt")
    expect(data + b"junk", "unexpected bytes")
    expect(os.urandom(4096), "not a tracec checkpoint", "corrupt", "truncated")
    expect(b"hello world, this is a text file\n", "not a tracec checkpoint")
    expect(struct.pack("<Q", 2**40) + b"{}", "not a tracec checkpoint")
    np.save(tmp_path / "arr.npy", np.ones(3))
    bad.write_bytes((tmp_path / "arr.npy").read_bytes())
    with pytest.raises(CheckpointError, match="NumPy"):
        load(bad)
    # a view reaching outside its storage is refused, never read out of bounds
    base = tracec.zeros(4, 3)
    save({"a": base, "b": base[1:]}, path)
    text = path.read_bytes()
    hacked = text.replace(b'\\"offset\\":3', b'\\"offset\\":9')
    assert hacked != text
    bad.write_bytes(hacked)
    with pytest.raises(CheckpointError):
        load(bad)


# --- atomic saves --------------------------------------------------------------------

def _dir_listing(d):
    return sorted(os.listdir(d))


def test_failed_save_leaves_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ck.tcs"
    good = {"w": _sample(tracec.float32), "epoch": 1}
    save(good, path)
    before = path.read_bytes()
    listing = _dir_listing(tmp_path)

    # an object that cannot be serialized (nor pickled)
    import threading
    with pytest.raises(TypeError, match="cannot save an object of type") as e:
        save({"w": tracec.ones(3), "bad": threading.Lock()}, path)
    assert "['bad']" in str(e.value)
    with pytest.raises(TypeError):
        save({"f": lambda: 0}, path)
    cyc = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="cycle"):
        save(cyc, path)
    assert path.read_bytes() == before and _dir_listing(tmp_path) == listing

    # a failure in the middle of writing the data
    import tracec.serialization as ser
    real_write = ser._write

    def failing_write(fh, head, raws):
        fh.write(head)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(ser, "_write", failing_write)
    with pytest.raises(OSError, match="No space"):
        save({"w": tracec.ones(1000), "epoch": 2}, path)
    monkeypatch.setattr(ser, "_write", real_write)
    assert path.read_bytes() == before and _dir_listing(tmp_path) == listing

    # a failure at fsync
    def failing_fsync(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output"):
        save({"w": tracec.ones(10)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and _dir_listing(tmp_path) == listing
    assert_same(good, load(path))

    # and an interrupted save (KeyboardInterrupt) cleans up as well
    def interrupted(fh, head, raws):
        raise KeyboardInterrupt
    monkeypatch.setattr(ser, "_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save({"w": tracec.ones(10)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and _dir_listing(tmp_path) == listing


def test_save_replaces_and_keeps_permissions(tmp_path):
    path = tmp_path / "ck.tcs"
    save({"v": 1}, path)
    os.chmod(path, 0o640)
    save({"v": 2}, path)
    assert load(path) == {"v": 2}
    assert (os.stat(path).st_mode & 0o777) == 0o640
    assert _dir_listing(tmp_path) == ["ck.tcs"]
    with pytest.raises(FileNotFoundError, match="parent directory"):
        save({"v": 1}, tmp_path / "nope" / "ck.tcs")
