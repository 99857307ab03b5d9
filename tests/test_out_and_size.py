"""PyTorch surface details that public programs print or rely on: ``out=``,
``torch.Size``, ``range`` indices, reprs under ``install_as_torch``."""
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tracec


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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch.Size([2, 3]) torch.float32 True"
