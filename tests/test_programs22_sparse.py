"""COO results of sparse products and selections, checked against torch:
COO * COO is COO (both coalesced: their coalesced intersection; else the
entries of the operand with fewer, times the other's value or 0,
uncoalesced), COO @ COO (mm, matmul, torch.sparse.mm) is coalesced COO over
the structural product of the patterns, index_select keeps COO
(uncoalesced, entries grouped by output position), ``to_sparse(sparse_dim=)``
is accepted, and a negated or negatively scaled COO tensor has +0 where it
has no entry.  tracec gave dense results (a later ``.coalesce()`` or
``._values()`` raised), refused the keyword, and printed -0."""
import warnings

import pytest
import torch

import tracec


def _mk(lib, i, v, n=3):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.sparse_coo_tensor(lib.tensor(i), lib.tensor(v), (n, n))


def _operands(lib):
    S = _mk(lib, [[0, 1, 1, 2, 0], [2, 0, 2, 1, 0]], [3., 4., 5., 6., 0.])
    T = _mk(lib, [[0, 1, 2, 2], [2, 2, 0, 2]], [1., -1., 2., 0.])
    U = _mk(lib, [[2, 0], [1, 0]], [7., 8.])
    W = _mk(lib, [[0, 1, 1, 2], [0, 0, 2, 2]], [1., 2., 3., 4.])
    return S, T, U, W


def _coo(r):
    return (str(r.layout).split(".")[-1], r.is_coalesced(), r._nnz(), r._indices().tolist(),
            r._values().tolist(), r.to_dense().tolist())


CASES = {
    "mul_uncoalesced": lambda S, T, U, W: S * T,
    "mul_fewer_first": lambda S, T, U, W: U * T,
    "mul_other_order": lambda S, T, U, W: S * U,
    "mul_self": lambda S, T, U, W: S * S,
    "mul_coalesced": lambda S, T, U, W: W.coalesce() * T.coalesce(),
    "mul_self_coalesced": lambda S, T, U, W: S.coalesce() * S.coalesce(),
    "sparse_mm": lambda S, T, U, W: __import__(type(S).__module__.split(".")[0]).sparse.mm(S, T),
    "matmul": lambda S, T, U, W: S @ W,
    "mm_coalesced": lambda S, T, U, W: S.coalesce().mm(T.coalesce()),
    "index_select_rows": lambda S, T, U, W: S.index_select(0, S._indices()[0, :3]),
    "index_select_cols": lambda S, T, U, W: S.coalesce().index_select(1, S._indices()[1, :2]),
    "neg": lambda S, T, U, W: -S.coalesce(),
    "negative_scale": lambda S, T, U, W: S * -2.0,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sparse_result_matches_torch(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _coo(CASES[case](*_operands(torch)))
        got = _coo(CASES[case](*_operands(tracec)))
    assert got == want
    assert [str(v) for v in got[5][0]] == [str(v) for v in want[5][0]]    # +0.0, not -0.0


def test_sparse_mul_shape_mismatch_and_to_sparse_keyword_match_torch():
    out = []
    for lib in (torch, tracec):
        S = _operands(lib)[0]
        with pytest.raises(RuntimeError) as e:
            S * _mk(lib, [[0], [0]], [1.], n=4)
        d = lib.eye(3).to_sparse(sparse_dim=1)
        out.append((str(e.value), d.sparse_dim(), d.dense_dim(), d._indices().tolist()))
    assert out[0] == out[1]
