"""``torch.serialization.add_safe_globals`` / ``safe_globals``: the
classes a user vouches for load from a weights-only checkpoint (a
training script's ``{"args": argparse.Namespace(...), ...}``), in files
written by the real ``torch.save`` and by ``tracec.save``; other names
stay refused, naming the class and the way to allow it."""
import argparse
import collections
import os

import pytest
import torch

import tracec
from tracec import serialization
from tracec.torch_checkpoint import WeightsOnlyError


@pytest.fixture(autouse=True)
def _no_leftover_globals():
    serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()


def _torch_file(tmp_path):
    path = str(tmp_path / "torch.pt")
    torch.save({"args": argparse.Namespace(lr=0.1, epochs=3), "w": torch.arange(4.0)}, path)
    return path


def _tracec_file(tmp_path):
    path = str(tmp_path / "tracec.pt")
    tracec.save({"args": argparse.Namespace(lr=0.1, epochs=3), "w": tracec.arange(4.0)}, path)
    return path


@pytest.mark.parametrize("make", [_torch_file, _tracec_file])
def test_a_namespace_loads_once_allowed(make, tmp_path):
    path = make(tmp_path)
    with pytest.raises(WeightsOnlyError, match="argparse.Namespace"):
        tracec.load(path)
    with serialization.safe_globals([argparse.Namespace]):
        ck = tracec.load(path)
    assert ck["args"] == argparse.Namespace(lr=0.1, epochs=3)
    assert ck["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert serialization.get_safe_globals() == []      # the block's entries are gone
    serialization.add_safe_globals([argparse.Namespace])
    assert tracec.load(path)["args"].lr == 0.1
    assert serialization.get_safe_globals() == [argparse.Namespace]
    # the same as torch's own API says
    torch.serialization.add_safe_globals([argparse.Namespace])
    try:
        assert torch.load(path if make is _torch_file else _torch_file(tmp_path))["args"].epochs == 3
    finally:
        torch.serialization.clear_safe_globals()


def test_names_not_allowed_stay_refused_and_run_nothing(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    path = str(tmp_path / "evil.pt")
    torch.save({"x": Evil()}, path)
    serialization.add_safe_globals([argparse.Namespace])
    with pytest.raises(WeightsOnlyError, match="system"):
        tracec.load(path)
    assert not marker.exists()


def test_a_pair_names_an_object_as_the_file_does(tmp_path, monkeypatch):
    """``(obj, "module.name")``: the file's name resolves to ``obj`` (here a
    module that no longer exists when the file is read)."""
    import pickle
    import sys
    import types
    mod = types.ModuleType("mylib_geometry")
    Point = collections.namedtuple("Point", "x y")
    Point.__module__ = mod.__name__
    mod.Point = Point
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    path = str(tmp_path / "p.pt")
    with open(path, "wb") as f:
        pickle.dump({"p": Point(1, 2)}, f, protocol=2)
    monkeypatch.delitem(sys.modules, mod.__name__)
    with pytest.raises(WeightsOnlyError, match="mylib_geometry.Point"):
        tracec.load(path)
    serialization.add_safe_globals([(Point, "mylib_geometry.Point")])
    assert tuple(tracec.load(path)["p"]) == (1, 2)
    with pytest.raises(TypeError):
        serialization.add_safe_globals([3])
