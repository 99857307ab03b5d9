"""Products beyond ``matmul``: ``addmm baddbmm einsum``, and the dense
stand-in for PyTorch's COO sparse tensors (``sparse_coo_tensor``, ``spmm``).

Invariant: composites of ``matmul``, ``transpose``, ``reshape``,
``reduce_sum``, ``where`` and ``index_add``, so eager autograd and the
compiler see only primitives.  ``einsum`` contracts its operands pairwise,
left to right, each pair as one batched ``matmul``.  A "sparse" tensor here
is dense (API.md allows it): ``sparse_coo_tensor`` sums the values at their
indices into a dense tensor; ``SPARSE`` remembers, per such tensor, its COO
indices (and, while uncoalesced, its values), so it reports PyTorch's
``is_sparse``, ``layout``, ``_nnz()``, ``indices()``, ``values()`` and prints
as a COO tensor.  A coalesced one's values are read from the dense data.
"""
from __future__ import annotations

import math
import string
import warnings
import weakref

import numpy as np

from tracec import dtypes as dt
from tracec import autocast_mode, ops
from tracec.graph import keep_saved
from tracec.functions import (_named, add, addmm_dtype_check, matmul, matmul_dtype_check, mul,
                              promote, user_stacklevel)
from tracec.tensor import SPARSE, Tensor, concrete
from tracec import aten_report
from tracec.aten_report import AtenCall

__all__ = ["addmm", "baddbmm", "einsum", "sparse_coo_tensor", "spmm", "dsmm", "sparse_info",
           "mark_sparse", "coalesced_indices", "raw_record", "set_record", "invariants_warn_once"]


def integral_scalars(input, prod, beta, alpha, name=None):
    """``beta`` and ``alpha`` as the BLAS-like ops of PyTorch take them: for
    integer operands they are truncated to integers (the result stays
    integral), or for ``addr`` (``name``) a float one is an error."""
    d = dt.promote_types(getattr(input, "dtype", prod.dtype), prod.dtype)
    if d.is_floating_point or d.is_complex or d is dt.bool_:
        return beta, alpha
    if name is not None:
        for k, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise RuntimeError(f"For integral input tensors, argument {k} must not be a "
                                   "floating point number.")
    return int(beta), int(alpha)


def _scaled_sum(input, prod, beta, alpha, name):
    if isinstance(input, Tensor):
        beta, alpha = integral_scalars(input, prod, beta, alpha)
    if alpha != 1:
        prod = mul(prod, alpha)
    if beta == 0:  # input is ignored (its NaNs do not propagate), as in PyTorch
        return _named(prod, name)
    if beta != 1:
        input = mul(input, beta)
    return _named(add(input, prod), name)


def _product_sum(input, a, b, beta, alpha, name):
    """``beta * input + alpha * (a @ b)``; with bfloat16 / float16 operands
    all through float32 and rounded once, as PyTorch's CPU kernels (its
    BLAS accumulates and scales in float32: rounding the product first moved
    about a quarter of the values by an ulp when alpha or beta is not 1)."""
    half = a.dtype if a.dtype in (dt.bfloat16, dt.float16) and b.dtype is a.dtype and (
        not isinstance(input, Tensor) or input.dtype is a.dtype) else None
    if half is None:
        return _scaled_sum(input, matmul(a, b), beta, alpha, name)
    f32 = dt.float32
    wide = input if not isinstance(input, Tensor) else ops.cast(input, f32)
    y = _scaled_sum(wide, matmul(ops.cast(a, f32), ops.cast(b, f32)), beta, alpha, name)
    return _named(ops.cast(y, half), name)


@aten_report.reports(lambda out, input, mat1, mat2, **kw: [AtenCall(
    "addmm", (tuple(mat1.shape), tuple(mat2.shape)), (mat1.requires_grad, mat2.requires_grad))])
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {mat1.ndim}-D tensor" if mat1.ndim != 2
                           else f"mat2 must be a matrix, got {mat2.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    if autocast_mode.ACTIVE:
        # all three lowered, then the sum in float32 rounded once (autocast
        # off inside, or the float32 product would be lowered again)
        input, mat1, mat2 = autocast_mode.lower_precision(input, mat1, mat2)
        addmm_dtype_check(input, mat1, mat2)
        with autocast_mode.autocast("cpu", enabled=False):
            return _product_sum(input, mat1, mat2, beta, alpha, "AddmmBackward0")
    addmm_dtype_check(input, mat1, mat2)
    return _product_sum(input, mat1, mat2, beta, alpha, "AddmmBackward0")


def _baddbmm_dtype_check(input, batch1, batch2) -> None:
    """PyTorch's refusal of ``baddbmm`` over different dtypes: the added
    tensor against batch1 first, then bmm's check of the two batches."""
    if isinstance(input, Tensor) and input.dtype is not batch1.dtype:
        c = dt.C_TYPE_NAMES
        raise RuntimeError(f"Input dtypes must be the same, got: input {c[input.dtype.name]}, "
                           f"batch1: {c[batch1.dtype.name]}, batch2: {c[batch2.dtype.name]}")
    matmul_dtype_check(batch1, batch2)


@aten_report.reports(lambda out, input, batch1, batch2, **kw: [AtenCall(
    "baddbmm", (tuple(batch1.shape), tuple(batch2.shape)),
    (batch1.requires_grad, batch2.requires_grad))])
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)`` over a batch of matrices."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if batch1.ndim != 3
                           else "batch2 must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{batch1.shape[0]} and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: "
                           f"[{batch2.shape[0]}, {batch2.shape[1]}].")
    if autocast_mode.ACTIVE:
        # all three lowered, then the sum in float32 rounded once (autocast
        # off inside, or the float32 product would be lowered again)
        input, batch1, batch2 = autocast_mode.lower_precision(input, batch1, batch2)
        _baddbmm_dtype_check(input, batch1, batch2)
        with autocast_mode.autocast("cpu", enabled=False):
            return _product_sum(input, batch1, batch2, beta, alpha, "BaddbmmBackward0")
    _baddbmm_dtype_check(input, batch1, batch2)
    return _product_sum(input, batch1, batch2, beta, alpha, "BaddbmmBackward0")


# --- einsum ----------------------------------------------------------------------------

_ELLIPSIS = [chr(0x3B1 + i) for i in range(24)]  # labels for "..." dims (Greek)


def _parse(equation: str, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): more operands were provided than specified in the "
                         f"equation" if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the equation")
    ell = 0
    labels = []
    for t, x in zip(terms, operands):
        if t.count("...") > 1:
            raise RuntimeError(f"einsum(): found '.' for operand {len(labels)} for which an "
                               "ellipsis was already found")
        if "." in t.replace("...", ""):
            raise RuntimeError(f"einsum(): found '.' for operand {len(labels)} that is not part "
                               "of any ellipsis")
        named = t.replace("...", "")
        for c in named:
            if not c.isalpha():
                raise RuntimeError(f"einsum(): invalid subscript given at index "
                                   f"{equation.index(c)} in the equation string, subscripts "
                                   "must be in [a-zA-Z]")
        if "..." in t:
            k = x.ndim - len(named)
            if k < 0:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({len(named)}) is more than the number of dimensions "
                                   f"({x.ndim}) for operand {len(labels)}")
            ell = max(ell, k)
            head, _, tail = t.partition("...")
            # Ellipsis dims align from the right, as broadcasting does.
            labels.append(list(head) + _ELLIPSIS[24 - k:] + list(tail))
        else:
            if len(named) != x.ndim:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({len(named)}) does not match the number of dimensions "
                                   f"({x.ndim}) for operand {len(labels)} and no ellipsis "
                                   "was given")
            labels.append(list(t))
    ell_labels = _ELLIPSIS[24 - ell:]
    if arrow:
        if "." in rhs.replace("...", "", 1):
            raise RuntimeError("einsum(): found '.' for output that is not part of any ellipsis "
                               "(...)")
        if "..." in rhs:
            head, _, tail = rhs.partition("...")
            out = list(head) + ell_labels + list(tail)
        else:
            out = list(rhs)
        seen = {c for ls in labels for c in ls}
        at = equation.index("->") + 2       # (PyTorch's checks, in its order, as it scans)
        for k, c in enumerate(equation[at:], at):
            if c == "." or c == " ":
                continue
            if not ("a" <= c <= "z" or "A" <= c <= "Z"):
                raise RuntimeError(f"einsum(): invalid subscript given at index {k} in the "
                                   "equation string, subscripts must be in [a-zA-Z]")
            if c not in seen:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   "equation for any input operand")
            if equation.count(c, at, k):
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                   "the output")
    else:
        counts: dict = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = ell_labels + sorted(c for c, n in counts.items()
                                  if n == 1 and c not in _ELLIPSIS)
    return labels, out


def _diagonal(x, labels):
    """Merge repeated labels of one operand (``ii`` -> ``i``): keep where the
    indices agree, then sum one of the axes away.  (PyTorch's diagonal is
    a view saving no tensors: the mask is kept past a backward, ``keep_saved``.)"""
    x0 = x
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        n = x.shape[i]
        shape = tuple(n if k in (i, j) else 1 for k in range(x.ndim))
        same = ops.eq(ops.iota(shape, dt.int64, i, like=x), ops.iota(shape, dt.int64, j, like=x))
        x = ops.reduce_sum(ops.where(same, x, 0), (j,))
        labels = labels[:j] + labels[j + 1:]
    if x is not x0:
        keep_saved(x, (x0,))
    return x, labels


def _sum_out(x, labels, keep):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, labels
    return ops.reduce_sum(x, axes), [c for c in labels if c in keep]


def _permute(x, labels, order):
    perm = [labels.index(c) for c in order]
    if perm != list(range(len(perm))):
        x = ops.transpose(x, tuple(perm))
    return x


def _contract(a, la, b, lb, keep, sizes):
    batch = [c for c in la if c in lb and c in keep]
    inner = [c for c in la if c in lb and c not in keep]
    only_a = [c for c in la if c not in lb]
    only_b = [c for c in lb if c not in la]
    a = _permute(a, la, batch + only_a + inner)
    b = _permute(b, lb, batch + inner + only_b)
    bs = tuple(sizes[c] for c in batch)
    m, k, n = (math.prod(sizes[c] for c in g) for g in (only_a, inner, only_b))
    a = ops.reshape(a, (math.prod(bs), m, k))
    b = ops.reshape(b, (math.prod(bs), k, n))
    y = ops.matmul(a, b)
    return ops.reshape(y, bs + tuple(sizes[c] for c in only_a + only_b)), batch + only_a + only_b


def _sublist_equation(args):
    """``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])`` (the
    sublist format: subscripts as ints in [0, 52), ``...`` as ``Ellipsis``)
    -> (equation, operands)."""
    def letters(sub):
        out = ""
        for v in sub:
            if v is Ellipsis:
                out += "..."
            elif isinstance(v, int) and 0 <= v < 52:
                # PyTorch's order of labels: 0-25 are A-Z, 26-51 a-z
                out += chr(ord("A") + v) if v < 26 else chr(ord("a") + v - 26)
            else:
                raise ValueError("einsum(): expected subscript to be within the range [0, 52), "
                                 f"but got {v}")
        return out
    ops_, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(subs) < len(ops_):      # an odd count: the last is the output's sublist
        out = ops_.pop()
    eq = ",".join(letters(s) for s in subs)
    if out is not None:
        eq += "->" + letters(out)
    return eq, tuple(ops_)


def _einsum_calls(out, equation, *operands):
    """ATen's einsum without opt_einsum: operands contracted left to right,
    each pair with a summed dimension as one ``bmm`` (batch: the labels both
    keep; then the left-only, summed and right-only labels), a pair without
    one as a product (nothing counted)."""
    if isinstance(equation, Tensor):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    labels, final = _parse(equation, operands)
    sizes: dict = {}
    for x, ls in zip(operands, labels):
        for c, n in zip(ls, x.shape):
            if n != 1 or c not in sizes:
                sizes[c] = n
    terms = [list(dict.fromkeys(ls)) for ls in labels]
    calls, ly, grad = [], terms[0], operands[0].requires_grad
    for i in range(1, len(terms)):
        lb = terms[i]
        after = set(final).union(*[set(t) for t in terms[i + 1:]])
        ly = [c for c in ly if c in after or c in lb]
        lb = [c for c in lb if c in after or c in ly]
        both = [c for c in ly if c in lb]
        summed = [c for c in both if c not in after]
        if summed:
            batch = math.prod(sizes[c] for c in both if c in after)
            lo = math.prod(sizes[c] for c in ly if c not in lb)
            ro = math.prod(sizes[c] for c in lb if c not in ly)
            k = math.prod(sizes[c] for c in summed)
            calls.append(AtenCall("bmm", ((batch, lo, k), (batch, k, ro)),
                                  (grad, operands[i].requires_grad)))
        ly = [c for c in ly if c not in summed] + [c for c in lb if c not in ly]
        grad = grad or operands[i].requires_grad
    return calls


@aten_report.reports(_einsum_calls)
def einsum(equation, *operands):
    """``torch.einsum``: letters, ``...``, implicit or explicit output,
    repeated letters within an operand (diagonals) and size-1 broadcasting;
    also the sublist format ``einsum(op1, [0, 1], op2, [1, 2], [0, 2])``."""
    if isinstance(equation, Tensor):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for x in operands:
        if not isinstance(x, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, not {type(x).__name__}")
    labels, out = _parse(equation, operands)
    sizes: dict = {}
    for i, (x, ls) in enumerate(zip(operands, labels)):
        for c, s in zip(ls, x.shape):
            if sizes.get(c, 1) != 1 and s != 1 and s != sizes[c]:
                if c in _ELLIPSIS:
                    # (PyTorch's message, its missing space included)
                    d = ls.index(c) - ls.index(next(l for l in ls if l in _ELLIPSIS))
                    raise RuntimeError(f"einsum(): dimension {d} covered by ellipsis in operand "
                                       f"{i}has size {s} which does not broadcast with "
                                       f"previously seen ellipsis with size {sizes[c]} for the "
                                       "respective dimension")
                raise RuntimeError(f"einsum(): subscript {c} has size {s} for operand {i} which "
                                   f"does not broadcast with previously seen size {sizes[c]}")
            if s != 1 or c not in sizes:
                sizes[c] = s
    _refuse_mixed_contraction(labels, out, operands)
    operands, _ = promote("einsum", *operands)
    xs = []
    for x, ls in zip(operands, labels):
        full = tuple(sizes[c] for c in ls)
        if tuple(x.shape) != full:
            x = ops.broadcast_to(x, full)
        xs.append(_diagonal(x, ls))
    y, ly = xs[0]
    for i in range(1, len(xs)):
        b, lb = xs[i]
        # Labels needed after this pair: the output's and later operands'.
        after = set(out).union(*[set(l) for _, l in xs[i + 1:]])
        y, ly = _sum_out(y, ly, after | set(lb))
        b, lb = _sum_out(b, lb, after | set(ly))
        y, ly = _contract(y, ly, b, lb, after, sizes)
    y, ly = _sum_out(y, ly, set(out))
    y = _permute(y, ly, out)
    if y is operands[0]:
        y = ops.cast(y, y.dtype)
    return y


def _refuse_mixed_contraction(labels, out, operands) -> None:
    """PyTorch's error for an einsum that contracts (sums over a label of
    both operands, through ``bmm``) two operands of different dtypes:
    ``expected scalar type A but found B``, A and B the pair's dtypes in
    the order PyTorch takes them.  It contracts two operands left to
    right (the result first), more in opt_einsum's order (``auto``, as
    ``torch.backends.opt_einsum``'s default) when that package is
    installed, each result last; a pair with nothing to sum is a
    product, which promotes (``'i,j->ij'``, ``'i,i->i'`` mix dtypes)."""
    dtypes = [x.dtype for x in operands]
    if len(set(dtypes)) == 1:
        return
    sizes = [dict(zip(ls, x.shape)) for ls, x in zip(labels, operands)]
    items = list(zip(dtypes, sizes))
    for i, j in _contraction_order(labels, out, operands):
        (da, sa), (db, sb) = items[i], items[j]
        rest = [sz for k, (_, sz) in enumerate(items) if k not in (i, j)]
        kept = set(out).union(*rest)
        summed = [c for c in sa if c in sb and c not in kept and sa[c] != 1 and sb[c] != 1]
        if summed and da is not db:
            raise RuntimeError(f"expected scalar type {dt.scalar_type_name(da)} but found "
                               f"{dt.scalar_type_name(db)}")
        merged = {c: max(n, sb.get(c, 1)) for c, n in sa.items() if c in kept}
        merged.update({c: n for c, n in sb.items() if c in kept and c not in merged})
        d = da if summed else dt.promote_types(da, db)
        items = [it for k, it in enumerate(items) if k not in (i, j)] + [(d, merged)]


def _contraction_order(labels, out, operands) -> list:
    """The pairs (indices into the shrinking operand list, the result
    appended last) that PyTorch's einsum contracts, in order."""
    n = len(operands)
    try:
        import opt_einsum
    except ImportError:
        opt_einsum = None
    if n <= 2 or opt_einsum is None:
        # left to right: the running result stays first
        return [(0, 1)] * (n - 1)
    names: dict = {}     # (ASCII letters for opt_einsum: "..." dims have Greek labels)

    def letter(c):
        return names.setdefault(c, string.ascii_letters[len(names)])
    eq = ",".join("".join(letter(c) for c in ls) for ls in labels) + \
        "->" + "".join(letter(c) for c in out)
    path = opt_einsum.contract_path(eq, *[tuple(x.shape) for x in operands], shapes=True,
                                    optimize="auto")[0]
    return [tuple(p) for p in path]


# --- sparse (dense stand-ins) ------------------------------------------------------------

_INVARIANTS_WARNED: list = []
_INVARIANTS_MSG = (
    "Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) will occur "
    "when operating on a sparse tensor which violates the invariants, but checks incur "
    "performance overhead. To silence this warning, explicitly opt in or out. See "
    "`torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance.  (Triggered internally "
    "at /__w/pytorch/pytorch/aten/src/ATen/Context.cpp:816.)")



def raw_record(t):
    """``t``'s entry in ``SPARSE`` (a COO list, or a compressed layout's
    record: ``tracec.sparse_compressed``), or None for a strided tensor."""
    e = SPARSE.get(id(t))
    return e[1] if e is not None and e[0]() is t else None


def set_record(t, record):
    """``t`` is from now on the non-strided tensor that ``record`` describes."""
    key = id(t)
    SPARSE[key] = (weakref.ref(t, lambda r, k=key: SPARSE.pop(k, None)), record)
    return t


def sparse_info(t):
    """``[indices, values, coalesced]`` of the COO tensor ``t`` stands for, or None."""
    rec = raw_record(t)
    return rec if type(rec) is list else None


def invariants_warn_once():
    """PyTorch's warning, once per process, that a sparse constructor
    called without ``check_invariants`` does not check them."""
    if not _INVARIANTS_WARNED:
        _INVARIANTS_WARNED.append(True)
        warnings.warn(_INVARIANTS_MSG, UserWarning, stacklevel=user_stacklevel())


def keep_sparse(out, src, dtype=None):
    """``out`` (a copy of ``src``'s data: clone, detach, deepcopy, or its
    cast to ``dtype``) is a COO tensor when ``src`` is one, with its indices
    and coalesced state, as PyTorch's copies of a sparse tensor are sparse."""
    info = raw_record(src)
    if info is None:
        return out
    if type(info) is not list:      # a compressed layout: its values are the data
        return set_record(out, info)
    values = info[1] if info[1] is None or dtype is None else ops.cast(info[1], dtype)
    return mark_sparse(out, info[0], values, info[2])


def pattern_masked(t):
    """``t`` itself when it is not a COO tensor needing a gradient, else
    its values through an identity whose gradient is zero off its
    specified entries: the gradient PyTorch's ``to_dense``,
    ``sparse.sum`` and ``sparse.mm`` give a sparse input, only at its
    pattern (the dense stand-in's other entries are no values of it)."""
    info = sparse_info(t)
    if info is None or not t.requires_grad:
        return t
    idx = np.asarray(info[0]._data)
    sd = idx.shape[0]
    mask = np.zeros(tuple(t.shape[:sd]), bool)
    mask[tuple(idx)] = True
    mask = mask.reshape(mask.shape + (1,) * (t.ndim - sd))
    return ops.where(Tensor._make(mask, dt.bool_), t, ops.stop_gradient(t))


def sparse_entries(t, info):
    """``(indices, values)`` of the COO tensor ``t`` as NumPy arrays: a
    coalesced one's values are its dense data at its indices."""
    idx = np.asarray(info[0]._data)
    if info[1] is not None:
        return idx, np.asarray(info[1]._data)
    return idx, np.asarray(t._data)[tuple(idx)]


def sparse_added(out, a, b, alpha=1):
    """``out`` = ``a + alpha * b`` (the dense sum) as PyTorch's COO result
    when both are COO tensors of one shape: its CPU kernel merges the two
    entry lists in order of their linear indices as if each were sorted
    (equal heads summed, zeros kept), so an uncoalesced operand can leave
    repeated indices; the result is coalesced when both operands are."""
    ia, ib = sparse_info(a), sparse_info(b)
    if ia is None or ib is None or tuple(a.shape) != tuple(b.shape) \
            or type(out._data) is not np.ndarray:
        return out
    (xa, va), (xb, vb) = sparse_entries(a, ia), sparse_entries(b, ib)
    sd = xa.shape[0]
    sizes = tuple(a.shape[:sd])
    la = np.ravel_multi_index(tuple(xa), sizes) if sd else np.zeros(xa.shape[1], np.int64)
    lb = np.ravel_multi_index(tuple(xb), sizes) if sd else np.zeros(xb.shape[1], np.int64)
    va = va.astype(out._data.dtype)
    vb = (vb * alpha).astype(out._data.dtype)
    if (np.diff(la) > 0).all() and (np.diff(lb) > 0).all():
        # both sorted without repeats: the merge is the sorted union
        lin = np.union1d(la, lb)
        values = np.zeros((len(lin),) + va.shape[1:], out._data.dtype)
        np.add.at(values, np.searchsorted(lin, la), va)
        np.add.at(values, np.searchsorted(lin, lb), vb)
        return _merged(out, lin, values, sizes, sd, bool(ia[2] and ib[2]))
    # the merge itself on Python ints (which entries pair up), the values
    # then gathered in NumPy
    A, B = la.tolist(), lb.tolist()
    na, nb = len(A), len(B)
    rows, from_a, from_b = [], [], []     # (from_a / from_b: entry taken, or -1)
    i = j = 0
    while i < na and j < nb:
        x, y = A[i], B[j]
        take_a, take_b = x <= y, y <= x
        rows.append(x if take_a else y)
        from_a.append(i if take_a else -1)
        from_b.append(j if take_b else -1)
        i += take_a
        j += take_b
    rows += A[i:] + B[j:]
    from_a += list(range(i, na)) + [-1] * (nb - j)
    from_b += [-1] * (na - i) + list(range(j, nb))
    fa, fb = np.asarray(from_a, np.int64), np.asarray(from_b, np.int64)
    values = np.zeros((len(rows),) + va.shape[1:], out._data.dtype)
    values[fa >= 0] += va[fa[fa >= 0]]
    values[fb >= 0] += vb[fb[fb >= 0]]
    return _merged(out, np.asarray(rows, dtype=np.int64), values, sizes, sd, bool(ia[2] and ib[2]))


def _merged(out, lin, values, sizes, sd, coalesced):
    idx = np.stack(np.unravel_index(lin, sizes)).astype(np.int64) if sd else \
        np.zeros((0, len(lin)), np.int64)
    return mark_sparse(out, Tensor._make(idx, dt.int64), Tensor._make(values, out.dtype), coalesced)


def mark_sparse(t, indices, values, coalesced: bool):
    """``t`` (dense data) is from now on a COO tensor with these ``indices``
    and, uncoalesced, these ``values``; returns ``t``."""
    return set_record(t, [indices, None if coalesced else values, coalesced])


def coalesced_indices(indices, size) -> np.ndarray:
    """The sorted, duplicate-free COO ``indices`` (NumPy) over ``size``."""
    idx = np.asarray(indices, dtype=np.int64)
    sd = idx.shape[0]
    if idx.shape[1] == 0:
        return idx.reshape(sd, 0)
    flat = np.ravel_multi_index(tuple(idx), tuple(size[:sd])) if sd else np.zeros(idx.shape[1],
                                                                                    np.int64)
    return np.stack(np.unravel_index(np.unique(flat), tuple(size[:sd]))).astype(np.int64) \
        if sd else idx[:, :1]

def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A dense tensor holding the sum of ``values`` at ``indices`` (the COO
    layout's meaning once coalesced); ``indices`` is ``[sparse_dims, nnz]``,
    ``values`` is ``[nnz, *dense_dims]``."""
    from tracec.creation import _finish, tensor as _tensor
    if check_invariants is None:
        invariants_warn_once()
    if not isinstance(indices, Tensor):
        indices = _tensor(np.asarray(indices), dtype=dt.int64)
    if not isinstance(values, Tensor):
        values = _tensor(values)
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if indices.dtype is not dt.int64:
        # PyTorch's binding converts the indices to int64 whatever their
        # dtype (peft's SHiRA passes int32 ones)
        indices = ops.cast(indices, dt.int64)
    sd, nnz = indices.shape
    if values.ndim < 1 or values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{nnz}, nnz from values: {values.shape[0] if values.ndim else 0}")
    if dtype is not None and dt.to_dtype(dtype) is not values.dtype:
        values = ops.cast(values, dt.to_dtype(dtype))
    dense = tuple(values.shape[1:])
    if size is None:
        idx = concrete(indices, "sparse_coo_tensor() without size")
        size = tuple(int(m) + 1 for m in idx.max(axis=1)) + dense if nnz else (0,) * sd + dense
    size = tuple(int(s) for s in size)
    if len(size) != sd + len(dense) or size[sd:] != dense:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim "
                           f"({len(dense)}), but got {len(size)}")
    idx = indices._data  # a range check only
    if nnz and ((idx < 0).any() or (idx >= np.asarray(size[:sd]).reshape(-1, 1)).any()):
        raise RuntimeError("found an index out of bounds of the size given to "
                           "sparse_coo_tensor()")
    # Flat position of each entry over the sparse dimensions (row-major).
    flat = None
    for d in range(sd):
        row = ops.reshape(ops.slice_(indices, (d, 0), (d + 1, nnz), (1, 1)), (nnz,))
        flat = row if flat is None else ops.add(ops.mul(flat, size[d]), row)
    if flat is None:
        flat = ops.full((nnz,), 0, dt.int64, like=values)
    total = math.prod(size[:sd])
    out = ops.index_add(ops.zeros((total,) + dense, values.dtype, like=values), flat, values, 0)
    out = ops.reshape(out, size)
    out = _named(_finish(out, requires_grad, device), "SparseCooTensorWithDimsAndTensorsBackward0")
    return mark_sparse(out, indices, values, bool(is_coalesced) or nnz <= 1)


def spmm(input, mat2):
    """``torch.spmm``: a matrix product (``mat1`` is a dense stand-in)."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"spmm: expected 2-D tensors, got {input.ndim}-D and {mat2.ndim}-D")
    return matmul(input, mat2)


def dsmm(input, mat2):
    """``torch.dsmm``: sparse ``input`` times dense ``mat2``, a dense result
    (``spmm``'s product and autograd node; linear_operator's interpolation)."""
    return spmm(input, mat2)
