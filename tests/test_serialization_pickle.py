"""Whole objects in tracec.save files (``torch.save(model, f)``): pickled
with their tensors stored as data; loaded only with ``weights_only=False``
(as ``torch.load`` asks), results equal, shared tensors still shared."""
import json
import struct
import threading

import numpy as np
import pytest

import tracec
import tracec.nn as nn
from tracec.serialization import CheckpointError


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(10, 6)
        self.rnn = nn.LSTM(6, 6, 2)
        self.decoder = nn.Linear(6, 10)
        self.decoder.weight = self.encoder.weight     # tied, as word_language_model
        self.note = {"vocab": ["a", "b"], "scale": 0.5}

    def forward(self, x):
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


def _metadata(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])["__metadata__"]


def test_whole_module_round_trip(tmp_path):
    tracec.manual_seed(0)
    m = TiedLM().eval()
    x = tracec.randint(0, 10, (5, 2))
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:          # a file object, as the example does
        tracec.save(m, f)
    assert _metadata(path)["tracec.format_version"] == "2"
    with open(path, "rb") as f:
        back = tracec.load(f, weights_only=False)
    assert type(back) is TiedLM and back is not m and not back.training
    assert back.decoder.weight is back.encoder.weight
    assert isinstance(back.decoder.weight, nn.Parameter)
    assert back.note == m.note
    np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())
    # the loaded copy is independent and trains
    back.train()
    back(x).sum().backward()
    assert back.encoder.weight.grad is not None and m.encoder.weight.grad is None


def test_loading_a_pickled_object_needs_weights_only_false(tmp_path):
    path = tmp_path / "model.pt"
    tracec.save({"model": TiedLM(), "epoch": 3}, path)
    for kw in ({}, {"weights_only": True}, {"weights_only": None}):
        # (PyTorch's text: the class named as a GLOBAL, weights_only set to False)
        with pytest.raises(CheckpointError, match=r"(?s)`weights_only` set to `False`.*"
                                                  r"GLOBAL .*TiedLM was not an allowed global"):
            tracec.load(path, **kw)


def test_model_and_optimizer_together_share_parameters(tmp_path):
    tracec.manual_seed(1)
    m = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    opt = tracec.optim.Adam(m.parameters(), lr=0.01)
    x = tracec.randn(5, 4)
    m(x).pow(2).sum().backward()
    opt.step()
    tracec.save({"model": m, "opt": opt, "step": 1}, tmp_path / "ck")
    ck = tracec.load(tmp_path / "ck", weights_only=False)
    m2, opt2 = ck["model"], ck["opt"]
    assert ck["step"] == 1
    assert [id(p) for p in m2.parameters()] == \
        [id(p) for g in opt2.param_groups for p in g["params"]]
    # one more identical step on each: still equal
    for mm, oo in ((m, opt), (m2, opt2)):
        oo.zero_grad()
        mm(x).pow(2).sum().backward()
        oo.step()
    for p, q in zip(m.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_plain_data_files_keep_format_version_1(tmp_path):
    tracec.save({"w": tracec.ones(3), "n": 2}, tmp_path / "sd")
    assert _metadata(tmp_path / "sd")["tracec.format_version"] == "1"
    tracec.save(nn.Linear(2, 2).state_dict(), tmp_path / "sd2")
    assert _metadata(tmp_path / "sd2")["tracec.format_version"] == "1"


def test_unpicklable_object_is_refused_before_writing(tmp_path):
    path = tmp_path / "x"
    tracec.save({"a": 1}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match=r"cannot save an object of type _thread\.lock "
                                        r"\(at obj\['lock'\]\): pickling it failed"):
        tracec.save({"lock": threading.Lock()}, path)
    with pytest.raises(TypeError, match="pickling it failed"):
        tracec.save(tracec.compile(lambda a: a + 1), path)
    assert path.read_bytes() == before


def test_a_class_gone_at_load_time_is_a_clear_error(tmp_path):
    import sys
    import types
    mod = types.ModuleType("tracec_test_gone")

    class Gone(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
    Gone.__module__ = mod.__name__
    Gone.__qualname__ = "Gone"
    mod.Gone = Gone
    sys.modules[mod.__name__] = mod
    try:
        tracec.save(Gone(), tmp_path / "g")
    finally:
        del sys.modules[mod.__name__]
    with pytest.raises(CheckpointError, match=r"pickled tracec_test_gone\.Gone could not be "
                                              r"loaded \(ModuleNotFoundError"):
        tracec.load(tmp_path / "g", weights_only=False)
