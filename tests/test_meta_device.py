"""The ``meta`` device (tracec/meta_array.py) and ``with device(...)``,
against PyTorch 2.13: shapes without data, models built on meta then
materialized, PyTorch's errors and reprs, and no random numbers drawn."""
import pytest

import tracec
import tracec.nn as nn

torch = pytest.importorskip("torch")


def _same_repr(ours, theirs):
    assert repr(ours).replace("tracec.", "torch.") == repr(theirs)


def test_factories_and_ops_keep_shapes_without_data():
    for lib in (tracec, torch):
        x = lib.empty(3, 4, device="meta")
        assert x.is_meta and x.device.type == "meta" and not x.is_cpu
        assert (x + 1).device.type == "meta"
        assert tuple(x.sum(0).shape) == (4,)
        assert tuple((x @ lib.empty(4, 5, device="meta")).shape) == (3, 5)
    _same_repr(tracec.zeros(2, 3, device="meta", dtype=tracec.int64),
               torch.zeros(2, 3, device="meta", dtype=torch.int64))
    _same_repr(tracec.zeros(2, device="meta", dtype=tracec.float64, requires_grad=True),
               torch.zeros(2, device="meta", dtype=torch.float64, requires_grad=True))
    _same_repr(tracec.ones((), device="meta"), torch.ones((), device="meta"))
    # A huge meta tensor costs no memory.
    big = tracec.empty(1 << 20, 1 << 20, device="meta")
    assert tuple((big * 2).shape) == (1 << 20, 1 << 20)


def test_like_functions_follow_the_input_device():
    x = tracec.empty(2, 3, device="meta")
    assert tracec.zeros_like(x).is_meta and tracec.randn_like(x).is_meta
    assert tracec.empty_like(x).is_meta and tracec.full_like(x, 2.0).is_meta
    assert tracec.empty_like(x, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("what", ["item", "numpy", "tolist", "cpu", "item1", "mixed"])
def test_errors_match_pytorch(what):
    def run(lib):
        x = lib.empty(3, 4, device="meta")
        return {"item": lambda: x.item(), "numpy": lambda: x.numpy(),
                "tolist": lambda: x.tolist(), "cpu": lambda: x.to("cpu"),
                "item1": lambda: lib.zeros(1, device="meta").item(),
                "mixed": lambda: x + lib.ones(3, 4)}[what]()
    with pytest.raises(Exception) as theirs:
        run(torch)
    with pytest.raises(type(theirs.value)) as ours:
        run(tracec)
    assert str(theirs.value).split("!")[0] in str(ours.value)


def test_device_context_and_no_random_numbers_drawn():
    tracec.manual_seed(0)
    before = tracec.get_rng_state().clone()
    with tracec.device("meta"):
        assert tracec.get_default_device().type == "meta"
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
        assert tracec.ones(2).is_meta and tracec.arange(3).is_meta and tracec.rand(2).is_meta
    assert tracec.get_default_device().type == "cpu" and not tracec.ones(2).is_meta
    conv = nn.Conv2d(3, 8, 3, device="meta")
    lstm = nn.LSTM(4, 5, device="meta")
    assert bool((tracec.get_rng_state() == before).all())   # init drew nothing
    assert all(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    out = model(tracec.empty(5, 4, device="meta"))
    assert out.is_meta and tuple(out.shape) == (5, 2)
    assert tuple(conv(tracec.empty(1, 3, 10, 10, device="meta")).shape) == (1, 8, 8, 8)
    assert tuple(lstm(tracec.empty(3, 2, 4, device="meta"))[0].shape) == (3, 2, 5)


def test_backward_on_meta_gives_meta_gradients():
    y = tracec.randn(3, requires_grad=True, device="meta")
    (y * 2).sum().backward()
    assert y.grad.is_meta and tuple(y.grad.shape) == (3,)
    a = tracec.zeros(3, device="meta")
    a[0] = 1
    a.add_(1)           # in-place writes do nothing
    assert a.is_meta


def test_build_on_meta_then_load_weights_like_pytorch():
    """The large-model recipe: skeleton on meta, ``to_empty``, then the
    state dict of a real model; results equal the real model's."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5), torch.nn.Tanh(),
                              torch.nn.Linear(5, 3))
    state = {k: tracec.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}
    with tracec.device("meta"):
        model = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Tanh(), nn.Linear(5, 3))
    with pytest.raises(NotImplementedError, match="to_empty"):
        model.to("cpu")
    model.to_empty(device="cpu")
    assert all(p.device.type == "cpu" for p in model.parameters())
    model.load_state_dict(state)
    x = torch.randn(4, 6)
    got = model(tracec.tensor(x.numpy())).detach().numpy()
    import numpy as np
    np.testing.assert_allclose(got, ref(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    # The other direction: a real model sent to meta keeps its structure only.
    meta = nn.Linear(3, 2).to("meta")
    assert meta.weight.is_meta and isinstance(meta.weight, nn.Parameter)


def test_meta_tensors_are_refused_inside_a_compiled_function():
    f = tracec.compile(lambda x: x * 2)
    with pytest.raises(Exception, match="meta"):
        f(tracec.empty(3, device="meta"))
