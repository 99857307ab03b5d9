"""torch.export: export -> ExportedProgram (.module(), state_dict, Dim,
guards, run_decompositions, save/load through tracec.save), against
torch 2.13."""
import numpy as np
import pytest
import torch

import tracec


class Block:
    """The same small model in both libraries (weights copied from tracec's)."""

    @staticmethod
    def make(T):
        class M(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = T.nn.Linear(3, 4)
                self.bn = T.nn.BatchNorm1d(4)
                self.register_buffer("shift", T.tensor([0.5, -0.5, 1.0, 0.0]), persistent=False)

            def forward(self, x, y, *, scale=2.0):
                h = T.relu(self.bn(self.lin(x))) + self.shift
                return {"out": h * scale, "pair": (h.sum(-1), y + 1)}
        return M


def models():
    tm = Block.make(tracec)().eval()
    with tracec.no_grad():
        tm.bn.running_mean.copy_(tracec.tensor([0.1, 0.2, -0.3, 0.0]))
        tm.bn.running_var.copy_(tracec.tensor([1.5, 0.5, 2.0, 1.0]))
    pm = Block.make(torch)().eval()
    pm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return tm, pm


def assert_same(a, b):
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_export_module_runs_like_the_module_and_like_torch():
    tm, pm = models()
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    y = np.arange(5, dtype=np.float32)
    eps = {}
    for T, m in ((tracec, tm), (torch, pm)):
        ep = T.export.export(m, (T.tensor(x), T.tensor(y)), {"scale": 3.0})
        eps[T] = ep
        assert type(ep).__name__ == "ExportedProgram"
        with pytest.raises(RuntimeError, match="Unable to call ExportedProgram directly"):
            ep(T.tensor(x), T.tensor(y))
        assert list(ep.state_dict) == ["lin.weight", "lin.bias", "bn.weight", "bn.bias",
                                       "bn.running_mean", "bn.running_var",
                                       "bn.num_batches_tracked"]
        assert ep.state_dict["lin.weight"] is m.lin.weight
        assert type(ep.run_decompositions()).__name__ == "ExportedProgram"
    got = eps[tracec].module()(tracec.tensor(x), tracec.tensor(y), scale=3.0)
    assert_same(got, eps[torch].module()(torch.tensor(x), torch.tensor(y), scale=3.0))
    assert_same(got, tm(tracec.tensor(x), tracec.tensor(y), scale=3.0))
    text = str(eps[tracec])
    assert text.startswith("ExportedProgram:") and "tracec.matmul" in text
    assert "tracec.matmul" in str(eps[tracec].graph_module.graph)
    # the program reads its state: a changed weight changes the result
    with tracec.no_grad():
        tm.lin.bias.add_(1.0)
    moved = eps[tracec].module()(tracec.tensor(x), tracec.tensor(y), scale=3.0)
    assert_same(moved, tm(tracec.tensor(x), tracec.tensor(y), scale=3.0))


@pytest.mark.parametrize("T", [torch, tracec], ids=["torch", "tracec"])
def test_export_guards_and_dims_match_torch(T):
    m = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.ReLU())
    batch = T.export.Dim("batch", min=2, max=64)
    assert repr(batch) == "Dim('batch', max=64)" and repr(T.export.Dim("b")) == "Dim('b', min=0)"
    ep = T.export.export(m, (T.randn(5, 3),), dynamic_shapes={"input": {0: batch}})
    for n in (2, 7, 64):
        x = T.randn(n, 3)
        np.testing.assert_allclose(ep.module()(x).detach().numpy(), m(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[0\] <= 64"):
        ep.module()(T.randn(100, 3))
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[1\] == 3"):
        ep.module()(T.randn(5, 4))
    static = T.export.export(m, (T.randn(5, 3),))
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[0\] == 5"):
        static.module()(T.randn(6, 3))
    with pytest.raises(ValueError, match="Expected `mod` to be an instance of "
                                         "`torch.nn.Module`"):
        T.export.export(lambda x: x, (T.ones(1),))


def test_export_save_load_needs_no_code(tmp_path):
    tm, _ = models()
    x, y = tracec.randn(4, 3), tracec.randn(4)
    ep = tracec.export.export(tm, (x, y), dynamic_shapes=(
        {0: tracec.export.Dim("b", min=2, max=32)}, {0: tracec.export.Dim("b", min=2, max=32)}))
    path = str(tmp_path / "model.pt2")
    tracec.export.save(ep, path, extra_files={"note": "hi"})
    # the file is a tracec.save checkpoint: tensors, strings and numbers only
    raw = tracec.load(path)
    assert raw["format"] == "tracec.export/1" and isinstance(raw["meta"], str)
    extra = {}
    back = tracec.export.load(path, extra_files=extra)
    assert extra == {"note": "hi"}
    assert sorted(back.state_dict) == sorted(ep.state_dict)
    for n in (4, 9):
        a, b = tracec.randn(n, 3), tracec.randn(n)
        assert_same(back.module()(a, b), tm(a, b))
    with pytest.raises(AssertionError, match="Guard failed"):
        back.module()(tracec.randn(40, 3), tracec.randn(40))
    with pytest.raises(TypeError, match="must be an instance of 'ExportedProgram'"):
        tracec.export.save(tm, path)


def test_export_refuses_what_it_cannot_capture():
    @tracec.library.custom_op("texport::np_sin", mutates_args=())
    def np_sin(x: tracec.Tensor) -> tracec.Tensor:
        return tracec.from_numpy(np.sin(x.numpy()))

    class M(tracec.nn.Module):
        def forward(self, x):
            return np_sin(x) + 1
    with pytest.raises(tracec.TraceError, match="M.forward cannot be captured: the custom op "
                                                "texport::np_sin computes in Python"):
        tracec.export.export(M(), (tracec.ones(2),))
    bn = tracec.nn.BatchNorm1d(3)     # training mode: the forward updates its buffers
    with pytest.raises(tracec.TraceError, match="export the module in eval"):
        tracec.export.export(bn, (tracec.randn(4, 3),))
    assert bn.running_mean.tolist() == [0.0, 0.0, 0.0] and bn.num_batches_tracked.item() == 0


def test_compiling_an_exported_module_never_freezes_its_outputs():
    m = tracec.nn.Linear(3, 2)
    ep = tracec.export.export(m, (tracec.randn(4, 3),))
    f = tracec.compile(ep.module())
    with pytest.warns(UserWarning, match="runs eagerly"):
        for _ in range(3):
            x = tracec.randn(4, 3)
            np.testing.assert_allclose(f(x).numpy(), m(x).detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    reasons = f.__dict__["_compiled"].cache_info().eager_reasons
    assert "the exported program of Linear computes in Python" in reasons[0]


def test_export_inputs_in_containers_and_violated_dims():
    class M(tracec.nn.Module):
        def forward(self, batch):
            return batch["a"] * 2 + batch["b"][0]
    m = M()
    ep = tracec.export.export(m, ({"a": tracec.ones(3, 2), "b": [tracec.ones(3, 2)]},))
    got = ep.module()({"a": tracec.full((3, 2), 2.0), "b": [tracec.ones(3, 2)]})
    assert got.tolist() == [[5.0, 5.0]] * 3
    with pytest.raises(AssertionError, match=r"Guard failed: batch\['a'\].size\(\)\[0\] == 3"):
        ep.module()({"a": tracec.ones(4, 2), "b": [tracec.ones(4, 2)]})
    b = tracec.export.Dim("b", max=16)
    ep = tracec.export.export(m, ({"a": tracec.ones(3, 2), "b": [tracec.ones(3, 2)]},),
                              dynamic_shapes={"batch": {"a": {0: b}, "b": [{0: b}]}})
    got = ep.module()({"a": tracec.full((7, 2), 2.0), "b": [tracec.ones(7, 2)]})
    assert got.tolist() == [[5.0, 5.0]] * 7
    with pytest.raises(AssertionError, match=r"Guard failed: batch\['a'\].size\(\)\[0\] <= 16"):
        ep.module()({"a": tracec.ones(20, 2), "b": [tracec.ones(20, 2)]})

    class Fixed(torch.nn.Module):
        def forward(self, x):
            return x.reshape(5, 2) + 1

    class CFixed(tracec.nn.Module):
        def forward(self, x):
            return x.reshape(5, 2) + 1          # the batch of 5 becomes a constant
    for T in (torch, tracec):
        with pytest.raises(Exception, match=r"Constraints violated \(batch\)!"):
            T.export.export(Fixed() if T is torch else CFixed(), (T.ones(5, 2),),
                            dynamic_shapes={"x": {0: T.export.Dim("batch")}})
