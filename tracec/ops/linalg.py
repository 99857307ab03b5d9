"""``matmul``: batched matrix product ``[..., m, k] @ [..., k, n]`` with
broadcast batch dimensions.  Rank-1 operands are handled by the front end
(reshape in, reshape out), so the primitive always sees rank >= 2."""
from __future__ import annotations

import math

import numpy as np

from tracec.ops.core import Aval, Primitive, ShapeError, broadcast_shapes
from tracec.ops import elementwise as ew, movement


def _matmul_shape(a, b):
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul: operands must have rank >= 2, got {tuple(a)} and {tuple(b)}")
    if a[-1] != b[-2]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied "
                         f"({'x'.join(map(str, a))} and {'x'.join(map(str, b))})")
    try:
        batch = broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    except ShapeError:
        raise ShapeError(f"matmul: batch dimensions of {tuple(a)} and {tuple(b)} "
                         f"cannot be broadcast") from None
    return batch + (a[-2], b[-1])


def _matmul_dtype(a, b):
    if a is not b:
        raise ShapeError(f"expected both matmul operands to have the same dtype, got {a} and {b}")
    return a


def _swap(x):
    n = len(x.shape)
    return movement.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_vjp(g, a, b, out, column_major=(False, False)):
    # An unsaved partner (an Aval) means that cotangent is not wanted: the
    # tape keeps ``b`` only if ``a`` needs a gradient, and ``a`` likewise.
    # Complex operands (eager only): the cotangents read the conjugates.
    # ``column_major`` (set by the eager front end only; values do not
    # depend on it): which 2-D operand was column-major (a transpose, as
    # Linear's ``weight.t()``); its cotangent is then made column-major too,
    # as PyTorch's mm backward does (``(g.t() @ a).t()``), so the gradient
    # that a transpose hands back to a contiguous weight is contiguous
    # (DARTS's ``torch.cat([g.view(-1) for g in autograd.grad(...)])``).
    ga = None
    if not isinstance(b, Aval):
        if column_major[0]:
            ga = _swap(matmul(ew.conj(b), _swap(g)))
        else:
            ga = ew.sum_to(matmul(g, _swap(ew.conj(b))), tuple(a.shape))
    gb = None
    if not isinstance(a, Aval):
        a = ew.conj(a)
        if column_major[1]:
            rows = math.prod(a.shape[:-1])
            gb = _swap(matmul(_swap(movement.reshape(g, (rows, g.shape[-1]))),
                              movement.reshape(a, (rows, a.shape[-1]))))
        elif len(a.shape) > 2 and math.prod(b.shape[:-2]) == 1:
            # One B for the whole batch of A (a Linear on a [T, B, F] input):
            # its gradient is one product over every row of the batch, not a
            # batch of products summed afterwards (which would materialize
            # one [K, N] per batch).
            rows = math.prod(a.shape[:-1])
            a2 = movement.reshape(a, (rows, a.shape[-1]))
            g2 = movement.reshape(g, (rows, g.shape[-1]))
            gb = movement.reshape(matmul(_swap(a2), g2), tuple(b.shape))
        else:
            gb = ew.sum_to(matmul(_swap(a), g), tuple(b.shape))
    return ga, gb


def _matmul_impl(a, b):
    if a.dtype.char == "e" and b.dtype.char == "e":    # (both float16; cheaper than ==)
        # float16: NumPy has no BLAS for it (a loop ~100x slower than the
        # float32 GEMM); PyTorch's CPU kernels accumulate in float32 and
        # round the result once, as the float32 GEMM rounded to float16 does
        return _matmul_impl(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    if a.ndim > 2 and (b.ndim == 2 or all(d == 1 for d in b.shape[:-2])):
        # One B for the whole batch of A (a Linear on [T, B, F]): one GEMM
        # over every row of A.  NumPy's batched loop calls a GEMM per batch
        # element, each reading all of B (2.7x slower for the word-language
        # model's decoder); the values are the same (each row's products).
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = np.matmul(a.reshape(math.prod(a.shape[:-1]), k), b.reshape(k, n))
        return out.reshape(batch + (m, n))
    return np.matmul(a, b)


matmul_p = Primitive("matmul", kind="matmul", impl=ew._quiet_impl(_matmul_impl),
                     shape_rule=_matmul_shape, dtype_rule=_matmul_dtype, vjp=_matmul_vjp,
                     save=ew.save_partners)


def matmul(a, b): return matmul_p.bind(a, b)
