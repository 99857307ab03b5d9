"""``tracec.linalg`` and the top-level linear algebra (``mv addmv addr ger
inner kron tensordot trace matrix_power chain_matmul cross cdist vdot norm
dist``, and the factorizations of ``linalg_lapack``).

Invariant: products, norms and contractions are composites of primitives
(autograd and ``tracec.compile`` for free); the factorizations and inverses
(``inv det slogdet solve cholesky qr svd eigh eigvalsh pinv``) live in
``linalg_lapack`` (eager only) and are re-exported here, so ``tracec.linalg``
is PyTorch's ``torch.linalg`` namespace.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from tracec import autocast_mode, blas_dot, fused_eager
from tracec import dtypes as dt
from tracec import aten_report
from tracec import functions as F
from tracec import ops
from tracec import shape_ops as S
from tracec.contraction import integral_scalars
from tracec.functions import _named, _safe_root, promote, tensor_arg
from tracec.methods import _inplace
from tracec.out_arg import with_out
from tracec.ops.core import normalize_axis
from tracec.rearrange import flip
from tracec.linalg_lapack import (LinAlgError, _float_input, _square, cholesky,  # noqa: F401
                                  cholesky_ex, eig, eigvals,
                                  cholesky_inverse, cholesky_solve, det, eigh, eigvalsh, inv,
                                  inv_ex, inverse, logdet, lstsq, matrix_rank, pinv, pinverse,
                                  qr, slogdet, solve, solve_ex, solve_triangular, svd, svdvals,
                                  triangular_solve, lu, lu_factor, lu_factor_ex, lu_solve,
                                  _torch_lu, _torch_lu_solve, _torch_cholesky,
                                  _torch_qr, _torch_slogdet, _torch_svd)
from tracec.linalg_householder import householder_product, orgqr  # noqa: F401
from tracec.linalg_ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: F401
from tracec.tensor import Tensor, concrete
from tracec.graph import is_grad_enabled as graph_enabled

__all__ = ["norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "cholesky",
           "qr", "svd", "svdvals", "eigh", "eigvalsh", "cross", "vecdot", "matmul", "pinv",
           "matrix_power", "multi_dot", "inv_ex", "cholesky_ex", "solve_ex", "matrix_rank",
           "lstsq", "solve_triangular", "vander", "cond", "tensorinv", "tensorsolve",
           "matrix_exp", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "eig", "eigvals",
           "LinAlgError", "diagonal", "householder_product", "ldl_factor", "ldl_factor_ex",
           "ldl_solve"]

matmul = F.matmul


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.diagonal`` with the matrix dimensions last by default."""
    from tracec.shape_extra import diagonal as _diagonal
    return _diagonal(A, offset, dim1, dim2)


# --- norms ---------------------------------------------------------------------------------

def _axes(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted({normalize_axis(d, x.ndim) for d in dims}))


_TRUE = Tensor._make(np.array(True), dt.bool_)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    x = _float_input(x, "linalg.vector_norm", complex_ok=True)
    if dtype is not None:
        want = dt.to_dtype(dtype)
        if want.is_complex != x.dtype.is_complex:
            raise RuntimeError(f"linalg.vector_norm: dtype should be "
                               f"{'complex' if x.dtype.is_complex else 'real'} for "
                               f"{'complex' if x.dtype.is_complex else 'real'} inputs, but got "
                               f"{dt.scalar_type_name(want)}")
        x = ops.cast(x, want)
    if x.dtype.is_complex:      # the norm of the moduli (a real result)
        return vector_norm(F.abs(x), ord, dim, keepdim)
    if x.dtype in (dt.bfloat16, dt.float16):
        # PyTorch's kernel accumulates in float32 and rounds the norm once
        if ord == 2 and x.requires_grad and graph_enabled():
            y = vector_norm(ops.stop_gradient(x), ord, dim, keepdim)
            return F._named(_half_norm2_vjp(y, x, _axes(x, dim), keepdim),
                            "LinalgVectorNormBackward0")
        y = vector_norm(ops.cast(x, dt.float32), ord, dim, keepdim)
        return F._named(ops.cast(y, x.dtype), "LinalgVectorNormBackward0")
    axes = _axes(x, dim)
    if x.ndim == 0:       # (keepdim keeps no dim of a 0-d input)
        x, axes, keepdim = ops.reshape(x, (1,)), (0,), False
    ord = float(ord)
    # |x| where the order reads it (the 2-norm squares x itself, 0 counts it)
    ax = ops.abs_(x) if ord not in (0.0, 2.0) else None
    if ord == math.inf:
        y = ops.reduce_max(ax, axes)
    elif ord == -math.inf:
        y = ops.reduce_min(ax, axes)
    elif ord == 0:
        y = ops.reduce_sum(ops.cast(ops.ne(x.detach(), 0.0), x.dtype), axes)
        if x.requires_grad:     # a zero gradient that keeps the history (x * 0 is NaN at inf)
            y = ops.add(y, ops.reduce_sum(S.masked_fill(x, _TRUE, 0.0), axes))
    elif ord == 1:
        y = ops.reduce_sum(ax, axes)
    elif ord == 2:
        fast = _two_norm_kernels(x, axes, keepdim)
        if fast is not None:
            return fast
        y = _safe_root(ops.reduce_sum(ops.mul(x, x), axes), 2)
    elif ord < 1:
        # |x| ** (ord - 1) is infinite at 0: PyTorch's norm_backward gives the
        # zero entries gradient 0 (not NaN); their term is 0 (inf for ord < 0)
        zero = ops.eq(x.detach(), 0.0)
        t = ops.pow_(ops.where(zero, 1.0, ax), ord)
        y = _safe_root(ops.reduce_sum(ops.where(zero, 0.0 if ord > 0 else math.inf, t), axes), ord)
    else:
        y = _safe_root(ops.reduce_sum(ops.pow_(ax, ord), axes), ord)
    if keepdim:
        y = ops.reshape(y, tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    return _named(y, "LinalgVectorNormBackward0")


def _half_norm2_vjp(y, x, axes, keepdim):
    """``y``, the half 2-norm of ``x`` computed without a gradient, with
    PyTorch's backward as its half ops round it: ``(x / y) * g`` (0 where
    ``y`` is 0); the added zero term ``sum(k * (x - x))``, ``k`` that
    rounded ``x / y``, is the linear map whose transpose that is."""
    xs = ops.stop_gradient(x)
    keep = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    yk = ops.reshape(ops.stop_gradient(y), keep)
    zero = ops.eq(yk, 0.0)
    k = ops.where(zero, 0.0, F.div(xs, ops.where(zero, 1.0, yk)))
    t = ops.reduce_sum(ops.mul(k, ops.sub(x, xs)), axes) if axes else ops.mul(k, ops.sub(x, xs))
    if keepdim:
        t = ops.reshape(t, tuple(y.shape))
    return ops.add(y, ops.reshape(t, tuple(y.shape)))


def _two_norm_kernels(x, axes, keepdim):
    """The 2-norm of a large float tensor over every axis or the last one
    through native kernels (``fused_eager.nary``: one pass, no ``x * x``
    temporary; 4M float32: 1.5 ms in NumPy), else None."""
    if x.dtype not in (dt.float32, dt.float64) or not x.ndim:
        return None
    shape, nd = tuple(x._data.shape), x.ndim
    if len(axes) == nd and not keepdim:
        return fused_eager.nary((x,), ((-1,),), ("norm2", "all"), _two_norm_all,
                                "LinalgVectorNormBackward0", out_shape=())
    if axes == (nd - 1,) and shape[-1] > 1:
        return fused_eager.nary((x,), ((-1, shape[-1]),), ("norm2", "last", bool(keepdim)),
                                _TWO_NORM_LAST[bool(keepdim)], "LinalgVectorNormBackward0",
                                out_shape=shape[:-1] + ((1,) if keepdim else ()))
    return None


def _two_norm_all(t):
    return vector_norm(t)


_TWO_NORM_LAST = {kd: (lambda t, kd=kd: vector_norm(t, 2, -1, kd)) for kd in (False, True)}


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    A = _float_input(A, "linalg.matrix_norm", complex_ok=True)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if dtype is not None:
        A = ops.cast(A, dt.to_dtype(dtype))
    d0, d1 = (normalize_axis(d, A.ndim) for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        # Singular values: move the two dims last.
        perm = tuple(i for i in range(A.ndim) if i not in (d0, d1)) + (d0, d1)
        s = svdvals(ops.transpose(A, perm))
        y = F.sum(s, -1) if ord == "nuc" else (F.amax(s, -1) if ord == 2 else F.amin(s, -1))
    elif ord in (1, -1, math.inf, -math.inf):
        summed, other = (d0, d1) if ord in (1, -1) else (d1, d0)
        col = F.sum(F.abs(A), summed, keepdim=True)
        y = (F.amax if ord > 0 else F.amin)(col, other, keepdim=True)
        y = ops.reshape(y, tuple(s for i, s in enumerate(A.shape) if i not in (d0, d1)))
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if keepdim:
        shape = list(y.shape)
        for d in sorted((d0, d1)):
            shape.insert(d, 1)
        y = ops.reshape(y, tuple(shape))
    return y


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``torch.linalg.norm`` (``tracec.norm`` is ``torch.norm``, ``_torch_norm``)."""
    A = _float_input(A, "linalg.norm", complex_ok=True)
    if dim is not None and not isinstance(dim, int) and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if A.ndim == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        if A.ndim != 1:
            raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {A.ndim}D.")
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: Order {ord} not supported.")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


def _torch_norm(input, p="fro", dim=None, keepdim=False, dtype=None):  # noqa: A002
    """``torch.norm``: ``'fro'`` (2-norm over ``dim``), ``'nuc'``, or a vector p-norm."""
    x = _float_input(input, "norm", complex_ok=True)
    if p == "nuc":
        return matrix_norm(x, "nuc", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"norm: Order {p} not supported.")
    return vector_norm(x, p, dim, keepdim, dtype=dtype)


def dist(input, other, p=2):  # noqa: A002
    """``torch.dist``: the p-norm of ``input - other`` (``grad_fn``
    ``DistBackward0``, as PyTorch names it)."""
    out = vector_norm(F.sub(input, other), p)
    if out._node is not None:
        out._node._name = "DistBackward0"
    return out


# --- products --------------------------------------------------------------------------

def mv(input, vec):  # noqa: A002
    A, v = tensor_arg(input, "mv"), tensor_arg(vec, "mv")
    if A.ndim != 2 or v.ndim != 1:   # (the result's rank, then the operands')
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {A.ndim}, {v.ndim}")
    if not autocast_mode.ACTIVE:
        F.matmul_dtype_check(A, v)
    if A.shape[1] != v.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({A.shape[0]}), mat ({A.shape[0]}x"
                           f"{A.shape[1]}), vec ({v.shape[0]})")
    return F.matmul(A, v)


def _add_scaled(input, prod, beta, alpha, name=None):
    if isinstance(input, Tensor):
        beta, alpha = integral_scalars(input, prod, beta, alpha, name)
    prod = F.mul(prod, alpha) if alpha != 1 else prod
    if beta == 0:   # PyTorch ignores input then (nan and inf in it included)
        shape = np.broadcast_shapes(tuple(getattr(input, "shape", ())), tuple(prod.shape))
        return F.add(ops.broadcast_to(prod, shape), 0)
    return F.add(F.mul(input, beta) if beta != 1 else input, prod)


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    if isinstance(input, Tensor) and not input.dtype is mat.dtype is vec.dtype \
            and not autocast_mode.ACTIVE:
        n = dt.scalar_type_name
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{n(input.dtype)}, {n(mat.dtype)}, and {n(vec.dtype)}")
    return _named(_add_scaled(input, mv(mat, vec), beta, alpha), "AddmvBackward0")


def ger(input, vec2):  # noqa: A002
    return F.outer(tensor_arg(input, "ger"), tensor_arg(vec2, "ger"))


def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    return _named(_add_scaled(input, ger(vec1, vec2), beta, alpha, "addr"), "AddrBackward0")


def tensordot(a, b, dims=2, out=None):
    a, b = tensor_arg(a, "tensordot"), tensor_arg(b, "tensordot")
    if a.dtype is not b.dtype and not autocast_mode.ACTIVE:   # (no promotion, as matmul)
        raise RuntimeError("both inputs should have same dtype")
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    da = [normalize_axis(d, a.ndim) for d in da]
    db = [normalize_axis(d, b.ndim) for d in db]
    for i, j in zip(da, db):
        # PyTorch's: a size-1 dimension pairs with any size, whose side is summed first
        if a.shape[i] != b.shape[j]:
            if a.shape[i] == 1:
                b = F.sum(b, j, keepdim=True)
            elif b.shape[j] == 1:
                a = F.sum(a, i, keepdim=True)
            else:
                raise RuntimeError(f"contracted dimensions need to match, but first has size "
                                   f"{a.shape[i]} in dim {i} and second has size "
                                   f"{b.shape[j]} in dim {j}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [j for j in range(b.ndim) if j not in db]
    k = math.prod(a.shape[i] for i in da)
    a2 = ops.reshape(ops.transpose(a, tuple(fa + da)), (math.prod(a.shape[i] for i in fa), k))
    b2 = ops.reshape(ops.transpose(b, tuple(db + fb)), (k, math.prod(b.shape[j] for j in fb)))
    r = F.matmul(a2, b2)
    if not fa and not fb:
        # a full contraction: PyTorch's (1, k) @ (k, 1) mm is MKL's sdot
        # (torch.inner of vectors equals torch.dot): round as it does
        u, v = ops.reshape(a2, (k,)), ops.reshape(b2, (k,))
        if blas_dot.modelled(u, v):
            r = F._value_of(r, ops.reshape(blas_dot.sdot(u, v), (1, 1)))
    return ops.reshape(r, tuple(a.shape[i] for i in fa) + tuple(b.shape[j] for j in fb))


def inner(input, other):  # noqa: A002
    a, b = tensor_arg(input, "inner"), tensor_arg(other, "inner")
    if a.ndim == 0 or b.ndim == 0:
        return F.mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(a.shape)} and {list(b.shape)}")
    return tensordot(a, b, ([-1], [-1]))


def vdot(input, other):  # noqa: A002
    """``torch.vdot``: dot's checks (and messages), then sum(conj(input) *
    other): the first vector is conjugated."""
    a, b = tensor_arg(input, "vdot"), tensor_arg(other, "vdot")
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype.category == 3 and a.dtype is b.dtype:
        a = ops.conj(a)
    return _named(F.dot(a, b), "VdotBackward0")


def vecdot(x, y, *, dim=-1):
    return F.sum(F.mul(x, y), dim)


def kron(input, other):  # noqa: A002
    a, b = tensor_arg(input, "kron"), tensor_arg(other, "kron")
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    a2 = ops.reshape(a, tuple(v for s in sa for v in (s, 1)))
    b2 = ops.reshape(b, tuple(v for s in sb for v in (1, s)))
    return _named(ops.reshape(F.mul(a2, b2), tuple(x * y for x, y in zip(sa, sb))),
                  "KronBackward0")


def trace(input):  # noqa: A002
    x = tensor_arg(input, "trace")
    if x.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " f"{x.ndim}")
    n, m = x.shape
    k = min(n, m)
    diag = ops.slice_(ops.reshape(x, (n * m,)), (0,), (max((k - 1) * (m + 1) + 1, 0),),
                      (m + 1,))
    return _named(F.sum(diag), "TraceBackward0")


def chain_matmul(*matrices):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead, which accepts a list of two or "
                  "more tensors rather than multiple parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    return functools.reduce(F.mm, matrices) if len(matrices) > 1 else S.clone(matrices[0])


def multi_dot(tensors):
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got "
                           f"{len(tensors)}")
    # ATen's order: a 1-D first / last operand as a row / column, then the
    # cheapest parenthesization (three operands: (AB)C unless A(BC) costs
    # less; more: the matrix-chain table, first split on ties), each product
    # one matrix product, so the rounding and the FLOPs are PyTorch's
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype is not tensors[0].dtype:
            c = dt.C_TYPE_NAMES
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 "
                               f"is {c[tensors[0].dtype.name]} and tensor {i} {c[t.dtype.name]}")
    first_1d, last_1d = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if first_1d:
        tensors[0] = S.unsqueeze(tensors[0], 0)
    if last_1d:
        tensors[-1] = S.unsqueeze(tensors[-1], -1)
    dims = [t.shape[0] for t in tensors] + [tensors[-1].shape[-1]]
    out = _chain_product(tensors, _chain_order(dims), 0, len(tensors) - 1)
    if first_1d:
        out = S.squeeze(out, 0)
    if last_1d:
        out = S.squeeze(out, -1)
    return out


def _chain_order(dims) -> dict:
    """The split point of each sub-chain ``(i, j)`` of matrices ``dims[k] x
    dims[k + 1]`` that multiplies it with the fewest scalar products."""
    n = len(dims) - 1
    if n == 3:
        a, b, c, d = dims
        return {(0, 2): 0 if a * c * (b + d) > b * d * (a + c) else 1, (1, 2): 1, (0, 1): 0}
    cost = {(i, i): 0 for i in range(n)}
    split = {}
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j] = None
            for k in range(i, j):
                q = cost[i, k] + cost[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i, j] is None or q < cost[i, j]:
                    cost[i, j], split[i, j] = q, k
    return split


def _chain_product(tensors, split, i, j):
    if i == j:
        return tensors[i]
    k = split[i, j]
    return F.matmul(_chain_product(tensors, split, i, k), _chain_product(tensors, split, k + 1, j))


def _eye_like(A):
    n = A.shape[-1]
    eye = ops.cast(ops.eq(ops.iota((n, n), dt.int64, 0, like=A),
                          ops.iota((n, n), dt.int64, 1, like=A)), A.dtype)
    return ops.broadcast_to(eye, tuple(A.shape))


def matrix_power(input, n):  # noqa: A002
    A = tensor_arg(input, "matrix_power")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, "
                           f"but they are {A.shape[-2] if A.ndim > 1 else A.shape} by "
                           f"{A.shape[-1]} matrices")
    if n == 0:   # the identity, linked to A with a zero gradient (as PyTorch's)
        return ops.where(ops.full(tuple(A.shape), False, dt.bool_, like=A), A, _eye_like(A))
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else F.matmul(result, base)
        n >>= 1
        if n:
            base = F.matmul(base, base)
    return result


def cross(input, other, dim=-1):  # noqa: A002
    (a, b), _ = promote("cross", tensor_arg(input, "cross"), tensor_arg(other, "cross"))
    shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    a, b = ops.broadcast_to(a, shape), ops.broadcast_to(b, shape)
    d = normalize_axis(dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")

    def c(x, i):
        return ops.slice_(x, tuple(i if j == d else 0 for j in range(len(shape))),
                          tuple(i + 1 if j == d else s for j, s in enumerate(shape)),
                          (1,) * len(shape))
    a0, a1, a2 = (c(a, i) for i in range(3))
    b0, b1, b2 = (c(b, i) for i in range(3))
    parts = [ops.sub(ops.mul(a1, b2), ops.mul(a2, b1)), ops.sub(ops.mul(a2, b0), ops.mul(a0, b2)),
             ops.sub(ops.mul(a0, b1), ops.mul(a1, b0))]
    return _named(ops.concatenate(parts, axis=d), "LinalgCrossBackward0")


def _torch_cross(input, other, dim=None):  # noqa: A002
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use "
                      "torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release. (Triggered internally at "
                      "/__w/pytorch/pytorch/aten/src/ATen/native/Cross.cpp:63.)", UserWarning,
                      stacklevel=F.user_stacklevel())
        shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return cross(input, other, dim)


_CDIST_MODES = {"use_mm_for_euclid_dist_if_necessary": 0, "use_mm_for_euclid_dist": 1,
                "donot_use_mm_for_euclid_dist": 2}


def _euclidean_dist(a, b):
    """PyTorch's matmul form of the 2-norm cdist (its ``_euclidean_dist``,
    taken for more than 25 rows on a side or when asked): ``sqrt(max(|a|^2
    + |b|^2 - 2 a.b, 0))`` as one product of padded operands, so a
    point's distance to itself is its rounding error (not 0)."""
    an = ops.reduce_sum(F.mul(a, a), (a.ndim - 1,))
    bn = ops.reduce_sum(F.mul(b, b), (b.ndim - 1,))
    an, bn = S.unsqueeze(an, -1), S.unsqueeze(bn, -1)
    a_ = S.cat([F.mul(a, -2.0), an, ops.full(tuple(an.shape), 1.0, a.dtype, like=a)], -1)
    b_ = S.cat([b, ops.full(tuple(bn.shape), 1.0, b.dtype, like=b), bn], -1)
    r = F.matmul(a_, b_.transpose(-2, -1))
    pos = ops.gt(r, 0.0)            # clamped to 0, whose gradient is 0 (as PyTorch's backward)
    return ops.where(pos, ops.sqrt(ops.where(pos, r, 1.0)), 0.0)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """PyTorch's checks in its order: both at least 2-D, as many columns,
    both floating, ``p >= 0``; then, unless a side is empty, its kernel's:
    float32 / float64 only (``"cdist" not implemented for 'Half'``), one
    dtype."""
    mode = _CDIST_MODES.get(compute_mode)
    if mode is None:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    a, b = tensor_arg(x1, "cdist"), tensor_arg(x2, "cdist")
    for name, t in (("X1", a), ("X2", b)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{a.shape[-1]} X2: {b.shape[-1]}")
    for name, t in (("X1", a), ("X2", b)):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{dt.scalar_type_name(t.dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if a.numel() and b.numel():
        if a.dtype not in (dt.float32, dt.float64):
            raise NotImplementedError(
                f'"cdist" not implemented for \'{dt.scalar_type_name(a.dtype)}\'')
        if b.dtype is not a.dtype:
            raise RuntimeError(f"expected scalar type {dt.scalar_type_name(a.dtype)} but found "
                               f"{dt.scalar_type_name(b.dtype)}")
    elif b.dtype is not a.dtype:
        b = ops.cast(b, a.dtype)          # (an empty result has X1's dtype)
    if (p == 2 and a.numel() and b.numel() and a.shape[-1]
            and (mode == 1 or (mode == 0 and (a.shape[-2] > 25 or b.shape[-2] > 25)))):
        return _named(_euclidean_dist(a, b), "ViewBackward0")    # (PyTorch's last op)
    diff = F.sub(ops.reshape(a, tuple(a.shape[:-1]) + (1, a.shape[-1])),
                 ops.reshape(b, tuple(b.shape[:-2]) + (1,) + tuple(b.shape[-2:])))
    if p == math.inf:
        # (PyTorch's cdist backward gives every tied maximum the whole
        # gradient, sign(diff), where vector_norm's splits it)
        ad = ops.abs_(diff)
        m = ops.stop_gradient(ops.reduce_max(ad, (diff.ndim - 1,)))
        tie = ops.eq(ad, ops.reshape(m, tuple(m.shape) + (1,)))
        lift = ops.reduce_sum(ops.where(tie, ops.sub(ad, ops.stop_gradient(ad)), 0.0),
                              (diff.ndim - 1,))
        return _named(ops.add(m, lift), "CdistBackward0")
    return _named(vector_norm(diff, p, -1), "CdistBackward0")


@aten_report.reports(lambda out, input, batch1, batch2, **kw: [aten_report.AtenCall(
    "addbmm", (tuple(batch1.shape), tuple(batch2.shape)),
    (batch1.requires_grad, batch2.requires_grad))])
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    b1, b2 = tensor_arg(batch1, "addbmm"), tensor_arg(batch2, "addbmm")
    if b1.ndim != 3 or b2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if not autocast_mode.ACTIVE:
        F.addmm_dtype_check(input, b1, b2)    # (PyTorch's addbmm is addmm's kernel)
    return _named(_add_scaled(input, F.sum(F.matmul(b1, b2), 0), beta, alpha),
                  "AddbmmBackward0")


def vander(x, N=None):  # noqa: N803 - PyTorch's name
    """``torch.linalg.vander``: columns x^0, x^1, ..., x^(N-1)."""
    x = tensor_arg(x, "linalg.vander")
    if x.ndim == 0:               # PyTorch reads a 0-d x as one element
        x = ops.reshape(x, (1,))
    n = x.shape[-1] if N is None else N
    if n <= 1 and N is not None and N < 1:
        raise RuntimeError("N must be greater than 1.")
    if x.dtype is dt.bool_:
        x = ops.cast(x, dt.int64)
    cols = [ops.full(tuple(x.shape), 1, x.dtype, like=x)]
    for _ in range(1, n):
        cols.append(ops.mul(cols[-1], x))
    return S.stack(cols, -1) if n else ops.full(tuple(x.shape) + (0,), 0, x.dtype, like=x)


def _torch_vander(x, N=None, increasing=False):  # noqa: N803
    """``torch.vander``: 1-D ``x``, decreasing powers unless ``increasing``."""
    x = tensor_arg(x, "vander")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    v = vander(x, N)
    return v if increasing else flip(v, (-1,))


def cond(A, p=None):
    """Condition number: largest over smallest singular value (p None or 2,
    -2 the reverse), ``sum(s) * sum(1 / s)`` for 'nuc', else
    ``norm(A, p) * norm(inv(A), p)`` (inf for a singular A)."""
    A = _float_input(A, "linalg.cond")
    if p is None or p in (2, -2):
        s = svdvals(A)
        hi, lo = F.amax(s, -1), F.amin(s, -1)
        return F.div(lo, hi) if p == -2 else F.div(hi, lo)
    if p == "nuc":   # (PyTorch's: from the singular values, no inverse)
        s = svdvals(A)
        return F.mul(F.sum(s, -1), F.sum(F.reciprocal(s), -1))
    # PyTorch's: inv_ex, and inf where A is singular (a zero A too)
    inverse_, info = inv_ex(A)
    return F.where(F.gt(info, 0), float("inf"),
                   F.mul(matrix_norm(A, p), matrix_norm(inverse_, p)))


def tensorinv(A, ind=2):
    A = tensor_arg(A, "linalg.tensorinv")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape, in_shape = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    n = math.prod(out_shape)
    if n != math.prod(in_shape):
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           "prod(self.shape[:ind]), but got "
                           f"{math.prod(in_shape)} != {n}")
    return ops.reshape(inv(ops.reshape(A, (n, n))), in_shape + out_shape)


def tensorsolve(A, B, dims=None):
    A, B = tensor_arg(A, "linalg.tensorsolve"), tensor_arg(B, "linalg.tensorsolve")
    if dims is not None:
        dims = [normalize_axis(d, A.ndim) for d in dims]
        A = ops.transpose(A, tuple(i for i in range(A.ndim) if i not in dims) + tuple(dims))
    rest = tuple(A.shape[B.ndim:])
    n = B.numel()
    X = solve(ops.reshape(A, (n, math.prod(rest))), ops.reshape(B, (n,)))
    return ops.reshape(X, rest)


# Taylor terms of exp(A / 2^s) with ||A / 2^s||_1 <= 1/2: the 18th is < 1e-22.
_EXP_TERMS = 18


def matrix_exp(input):
    """exp(A) by scaling and squaring a Taylor series.  The scaling reads
    the norm of A (eager only); the rest is matmuls, so it differentiates."""
    input = _square(input, "linalg.matrix_exp")
    a = concrete(input, "linalg.matrix_exp() (eager only: its scaling reads the matrix norm)")
    norm1 = float(np.abs(a).sum(-2).max()) if a.size else 0.0
    s = max(0, int(math.ceil(math.log2(norm1 / 0.5)))) if norm1 > 0.5 else 0
    X = F.mul(input, 0.5 ** s) if s else input
    eye = ops.broadcast_to(ops.cast(_eye_like(input), input.dtype), tuple(input.shape))
    term, total = eye, eye
    for k in range(1, _EXP_TERMS + 1):
        term = F.mul(F.matmul(term, X), 1.0 / k)
        total = F.add(total, term)
    for _ in range(s):
        total = F.matmul(total, total)
    return _named(total, "LinalgMatrixExpBackward0")


def frobenius_norm(input, dim=(-2, -1), keepdim=False):  # noqa: A002
    return vector_norm(input, 2, dim, keepdim)


def nuclear_norm(input, dim=(-2, -1), keepdim=False):  # noqa: A002
    if isinstance(dim, bool):      # nuclear_norm(input, keepdim)
        dim, keepdim = (-2, -1), dim
    return matrix_norm(input, "nuc", dim, keepdim)


def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to
    it (PyTorch's factor maxnorm / (norm + 1e-7), differentiated as PyTorch's)."""
    x = _float_input(input, "renorm")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    d = normalize_axis(dim, x.ndim)
    others = tuple(i for i in range(x.ndim) if i != d)
    norms = vector_norm(x, p, others, keepdim=True)
    factor = F.where(F.gt(norms, maxnorm), F.div(maxnorm, F.add(norms, 1e-7)), 1.0)
    return _named(F.mul(x, factor), "RenormBackward0")


_TENSOR_METHODS = {
    "mv": mv, "addmv": addmv, "addr": addr, "ger": ger, "inner": inner, "kron": kron,
    "trace": trace, "det": det, "logdet": logdet, "slogdet": _torch_slogdet, "inverse": inv,
    "pinverse": pinverse, "matrix_power": matrix_power, "cross": _torch_cross, "vdot": vdot,
    "norm": _torch_norm, "dist": dist, "addbmm": addbmm, "matrix_exp": matrix_exp,
    "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
    "triangular_solve": triangular_solve, "lstsq": lstsq, "renorm": renorm,
    "cholesky": _torch_cholesky, "qr": _torch_qr, "svd": _torch_svd, "lu": _torch_lu,
    "lu_solve": _torch_lu_solve, "orgqr": orgqr,
}
for _name, _fn in _TENSOR_METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.addmv_ = _inplace("addmv_", addmv)
Tensor.addr_ = _inplace("addr_", addr)
Tensor.addbmm_ = _inplace("addbmm_", addbmm)
Tensor.renorm_ = _inplace("renorm_", renorm)


def _add_out_keyword():
    # torch.linalg's functions take out= (tracec/out_arg.py).
    g = globals()
    for name in ("norm vector_norm matrix_norm inv det slogdet solve cholesky qr svd svdvals "
                 "eigh eigvalsh cross vecdot matmul pinv matrix_power multi_dot inv_ex "
                 "cholesky_ex solve_ex matrix_rank solve_triangular matrix_exp ldl_factor "
                 "ldl_factor_ex ldl_solve").split():
        g[name] = with_out(g[name])


_add_out_keyword()
