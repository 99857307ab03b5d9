"""Gaps the models29 programs (tests/programs/models29) found in tracec,
each checked against torch 2.13."""
import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")


def _sparse_grad_cases(lib):
    """(name, is_sparse, dense gradient) of an Embedding(sparse=True)'s
    weight after backward passes mixing its lookups with dense uses."""
    idx = lib.tensor([1, 3, 3])
    out = []

    def case(name, f):
        e = lib.nn.Embedding(6, 3, sparse=True)
        with lib.no_grad():
            e.weight.copy_(lib.arange(18.).reshape(6, 3) / 10)
        f(e)
        out.append((name, e.weight.grad.is_sparse, e.weight.grad.to_dense().numpy().copy()))

    def twice(e, a, b):
        (e(idx).sum() if a else e.weight.sum()).backward()
        (e(idx).sum() if b else e.weight.sum()).backward()

    case("lookup", lambda e: e(idx).sum().backward())
    case("two lookups", lambda e: (e(idx).sum() + e(lib.tensor([0])).sum()).backward())
    case("plus l2", lambda e: (e(idx).sum() + e.weight.pow(2).sum()).backward())
    case("sparse then dense", lambda e: twice(e, True, False))
    case("dense then sparse", lambda e: twice(e, False, True))
    case("sparse then sparse", lambda e: twice(e, True, True))
    case("bag plus dense", lambda e: (lib.nn.functional.embedding_bag(
        idx, e.weight, lib.tensor([0, 1]), sparse=True).sum() + e.weight.sum()).backward())
    return out


def test_a_dense_gradient_added_to_a_sparse_one_makes_it_dense():
    # DeepCTR-Torch's L2 term over a whole sparse=True table: PyTorch's
    # engine sums the lookup's sparse gradient with the dense one into a
    # dense gradient (and AccumulateGrad adds sparse + dense to dense).
    # tracec reported every gradient of a sparse=True weight as sparse.
    got, want = _sparse_grad_cases(tracec), _sparse_grad_cases(pt)
    for (name, gs, gv), (_, ws, wv) in zip(got, want):
        assert gs == ws, name
        np.testing.assert_allclose(gv, wv, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_sparse_adam_refuses_a_gradient_made_dense(lib):
    # ...so SparseAdam refuses to step it, with PyTorch's message; tracec
    # accepted any gradient of a sparse=True weight
    e = lib.nn.Embedding(6, 3, sparse=True)
    opt = lib.optim.SparseAdam(e.parameters(), lr=0.1)
    (e(lib.tensor([1, 3])).sum() + 1e-3 * lib.sum(lib.square(e.weight))).backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, "
                                           "please consider Adam instead"):
        opt.step()
    opt.zero_grad()
    before = e.weight.detach().clone()
    e(lib.tensor([1, 3])).sum().backward()
    opt.step()
    moved = (e.weight.detach() != before).any(1).nonzero().flatten().tolist()
    assert moved == [1, 3]
