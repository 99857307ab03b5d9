"""Tensor metadata (strides, contiguity, storage), searching ops and a few
of the new ops inside ``tracec.compile`` compared with eager."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from _torch_ref import run_both, torch

VIEWS = {
    "plain": lambda L, x: x,
    "t": lambda L, x: x.t(),
    "slice_rows": lambda L, x: x[1:],
    "slice_step": lambda L, x: x[:, ::2],
    "expand": lambda L, x: x[:1].expand(3, 4),
    "permute3": lambda L, x: x.reshape(2, 3, 2).permute(2, 0, 1),
    "select": lambda L, x: x[:, 2],
    "scalar": lambda L, x: x[0, 0],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_strides_offsets_contiguity(name):
    got = []
    for L in (tracec, torch):
        base = L.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
        v = VIEWS[name](L, base)
        got.append((v.stride(), v.storage_offset(), v.is_contiguous(),
                    [v.stride(d) for d in range(-v.dim(), v.dim())],
                    v.data_ptr() - base.data_ptr(), v.nbytes, v.itemsize, v.element_size(),
                    v.ndimension(), v.untyped_storage().data_ptr() == base.data_ptr(),
                    v.untyped_storage().nbytes()))
    assert got[0] == got[1]


def test_flags_and_constants():
    x = tracec.zeros(2, 3)
    t = torch.zeros(2, 3)
    for name in ("is_cpu", "is_sparse", "is_quantized", "is_meta", "is_leaf", "retains_grad",
                 "output_nr", "is_cuda"):
        assert getattr(x, name) == getattr(t, name), name
    assert x.get_device() == t.get_device() == -1
    assert x.is_signed() and not tracec.zeros(2, dtype=tracec.bool).is_signed()
    assert tracec.is_signed(x) and not x.is_inference() and not tracec.is_inference(x)
    assert x.layout is tracec.strided and repr(tracec.strided) == "torch.strided"
    assert x.pin_memory() is x and x.share_memory_() is x
    assert x.is_set_to(x) and not x.is_set_to(x.clone()) and not x.is_set_to(x[1:])
    y = (tracec.zeros(2, requires_grad=True) * 2)
    y.retain_grad()
    assert y.retains_grad
    for name in ("contiguous_format", "channels_last", "preserve_format", "channels_last_3d"):
        assert repr(getattr(tracec, name)) == repr(getattr(torch, name))


def test_contiguous_memory_formats():
    a = np.arange(24.0).reshape(1, 2, 3, 4)
    for L in (tracec, torch):
        x = L.tensor(a)
        cl = x.contiguous(memory_format=L.channels_last)
        assert cl.stride() == (24, 1, 8, 2)
        assert cl.is_contiguous(memory_format=L.channels_last) and not cl.is_contiguous()
        back = cl.contiguous()
        assert back.stride() == (24, 12, 4, 1)
        np.testing.assert_array_equal(back.numpy(), a)
        assert x.contiguous() is x
    run_both(lambda L, x: x.contiguous(memory_format=L.channels_last) * 2, a)


SEARCH = {
    "searchsorted": lambda L, s, v: L.searchsorted(s, v),
    "searchsorted_right": lambda L, s, v: L.searchsorted(s, v, right=True),
    "searchsorted_side": lambda L, s, v: L.searchsorted(s, v, side="right", out_int32=True),
    "bucketize": lambda L, s, v: L.bucketize(v, s),
    "bucketize_right": lambda L, s, v: L.bucketize(v, s, right=True, out_int32=True),
}


@pytest.mark.parametrize("name", sorted(SEARCH))
def test_search(name):
    s = np.array([0.0, 1.0, 1.0, 2.5, 4.0])
    v = np.array([[-1.0, 1.0, 2.0], [4.0, 5.0, 2.5]])
    run_both(SEARCH[name], s, v, grad=False)


def test_searchsorted_nd_sorter_scalar():
    s = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    sorter = np.argsort(s, axis=-1)
    run_both(lambda L, s, o, v: L.searchsorted(s, v, sorter=o), s, sorter,
             np.array([[2.0], [4.5]]), grad=False)
    run_both(lambda L, s: L.searchsorted(s, 1.0), np.array([0.0, 1.0, 2.0]), grad=False)


@pytest.mark.parametrize("kw", [{}, {"return_inverse": True}, {"return_counts": True},
                                {"return_inverse": True, "return_counts": True, "dim": 0},
                                {"sorted": True, "dim": 1}])
def test_unique(kw):
    a = np.array([[1, 3, 1], [2, 3, 2], [1, 3, 1]])
    run_both(lambda L, x: L.unique(x, **kw), a, grad=False)
    run_both(lambda L, x: x.unique(**kw), a.astype(np.float32), grad=False)


@pytest.mark.parametrize("kw", [{}, {"return_inverse": True, "return_counts": True},
                                {"return_counts": True, "dim": 0}])
def test_unique_consecutive(kw):
    a = np.array([[1, 1, 2], [1, 1, 2], [3, 1, 1], [3, 1, 1]])
    run_both(lambda L, x: L.unique_consecutive(x, **kw), a, grad=False)


def test_histogram():
    a = np.array([0.1, 0.5, 0.5, 2.0, 3.5])
    run_both(lambda L, x: L.histogram(x, 4), a, grad=False)
    run_both(lambda L, x, w: L.histogram(x, 3, range=(0.0, 3.0), weight=w, density=True),
             a, np.array([1.0, 2.0, 1.0, 1.0, 1.0]), grad=False)
    h = tracec.histogram(tracec.tensor(a), 2)
    assert h.hist.shape == (2,) and h.bin_edges.shape == (3,)


def test_value_dependent_ops_refused_in_compile():
    @tracec.compile
    def f(x):
        return tracec.nonzero(x)
    with pytest.raises(tracec.TraceError, match="nonzero"):
        f(tracec.tensor([0.0, 1.0]))


def test_one_hot_scatter_and_index_add_compile():
    w = tracec.randn(4, 5, requires_grad=True)

    def step(y, idx, src):
        onehot = tracec.zeros(3, 5).scatter_(1, y.unsqueeze(1), 1.0)
        acc = tracec.zeros(4, 5).index_add(0, idx, src)
        red = src.scatter_reduce(1, y.unsqueeze(1).expand(2, 2), src[:, :2], "amax",
                                 include_self=False)
        loss = (onehot.sum(0) * w).sum() + (acc * w).sum() + red.sum()
        loss.backward()
        return loss, onehot, acc
    y, idx = tracec.tensor([1, 4, 1]), tracec.tensor([3, 0])
    src = tracec.randn(2, 5)
    want = [t.detach().numpy().copy() for t in step(y[:2], idx, src)] + [w.grad.numpy().copy()]
    w.grad = None
    f = tracec.compile(step)
    got = [t.detach().numpy() for t in f(y[:2], idx, src)] + [w.grad.numpy()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    w.grad = None
    y2 = tracec.tensor([2, 3])  # new index values, same trace
    got = f(y2, idx, src)[1].numpy()
    np.testing.assert_array_equal(got[:2].argmax(1), [2, 3])


def test_to_memory_format_lays_out_tensors_and_modules_as_pytorch():
    """``Tensor.to(memory_format=)`` and ``Module.to(memory_format=)`` (4-D
    parameters only) give PyTorch's strides; training results are unchanged."""
    import torch
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    for lib in (tracec, torch):
        y = lib.tensor(x).to(memory_format=lib.channels_last)
        assert y.stride() == (60, 1, 15, 3) and y.is_contiguous(memory_format=lib.channels_last)
        z = lib.tensor(x).to(lib.float64, memory_format=lib.preserve_format)
        assert z.stride() == (60, 20, 5, 1) and z.dtype == lib.float64
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    ours = tracec.nn.Sequential(tracec.nn.Conv2d(3, 4, 3), tracec.nn.BatchNorm2d(4))
    ours.load_state_dict({k: tracec.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    ref.to(memory_format=torch.channels_last)
    ours.to(memory_format=tracec.channels_last)
    assert ours[0].weight.stride() == ref[0].weight.stride() == (27, 1, 9, 3)
    assert ours[1].weight.stride() == ref[1].weight.stride()
    assert isinstance(ours[0].weight, tracec.nn.Parameter)
    a = ref(torch.tensor(x).to(memory_format=torch.channels_last)).square().mean()
    b = ours(tracec.tensor(x).to(memory_format=tracec.channels_last)).square().mean()
    a.backward()
    b.backward()
    np.testing.assert_allclose(b.item(), a.item(), rtol=1e-5)
    np.testing.assert_allclose(ours[0].weight.grad.numpy(), ref[0].weight.grad.numpy(),
                               rtol=1e-4, atol=1e-5)
