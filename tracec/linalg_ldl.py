"""``torch.linalg.ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve``: the
Bunch-Kaufman LDL^T (LDL^H) factorization of a symmetric (Hermitian)
matrix and the solve with its factors, by LAPACK's ``sytrf`` / ``hetrf``
and ``sytrs`` / ``hetrs`` through ``scipy.linalg.lapack``, as PyTorch's CPU
kernels call them.

Invariant: the outputs are PyTorch's: ``LD`` the lower triangle of
LAPACK's compact factor (``uplo='L'``; the strict upper triangle zero), in
PyTorch's column-major layout (strides ``(n*n, 1, n)`` per matrix),
``pivots`` LAPACK's 1-based ``ipiv`` (negative pairs mark 2x2 blocks) as
int32, ``info`` int32 per matrix.  Only the lower triangle of ``A`` is
read (PyTorch does not check symmetry).  ``hermitian`` picks ``hetrf`` /
``hetrs`` for complex input; real input is symmetric either way.  Eager
only (the values go through LAPACK); PyTorch has no derivative for these
ops: their outputs are in the graph, and a backward through them raises
PyTorch's error.  ``out=`` is ``tracec.linalg``'s (``out_arg.with_out``).
"""
from __future__ import annotations

import numpy as np

from tracec import autograd
from tracec import dtypes as dt
from tracec.linalg_lapack import _np
from tracec.return_types import structseq
from tracec.tensor import Tensor, concrete

__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

LDLFactorResult = structseq("linalg_ldl_factor", ["LD", "pivots"])
LDLFactorExResult = structseq("linalg_ldl_factor_ex", ["LD", "pivots", "info"])

# LAPACK's precision prefix of a NumPy dtype
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


def _float_or_complex(x, name: str, what: str = "input") -> None:
    if x.dtype in (dt.float16, dt.bfloat16) and name.endswith("ldl_factor_ex"):
        raise NotImplementedError(f'"ldl_factor_kernel_cpu" not implemented for '
                                  f"'{dt.scalar_type_name(x.dtype)}'")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as {what}. "
                           f"Got {dt.scalar_type_name(x.dtype)}")


def _square(x, name: str) -> None:
    if x.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{x.shape[-2]} by {x.shape[-1]} matrices")


def _column_major(a: np.ndarray) -> np.ndarray:
    """``a`` laid out as LAPACK leaves it: each matrix column-major."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)


def _routine(kind: str, a_dtype: np.dtype, hermitian: bool):
    # SciPy is imported here, not with the module: it is no dependency of
    # tracec's (``import tracec`` must work without it), only of these ops.
    try:
        from scipy.linalg import lapack
    except ImportError:
        raise RuntimeError("torch.linalg.ldl_factor / ldl_solve need SciPy's LAPACK "
                           "(pip install scipy)") from None
    herm = hermitian and a_dtype.kind == "c"
    return getattr(lapack, _PREFIX[a_dtype] + ("he" if herm else "sy") + kind)


def _factor_np(a: np.ndarray, hermitian: bool):
    """``(LD, pivots, info)`` over a batch of square matrices."""
    n = a.shape[-1]
    flat = a.reshape((int(np.prod(a.shape[:-2])), n, n))
    ld = np.zeros(flat.shape, a.dtype)
    piv = np.zeros(flat.shape[:2], np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    if n:
        sytrf = _routine("trf", a.dtype, hermitian)
        for i, m in enumerate(flat):
            f, p, inf = sytrf(m, lower=1)
            ld[i], piv[i], info[i] = np.tril(f), p, inf
    return (_column_major(ld.reshape(a.shape)), piv.reshape(a.shape[:-1]),
            info.reshape(a.shape[:-2]))


class _NoDerivative(autograd.Function):
    """An output of an op PyTorch does not differentiate (its
    ``NotImplemented`` node): in the graph, its backward raises."""

    @staticmethod
    def forward(ctx, x, held, op):
        ctx.op = op
        return held[0]

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(f"derivative for aten::{ctx.op} is not implemented")


def _result(value: Tensor, inputs, op: str) -> Tensor:
    from tracec.graph import is_grad_enabled
    needs = [x for x in inputs if x.requires_grad]
    if not needs or not is_grad_enabled():
        return value
    return _NoDerivative.apply(needs[0], [value], op)


def ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False):
    """``(LD, pivots, info)``; ``info[i] > 0``: D's entry ``info[i]`` is
    exactly zero (the matrix is singular), raising only with
    ``check_errors``, in PyTorch's words (its internal assert)."""
    name = "torch.linalg.ldl_factor_ex"
    _float_or_complex(A, name)
    _square(A, name)
    a = concrete(A, "linalg.ldl_factor_ex() (eager only: LAPACK through SciPy)")
    ld, piv, info = _factor_np(a, hermitian)
    if check_errors and info.size and info.max() > 0:
        _raise_info(int(info.reshape(-1)[np.flatnonzero(info.reshape(-1))[0]]), name)
    return LDLFactorExResult(_result(Tensor._make(ld, A.dtype), (A,), "linalg_ldl_factor_ex"),
                             Tensor._make(piv, dt.int32), Tensor._make(info, dt.int32))


def _raise_info(code: int, name: str):
    # (PyTorch's batch_check_errors reaches its "unknown" branch for
    # sytrf's positive info: a failed internal assert, as it prints)
    raise RuntimeError('false INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/aten/src/ATen/'
                       'native/BatchLinearAlgebra.cpp":1642, please report a bug to PyTorch. '
                       f"{name}: Unknown error code: {code}.")


def ldl_factor(A, *, hermitian: bool = False):
    """``(LD, pivots)``: ``ldl_factor_ex`` raising on a singular matrix."""
    r = ldl_factor_ex(A, hermitian=hermitian)
    if r.info.numel() and int(r.info.max()) > 0:
        flat = concrete(r.info, "ldl_factor").reshape(-1)
        _raise_info(int(flat[np.flatnonzero(flat)[0]]), "torch.linalg.ldl_factor")
    return LDLFactorResult(r.LD, r.pivots)


def ldl_solve(LD, pivots, B, *, hermitian: bool = False):
    """``X`` with ``A X = B`` for ``A``'s ``ldl_factor`` ``(LD, pivots)``;
    the batch dimensions of ``LD`` and ``B`` broadcast."""
    name = "torch.linalg.ldl_solve"
    if B.ndim < 2:
        raise IndexError("Dimension out of range (expected to be in range of "
                         f"[{-max(B.ndim, 1)}, {max(B.ndim, 1) - 1}], but got -2)")
    _float_or_complex(LD, name)
    _square(LD, name)
    if pivots.dtype.is_floating_point or pivots.dtype.is_complex or pivots.dtype is dt.bool_:
        raise RuntimeError(f"{name}: Expected pivots to be integers. Got "
                           f"{dt.scalar_type_name(pivots.dtype)}")
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, "
                           f"but got pivots with shape {list(pivots.shape)} instead")
    if B.dtype is not LD.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{dt.scalar_type_name(B.dtype)} and A of type "
                           f"{dt.scalar_type_name(LD.dtype)} instead.")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"Incompatible matrix sizes for {name}: each A matrix is {n} by {n} "
                           f"but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    why = "linalg.ldl_solve() (eager only: LAPACK through SciPy)"
    ld, b = _np(LD, name), _np(B, name)
    piv = concrete(pivots, why).astype(np.int32)
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    count = int(np.prod(batch))
    ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape((count, n, n))
    piv = np.broadcast_to(piv, batch + (n,)).reshape((count, n))
    bb = np.broadcast_to(b, batch + b.shape[-2:])
    x = np.zeros((count,) + b.shape[-2:], b.dtype)
    if n and x.size:
        sytrs = _routine("trs", ld.dtype, hermitian)
        for i, (m, p, rhs) in enumerate(zip(ld, piv, bb.reshape(x.shape))):
            x[i] = sytrs(m, p, rhs, lower=1)[0]
    X = Tensor._make(_column_major(x.reshape(bb.shape)), LD.dtype)
    return _result(X, (LD, B), "linalg_ldl_solve")
