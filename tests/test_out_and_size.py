"""PyTorch surface details that public programs print or rely on: ``out=``,
``torch.Size``, ``range`` indices, reprs under ``install_as_torch``."""
import warnings

import numpy as np
import pytest
import torch

import tracec
from program_runner import python_c


def test_out_matches_torch_and_returns_out():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for name, args in [("matmul", (a, a.T)), ("mul", (a, a)), ("add", (a, a)), ("exp", (a / 10,)),
                       ("cat", ([a, a],)), ("sum", (a, 1))]:
        def conv(x, mod):
            if isinstance(x, list):
                return [mod.tensor(y) for y in x]
            return mod.tensor(x) if isinstance(x, np.ndarray) else x
        t_out, c_out = torch.empty(0), tracec.empty(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rt = getattr(torch, name)(*[conv(x, torch) for x in args], out=t_out)
            rc = getattr(tracec, name)(*[conv(x, tracec) for x in args], out=c_out)
        assert rc is c_out and rt is t_out
        np.testing.assert_allclose(c_out.numpy(), t_out.numpy(), rtol=1e-6)


def test_out_tuple_and_errors():
    x = tracec.tensor([[1.0, 5.0], [7.0, 2.0]])
    vals, idx = tracec.empty(2), tracec.empty(2, dtype=tracec.long)
    r = tracec.max(x, 1, out=(vals, idx))
    assert r.values is vals and idx.tolist() == [1, 0] and vals.tolist() == [5.0, 7.0]
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        tracec.mul(tracec.ones(2, requires_grad=True), 2, out=tracec.empty(2))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        tracec.add(tracec.ones(2), 0.5, out=tracec.empty(2, dtype=tracec.long))
    with tracec.no_grad():  # allowed without grad mode
        w = tracec.ones(2, requires_grad=True)
        assert tracec.mul(w, 3, out=tracec.empty(2)).tolist() == [3.0, 3.0]


def test_size_is_a_tuple_like_torch_size():
    x = tracec.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == torch.Size([2, 3, 4])
    assert isinstance(x.shape, tuple) and isinstance(x.shape, tracec.Size)
    assert repr(x.shape) == "tracec.Size([2, 3, 4])" and x.shape.numel() == 24
    assert isinstance(x.shape[1:], tracec.Size) and x.shape[-1] == 4
    assert hash(x.shape) == hash((2, 3, 4))
    assert tracec.zeros(x.shape[:2]).shape == (2, 3)


def test_range_index_selects_like_a_list():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = tracec.tensor(a)
    np.testing.assert_array_equal(t[range(4), [0, 1, 2, 3]].numpy(), a[range(4), [0, 1, 2, 3]])
    np.testing.assert_array_equal(t[range(1, 3)].numpy(), a[1:3])


def test_reprs_say_torch_under_install_as_torch():
    code = ("import tracec; tracec.install_as_torch(); import torch\n"
            "x = torch.ones(2, 3)\n"
            "print(x.shape, x.dtype, x.sum().grad_fn is None)\n")
    out = python_c(code, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch.Size([2, 3]) torch.float32 True"


def _repr_cases():
    rs = np.random.RandomState(0)
    return [np.array(3.5, np.float32), np.array([1., 2., 3.], np.float32), np.arange(10),
            np.array([0.5, 1.23456, -2.], np.float32), np.array([1e-5, 1., 1000.], np.float32),
            np.array([np.nan, np.inf, -np.inf, 1.], np.float32), np.array([1e9, 2.], np.float32),
            rs.rand(50, 784).astype(np.float32), rs.randint(0, 10, 512),
            rs.randn(3, 4, 5).astype(np.float32), np.zeros((0,), np.float32),
            np.zeros((2, 0), np.float32), np.zeros((0,), np.int64), np.array([True, False]),
            np.array([1, 2], np.int32), np.array([1.5, 2.], np.float64),
            rs.randn(2000).astype(np.float32), np.array([-0.0, 0.0], np.float32),
            np.array([1, -22, 333]), rs.randn(40, 30), np.array(7), np.array(True),
            (rs.randn(4, 4) * 1e5).astype(np.float32), np.array([1.0, 2.5], np.float16)]


@pytest.mark.parametrize("k", range(24))
def test_tensor_repr_is_pytorch_text(k):
    a = _repr_cases()[k]
    want = repr(torch.from_numpy(a.copy())).replace("torch.", "tracec.")
    assert repr(tracec.from_numpy(a.copy())) == want


def test_repr_suffixes_and_print_options():
    t, c = torch.ones(2, 3, requires_grad=True), tracec.ones(2, 3, requires_grad=True)
    assert repr(c) == repr(t)
    assert repr(c * 2).split("grad_fn")[0] == repr(t * 2).split("grad_fn")[0]
    assert repr(tracec.nn.Parameter(tracec.zeros(2))) == repr(torch.nn.Parameter(
        torch.zeros(2)))
    a = np.linspace(0, 1, 12, dtype=np.float32)
    with torch._tensor_str.printoptions(precision=2, threshold=5, edgeitems=2), \
            tracec.printoptions(precision=2, threshold=5, edgeitems=2):
        assert repr(tracec.tensor(a)) == repr(torch.tensor(a))
        assert tracec.get_printoptions() == torch._tensor_str.get_printoptions()
    assert tracec.get_printoptions()["precision"] == 4
    tracec.set_printoptions(profile="short")
    try:
        torch.set_printoptions(profile="short")
        assert repr(tracec.tensor(a)) == repr(torch.tensor(a))
    finally:
        tracec.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
