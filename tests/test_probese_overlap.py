"""Writes where memory overlaps, checked against torch 2.13 in the same
process (PyTorch's ``assert_no_partial_overlap`` / internal-overlap rules):

* a write whose source shares part of the written-to memory in another
  layout raises "some elements of the input tensor and the written-to
  tensor refer to a single memory location" (tracec computed out of place
  and silently gave other numbers): copy_, setitem, in-place binary /
  ternary ops, out= of elementwise ops, cat and index_select; the same
  elements in the same layout (x.add_(x), out=x) still work;
* writes PyTorch allows into an expanded tensor (masked_fill_, index_fill_,
  index_put_, with its deprecation warning; fill_diagonal_; and any write
  into a view whose own elements are distinct, x[0] = v) now write the
  shared memory (tracec raised); add_, copy_, clamp_, scatter_, out= ...
  still raise the internal-overlap error."""
import warnings

import pytest
import torch

import tracec


def _ar(L, n=6):
    return L.arange(float(n))


def _exp(L):
    return L.zeros(1, 3).expand(4, 3)


def _then(f, x):
    f(x)
    return x


CASES = {
    "copy_ shifted": lambda L: _then(lambda x: x[1:].copy_(x[:-1]), _ar(L)),
    "copy_ transposed": lambda L: _then(lambda x: x.copy_(x.t()), _ar(L, 9).reshape(3, 3)),
    "copy_ itself": lambda L: _then(lambda x: x.copy_(x), _ar(L)),
    "copy_ same view": lambda L: _then(lambda x: x[:].copy_(x), _ar(L)),
    "copy_ flipped copy": lambda L: _then(lambda x: x.copy_(x.flip(0)), _ar(L)),
    "setitem shifted": lambda L: _then(lambda x: x.__setitem__(slice(1, None), x[:-1]), _ar(L)),
    "add out shifted": lambda L: _then(lambda a: L.add(a[:-1], 1, out=a[1:]), _ar(L)),
    "add out self": lambda L: _then(lambda a: L.add(a, 1, out=a), _ar(L)),
    "exp out shifted": lambda L: _then(lambda x: L.exp(x[:-1], out=x[1:]), _ar(L)),
    "clamp out shifted": lambda L: _then(lambda x: L.clamp(x[:-1], 0, 3, out=x[1:]), _ar(L)),
    "cat out overlapping": lambda L: _then(lambda x: L.cat([x[:2], x[2:4]], out=x[1:5]),
                                           _ar(L)),
    "index_select out": lambda L: _then(
        lambda x: L.index_select(x, 0, L.tensor([0, 1]), out=x[2:4]), _ar(L)),
    "t().add_": lambda L: _then(lambda x: x.t().add_(x), _ar(L, 9).reshape(3, 3)),
    "add_ t()": lambda L: _then(lambda x: x.add_(x.t()), _ar(L, 9).reshape(3, 3)),
    "add_ shifted": lambda L: _then(lambda x: x[1:].add_(x[:-1]), _ar(L)),
    "mul_ shifted": lambda L: _then(lambda x: x[1:].mul_(x[:-1]), _ar(L)),
    "addcmul_ shifted": lambda L: _then(lambda x: x[1:].addcmul_(x[:-1], x[:-1]), _ar(L)),
    "lerp_ shifted": lambda L: _then(lambda x: x[1:].lerp_(x[:-1], 0.5), _ar(L)),
    "sub_ itself": lambda L: _then(lambda x: x.sub_(x), _ar(L)),
    "add_ other rows": lambda L: _then(lambda x: x[:2].add_(x[2:]), _ar(L, 8).reshape(4, 2)),
    # expanded tensors
    "expanded fill_": lambda L: _exp(L).fill_(2.0),
    "expanded masked_fill_": lambda L: _exp(L).masked_fill_(L.ones(4, 3, dtype=L.bool), 2.0),
    "expanded masked_fill_ one row": lambda L: _exp(L).masked_fill_(
        L.arange(12).reshape(4, 3) < 3, 2.0),
    "expanded masked_fill_ nothing": lambda L: _exp(L).masked_fill_(
        L.zeros(4, 3, dtype=L.bool), 2.0),
    "expanded index_fill_ column": lambda L: _exp(L).index_fill_(1, L.tensor([0]), 2.0),
    "expanded index_fill_ row": lambda L: _exp(L).index_fill_(0, L.tensor([0]), 2.0),
    "expanded index_put_": lambda L: _exp(L).index_put_((L.tensor([0]),), L.tensor(2.0)),
    "expanded index_put_ accumulate": lambda L: _exp(L).index_put_(
        (L.tensor([0]),), L.tensor(2.0), accumulate=True),
    "expanded x[0] = number": lambda L: _then(lambda x: x.__setitem__(0, 5.0), _exp(L)),
    "expanded x[0] = tensor": lambda L: _then(lambda x: x.__setitem__(0, L.tensor([1.0, 2, 3])),
                                              _exp(L)),
    "expanded x[0].copy_": lambda L: _exp(L)[0].copy_(L.ones(3)),
    "expanded fill_diagonal_": lambda L: _exp(L).fill_diagonal_(1.0),
    "expanded x[:, 0] = number": lambda L: _then(
        lambda x: x.__setitem__((slice(None), 0), 5.0), _exp(L)),
    "expanded add_": lambda L: _exp(L).add_(1),
    "expanded copy_": lambda L: _exp(L).copy_(L.ones(4, 3)),
    "expanded clamp_": lambda L: _exp(L).clamp_(0, 1),
    "expanded scatter_": lambda L: _exp(L).scatter_(1, L.tensor([[0]]), 2.0),
    "expanded index_add_": lambda L: _exp(L).index_add_(0, L.tensor([0]), L.ones(1, 3)),
    "expanded add out": lambda L: L.add(L.ones(4, 3), 1, out=_exp(L)),
}


def _outcome(L, fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(L)
        except RuntimeError as e:
            return "raises", str(e), []
    return "ok", r.flatten().tolist(), sorted(str(x.message) for x in w
                                               if "expanded" in str(x.message))


@pytest.mark.parametrize("name", list(CASES))
def test_overlapping_write_as_torch(name):
    assert _outcome(tracec, CASES[name]) == _outcome(torch, CASES[name])


def test_expanded_warning_names_the_callers_line():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _exp(tracec).masked_fill_(tracec.ones(4, 3, dtype=tracec.bool), 2.0)
    assert [x.filename for x in w] == [__file__]
