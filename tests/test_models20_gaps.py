"""Gaps found by the models20 public programs (tests/programs/models20),
each compared with torch."""
import argparse
import pickle
import warnings

import numpy as np
import pytest
import torch

import tracec


class _Center:
    """DINOLoss's center: a registered buffer replaced by its EMA under
    no_grad (``self.center = self.center * m + batch_center * (1 - m)``)."""

    @staticmethod
    def build(lib):
        class Loss(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("center", lib.zeros(1, 3))

            def forward(self, t, s):
                q = lib.nn.functional.softmax((t - self.center) / 0.5, dim=-1)
                loss = lib.sum(-q * lib.nn.functional.log_softmax(s, dim=-1), dim=-1).mean()
                self.update_center(t)
                return loss

            @lib.no_grad()
            def update_center(self, t):
                batch_center = lib.sum(t, dim=0, keepdim=True) / len(t)
                self.center = self.center * 0.9 + batch_center * (1 - 0.9)
        return Loss()


def test_compiled_call_replacing_a_registered_buffer_writes_it_like_eager():
    r = np.random.default_rng(0)
    ts = [r.normal(size=(4, 3)).astype(np.float32) for _ in range(4)]
    ss = [r.normal(size=(4, 3)).astype(np.float32) for _ in range(4)]
    ref = _Center.build(torch)
    want = [(ref(torch.from_numpy(t), torch.from_numpy(s)).item(), ref.center.numpy().copy())
            for t, s in zip(ts, ss)]
    mod = _Center.build(tracec)
    f = tracec.compile(lambda t, s: mod(t, s))
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no refused side effect, no eager fallback
        got = [(f(tracec.from_numpy(t), tracec.from_numpy(s)).item(), mod.center.numpy().copy())
               for t, s in zip(ts, ss)]
    for (gl, gc), (wl, wc) in zip(got, want):
        assert gl == pytest.approx(wl, rel=1e-5)
        np.testing.assert_allclose(gc, wc, rtol=1e-5, atol=1e-7)
    assert f.traces == 1
    assert list(mod.state_dict()) == ["center"] and mod.center.shape == (1, 3)


def test_compiled_call_replacing_a_buffer_with_a_graph_tensor_stays_refused():
    # a new value that needs grad cannot be written into the buffer: the
    # replacement stays a side effect (eager fallback), with eager's numbers
    class M(tracec.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", tracec.zeros(2))

        def forward(self, x):
            self.b = self.b + x
            return self.b.sum()

    m = M()
    f = tracec.compile(lambda x: m(x), fallback="eager")
    x = tracec.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        outs = [f(x).item() for _ in range(3)]
    assert outs == [2.0, 4.0, 6.0]
    assert m.b.requires_grad


def test_weights_only_refusal_is_an_unpickling_error_like_torch(tmp_path):
    # DINO's checkpoint holds its argparse.Namespace: torch.load's default
    # (weights_only=True) refuses it with pickle.UnpicklingError
    obj = {"w": [1.0], "args": argparse.Namespace(arch="vit_tiny")}
    torch.save({**obj, "w": torch.ones(2)}, tmp_path / "t.pth")
    tracec.save({**obj, "w": tracec.ones(2)}, tmp_path / "c.pth")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(tmp_path / "t.pth")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed.*weights_only=False"):
        tracec.load(tmp_path / "c.pth")
    with pytest.raises(tracec.serialization.CheckpointError):
        tracec.load(tmp_path / "c.pth")
    # torch's file naming a class: refused by tracec always, as an UnpicklingError too
    with pytest.raises(pickle.UnpicklingError, match="refusing to unpickle argparse.Namespace"):
        tracec.load(tmp_path / "t.pth", weights_only=False)
    assert tracec.load(tmp_path / "c.pth", weights_only=False)["args"].arch == \
        torch.load(tmp_path / "t.pth", weights_only=False)["args"].arch == "vit_tiny"


def test_cat_with_legacy_empty_tensor_promotes_like_torch():
    # DINO's MultiCropWrapper: output = torch.empty(0), then
    # output = torch.cat((output, _out)); the skipped empty tensor still
    # takes part in the result's dtype
    cases = [
        (lambda L: L.cat((L.empty(0), L.arange(3))), "float32"),
        (lambda L: L.cat((L.arange(2), L.empty(0))), "float32"),
        (lambda L: L.cat((L.empty(0), L.arange(3, dtype=L.int32))), "float32"),
        (lambda L: L.cat((L.empty(0, dtype=L.float64), L.ones(2))), "float64"),
        (lambda L: L.cat((L.empty(0, dtype=L.long), L.empty(0))), "float32"),
        (lambda L: L.cat([L.empty(0, dtype=L.float64), L.ones(2, 3)], dim=1), "float64"),
        (lambda L: L.cat((L.empty(0), L.ones(2, 4))), "float32"),
    ]
    for fn, name in cases:
        want, got = fn(torch), fn(tracec)
        assert str(want.dtype) == f"torch.{name}"
        assert str(got.dtype) == f"tracec.{name}"
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_legacy_tensor_constructor_of_a_tensor_is_an_alias_like_torch():
    for lib in (torch, tracec):
        for a in (lib.tensor(3), lib.tensor([1, 2], dtype=lib.int32), lib.tensor([True]),
                  lib.tensor([1.0, 2.0])):
            b = lib.Tensor(a)
            assert b.dtype == a.dtype and b.shape == a.shape and b is not a
            assert b.data_ptr() == a.data_ptr()
        z = lib.tensor([1.0, 2.0])
        lib.Tensor(z)[0] = 5.0
        assert z.tolist() == [5.0, 2.0]
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.Tensor(x * 2)
        assert y.requires_grad and y.grad_fn.name() == "AliasBackward0"
        y.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
        # the other legacy forms are unchanged: sizes, data, a Size, nothing
        assert lib.Tensor(2, 3).shape == (2, 3) and str(lib.Tensor([1, 2]).dtype).endswith("float32")
        assert lib.Tensor(lib.Size([2])).shape == (2,) and lib.Tensor().shape == (0,)
        assert str(lib.Tensor(np.ones(2)).dtype).endswith("float32")
