"""PyTorch's compressed sparse layouts, ``torch.sparse_csr`` and
``torch.sparse_csc``, over dense stand-ins (as COO in ``tracec.contraction``).

A CSR (CSC) tensor here is a 2-D dense tensor whose entry in ``SPARSE`` is
a ``Compressed`` record: the layout and its compressed and plain index
tensors (``crow_indices`` / ``col_indices``, or ``ccol_indices`` /
``row_indices``).  Invariant: the record's entries are unique positions,
each compressed row (column) sorted by its plain index, and every dense
element outside them is zero; ``values()`` is the dense data gathered at
the entries in that order, so gradients reach the dense data (and, through
``sparse_csr_tensor``'s ``index_add``, the given values) with the same
primitives as any dense op.  A matrix product with a compressed tensor is
the dense product (PyTorch's result is strided too).
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import ops
from tracec.contraction import (coalesced_indices, invariants_warn_once, raw_record, set_record,
                                sparse_info)
from tracec.functions import _named, user_stacklevel
from tracec.tensor import Tensor
from tracec.tensor_meta import sparse_csc, sparse_csr

__all__ = ["Compressed", "compressed_info", "sparse_csr_tensor", "sparse_csc_tensor",
           "to_sparse_csr", "to_sparse_csc", "compressed_values", "compressed_to_coo",
           "compressed_transposed", "compressed_added", "layout_name"]

_BETA_WARNED: set = set()
_BETA_MSG = ("Sparse {} tensor support is in beta state. If you miss a functionality in the "
             "sparse tensor support, please submit a feature request to "
             "https://github.com/pytorch/pytorch/issues. (Triggered internally at "
             "/__w/pytorch/pytorch/aten/src/ATen/SparseCsrTensorImpl.cpp:49.)")


class Compressed:
    """The record of a CSR / CSC tensor: ``layout``, its ``compressed``
    indices (``[n_outer + 1]``) and ``plain`` indices (``[nnz]``)."""
    __slots__ = ("layout", "compressed", "plain")

    def __init__(self, layout, compressed: Tensor, plain: Tensor):
        self.layout, self.compressed, self.plain = layout, compressed, plain


def compressed_info(t) -> Compressed | None:
    rec = raw_record(t)
    return rec if isinstance(rec, Compressed) else None


def layout_name(t) -> str:
    """PyTorch's name of ``t``'s layout in its errors (``Strided``, ``Sparse``, ``SparseCsr``)."""
    rec = compressed_info(t)
    if rec is not None:
        return "SparseCsr" if rec.layout is sparse_csr else "SparseCsc"
    return "Sparse" if sparse_info(t) is not None else "Strided"


def _beta_warn(layout):
    if not _BETA_WARNED:     # one TORCH_WARN_ONCE, naming the first layout made
        _BETA_WARNED.add(layout)
        name = "CSR" if layout is sparse_csr else "CSC"
        warnings.warn(_BETA_MSG.format(name), UserWarning, stacklevel=user_stacklevel())


def _positions(rec: Compressed):
    """(rows, cols) of the entries, NumPy int64, in the record's order."""
    ci = np.asarray(rec.compressed._data, dtype=np.int64)
    outer = np.repeat(np.arange(len(ci) - 1, dtype=np.int64), np.diff(ci))
    plain = np.asarray(rec.plain._data, dtype=np.int64)
    return (outer, plain) if rec.layout is sparse_csr else (plain, outer)


def _mark(out: Tensor, layout, rows, cols, shape) -> Tensor:
    """Marks ``out`` as ``layout`` with entries at (rows, cols) (unique, any order)."""
    outer, plain = (rows, cols) if layout is sparse_csr else (cols, rows)
    n_outer = shape[0] if layout is sparse_csr else shape[1]
    order = np.lexsort((plain, outer))
    counts = np.bincount(outer, minlength=n_outer)
    comp = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    rec = Compressed(layout, Tensor._make(comp, dt.int64),
                     Tensor._make(np.asarray(plain)[order].astype(np.int64), dt.int64))
    set_record(out, rec)
    _beta_warn(layout)
    return out


def compressed_values(t: Tensor, rec: Compressed) -> Tensor:
    """``values()``: the dense data at the entries, in the record's order."""
    rows, cols = _positions(rec)
    r = Tensor._make(rows, dt.int64)
    c = Tensor._make(cols, dt.int64)
    return t[r, c]


def compressed_to_coo(t: Tensor, rec: Compressed) -> Tensor:
    """The COO tensor of a compressed one (``to_sparse()``): its entries in
    the record's order, so coalesced from CSR and (as in PyTorch) not from CSC."""
    from tracec.contraction import mark_sparse
    rows, cols = _positions(rec)
    out = _named(ops.cast(t, t.dtype), "ToSparseBackward1")
    csr = rec.layout is sparse_csr
    values = None if csr else compressed_values(t, rec).detach()
    return mark_sparse(out, Tensor._make(np.stack([rows, cols]), dt.int64), values, csr)


def compressed_transposed(out: Tensor, src: Tensor, a: int, b: int) -> Tensor:
    """``out``, the transpose of ``src``: when ``src`` is CSR (CSC), the CSC
    (CSR) matrix of the same index arrays, as PyTorch's ``t()``."""
    rec = compressed_info(src)
    if rec is None or a == b:
        return out
    other = sparse_csc if rec.layout is sparse_csr else sparse_csr
    return set_record(out, Compressed(other, rec.compressed, rec.plain))


def compressed_added(out: Tensor, a: Tensor, b: Tensor, subtract: bool) -> Tensor:
    """``out`` = ``a + alpha * b`` (``a - alpha * b`` if ``subtract``): when
    both are CSR matrices of one shape, the CSR matrix over the union of their
    entries, as PyTorch's; PyTorch refuses a difference of compressed tensors
    and (its kernel reading crow_indices) a sum of CSC ones."""
    ra, rb = compressed_info(a), compressed_info(b)
    if ra is None or rb is None or ra.layout is not rb.layout or tuple(a.shape) != tuple(b.shape):
        return out
    if subtract:
        raise RuntimeError(f"unsupported tensor layout: {layout_name(a)}")
    if ra.layout is sparse_csc:
        raise RuntimeError("crow_indices expected sparse row compressed tensor layout but got "
                           "SparseCsc")
    (ia, ja), (ib, jb) = _positions(ra), _positions(rb)
    n = a.shape[1]
    flat = np.union1d(ia * n + ja, ib * n + jb)
    return _mark(out, ra.layout, flat // n, flat % n, tuple(a.shape))


def _convert(self, layout, name):
    rec = compressed_info(self)
    if rec is not None and rec.layout is layout:
        return self
    if self.ndim != 2:
        raise NotImplementedError(f"tracec: {name}() of a {self.ndim}-D tensor "
                                  "(only 2-D matrices; no batch or dense dimensions)")
    if rec is not None:
        rows, cols = _positions(rec)
    else:
        info = sparse_info(self)
        if info is not None:
            idx = coalesced_indices(info[0].numpy(), tuple(self.shape))
            rows, cols = idx[0], idx[1]
        else:
            rows, cols = np.nonzero(self.detach().numpy())
    back = "ToSparseCsrBackward0" if layout is sparse_csr else "ToSparseCscBackward0"
    out = _named(ops.cast(self, self.dtype), back)
    return _mark(out, layout, np.asarray(rows, np.int64), np.asarray(cols, np.int64),
                 tuple(self.shape))


def to_sparse_csr(self, dense_dim=None):
    """``x.to_sparse_csr()`` of a strided (its non-zeros), COO or CSC matrix."""
    if dense_dim is not None:
        raise NotImplementedError("tracec: to_sparse_csr(dense_dim=...)")
    return _convert(self, sparse_csr, "to_sparse_csr")


def to_sparse_csc(self, dense_dim=None):
    """``x.to_sparse_csc()`` of a strided (its non-zeros), COO or CSR matrix."""
    if dense_dim is not None:
        raise NotImplementedError("tracec: to_sparse_csc(dense_dim=...)")
    return _convert(self, sparse_csc, "to_sparse_csc")


def _as_index(x, what):
    from tracec.creation import tensor as _tensor
    t = x if isinstance(x, Tensor) else _tensor(np.asarray(x), dtype=dt.int64)
    if t.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{what} must be an int64 or int32 tensor, but got: {t.dtype!r}")
    return t


def _compressed_tensor(layout, comp, plain, values, size, dtype, device, requires_grad,
                       check_invariants):
    from tracec.creation import _finish, tensor as _tensor
    names = (("crow_indices", "col_indices", "ncols") if layout is sparse_csr
             else ("ccol_indices", "row_indices", "nrows"))
    comp, plain = _as_index(comp, names[0]), _as_index(plain, names[1])
    if not isinstance(values, Tensor):
        values = _tensor(values)
    if dtype is not None and dt.to_dtype(dtype) is not values.dtype:
        values = ops.cast(values, dt.to_dtype(dtype))
    if comp.ndim != 1 or plain.ndim != 1 or values.ndim != 1:
        raise NotImplementedError("tracec: compressed sparse tensors with batch or dense "
                                  "dimensions (only 2-D matrices)")
    if check_invariants is None:
        invariants_warn_once()
    ci, pi = comp.numpy().astype(np.int64), plain.numpy().astype(np.int64)
    nnz = len(pi)
    if size is None:
        n_plain = int(pi.max()) + 1 if nnz else 0
        size = (len(ci) - 1, n_plain) if layout is sparse_csr else (n_plain, len(ci) - 1)
    size = tuple(int(s) for s in size)
    if len(size) != 2:
        raise NotImplementedError("tracec: compressed sparse tensors of more than 2 dimensions")
    if values.shape[0] != nnz:
        raise RuntimeError(f"{names[1]} and values must have the same number of elements, "
                           f"but got {names[1]}.numel()={nnz}, values.numel()={values.shape[0]}")
    n_outer, n_plain = size if layout is sparse_csr else size[::-1]
    # PyTorch's checks (torch.sparse.check_sparse_tensor_invariants), made
    # always: a dense stand-in cannot hold a malformed tensor (where PyTorch,
    # unchecked, reads out of bounds)
    c = names[0]
    for ok, cond in ((ci[0] == 0 if len(ci) else True, f"`{c}[..., 0] == 0`"),
                     (len(ci) == n_outer + 1,
                      f"`{c}.shape[-1] == {'nrows' if layout is sparse_csr else 'ncols'} + 1`"),
                     (ci[-1] == nnz if len(ci) else True, f"`{c}[..., -1] == nnz`"),
                     (bool((np.diff(ci) >= 0).all()),
                      f"`0 <= {c}[..., 1:] - {c}[..., :-1] <= {names[2]}`"),
                     (bool(((pi >= 0) & (pi < n_plain)).all()), f"`0 <= {names[1]} < {names[2]}`")):
        if not ok:
            raise RuntimeError(f"{cond} is not satisfied.")
    outer = np.repeat(np.arange(len(ci) - 1, dtype=np.int64), np.diff(ci))
    rows, cols = (outer, pi) if layout is sparse_csr else (pi, outer)
    if nnz and ((rows >= size[0]).any() or (cols >= size[1]).any() or (pi < 0).any()):
        raise RuntimeError(f"tracec: {names[1]} out of the bounds of size {size}")
    flat = Tensor._make(rows * size[1] + cols, dt.int64)
    dense = ops.index_add(ops.zeros((size[0] * size[1],), values.dtype, like=values), flat,
                          values, 0)
    out = _named(ops.reshape(dense, size), "SparseCompressedTensorBackward0")
    out = _finish(out, requires_grad, device)
    set_record(out, Compressed(layout, comp, plain))
    _beta_warn(layout)
    return out


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, layout=None,
                      device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None):
    """``torch.sparse_csr_tensor``: the 2-D CSR matrix of ``values`` at
    rows given by ``crow_indices`` and columns ``col_indices`` (gradients
    flow into ``values``)."""
    return _compressed_tensor(sparse_csr, crow_indices, col_indices, values, size, dtype,
                              device, requires_grad, check_invariants)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, layout=None,
                      device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None):
    """``torch.sparse_csc_tensor``: the CSC counterpart of ``sparse_csr_tensor``."""
    return _compressed_tensor(sparse_csc, ccol_indices, row_indices, values, size, dtype,
                              device, requires_grad, check_invariants)


def _indices_of(kind: str, which: int):
    """A compressed-index accessor: ``kind`` names the layout PyTorch asks
    for in its error (``row`` for CSR, ``column`` for CSC)."""
    want = sparse_csr if kind == "row" else sparse_csc
    name = {("row", 0): "crow_indices", ("row", 1): "col_indices",
            ("column", 0): "ccol_indices", ("column", 1): "row_indices"}[kind, which]

    def accessor(self):
        rec = compressed_info(self)
        if rec is None or rec.layout is not want:
            raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got "
                               f"{layout_name(self)}")
        return rec.compressed if which == 0 else rec.plain
    accessor.__name__ = accessor.__qualname__ = name
    accessor.__doc__ = f"``Tensor.{name}()`` of a {'CSR' if want is sparse_csr else 'CSC'} tensor."
    return accessor


def compressed_repr(t: Tensor, rec: Compressed, extra: list) -> str:
    """PyTorch's text of a CSR / CSC tensor (``torch/_tensor_str.py``)."""
    from tracec import tensor_str
    cname, pname = ("crow", "col") if rec.layout is sparse_csr else ("ccol", "row")
    parts = []
    for prefix, a, floating in ((f"{cname}_indices=tensor(", rec.compressed._data, False),
                                (f"{pname}_indices=tensor(", rec.plain._data, False),
                                ("values=tensor(", None, True)):
        if a is None:
            v = compressed_values(t, rec).detach()
            a = v._data.astype(np.float32) if v.dtype in (dt.bfloat16, dt.float16) else v._data
            floating = v.dtype.is_floating_point or v.dtype.category == 3
        body = tensor_str.body_text(a, floating, 7 + len(prefix))
        if a.size == 0:
            body += ", size=" + str(tuple(a.shape))
        parts.append(prefix + body + ")")
    suffixes = [f"size={tuple(t.shape)}", f"nnz={int(rec.plain.shape[0])}"]
    default = dt.get_default_dtype()
    if t.dtype not in (default, dt.int64, dt.bool_, dt.get_default_complex()):
        suffixes.append(f"dtype={t.dtype!r}")
    suffixes.append(f"layout={rec.layout!r}")
    text = "tensor(" + (",\n" + " " * 7).join(parts)
    return tensor_str._add_suffixes(text, suffixes + extra, 7)


Tensor.crow_indices = _indices_of("row", 0)
Tensor.col_indices = _indices_of("row", 1)
Tensor.ccol_indices = _indices_of("column", 0)
Tensor.row_indices = _indices_of("column", 1)
Tensor.to_sparse_csr = to_sparse_csr
Tensor.to_sparse_csc = to_sparse_csc
Tensor.is_sparse_csr = property(lambda self: (lambda r: r is not None and r.layout is sparse_csr)(
    compressed_info(self)))
