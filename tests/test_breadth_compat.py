"""Gaps found by running more public programs (tests/programs/breadth), each
checked against torch 2.13: the same call in both libraries, same values,
gradients and errors."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


def _pair(a):
    return tracec.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("name,args,kwargs", [
    ("sum", (), {"axis": 1, "keepdims": True}), ("mean", (), {"axis": 0}),
    ("cumprod", (), {"axis": 0}), ("cumsum", (), {"axis": 1}),
    ("amax", (), {"axis": 1, "keepdims": True}), ("std", (), {"axis": 0}),
    ("softmax", (), {"axis": -1}), ("log_softmax", (), {"axis": 0}),
    ("logsumexp", (), {"axis": 1, "keepdims": True}), ("argmax", (), {"axis": 1}),
    ("prod", (), {"axis": 1}), ("squeeze", (), {"axis": 0}), ("unsqueeze", (), {"axis": 2}),
])
def test_numpy_keyword_names(name, args, kwargs):
    a = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    t, r = _pair(a)
    for got, want in ((getattr(tracec, name)(t, *args, **kwargs),
                       getattr(torch, name)(r, *args, **kwargs)),
                      (getattr(t, name)(*args, **kwargs), getattr(r, name)(*args, **kwargs))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        assert tuple(got.shape) == tuple(want.shape)


def test_numpy_keyword_names_on_tuple_results_and_lists():
    a = np.random.default_rng(1).random((3, 4)).astype(np.float32)
    t, r = _pair(a)
    got, want = tracec.max(t, axis=1, keepdims=True), torch.max(r, axis=1, keepdims=True)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    assert tuple(tracec.cat([t, t], axis=1).shape) == tuple(torch.cat([r, r], axis=1).shape)
    assert tuple(tracec.stack([t, t], axis=2).shape) == tuple(torch.stack([r, r], axis=2).shape)
    with pytest.raises(TypeError):
        t.sum(dim=0, axis=0)
