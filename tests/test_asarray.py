"""``torch.asarray`` against PyTorch 2.13: aliasing, copies, dtypes, errors."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

CASES = [([1, 2.5], {}), (3, {}), ([True, False], {}), (np.float32(2.0), {}),
         ([np.float32(1)], {}), (np.array([1, 2], dtype=np.int32), {}),
         (np.arange(3.0), {"dtype": "float32"}), ([[1, 2], [3, 4]], {"dtype": "float64"}),
         (np.arange(4.0).reshape(2, 2).T, {})]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_values_and_dtypes_as_torch(i):
    obj, kw = CASES[i]
    c = tracec.asarray(obj, **{k: getattr(tracec, v) for k, v in kw.items()})
    t = torch.asarray(obj, **{k: getattr(torch, v) for k, v in kw.items()})
    assert c.dtype.name == str(t.dtype).replace("torch.", "")
    np.testing.assert_array_equal(c.numpy(), t.numpy())


def test_aliases_and_copies_as_torch():
    a = np.arange(3.0)
    c, t = tracec.asarray(a), torch.asarray(a)
    a[0] = 9.0
    assert c[0].item() == t[0].item() == 9.0          # both share the array's memory
    x = tracec.ones(2)
    assert tracec.asarray(x) is x and tracec.asarray(x, copy=True) is not x
    assert tracec.asarray(x, dtype=tracec.float64).dtype is tracec.float64
    y = tracec.asarray(x, requires_grad=True)
    assert y is x and x.requires_grad
    b = np.zeros(2)
    d = tracec.asarray(b, copy=True)
    b[0] = 1.0
    assert d[0].item() == 0.0


@pytest.mark.parametrize("make", [
    lambda lib: lib.asarray(lib.ones(2), dtype=lib.float64, copy=False),
    lambda lib: lib.asarray(np.arange(3.0), dtype=lib.float32, copy=False),
    lambda lib: lib.asarray([1, 2], copy=False),
])
def test_copy_false_errors_as_torch(make):
    with pytest.raises(ValueError) as c:
        make(tracec)
    with pytest.raises(ValueError) as t:
        make(torch)
    assert str(c.value) == str(t.value)


def test_complex_linalg_says_unsupported():
    # inv / solve / eigh take complex inputs (tests/test_models18_gaps.py); det does not yet
    a = tracec.eye(2, dtype=tracec.complex64)
    with pytest.raises(NotImplementedError, match="linalg.det: complex inputs"):
        tracec.linalg.det(a)
