"""Indices out of range, eagerly and in compiled calls, as PyTorch 2.13:
``take_along_dim`` with ``dim`` wraps its indices modulo the size (no
error, and no read outside the input); without ``dim`` it is gather's
range check; and a compiled call's failed index check names the offending
index, as eager's and PyTorch's errors do ("index 7 is out of bounds for
dimension 0 with size 5"), besides the user's line."""
import numpy as np
import pytest
import torch

import tracec

X = np.arange(10, dtype=np.float32).reshape(2, 5)


def _along(lib, x, i):
    return lib.take_along_dim(x, i, 1) * 2


def _flat(lib, x, i):
    return lib.take_along_dim(x, i)


def _getitem(lib, x, i):
    return x[i] * 2


def _index_add(lib, x, i, v):
    return x.index_add(0, i, v)


def _gather(lib, x, i):
    return x.gather(1, i)


COMPILED = {fn: tracec.compile(lambda *a, fn=fn: fn(tracec, *a), backend="cpu")
            for fn in (_along, _flat, _getitem, _index_add, _gather)}


@pytest.mark.parametrize("idx", [[[0, 1], [2, 3]], [[0, 7], [-7, 2]], [[2**40, -100], [4, 5]],
                                 [[-5, -6], [9, 10]]])
def test_take_along_dim_wraps_indices_modulo_the_size(idx):
    want = _along(torch, torch.tensor(X), torch.tensor(idx)).numpy()
    x, i = tracec.tensor(X), tracec.tensor(idx)
    np.testing.assert_array_equal(_along(tracec, x, i).numpy(), want)
    np.testing.assert_array_equal(COMPILED[_along](x, i).numpy(), want)


def test_take_along_dim_gradient_of_wrapped_indices():
    idx = [[1, 7], [-1, -6]]
    xt = torch.tensor(X, requires_grad=True)
    torch.take_along_dim(xt, torch.tensor(idx), 1).sum().backward()
    x = tracec.tensor(X, requires_grad=True)
    tracec.take_along_dim(x, tracec.tensor(idx), 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def _error(fn, *args):
    with pytest.raises(Exception) as e:
        fn(*args)
    return e.type, str(e.value)


@pytest.mark.parametrize("make", [
    lambda L: L.take_along_dim(L.tensor(X), L.tensor([[7]], dtype=L.int32), 1),
    lambda L: L.take_along_dim(L.tensor(X), L.tensor([[1.0]]), 1),
    lambda L: L.take_along_dim(L.tensor(X), L.tensor([1, 7]), 1),
    lambda L: L.take_along_dim(L.tensor(X), L.tensor([[3, -12]]), 0),
    lambda L: L.take_along_dim(L.tensor(X), L.tensor([1, 12])),
    lambda L: L.take_along_dim(L.tensor(X), L.tensor([-1, 3])),
    lambda L: L.take_along_dim(L.zeros(2, 0), L.zeros(2, 1, dtype=L.long), 1),
], ids=["int32", "float", "ndim", "broadcast", "flat_high", "flat_negative", "empty_dim"])
def test_take_along_dim_errors_as_pytorch(make):
    t_type, t_msg = _error(make, torch)
    e_type, e_msg = _error(make, tracec)
    assert issubclass(e_type, t_type) and e_msg == t_msg


def test_take_along_dim_without_dim_checks_a_compiled_calls_indices():
    x = tracec.tensor(X)
    f = COMPILED[_flat]
    np.testing.assert_array_equal(f(x, tracec.tensor([1, 2])).numpy(), [1, 2])
    with pytest.raises(RuntimeError, match=r"test_index_range_errors\.py:\d+.*index 12 is out "
                                           r"of bounds for dimension 0 with size 10"):
        f(x, tracec.tensor([1, 12]))


def test_compiled_index_errors_name_the_index():
    x = tracec.tensor(X.reshape(5, 2))
    f = COMPILED[_getitem]
    f(x, tracec.tensor([[1, 2], [0, 1]]))
    # the first out of range in row-major order, as eager and PyTorch report
    bad = [[1, 9], [-8, 3]]
    with pytest.raises(IndexError) as eager:
        _getitem(tracec, x, tracec.tensor(bad))
    with pytest.raises(IndexError) as compiled:
        f(x, tracec.tensor(bad))
    text = "index 9 is out of bounds for dimension 0 with size 5"
    assert str(eager.value) == text
    assert text in str(compiled.value) and "test_index_range_errors.py:" in str(compiled.value)
    with pytest.raises(IndexError, match="index -8 is out of bounds for dimension 0 with size 5"):
        f(x, tracec.tensor([[1, 2], [-8, 1]]))


def test_compiled_index_add_and_gather_errors_name_the_index():
    x = tracec.tensor(X.reshape(5, 2))
    f, g = COMPILED[_index_add], COMPILED[_gather]
    f(x, tracec.tensor([1, 2]), tracec.ones(2, 2))
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 0 with size 5"):
        f(x, tracec.tensor([1, 6]), tracec.ones(2, 2))
    g(x, tracec.tensor([[0], [1]]))
    with pytest.raises(RuntimeError, match="index -3 is out of bounds for dimension 1 with size 2"):
        g(x, tracec.tensor([[0], [-3]]))


def test_a_large_index_tensor_names_its_bad_index():
    # (many elements: the check's loop may run on several threads)
    n = 1 << 17
    x = tracec.arange(5.0)
    f = tracec.compile(lambda i: x[i] + 1, backend="cpu")
    idx = np.arange(n) % 5
    f(tracec.tensor(idx))
    idx[n - 3] = 11
    with pytest.raises(IndexError, match="index 11 is out of bounds for dimension 0 with size 5"):
        f(tracec.tensor(idx))


def test_two_index_checks_of_one_line_name_the_failing_index():
    x = tracec.arange(5.0)
    f = tracec.compile(lambda i, j: x[i] + x[j], backend="cpu")
    f(tracec.tensor([0, 1, 2]), tracec.tensor([1, 2, 3]))
    with pytest.raises(IndexError, match="index 8 is out of bounds for dimension 0 with size 5"):
        f(tracec.tensor([0, 1, 2]), tracec.tensor([1, 8, 3]))
    with pytest.raises(IndexError, match="index -6 is out of bounds for dimension 0 with size 5"):
        f(tracec.tensor([0, -6, 2]), tracec.tensor([1, 8, 3]))
