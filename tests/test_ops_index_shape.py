"""Shape/view ops, in-place shape changes and strided views against
PyTorch: values, dtypes, shapes, gradients, memory sharing, errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracec
from _torch_ref import assert_same, rnd, run_both, torch

R = np.random.default_rng(1)
A = rnd(R, (2, 3, 4), "float64")
M = rnd(R, (3, 4), "float64")
V = rnd(R, (4,), "float64")
S0 = np.array(1.5)

CASES = {
    "movedim": lambda L, a: L.movedim(a, 0, -1),
    "movedim_tuple": lambda L, a: a.movedim((0, 2), (2, 0)),
    "moveaxis": lambda L, a: L.moveaxis(a, (1,), (0,)),
    "swapdims": lambda L, a: L.swapdims(a, 0, 2),
    "swapaxes": lambda L, a: L.swapaxes(a, 1, 2),
    "tile": lambda L, a: L.tile(a, (2, 1, 1)),
    "tile_short": lambda L, a: a.tile((2,)),
    "tile_long": lambda L, a: L.tile(a, (2, 1, 1, 2)),
    "tensor_split_sections": lambda L, a: L.tensor_split(a, 3, dim=2),
    "tensor_split_indices": lambda L, a: a.tensor_split((1, 3, 10), 2),
    "tensor_split_neg": lambda L, a: L.tensor_split(a, [-1], dim=1),
    "hsplit": lambda L, a: L.hsplit(a, 3),
    "hsplit_idx": lambda L, a: a.hsplit([1]),
    "vsplit": lambda L, a: L.vsplit(a, [1]),
    "dsplit": lambda L, a: L.dsplit(a, 2),
    "split_with_sizes": lambda L, a: a.split_with_sizes([1, 3], dim=-1),
    "unsafe_chunk": lambda L, a: L.unsafe_chunk(a, 2, 2),
    "unsafe_split": lambda L, a: a.unsafe_split(2, 1),
    "diagonal": lambda L, a: L.diagonal(a),
    "diagonal_args": lambda L, a: a.diagonal(1, 2, 1),
    "diagonal_neg": lambda L, a: L.diagonal(a, offset=-1, dim1=1, dim2=2),
    "diagonal_empty": lambda L, a: L.diagonal(a, 5, 1, 2),
    "diag_embed": lambda L, a: L.diag_embed(a),
    "diag_embed_args": lambda L, a: a.diag_embed(1, 0, 2),
    "diag_embed_neg": lambda L, a: L.diag_embed(a, -2, 3, 1),
    "diagflat": lambda L, a: L.diagflat(a[0], 1),
    "rot90": lambda L, a: L.rot90(a),
    "rot90_k2": lambda L, a: a.rot90(2, [1, 2]),
    "rot90_k3": lambda L, a: L.rot90(a, -1, (2, 0)),
    "rot90_k0": lambda L, a: L.rot90(a, 4),
    "unfold": lambda L, a: a.unfold(2, 2, 1),
    "unfold_step": lambda L, a: a.unfold(1, 2, 2),
    "unfold_dim0": lambda L, a: a.unfold(0, 1, 1),
    "ravel": lambda L, a: L.ravel(a.transpose(0, 1)),
    "narrow_copy": lambda L, a: L.narrow_copy(a, 2, 1, 2),
    "sum_to_size": lambda L, a: a.sum_to_size(3, 1),
    "sum_to_size_same": lambda L, a: a.sum_to_size((2, 3, 4)) * 1,
    "atleast": lambda L, a: (L.atleast_1d(a[0, 0, 0]), L.atleast_2d(a[0, 0]), L.atleast_3d(a[0]),
                             L.atleast_3d(a[0, 0]), L.atleast_3d(a[0, 0, 0]),
                             L.atleast_2d((a[0, 0, 0], a[0]))),
    "hstack": lambda L, a: L.hstack((a[0], a[1])),
    "hstack_1d": lambda L, a: L.hstack([a[0, 0], a[1, 1, :2]]),
    "vstack": lambda L, a: L.vstack((a[0, 0], a[1, 1])),
    "row_stack": lambda L, a: L.row_stack((a[0], a[1, :1])),
    "dstack": lambda L, a: L.dstack((a[0], a[1])),
    "column_stack": lambda L, a: L.column_stack((a[0, :, 0], a[1, :, :2], a[0, :, 1])),
    "meshgrid_ij": lambda L, a: L.meshgrid(a[0, 0], a[0, 1, :3], indexing="ij"),
    "meshgrid_xy": lambda L, a: L.meshgrid(a[0, 0], a[0, 1, :3], a[1, 0, :2], indexing="xy"),
    "cartesian_prod": lambda L, a: L.cartesian_prod(a[0, 0, :2], a[0, 1, :3]),
    "cartesian_prod_one": lambda L, a: L.cartesian_prod(a[0, 0]),
    "combinations": lambda L, a: L.combinations(a[0, 0]),
    "combinations_r3_rep": lambda L, a: L.combinations(a[0, 0, :3], 3, True),
    "combinations_empty": lambda L, a: L.combinations(a[0, 0, :2], 3),
    "broadcast_tensors": lambda L, a: L.broadcast_tensors(a[:, :1], a[0, 0]),
    "block_diag": lambda L, a: L.block_diag(a[0], a[1, 0], a[1, 1, 1], a[:, :, 0]),
    "select_int": lambda L, a: a.select(2, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vs_torch(name):
    run_both(CASES[name], A)


def test_block_diag_promotes():
    run_both(lambda L, a, b: L.block_diag(a, b), np.array([[1, 2]]), M, grad=False)


def test_broadcast_shapes():
    for shapes in [((2, 1), (3,)), (3, (2, 1)), ((), (4, 1, 2)), ((1,), (0, 1))]:
        assert tuple(tracec.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(RuntimeError, match="Attempting to broadcast a dimension of length 4"):
        tracec.broadcast_shapes((2, 3), (4,))


def test_meshgrid_warns_without_indexing():
    with pytest.warns(UserWarning, match="indexing argument"):
        tracec.meshgrid(tracec.arange(2), tracec.arange(3))


def test_shape_views_share_memory():
    x = tracec.zeros(3, 4)
    for v in (x.movedim(0, 1), x.swapdims(0, 1), x.diagonal(), tracec.ravel(x),
              tracec.hsplit(x, 2)[1], x.select(1, 2)):
        assert np.shares_memory(v.numpy(), x.numpy())
    d = x.diagonal()
    d.fill_(5.0)
    assert x.numpy()[1, 1] == 5.0


@pytest.mark.parametrize("op,args", [("t_", ()), ("transpose_", (0, 1)), ("swapdims_", (1, 0)),
                                     ("swapaxes_", (0, 1)), ("squeeze_", ()),
                                     ("unsqueeze_", (1,)), ("squeeze_", (1,))])
def test_inplace_shape_changes(op, args):
    base = M.reshape(3, 1, 4)[:, 0] if "squeeze" not in op else M.reshape(3, 1, 4)
    outs = []
    for L in (tracec, torch):
        x = L.tensor(base.copy(), requires_grad=True)
        y = x * 2
        r = getattr(y, op)(*args)
        assert r is y
        (y * L.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)))).sum() \
            .backward()
        outs.append((y, x.grad))
    assert_same(outs[0][0], outs[1][0])
    assert_same(outs[0][1], outs[1][1])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(tracec.zeros(2, 2, requires_grad=True), op)(*args)


def test_inplace_shape_change_of_a_view_keeps_sharing():
    x = tracec.zeros(2, 3)
    v = x[:, 1:]
    v.t_()
    v[0, 1] = 7.0
    assert v.shape == (2, 2) and x.numpy()[1, 1] == 7.0


def test_resize():
    for L in (tracec, torch):
        x = L.arange(6.0)
        assert x.resize_(2, 3) is x and tuple(x.shape) == (2, 3)
        x.resize_(2)
        np.testing.assert_array_equal(x.numpy(), [0, 1])
        y = L.zeros(4).resize_as_(L.zeros(2, 2))
        assert tuple(y.shape) == (2, 2)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            L.zeros(2, requires_grad=True).resize_(4)


def test_as_strided_shares_memory_and_matches():
    base = np.arange(12.0)
    outs = []
    for L in (tracec, torch):
        x = L.tensor(base.copy())
        v = x.as_strided((3, 3), (2, 1), 1)
        outs.append(v)
        x[3] = 100.0
        assert v.numpy()[1, 0] == 100.0  # sees the write to its base
        assert L.as_strided(x, (2, 2), (1, 1)).numpy().tolist() == [[0.0, 1.0], [1.0, 2.0]]
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        tracec.zeros(4).as_strided((3, 3), (2, 1))


def test_as_strided_gradient():
    run_both(lambda L, x: x.as_strided((3, 2), (1, 2), 1), np.arange(8.0) / 3)


def test_empty_strided():
    for L in (tracec, torch):
        e = L.empty_strided((2, 3), (1, 2))
        assert tuple(e.shape) == (2, 3) and e.stride() == (1, 2)
        f = L.zeros(1, dtype=L.float64).new_empty_strided((2, 2), (2, 1))
        assert f.dtype == L.float64 and f.stride() == (2, 1)


def test_view_dtype():
    a = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    run_both(lambda L, x: x.view(L.int32), a, grad=False)
    run_both(lambda L, x: x.view(L.float32), a)  # no gradient, as in PyTorch
    x = tracec.tensor(a)
    x.view(tracec.int32)[0, 0] = 0
    assert x.numpy()[0, 0] == 0.0


def test_unfold_and_tile_compile_match_eager():
    def f(x):
        return x.unfold(1, 3, 2).sum(-1) * 2 + x.tile((1, 2))[:, :3]
    x = tracec.randn(4, 7)
    np.testing.assert_allclose(tracec.compile(f)(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_movedim_compile_with_grad_matches_eager():
    w = tracec.randn(2, 3, 4, requires_grad=True)

    def step(x):
        loss = (tracec.movedim(w, 0, -1) * x).sum()
        loss.backward()
        return loss
    x = tracec.randn(3, 4, 2)
    want = step(x)
    g_eager = w.grad.clone()
    w.grad = None
    got = tracec.compile(step)(x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.detach().numpy(), g_eager.detach().numpy(), rtol=1e-6)


ERRORS = [
    (lambda L: L.unflatten(L.zeros(2, 4), 1, (2, 3)),
     "unflatten: Provided sizes [2, 3] don't multiply up to the size of dim 1 (4)"),
    (lambda L: L.zeros(2, 4).unflatten(1, ()), "unflatten: sizes must be non-empty"),
    (lambda L: L.movedim(L.zeros(2, 4), (0, 1), (0,)),
     "movedim: Invalid source or destination dims: source ([0, 1] dims) should contain the "
     "same number of dims as destination ([0] dims)"),
    (lambda L: L.movedim(L.zeros(2, 4), (0, 0), (0, 1)), "movedim: repeated dim in `source`"),
    (lambda L: L.rot90(L.zeros(2, 4), 1, (0, 0)), "expected rotation dims to be different"),
    (lambda L: L.rot90(L.zeros(2), 1, (0, 1)), "expected total dims >= 2"),
    (lambda L: L.hsplit(L.zeros(2, 5), 2), "torch.hsplit attempted to split along dimension 1"),
    (lambda L: L.vsplit(L.zeros(2), 2), "torch.vsplit requires a tensor with at least 2"),
    (lambda L: L.dsplit(L.zeros(2, 4), 2), "torch.dsplit requires a tensor with at least 3"),
    (lambda L: L.zeros(5).unfold(0, 6, 1), "maximum size for tensor at dimension 0 is 5"),
    (lambda L: L.zeros(5).unfold(0, 2, 0), "step is 0 but must be > 0"),
    (lambda L: L.zeros(2, 3).sum_to_size(3, 3), "size {[3, 3]} is not expandable to size {[2, 3]}."),
    (lambda L: L.tensor_split(L.zeros(5), 0), "number of sections must be larger than 0, got 0"),
    (lambda L: L.meshgrid(L.zeros(2), L.zeros(2, dtype=L.int64), indexing="ij"),
     "meshgrid expects all tensors to have the same dtype"),
    (lambda L: L.meshgrid(L.zeros(2), indexing="xx"), "indexing must be one of \"xy\" or \"ij\""),
    (lambda L: L.diagonal(L.zeros(2, 3), 0, 1, 1), "diagonal dimensions cannot be identical 1, 1"),
    (lambda L: L.block_diag(L.zeros(2, 3, 3)), "Input tensors must have 2 or fewer dimensions"),
    (lambda L: L.stack([]), "stack expects a non-empty TensorList"),
    # broadcasting names the last dimension that differs, as PyTorch's check
    (lambda L: L.ones(2, 3) + L.ones(3, 2),
     "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1"),
    (lambda L: L.ones(2, 3, 4) + L.ones(3, 5, 4),
     "The size of tensor a (3) must match the size of tensor b (5) at non-singleton dimension 1"),
    (lambda L: L.ones(7, 1, 3) * L.ones(2, 4),
     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 2"),
    (lambda L: L.nn.BatchNorm1d(4)(L.ones(2, 3)), "running_mean should contain 3 elements not 4"),
    (lambda L: L.nn.functional.batch_norm(L.ones(2, 3), L.zeros(3), L.ones(3),
                                          bias=L.ones(2)), "bias should contain 3 elements not 2"),
    (lambda L: L.hstack([]), "hstack expects a non-empty TensorList"),
    (lambda L: L.vstack(()), "vstack expects a non-empty TensorList"),
    (lambda L: L.dstack([]), "dstack expects a non-empty TensorList"),
    (lambda L: L.column_stack([]), "column_stack expects a non-empty TensorList"),
]


@pytest.mark.parametrize("make", [lambda L: L.cat([]), lambda L: L.concat(()),
                                  lambda L: L.concatenate([])])
def test_cat_of_nothing_is_a_value_error_as_in_torch(make):
    for L in (torch, tracec):
        with pytest.raises(ValueError, match=r"torch.cat\(\): expected a non-empty list of Tensors"):
            make(L)


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_match_torch(i):
    fn, msg = ERRORS[i]
    for L in (torch, tracec):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError) as e:
                fn(L)
        assert msg in str(e.value), f"{L.__name__}: {e.value}"


@pytest.mark.parametrize("key", [True, False, (True,), (Ellipsis, True), (0, True),
                                 (True, 1, slice(1, 3)), (slice(None), False, 0),
                                 (None, True, Ellipsis), (Ellipsis, 1, False)])
def test_zero_dim_bool_index_adds_an_axis_as_pytorch(key):
    """x[True] is x[None]; x[False] is that with the new axis empty."""
    torch = pytest.importorskip("torch")
    a = np.arange(24.0).reshape(2, 3, 4)
    want = torch.tensor(a)[key]
    x = tracec.tensor(a, requires_grad=True)
    got = x[key]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.numpy())
    got.sum().backward()
    tw = torch.tensor(a, requires_grad=True)
    tw[key].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tw.grad.numpy())
