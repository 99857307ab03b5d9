"""The factorizations and inverses of ``tracec.linalg``: ``inv det slogdet
logdet solve cholesky qr svd svdvals eigh eigvalsh pinv pinverse``.

Invariant: each runs NumPy's LAPACK on its operands' values (``concrete``):
eager only, a ``TraceError`` naming the op inside ``tracec.compile``, but
for ``inv solve cholesky cholesky_ex solve_triangular cholesky_solve det
slogdet logdet`` (and their aliases, ``inv_ex solve_ex`` with
``check_errors=True``) on real matrices up to ``linalg_gauss_jordan.MAX_N``:
a traced call records them in primitives (``linalg_gauss_jordan``,
``linalg_substitution``, ``linalg_det``).  Each
is a custom ``autograd.Function``: ``inv det slogdet/logdet solve cholesky
eigvalsh`` have their standard VJPs, ``eigh svd svdvals qr pinv pinverse
lstsq`` PyTorch's (``linalg_grads``), computed in NumPy; a ``create_graph``
backward through ``inv det slogdet/logdet solve cholesky solve_triangular
eigh eigvalsh svdvals pinv lstsq lu_factor qr`` (a square or tall reduced
``qr``) runs their VJPs in tensor ops (a gradient with a graph: second
derivatives), through the others (a wide ``qr``, ``svd``'s singular
vectors) gives a gradient without a graph.  LAPACK's
failures become PyTorch's messages (singular matrix, not positive-definite).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from tracec import autograd
from tracec import dtypes as dt
from tracec import graph as _graph
from tracec.creation import eye as _eye
from tracec import functions as F
from tracec import ops
from tracec import shape_ops as S
from tracec._C import _LinAlgError
from tracec.functions import promote, tensor_arg
from tracec.ops.core import broadcast_shapes
from tracec import lapack_lu, linalg_det, linalg_gauss_jordan, linalg_substitution
from tracec.lapack_lu import getrf as _lu_np
from tracec.linalg_grads import eigh_vjp, pinv_vjp, qr_vjp, svd_vjp
from tracec.tensor import RECORDERS, Tensor, concrete
from tracec.return_types import structseq

__all__ = ["LinAlgError", "eig", "eigvals", "inv", "inverse", "det", "slogdet", "logdet", "solve", "cholesky", "qr", "svd",
           "svdvals", "eigh", "eigvalsh", "pinv", "pinverse", "inv_ex", "cholesky_ex",
           "solve_ex", "matrix_rank", "lstsq", "solve_triangular", "triangular_solve",
           "cholesky_solve", "cholesky_inverse", "lu_factor", "lu_factor_ex", "lu", "lu_unpack",
           "lu_solve"]

# (torch.linalg's functions return ``torch.return_types.linalg_<name>``;
# torch.slogdet / torch.qr / torch.svd their own ``slogdet`` / ``qr`` / ``svd``)
SlogdetResult = structseq("linalg_slogdet", ["sign", "logabsdet"])
_TorchSlogdet = structseq("slogdet", ["sign", "logabsdet"])
_TorchQR = structseq("qr", ["Q", "R"])
QRResult = structseq("linalg_qr", ["Q", "R"])
SVDResult = structseq("linalg_svd", ["U", "S", "Vh"])
EighResult = structseq("linalg_eigh", ["eigenvalues", "eigenvectors"])
EigResult = structseq("linalg_eig", ["eigenvalues", "eigenvectors"])
InvExResult = structseq("linalg_inv_ex", ["inverse", "info"])
CholeskyExResult = structseq("linalg_cholesky_ex", ["L", "info"])
SolveExResult = structseq("linalg_solve_ex", ["result", "info"])
LstsqResult = structseq("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
TriangularSolveResult = structseq("triangular_solve", ["solution", "cloned_coefficient"])
LUFactorResult = structseq("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = structseq("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = structseq("linalg_lu", ["P", "L", "U"])
LUUnpackResult = structseq("lu_unpack", ["P", "L", "U"])


# torch.linalg.LinAlgError is torch._C._LinAlgError
LinAlgError = _LinAlgError


def _float_input(x, name, complex_ok=False):
    x = tensor_arg(x, name)
    if x.dtype.is_complex and not complex_ok:
        # PyTorch accepts these; tracec's decompositions and their gradients
        # are real only: say so instead of PyTorch's message for integers
        raise NotImplementedError(f"{name}: complex inputs ({x.dtype.name}) are not supported "
                                  "by tracec's linear algebra yet; real float32/float64 are")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {_TORCH.get(x.dtype.name, x.dtype.name)}")
    return x


_TORCH = {"int64": "Long", "int32": "Int", "bool": "Bool"}


def _matrix(x, name, complex_ok=False):
    """``x`` checked as a (batch of) matrices: float, at least 2-D."""
    x = _float_input(x, name, complex_ok)
    if x.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    return x


def _square(x, name, complex_ok=False):
    x = _matrix(x, name, complex_ok)
    if x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{x.shape[-2]} by {x.shape[-1]} matrices")
    return x


# --- factorizations (eager, NumPy) ---------------------------------------------------------------

def _traced(A) -> bool:
    """Whether a call on ``A`` records its traced form (``linalg_gauss_jordan``,
    ``linalg_substitution``): while tracing, real float32/float64 matrices
    up to ``MAX_N`` (the loop is unrolled into the trace)."""
    # (a symbolic n is specialized, int(): the loop unrolls a known number of steps)
    return bool(RECORDERS) and A.dtype in (dt.float32, dt.float64) and \
        int(A.shape[-1]) <= linalg_gauss_jordan.MAX_N


def _np(x, name):
    why = f"{name}() (eager only: LAPACK through NumPy)"
    if RECORDERS and x.ndim >= 2 and isinstance(x.shape[-1], int) and \
            x.shape[-1] > linalg_gauss_jordan.MAX_N:
        why = (f"{name}() (eager only: LAPACK through NumPy for matrices larger than "
               f"{linalg_gauss_jordan.MAX_N}x{linalg_gauss_jordan.MAX_N}, here "
               f"{x.shape[-2]}x{x.shape[-1]}: the traced elimination is unrolled, a step per "
               "column)")
    a = concrete(x, why)
    return a.astype(np.float32) if x.dtype in (dt.float16, dt.bfloat16) else a


def _wrap(a, like):
    """``a`` as a tensor of ``like``'s dtype; the real part's dtype for a
    real result of a complex input (a Hermitian matrix's eigenvalues)."""
    d = like.dtype
    if d.is_complex and np.asarray(a).dtype.kind != "c":
        d = dt.real_of(d)
    return Tensor._make(np.array(a, dtype=d.np, order="C"), d)


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _mH(a):
    """The conjugate transpose (the transpose of a real array): PyTorch's
    complex VJPs are its real ones with mH for mT."""
    return np.conj(np.swapaxes(a, -1, -2)) if np.iscomplexobj(a) else np.swapaxes(a, -1, -2)


def _sum_to(g, shape):
    """A NumPy gradient summed over broadcast batch dimensions."""
    while g.ndim > len(shape):
        g = g.sum(0)
    for i, s in enumerate(shape):
        if s == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdims=True)
    return g


def _function(name, forward, backward=None, graph_backward=None):
    """A differentiable eager op: ``forward(ctx, *arrays) -> array`` in NumPy,
    ``backward(ctx, g) -> tuple of arrays (or None)`` its VJP in NumPy.
    ``graph_backward(g, *inputs) -> tuple of tensors, or None`` (the
    inputs as given, real floating): the same VJP in differentiable tensor
    ops, run by a ``create_graph`` backward, so the gradient has a graph
    (a second derivative through the op); None where it does not apply
    (the NumPy VJP then runs, its result without a graph)."""
    def fwd(ctx, *xs):
        ctx.like = xs[0]
        if graph_backward is not None:
            ctx.inputs = xs
        return _wrap(forward(ctx, *[_np(x, name) if isinstance(x, Tensor) else x for x in xs]),
                     xs[0])

    def bwd(ctx, g):
        if backward is None:
            raise RuntimeError(f"{name}: tracec does not implement the derivative of this "
                               "output")
        if graph_backward is not None and _graph.is_grad_enabled() and \
                ctx.like.dtype.is_floating_point and g.dtype.is_floating_point:
            res = graph_backward(g, *ctx.inputs)
            if res is not None:
                return res
        grads = backward(ctx, _np(g, name))
        return tuple(None if r is None else _wrap(r, ctx.like) for r in grads)
    cls = type(name, (autograd.Function,), {"forward": staticmethod(fwd),
                                            "backward": staticmethod(bwd)})
    return cls.apply


def _lapack(name, msg):
    def wrap(f):
        @functools.wraps(f)
        def g(*a, **k):
            try:
                return f(*a, **k)
            except np.linalg.LinAlgError:
                raise LinAlgError(msg) from None
        return g
    return wrap


def _singular_error(a, name):
    """PyTorch's error for a singular ``a`` (NumPy raised): the first batch
    element whose LU has a zero pivot, and that pivot's 1-based index."""
    _, info = lapack_lu.lu_inverse(a)
    flat = info.reshape(-1)
    k = int(np.flatnonzero(flat)[0]) if flat.size else 0
    where = f"(Batch element {k}): " if info.ndim else ""
    return LinAlgError(f"{name}: {where}The diagonal element {int(flat[k])} is zero, the "
                       "inversion could not be completed because the input matrix is singular.")


def _inv_fwd(ctx, a):
    try:
        ctx.inv = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error(a, "linalg.inv") from None
    return ctx.inv


def _inv_graph_bwd(g, a):
    y = inv(a).mT
    return (-(y @ g @ y),)


_inv = _function("LinalgInvEx", _inv_fwd,
                 lambda ctx, g: (-_mH(ctx.inv) @ g @ _mH(ctx.inv),), _inv_graph_bwd)


def inv(input):
    A = _square(input, "linalg.inv", complex_ok=True)
    if _traced(A):
        # (a traced call reads no values: Gauss-Jordan in primitives)
        return F._named(linalg_gauss_jordan.inverse(A, "linalg.inv"), "LinalgInvExBackward0")
    return _inv(A)


inverse = inv


def _det_fwd(ctx, a):
    ctx.a = a
    ctx.det = np.linalg.det(a)
    return ctx.det


def _det_bwd(ctx, g):
    """``g det A^-T``, as PyTorch's LU solve of ``A^H X = g det I`` gives it:
    where det is 0 that right-hand side is zero and so is the gradient (a
    singular matrix has no inverse to raise on)."""
    d = g * ctx.det
    a = ctx.a
    singular = ctx.det == 0
    if np.any(singular):
        eye = np.eye(a.shape[-1], dtype=a.dtype)
        a = np.where(singular[..., None, None], eye, a)   # any invertible stand-in
    return (d[..., None, None] * _mT(np.linalg.inv(a)),)


def _det_graph_bwd(g, a):
    d = det(a)
    if bool((d == 0).any()):
        return None
    return ((g * d)[..., None, None] * inv(a).mT,)


_det = _function("LinalgDet", _det_fwd, _det_bwd, _det_graph_bwd)


def det(input):
    A = _square(input, "linalg.det")
    if _traced(A):
        return F._named(linalg_det.det(A, "linalg.det", A.requires_grad and _graph.is_grad_enabled()),
                        "LinalgDetBackward0")
    return _det(A)


def _logabsdet_fwd(ctx, a):
    ctx.a = a
    return np.linalg.slogdet(a)[1]


def _logabsdet_bwd(ctx, g):
    """``g A^-H``; for a singular A PyTorch's LU solve of ``A^H X = I``
    finishes with the infinities and NaNs of its zero pivot, as here."""
    try:
        inv_h = _mT(np.linalg.inv(ctx.a))
    except np.linalg.LinAlgError:
        inv_h = lapack_lu.lu_inverse(_mH(ctx.a))[0]
    with np.errstate(invalid="ignore"):
        return (g[..., None, None] * inv_h,)


def _logabsdet_graph_bwd(g, a):
    if bool((det(a.detach()) == 0).any()):
        return None
    return (g[..., None, None] * inv(a).mT,)


_logabsdet = _function("LinalgSlogdet", _logabsdet_fwd, _logabsdet_bwd, _logabsdet_graph_bwd)


def slogdet(input):
    input = _square(input, "linalg.slogdet")
    if _traced(input):
        sign, lad = linalg_det.slogdet(input, input.requires_grad and _graph.is_grad_enabled())
        lad = F._named(lad, "LinalgSlogdetBackward0")
        if lad.requires_grad:
            sign = ops.where(ops.full(tuple(sign.shape), False, dt.bool_, like=sign), lad, sign)
        return SlogdetResult(sign, lad)
    sign = _wrap(np.linalg.slogdet(_np(input, "linalg.slogdet"))[0], input)
    lad = _logabsdet(input)
    if lad.requires_grad:   # PyTorch's sign is an output of the node too (zero gradient)
        sign = ops.where(ops.full(tuple(sign.shape), False, dt.bool_, like=sign), lad, sign)
    return SlogdetResult(sign, lad)


def logdet(input):  # noqa: A002
    sign, lad = slogdet(input)
    # (a singular matrix's logabsdet is -inf already, with its own gradient)
    return F.where(F.lt(sign, 0), float("nan"), lad)


def _solve_fwd(ctx, a, b):
    ctx.a = a
    try:
        ctx.x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        info = lapack_lu.getrf(a)[2].reshape(-1)
        where = f"(Batch element {int(np.flatnonzero(info)[0])}): " if a.ndim > 2 else ""
        raise LinAlgError(f"torch.linalg.solve: {where}The solver failed because the input "
                          "matrix is singular.") from None
    return ctx.x


def _solve_bwd(ctx, g):
    gb = np.linalg.solve(_mH(ctx.a), g)
    ga = -gb @ _mH(ctx.x)
    return (_sum_to(ga, ctx.a.shape), gb)


def _sum_to_tensor(g, shape):
    """``_sum_to`` in tensor ops."""
    while g.ndim > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdim=True)
    return g


def _solve_graph_bwd(g, a, b):
    gb = _solve(a.mT, g)
    ga = -(gb @ _solve(a, b).mT)
    return (_sum_to_tensor(ga, tuple(a.shape)), _sum_to_tensor(gb, tuple(b.shape)))


_solve = _function("LinalgSolveEx", _solve_fwd, _solve_bwd, _solve_graph_bwd)


def solve(A, B, *, left=True):
    """PyTorch's ``linalg.solve``: ``B`` is a (batch of) vector(s) when it is
    1-D or ``A``'s shape without its last dimension (a column then, whose
    batch dimensions broadcast with ``A``'s; with ``left=False`` a column
    fits only a 1x1 ``A``, as in PyTorch), else a (batch of) matrices."""
    A = _square(A, "linalg.solve", complex_ok=True)
    (A, B), _ = promote("linalg.solve", A, _float_input(B, "linalg.solve", complex_ok=True))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = ops.reshape(B, tuple(B.shape) + (1,)) if vector else B
    if Bm.ndim < 2:
        raise RuntimeError("linalg.solve: The input tensor B must have at least 2 dimensions.")
    n, rows, cols = A.shape[-1], Bm.shape[-2], Bm.shape[-1]
    if (rows if left else cols) != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {rows}x{cols})")
    if left:
        X = _solve_matrix(A, Bm)
    else:       # X A = B  <=>  A^T X^T = B^T
        X = F._named(S.mT(_solve_matrix(S.mT(A), S.mT(Bm))), "LinalgSolveExBackward0")
    if vector:  # (a batch of A broadcasts a vector B: the solution has A's batch)
        return F._named(ops.reshape(X, tuple(X.shape[:-1])), "LinalgSolveExBackward0")
    return X


_SOLVE_SINGULAR = ("torch.linalg.solve: {where}The solver failed because the input matrix "
                   "is singular.")


def _solve_matrix(A, B):
    if _traced(A):
        where = "(Batch element {index}): " if A.ndim > 2 or B.ndim > 2 else ""
        X = linalg_gauss_jordan.solve(A, B, _SOLVE_SINGULAR.replace("{where}", where))
        return F._named(X, "LinalgSolveExBackward0")
    return _solve(A, B)


@_lapack("cholesky", "linalg.cholesky: The factorization could not be completed because the "
         "input is not positive-definite.")
def _cholesky_fwd(ctx, a):
    ctx.L = np.linalg.cholesky(a)
    return ctx.L


def _cholesky_bwd(ctx, g):
    L = ctx.L
    phi = np.tril(_mT(L) @ g)
    phi[..., np.arange(L.shape[-1]), np.arange(L.shape[-1])] *= 0.5
    Linv = np.linalg.inv(L)
    s = _mT(Linv) @ phi @ Linv
    return (0.5 * (s + _mT(s)),)


def _cholesky_graph_bwd(g, a):
    L = _cholesky(a)
    phi = (L.mT @ g).tril()
    phi = phi - 0.5 * phi.diagonal(0, -2, -1).diag_embed()
    linv = inv(L)
    s = linv.mT @ phi @ linv
    return (0.5 * (s + s.mT),)


_cholesky = _function("LinalgCholeskyEx", _cholesky_fwd, _cholesky_bwd, _cholesky_graph_bwd)


def cholesky(A, *, upper=False):
    return _named_cholesky(A, upper, "linalg.cholesky")


def _named_cholesky(A, upper, name):
    A = _square(A, name)
    if _traced(A):
        grad_fn = "CholeskyBackward0" if name == "cholesky" else "LinalgCholeskyExBackward0"
        L = linalg_substitution.cholesky(A, name)
        return F._named(S.mT(L) if upper else L, grad_fn)
    try:
        L = _cholesky(A)
    except LinAlgError:
        raise LinAlgError(_not_pd_message(name, A)) from None
    return S.mT(L) if upper else L


def _not_pd_message(name: str, A) -> str:
    """PyTorch's error for a matrix that is not positive-definite: the first
    failing batch element (when batched) and its first non-positive
    leading minor (LAPACK's info)."""
    a = _np(A, name)
    flat = a.reshape((-1,) + a.shape[-2:])
    for index, m in enumerate(flat):
        order = _partial_cholesky(m)[1]
        if order:
            return _pd_message(name, index if a.ndim > 2 else None, order)
    # NumPy refused a matrix the unblocked factorization accepts (rounding
    # at the last pivot): LAPACK's blocked order of operations differs
    return (f"{name}: The factorization could not be completed because the input is not "
            "positive-definite.")


_WARNED_ONCE: set = set()


def _warn_once(message):
    """PyTorch's TORCH_WARN_ONCE: once per process, naming the caller's line."""
    if message not in _WARNED_ONCE:
        _WARNED_ONCE.add(message)
        warnings.warn(message, UserWarning, stacklevel=F.user_stacklevel())


def _torch_cholesky(input, upper=False):  # noqa: A002
    _warn_once("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be "
               "removed in a future PyTorch release.")
    return _named_cholesky(input, upper, "cholesky")


def _grad_np(g):
    if g is None:
        return None
    if g.dtype.is_complex:
        return g._data.astype(np.complex128 if g.dtype is dt.complex128 else np.complex64,
                              copy=False)
    return g._data.astype(np.float64 if g.dtype is dt.float64 else np.float32, copy=False)


def _factorization(name, forward, backward, graph_backward=None):
    """A multi-output differentiable eager op: ``forward(ctx, a, *params)``
    returns NumPy arrays, ``backward(ctx, *grads)`` (None for an output no
    gradient reached) the input's NumPy gradient; ``graph_backward(grads,
    a, *params)`` as ``_function``'s (the input's gradient tensor, or
    None)."""
    def fwd(ctx, A, *params):
        ctx.like = A
        if graph_backward is not None:
            ctx.inputs = (A,) + params
        ctx.set_materialize_grads(False)
        return tuple(_wrap(o, A) for o in forward(ctx, _np(A, name), *params))

    def bwd(ctx, *grads):
        if all(g is None for g in grads):
            return (None,) * (1 + ctx.nparams)
        if graph_backward is not None and _graph.is_grad_enabled() and \
                ctx.like.dtype.is_floating_point:
            ga = graph_backward(grads, *ctx.inputs)
            if ga is not None:
                return (ga,) + (None,) * ctx.nparams
        return (_wrap(backward(ctx, *[_grad_np(g) for g in grads]), ctx.like),) + \
            (None,) * ctx.nparams
    cls = type(name, (autograd.Function,), {"forward": staticmethod(fwd),
                                            "backward": staticmethod(bwd)})

    def apply(A, *params):
        return cls.apply(A, *params)
    return apply


def _qr_fwd(ctx, a, mode):
    ctx.nparams, ctx.mode = 1, mode
    ctx.q, ctx.r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    return ctx.q, ctx.r


def _qr_bwd(ctx, gq, gr):
    m, n = ctx.like.shape[-2], ctx.like.shape[-1]
    if ctx.mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if ctx.mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    return qr_vjp(ctx.q, ctx.r, gq, gr)


def _qr_graph_bwd(grads, a, mode):
    """``qr_vjp``'s square-or-tall formula in tensor ops
    (``gA = (gQ + Q copyltu(M)) R^-T``, ``M = R gR^T - gQ^T Q``); None
    for a wide matrix or the modes ``_qr_bwd`` refuses."""
    m, n = a.shape[-2], a.shape[-1]
    if m < n or mode != "reduced":
        return None
    q, r = _qr(a, mode)
    gq, gr = grads
    gq = F.mul(q, 0.0) if gq is None else gq
    gr = F.mul(r, 0.0) if gr is None else gr
    mm = r @ gr.mT - gq.mT @ q
    low = mm.tril(-1)
    b = gq + q @ (low + low.mT + mm.diagonal(0, -2, -1).diag_embed())
    return solve(r, b.mT).mT


_qr = _factorization("LinalgQrBackward0", _qr_fwd, _qr_bwd, _qr_graph_bwd)


def qr(A, mode="reduced"):
    A = _matrix(A, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    Q, R = _qr(A, mode)
    if mode == "r":
        Q = Tensor._make(np.zeros((0,), A.dtype.np), A.dtype)
    return QRResult(Q, R)


def _torch_qr(input, some=True):  # noqa: A002
    """``torch.qr`` (deprecated: PyTorch's warning, once per process)."""
    _warn_torch_qr()
    return _TorchQR(*qr(input, "reduced" if some else "complete"))


@functools.cache
def _warn_torch_qr() -> None:
    import warnings
    warnings.warn("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a "
                  "future PyTorch release.\nThe boolean parameter 'some' has been replaced "
                  "with a string parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be "
                  "replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else 'complete')",
                  UserWarning, stacklevel=3)


def _torch_slogdet(input):  # noqa: A002
    """``torch.slogdet`` / ``Tensor.slogdet``."""
    return _TorchSlogdet(*slogdet(input))


def _svd_fwd(ctx, a, full_matrices):
    ctx.nparams = 1
    u, s_, vh = _svd_np(a, full_matrices=full_matrices)
    k = s_.shape[-1]
    ctx.u, ctx.s, ctx.vh = u[..., :, :k], s_, vh[..., :k, :]
    return u, s_, vh


def _svd_bwd(ctx, gu, gs, gvh):
    # full_matrices: only the first k singular vectors carry gradient (PyTorch's narrowing)
    k = ctx.s.shape[-1]
    gu = None if gu is None else gu[..., :, :k]
    gvh = None if gvh is None else gvh[..., :k, :]
    return svd_vjp(ctx.u, ctx.s, ctx.vh, gu, gs, gvh)


def _svd_graph_bwd(grads, a, full_matrices):
    """The singular values' part alone (``svdvals``, a loss of ``S``)."""
    gu, gs, gvh = grads
    if gu is not None or gvh is not None:
        return None
    u, s_, vh = _svd(a, False)
    return (u * gs[..., None, :]) @ vh


_svd = _factorization("LinalgSvdBackward0", _svd_fwd, _svd_bwd, _svd_graph_bwd)


def _svd_input(A, name):
    """A real or complex (batch of) matrices (``svd_vjp`` differentiates
    both)."""
    return _matrix(A, name, complex_ok=True)


def svd(A, full_matrices=True, *, driver=None):
    """``(U, S, Vh)``: a complex input's ``U`` / ``Vh`` are complex, ``S``
    real (LAPACK's gesdd through NumPy, as PyTorch's on CPU)."""
    A = _svd_input(A, "linalg.svd")
    return SVDResult(*_svd(A, full_matrices))


def svdvals(A, *, driver=None):
    A = _svd_input(A, "linalg.svdvals")
    return _svd(A, False)[1]


_SVD_TORCH = structseq("svd", ["U", "S", "V"])


def _torch_svd(input, some=True, compute_uv=True):  # noqa: A002
    """``torch.svd``: ``(U, S, V)``; with ``compute_uv=False``, PyTorch's
    zero-filled ``U`` (..., m, m) and ``V`` (..., n, n) beside the singular
    values."""
    if isinstance(input, Tensor) and input.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{input.ndim} dimensions instead")
    if not compute_uv:
        S_ = svdvals(input)
        *batch, m, n = input.shape
        U = Tensor._make(np.zeros((*batch, m, m), input.dtype.np), input.dtype)
        V = Tensor._make(np.zeros((*batch, n, n), input.dtype.np), input.dtype)
        return _SVD_TORCH(U, S_, V)
    U, S_, Vh = svd(input, full_matrices=not some)
    V = S.mT(Vh)
    return _SVD_TORCH(U, S_, V.conj() if V.dtype.is_complex else V)


def _eigvalsh_fwd(ctx, a, uplo):
    w, v = np.linalg.eigh(a, UPLO=uplo)
    ctx.v = v
    return w


def _eigvalsh_bwd(ctx, g):
    v = ctx.v
    return ((v * g[..., None, :]) @ _mT(v), None)


def _eigvalsh_graph_bwd(g, a, uplo):
    return (_eigh_graph_bwd((g, None), a, uplo), None)


_eigvalsh = _function("LinalgEigh", _eigvalsh_fwd, _eigvalsh_bwd, _eigvalsh_graph_bwd)


def _hermitian(A, name):
    """A real symmetric or complex Hermitian ``A``; the complex
    decomposition's derivative is not implemented (refused up front)."""
    A = _square(A, name, complex_ok=True)
    if A.dtype.is_complex and A.requires_grad:
        raise NotImplementedError(f"{name}: the derivative for complex inputs is not "
                                  "implemented by tracec yet (detach the input, or use a "
                                  "real symmetric matrix)")
    return A


def eigvalsh(A, UPLO="L"):  # noqa: N803 - PyTorch's name
    return _eigvalsh(_hermitian(A, "linalg.eigvalsh"), UPLO)


def _eigh_fwd(ctx, a, uplo):
    ctx.nparams = 1
    ctx.w, ctx.v = np.linalg.eigh(a, UPLO=uplo)
    return ctx.w, ctx.v


def _eigh_graph_bwd(grads, a, uplo):
    """``eigh_vjp`` in tensor ops."""
    gw, gv = grads
    w, v = _eigh(a, uplo)
    if gv is None:
        return (v * gw[..., None, :]) @ v.mT
    vtgv = v.mT @ gv
    eye = _eye(w.shape[-1], dtype=w.dtype)
    e = w[..., None, :] - w[..., :, None] + eye
    ret = (0.5 * (vtgv - vtgv.mT) / e) * (1 - eye)
    if gw is not None:
        ret = ret + gw.diag_embed()
    return v @ ret @ v.mT


_eigh = _factorization("LinalgEighBackward0",
                       _eigh_fwd, lambda ctx, gw, gv: eigh_vjp(ctx.w, ctx.v, gw, gv),
                       _eigh_graph_bwd)


def eigh(A, UPLO="L"):  # noqa: N803
    return EighResult(*_eigh(_hermitian(A, "linalg.eigh"), UPLO))


_NONFINITE_SVD = ("linalg.svd: The algorithm failed to converge because the input matrix "
                  "contained non-finite values.")


def _svd_np(a, **kwargs):
    try:
        return np.linalg.svd(a, **kwargs)
    except np.linalg.LinAlgError:
        raise LinAlgError(_NONFINITE_SVD) from None


def _eig_np(A, name):
    a = _np(A, name)
    if not np.isfinite(a).all():
        raise LinAlgError(f"{name}: The algorithm failed to converge because the input matrix "
                          "contained non-finite values.")
    w, v = np.linalg.eig(a)
    c = dt.complex128 if a.dtype == np.float64 or a.dtype == np.complex128 else dt.complex64
    return (Tensor._make(np.ascontiguousarray(w.astype(c.np)), c),
            Tensor._make(np.ascontiguousarray(v.astype(c.np)), c))


def eig_vjp(a_is_complex: bool, w, v, gw, gv):
    """PyTorch's ``linalg_eig_backward`` (NumPy): with ``E[i, j] =
    conj(L_j - L_i)`` (1 on the diagonal), ``gA = V^{-H} (diag(gL) +
    offdiag((V^H gV - V^H V diag(re(V^H gV))) / E)) V^H``, its real part
    for a real input; a loss that depends on the eigenvectors' phases is
    refused, as in PyTorch."""
    vh = np.conj(np.swapaxes(v, -1, -2))
    n = w.shape[-1]
    ret = np.zeros(v.shape, v.dtype)
    if gv is not None:
        vhgv = vh @ gv
        diag = np.diagonal(vhgv, 0, -2, -1)
        if not np.allclose(diag.imag, 0.0, rtol=1e-6, atol=1e-3):
            raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are "
                               "specified up to multiplication by e^{i phi}. The specified loss "
                               "function depends on this quantity, so it is ill-defined.")
        lc = np.conj(w)
        econj = lc[..., None, :] - lc[..., :, None]
        econj[..., np.arange(n), np.arange(n)] = 1.0
        ret = (vhgv - vh @ (v * diag.real[..., None, :])) / econj
    ret[..., np.arange(n), np.arange(n)] = 0.0 if gw is None else gw
    ga = np.linalg.solve(vh, ret @ vh)
    return ga if a_is_complex else ga.real


class _Eig(autograd.Function):
    """``linalg.eig`` of an input that requires grad: NumPy's geev
    forward, PyTorch's backward (``eig_vjp``, once differentiable)."""
    node_name = "LinalgEigBackward0"

    @staticmethod
    def forward(ctx, A, name):
        w, v = _eig_np(A, name)
        ctx.wv = (w._data, v._data)
        ctx.a_meta = (A.dtype, A.dtype.is_complex)
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        w, v = ctx.wv
        dtype, is_complex = ctx.a_meta
        ga = eig_vjp(is_complex, w, v, None if gw is None else np.asarray(gw._data),
                     None if gv is None else np.asarray(gv._data))
        return Tensor._make(np.ascontiguousarray(ga.astype(dtype.np)), dtype), None


def _eig_parts(A, name):
    A = _square(A, name, complex_ok=True)
    if A.requires_grad and _graph.is_grad_enabled():
        return _Eig.apply(A, name)
    return _eig_np(A, name)


def eig(A):
    """``(eigenvalues, eigenvectors)`` of a general square matrix, complex
    (LAPACK's geev through NumPy, as PyTorch's: unit-norm eigenvectors)."""
    return EigResult(*_eig_parts(A, "linalg.eig"))


def eigvals(A):
    return _eig_parts(A, "linalg.eigvals")[0]


def _pinv_np(a, atol, rtol, hermitian=False):
    # PyTorch's cut-off: singular values <= max(atol, rtol * largest) are 0;
    # rtol defaults to eps * max(m, n) when neither is given, else to 0.
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(a.shape[-2:]) if atol is None else 0.0
    if hermitian:
        # PyTorch's hermitian path: eigh of the lower triangle only, the
        # singular values being |eigenvalues|
        w, v = np.linalg.eigh(a, UPLO="L")
        s = np.abs(w)
        cut = np.maximum(atol or 0.0, rtol * s.max(axis=-1, keepdims=True, initial=0.0))
        inv_w = np.where(s > cut, 1.0 / np.where(s > cut, w, 1.0), 0.0)
        return (v * inv_w[..., None, :]) @ _mT(v)
    u, s, vh = _svd_np(a, full_matrices=False)
    cut = np.maximum(atol or 0.0, rtol * s.max(axis=-1, keepdims=True, initial=0.0))
    inv_s = np.where(s > cut, 1.0 / np.where(s > cut, s, 1.0), 0.0)
    return _mT(vh) @ (inv_s[..., None] * _mT(u))


def _pinv_fwd(ctx, a, atol, rtol, hermitian=False):
    # the backward is PyTorch's pinv_backward of the input as given, also
    # when hermitian=True read only its lower triangle
    ctx.nparams, ctx.a = 3, a
    ctx.p = _pinv_np(a, atol, rtol, hermitian)
    return (ctx.p,)


_pinv = _factorization("LinalgPinvBackward0", _pinv_fwd,
                       lambda ctx, g: pinv_vjp(g, ctx.p, ctx.a),
                       lambda grads, a, atol, rtol, hermitian:
                       pinv_vjp(grads[0], _pinv(a, atol, rtol, hermitian)[0], a))


def _pinv_input(A):
    """``A`` checked as PyTorch's ``linalg.pinv`` does (its message names
    the dtype and the shape), then as tracec's other decompositions."""
    A = tensor_arg(A, "linalg.pinv")
    if A.ndim < 2 or not (A.dtype.is_floating_point or A.dtype.is_complex) or \
            A.dtype in (dt.float16, dt.bfloat16):
        raise RuntimeError(f"linalg.pinv({dt.scalar_type_name(A.dtype)}{{{list(A.shape)}}}): "
                           "expected a tensor with 2 or more dimensions of float, double, cfloat "
                           "or cdouble types")
    return _float_input(A, "linalg.pinv")


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    A = _pinv_input(A)
    if hermitian:
        _square(A, "linalg.pinv")
    return _pinv(A, atol, rtol, bool(hermitian))[0]


def pinverse(input, rcond=1e-15):  # noqa: A002
    A = _pinv_input(input)
    return _pinv(A, None, rcond, False)[0]


def _info(A):
    return ops.full(tuple(A.shape[:-2]), 0, dt.int32, like=A)


def inv_ex(A, *, check_errors=False):
    """``(inverse, info)``: for a singular matrix info is the 1-based index
    of LAPACK's first zero pivot and the inverse what its LU solve leaves
    (infinities, NaNs), not differentiated; raising only with
    ``check_errors=True``."""
    if RECORDERS:   # (traced: a zero pivot raises at run time, so only with check_errors)
        A = _square(A, "linalg.inv_ex")
        if not (check_errors and _traced(A)):
            _np(A, "linalg.inv_ex(check_errors=False)")
        return InvExResult(F._named(linalg_gauss_jordan.inverse(A, "linalg.inv_ex"),
                                    "LinalgInvExBackward0"), _info(A))
    try:
        inverse_ = inv(A)
    except LinAlgError as e:
        if check_errors:
            raise LinAlgError(str(e).replace("linalg.inv:", "linalg.inv_ex:", 1)) from None
        out, info = lapack_lu.lu_inverse(_np(A, "linalg.inv_ex"))
        return InvExResult(_wrap(out, A), Tensor._make(info, dt.int32))
    return InvExResult(inverse_, _info(inverse_))


def _partial_cholesky(a: np.ndarray):
    """LAPACK's unblocked lower Cholesky (potf2) of one matrix: ``(L, info)``;
    at the first non-positive pivot ``j`` it stores the pivot unrooted and
    stops (info ``j + 1``), leaving what PyTorch's ``cholesky_ex`` returns."""
    w = np.tril(a).astype(np.result_type(a, np.float32), copy=True)
    n = w.shape[-1]
    for j in range(n):
        ajj = w[j, j] - w[j, :j] @ w[j, :j]
        if not ajj > 0:
            w[j, j] = ajj
            return w, j + 1
        w[j, j] = np.sqrt(ajj)
        w[j + 1:, j] = (w[j + 1:, j] - w[j + 1:, :j] @ w[j, :j]) / w[j, j]
    return w, 0


def _pd_message(name: str, batch_index, order: int) -> str:
    where = f"(Batch element {batch_index}): " if batch_index is not None else ""
    return (f"{name}: {where}The factorization could not be completed because the input is "
            f"not positive-definite (the leading minor of order {order} is not "
            f"positive-definite).")


def cholesky_ex(A, *, upper=False, check_errors=False):
    """``(L, info)``: ``info`` 0 where the factorization succeeded, else the
    order of the first leading minor that is not positive-definite (with
    LAPACK's partial ``L`` there, as PyTorch), raising only with
    ``check_errors=True``."""
    A = _square(A, "linalg.cholesky_ex")
    if _traced(A):
        if check_errors:
            L = _named_cholesky(A, upper, "linalg.cholesky_ex")
            return CholeskyExResult(L, _info(L))
        L, info = linalg_substitution.cholesky(A, None)
        return CholeskyExResult(F._named(S.mT(L) if upper else L, "LinalgCholeskyExBackward0"),
                                ops.cast(info, dt.int32))
    try:
        L = cholesky(A, upper=upper)
        return CholeskyExResult(L, _info(L))
    except RuntimeError:
        pass
    a = _np(A, "linalg.cholesky_ex")
    batch = a.shape[:-2]
    flat = a.reshape((-1,) + a.shape[-2:])
    parts = [_partial_cholesky(m) for m in flat]
    info = np.array([i for _, i in parts], np.int32).reshape(batch)
    if check_errors:
        first = int(np.flatnonzero(info.reshape(-1))[0])
        raise RuntimeError(_pd_message("linalg.cholesky_ex", first if batch else None,
                                       int(info.reshape(-1)[first])))
    L = np.stack([p for p, _ in parts]).reshape(a.shape).astype(a.dtype)
    if upper:
        L = np.swapaxes(L, -1, -2).copy()
    return CholeskyExResult(Tensor._make(L, A.dtype), Tensor._make(info, dt.int32))


def solve_ex(A, B, *, left=True, check_errors=False):
    """``(X, info)``; for a singular A, info and X as LAPACK's LU solve
    leaves them (see ``inv_ex``), raising only with ``check_errors=True``."""
    if RECORDERS and not (check_errors and _traced(_square(A, "linalg.solve_ex"))):
        # (traced, a singular A raises at run time: only with check_errors)
        _np(_square(A, "linalg.solve_ex"), "linalg.solve_ex(check_errors=False)")
    try:
        X = solve(A, B, left=left)
    except LinAlgError:
        if check_errors:
            raise
        return _singular_solve_ex(A, B, left)
    return SolveExResult(X, _info(_square(A, "linalg.solve_ex")))


def _singular_solve_ex(A, B, left):
    a, b = _np(A, "linalg.solve_ex"), _np(B, "linalg.solve_ex")
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vector:
        b = b[..., None]
    if not left:   # X A = B  <=>  A^T X^T = B^T
        a, b = _mT(a), _mT(b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    lu, piv, info = lapack_lu.getrf(a)
    x = np.stack([lapack_lu.lu_solve(m, p, r) for m, p, r in zip(lu, piv, b)]) if len(a) \
        else np.empty(b.shape, lu.dtype)
    x = x.reshape(batch + x.shape[-2:])
    if not left:
        x = _mT(x)
    if vector:
        x = x[..., 0]
    return SolveExResult(_wrap(x, A), Tensor._make(info.reshape(batch), dt.int32))


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    A = _float_input(A, "linalg.matrix_rank")
    s = _svd_np(_np(A, "linalg.matrix_rank"), compute_uv=False)
    if rtol is None:
        rtol = np.finfo(s.dtype).eps * max(A.shape[-2:]) if atol is None else 0.0
    cut = np.maximum(atol or 0.0, rtol * s.max(axis=-1, keepdims=True, initial=0.0))
    return Tensor._make(np.array((s > cut).sum(-1), dtype=np.int64), dt.int64)


def _lstsq_fwd(ctx, a, b, rcond):
    ctx.a, ctx.b = a, b
    ctx.p = _pinv_np(a, None, rcond)
    # PyTorch's backward differentiates pinv(A) at its default tolerance, whatever rcond
    ctx.p_default = ctx.p if rcond is None else _pinv_np(a, None, None)
    return ctx.p @ b


def _lstsq_bwd(ctx, g):
    # PyTorch's linalg_lstsq_backward: through X = pinv(A) B
    p = ctx.p_default
    ga = pinv_vjp(g @ _mT(ctx.b), p, ctx.a)
    return (_sum_to(ga, ctx.a.shape), _sum_to(_mT(p) @ g, ctx.b.shape), None)


def _lstsq_graph_bwd(g, a, b, rcond):
    p = pinv(a)
    ga = pinv_vjp(g @ b.mT, p, a)
    return (_sum_to_tensor(ga, tuple(a.shape)), _sum_to_tensor(p.mT @ g, tuple(b.shape)), None)


_lstsq = _function("LinalgLstsqBackward0", _lstsq_fwd, _lstsq_bwd, _lstsq_graph_bwd)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_check(A, B):
    """PyTorch's checks on ``linalg.lstsq``'s operands, in its order: ``A``
    is a (batch of) matrices, ``B`` has its dimensions or one fewer (a
    batch of vectors) and its dtype, a floating one, and their rows agree.
    Returns them."""
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    diff = A.ndim - B.ndim
    if not 0 <= diff <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    if A.dtype is not B.dtype:
        raise RuntimeError("torch.linalg.lstsq: Expected input and other to have the same dtype, "
                           f"but got input's dtype {dt.scalar_type_name(A.dtype)} and other's "
                           f"dtype {dt.scalar_type_name(B.dtype)}")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):   # (complex: _float_input's limit)
        raise RuntimeError("This function doesn't handle types other than float and double")
    A, B = _float_input(A, "torch.linalg.lstsq"), _float_input(B, "torch.linalg.lstsq")
    if A.shape[-2] != (B.shape[-1] if diff else B.shape[-2]):
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match "
                           f"other.size({-1 if diff else -2})")
    return A, B


def lstsq(A, B, rcond=None, *, driver=None):
    """``(solution, residuals, rank, singular_values)`` as PyTorch's cpu
    drivers give them: ``rank`` but for gels; ``singular_values`` for gelsd
    and gelss; ``residuals`` (``||A X - B||^2`` per column, differentiable)
    when m > n, the driver is not gelsy and every matrix has full rank;
    the others empty."""
    A, B = _lstsq_check(tensor_arg(A, "linalg.lstsq"), tensor_arg(B, "linalg.lstsq"))
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    Bm = ops.reshape(B, tuple(B.shape) + (1,)) if vector else B
    broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))    # (PyTorch's message)
    Xm = _lstsq(A, Bm, rcond)
    X = ops.reshape(Xm, tuple(Xm.shape[:-1])) if vector else Xm
    empty = Tensor._make(np.zeros((0,), A.dtype.np), A.dtype)
    m, n = A.shape[-2], A.shape[-1]
    rank = Tensor._make(np.zeros((0,), np.int64), dt.int64) if driver == "gels" else (
        matrix_rank(A) if rcond is None else matrix_rank(A, rtol=rcond))
    full = driver == "gels" or bool((_np(rank, "linalg.lstsq") == min(m, n)).all())
    residuals = empty
    if m > n and driver != "gelsy" and full:
        r = F.sub(F.matmul(A, Xm), Bm)
        residuals = F.sum(F.mul(r, r), -2)
    sv = svdvals(A).detach() if driver in ("gelsd", "gelss") else empty
    return LstsqResult(X, residuals, rank, sv)


def _tri_solve_fwd(ctx, a, b, upper, left, unitriangular):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        idx = np.arange(t.shape[-1])
        t[..., idx, idx] = 1.0
    ctx.t, ctx.upper, ctx.left, ctx.unit = t, upper, left, unitriangular
    ctx.x = np.linalg.solve(t, b) if left else _mT(np.linalg.solve(_mT(t), _mT(b)))
    return ctx.x


def _tri_solve_bwd(ctx, g):
    t, x = ctx.t, ctx.x
    if ctx.left:     # X = T^-1 B
        gb = np.linalg.solve(_mT(t), g)
        ga = -gb @ _mT(x)
    else:            # X = B T^-1
        gb = _mT(np.linalg.solve(t, _mT(g)))
        ga = -_mT(x) @ gb
    ga = np.triu(ga, 1 if ctx.unit else 0) if ctx.upper else np.tril(ga, -1 if ctx.unit else 0)
    return (_sum_to(ga, t.shape), _sum_to(gb, g.shape), None, None, None)


def _tri_solve_graph_bwd(g, a, b, upper, left, unit):
    x = _tri_solve(a, b, upper, left, unit)
    if left:     # X = T^-1 B
        gb = _tri_solve(a.mT, g, not upper, True, unit)
        ga = -(gb @ x.mT)
    else:        # X = B T^-1
        gb = _tri_solve(a.mT, g, not upper, False, unit)
        ga = -(x.mT @ gb)
    ga = ga.triu(1 if unit else 0) if upper else ga.tril(-1 if unit else 0)
    return (_sum_to_tensor(ga, tuple(a.shape)), _sum_to_tensor(gb, tuple(b.shape)),
            None, None, None)


_tri_solve = _lapack("solve_triangular", "linalg.solve_triangular: The solver failed because "
                     "the input matrix is singular.")(
    _function("LinalgSolveTriangular", _tri_solve_fwd, _tri_solve_bwd, _tri_solve_graph_bwd))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    A = _square(A, "linalg.solve_triangular")
    (A, B), _ = promote("linalg.solve_triangular", A, _float_input(B, "linalg.solve_triangular"))
    if _traced(A):
        return F._named(_traced_tri_solve(A, B, bool(upper), bool(left), bool(unitriangular)),
                        "LinalgSolveTriangularBackward0")
    return _tri_solve(A, B, bool(upper), bool(left), bool(unitriangular))


def _traced_tri_solve(A, B, upper, left, unit):
    if left:
        return linalg_substitution.solve_triangular(A, B, upper, unit)
    # X A = B  <=>  A^T X^T = B^T (A^T's triangle the other one)
    return S.mT(linalg_substitution.solve_triangular(S.mT(A), S.mT(B), not upper, unit))


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """The old ``torch.triangular_solve``: ``(solution, cloned_coefficient)``."""
    _warn_once("torch.triangular_solve is deprecated in favor of "
               "torch.linalg.solve_triangularand will be removed in a future PyTorch "
               "release.\ntorch.linalg.solve_triangular has its arguments reversed and "
               "does not return a copy of one of the inputs.\nX = "
               "torch.triangular_solve(B, A).solution\nshould be replaced with\nX = "
               "torch.linalg.solve_triangular(A, B).")
    M = S.mT(A) if transpose else A
    X = solve_triangular(M, input, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(F._named(X, "TriangularSolveBackward0"), S.clone(A))


def _from_factor(L, upper):
    # A = L L^T (U^T U): PyTorch differentiates cholesky_solve/inverse through
    # every entry of the factor, as this product does.
    return F.matmul(S.mT(L), L) if upper else F.matmul(L, S.mT(L))


def cholesky_solve(input, input2, upper=False):
    """(L L^T)^-1 B from a Cholesky factor (traced: two triangular solves)."""
    L = _float_input(input2, "cholesky_solve")
    if _traced(L):
        (B, L), _ = promote("cholesky_solve", _float_input(input, "cholesky_solve"), L)
        return F._named(linalg_substitution.cholesky_solve(B, S.mT(L) if upper else L),
                        "CholeskySolveBackward0")
    return solve(_from_factor(_float_input(input2, "cholesky_solve"), upper), input)


def cholesky_inverse(input, upper=False):
    return inv(_from_factor(_float_input(input, "cholesky_inverse"), upper))


# --- LU (partial pivoting, LAPACK's getrf conventions) ------------------------------------

def _permutation_np(piv, m):
    """P (m x m) with A = P L U, from getrf's sequential row swaps."""
    lead = piv.shape[:-1]
    flat = piv.reshape((-1, piv.shape[-1]))
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j] - 1
        pj = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = pj
    P = np.zeros((flat.shape[0], m, m))
    P[rows[:, None], perm, np.arange(m)[None, :]] = 1.0
    return P.reshape(lead + (m, m))


def _unpack_np(lu_, m, n):
    k = min(m, n)
    L = np.tril(lu_, -1)[..., :, :k] + np.eye(m, k, dtype=lu_.dtype)
    U = np.triu(lu_)[..., :k, :]
    return L, U


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    A = _float_input(A, "linalg.lu_factor_ex")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lu_factor: Expected tensor with 2 or more dimensions. "
                           f"Got size: {list(A.shape)} instead")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, piv, info = _lu_np(_np(A, "linalg.lu_factor"))
    LU = _lu_packed(A, lu_, piv) if A.requires_grad else _wrap(lu_, A)
    return LUFactorExResult(LU, Tensor._make(piv, dt.int32), Tensor._make(info, dt.int32))


def _lu_packed(A, lu_, piv):
    """The packed ``LU`` of ``A`` as a differentiable output: PyTorch's
    ``linalg_lu_backward`` for square A = P L U (gL, gU the strictly lower
    and the upper parts of the packed gradient):
    ``gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T``."""
    m, n = A.shape[-2:]

    def forward(ctx, a):
        ctx.P = _permutation_np(piv, m)
        ctx.L, ctx.U = _unpack_np(lu_, m, n)
        return lu_

    def backward(ctx, g):
        if m != n:
            raise RuntimeError("linalg.lu_factor: tracec implements the derivative for square "
                               "matrices only")
        L, U = ctx.L, ctx.U
        phi = np.tril(_mT(L) @ np.tril(g, -1), -1) + np.triu(np.triu(g) @ _mT(U))
        x = np.linalg.solve(_mT(L), phi)                      # L^-T phi
        return (ctx.P @ _mT(np.linalg.solve(U, _mT(x))),)     # ... U^-T

    def graph_backward(g, a):
        if m != n:
            return None
        f = lu_factor(a)
        P, L, U = lu_unpack(f.LU, f.pivots)
        phi = (L.mT @ g.tril(-1)).tril(-1) + (g.triu() @ U.mT).triu()
        x = solve(L.mT, phi)
        return (P @ solve(U, x.mT).mT,)
    return _function("LinalgLuFactorExBackward0", forward, backward, graph_backward)(A)


def lu_factor(A, *, pivot=True):
    """``(LU, pivots)``; eager only, differentiable for square A."""
    r = lu_factor_ex(A, pivot=pivot)
    return LUFactorResult(r.LU, r.pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    LU_data = _float_input(LU_data, "lu_unpack")
    m, n = LU_data.shape[-2:]
    lu_ = _np(LU_data, "lu_unpack")
    empty = Tensor._make(np.zeros((0,), LU_data.dtype.np), LU_data.dtype)
    P = _wrap(_permutation_np(concrete(LU_pivots, "lu_unpack"), m), LU_data) \
        if unpack_pivots else empty
    if not unpack_data:
        return LUUnpackResult(P, empty, empty)
    if LU_data.requires_grad:     # the triangles, differentiably
        from tracec.rearrange import tril, triu
        k = min(m, n)
        eye = Tensor._make(np.eye(m, k, dtype=LU_data.dtype.np), LU_data.dtype)
        L = F.add(tril(LU_data, -1)[..., :, :k], eye)
        return LUUnpackResult(P, L, triu(LU_data)[..., :k, :])
    L, U = _unpack_np(lu_, m, n)
    return LUUnpackResult(P, _wrap(L, LU_data), _wrap(U, LU_data))


def lu(A, *, pivot=True):
    """``(P, L, U)`` with ``A = P @ L @ U``; eager only, no gradient."""
    f = lu_factor(A, pivot=pivot)
    return LUResult(*lu_unpack(f.LU, f.pivots))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B unless ``left``; A^T in place of A with
    ``adjoint``), A = P L U given by ``lu_factor``."""
    LU = _float_input(LU, "linalg.lu_solve")
    B = _float_input(B, "linalg.lu_solve")
    m = LU.shape[-1]
    if LU.requires_grad or B.requires_grad:
        # A = P L U rebuilt from LU's triangles, then solve: both differentiable
        P, L, U = lu_unpack(LU, pivots)
        A = F.matmul(P, F.matmul(L, U))
        return solve(S.mT(A) if adjoint else A, B, left=left)
    P, L, U = (_permutation_np(concrete(pivots, "linalg.lu_solve"), m),
               *_unpack_np(_np(LU, "linalg.lu_solve"), m, m))
    a = P @ L @ U
    b = _np(B, "linalg.lu_solve")
    if adjoint:
        a = _mT(a)
    x = np.linalg.solve(a, b) if left else _mT(np.linalg.solve(_mT(a), _mT(b)))
    return _wrap(x, B)


def _torch_lu(A, pivot=True, get_infos=False):  # noqa: N803
    warnings.warn("torch.lu is deprecated in favor of torch.linalg.lu_factor / "
                  "torch.linalg.lu_factor_ex and will be removed in a future PyTorch release.\n"
                  "LU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\n"
                  "LU, pivots = torch.linalg.lu_factor(A, compute_pivots)", UserWarning,
                  stacklevel=F.user_stacklevel())
    r = lu_factor_ex(A, pivot=pivot)
    return (r.LU, r.pivots, r.info) if get_infos else (r.LU, r.pivots)


def _torch_lu_solve(input, LU_data, LU_pivots):  # noqa: N803
    _warn_once("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be "
               "removed in a future PyTorch release.\nNote that torch.linalg.lu_solve has "
               "its arguments reversed.\nX = torch.lu_solve(B, LU, pivots)\nshould be "
               "replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)")
    return lu_solve(LU_data, LU_pivots, input)
