"""``torch._utils``: the private helpers libraries import from it
(fastai's fp16_utils, apex-style master weights:
``_flatten_dense_tensors`` / ``_unflatten_dense_tensors``).  Checkpoints'
``torch._utils._rebuild_tensor*`` references are read by
``torch_checkpoint.py`` by name, not from here."""
from __future__ import annotations

from tracec import shape_ops

__all__ = ["_flatten_dense_tensors", "_unflatten_dense_tensors"]


def _flatten_dense_tensors(tensors):
    """One contiguous 1-d tensor holding ``tensors``' elements in turn (the
    tensor's own flat view when there is one)."""
    flat = [t.contiguous().view(-1) for t in tensors]
    return flat[0] if len(flat) == 1 else shape_ops.cat(flat)


def _unflatten_dense_tensors(flat, tensors):
    """Views of ``flat`` shaped as ``tensors`` (a tuple), in order."""
    out, offset = [], 0
    for t in tensors:
        n = t.numel()
        out.append(flat.narrow(0, offset, n).view_as(t))
        offset += n
    return tuple(out)
