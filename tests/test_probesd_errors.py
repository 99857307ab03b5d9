"""Errors on bad input in PyTorch 2.13's type and words, checked against
torch in the same process: Python conversions of a tensor of several
elements, torch.tensor() of ragged or non-numeric data, negative sizes,
mm of a vector, linalg.solve of mismatched shapes."""
import pytest
import torch

import tracec

CALLS = [
    lambda L: int(L.randn(2)), lambda L: float(L.randn(2)), lambda L: complex(L.randn(2)),
    lambda L: int(L.tensor([])), lambda L: [1, 2, 3][L.tensor([1, 2])],
    lambda L: L.tensor([[1, 2], [3]]), lambda L: L.tensor([[1], [2, 3]], dtype=L.float32),
    lambda L: L.tensor([[1, 2], 3]), lambda L: L.tensor([1, [2]]), lambda L: L.tensor("a"),
    lambda L: L.tensor([1, "a"]), lambda L: L.tensor(None), lambda L: L.tensor([None]),
    lambda L: L.tensor({1: 2}),
    lambda L: L.zeros(-1), lambda L: L.zeros(2, -3), lambda L: L.zeros((2, -1)),
    lambda L: L.empty(2, -5), lambda L: L.ones(-1), lambda L: L.arange(5).new_zeros(-1),
    lambda L: L.zeros(3).new_empty((-1,)), lambda L: L.eye(-1), lambda L: L.eye(2, -1),
    lambda L: L.linspace(0, 1, -1), lambda L: L.logspace(0, 1, -2), lambda L: L.randperm(-1),
    lambda L: L.mm(L.randn(3), L.randn(3, 2)), lambda L: L.mm(L.randn(2, 3), L.randn(3)),
    lambda L: L.linalg.solve(L.randn(2, 2), L.randn(3)),
    lambda L: L.linalg.solve(L.randn(2, 2), L.randn(3, 1)),
]


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value).__name__, str(e.value)


@pytest.mark.parametrize("i", range(len(CALLS)))
def test_error_as_torch(i):
    assert _error(lambda: CALLS[i](tracec)) == _error(lambda: CALLS[i](torch))


def test_conversions_of_one_element_still_work():
    for lib in (tracec, torch):
        assert int(lib.tensor([3])) == 3 and float(lib.tensor(2.5)) == 2.5
        assert [10, 20, 30][lib.tensor(1)] == 20 and complex(lib.tensor([1.0])) == 1
    assert tracec.zeros(0).shape == (0,) and tracec.linspace(0, 1, 0).shape == (0,)
