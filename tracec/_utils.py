"""``torch._utils``: the helpers libraries import from it by name.

Used by fastai's fp16_utils and apex-style master weights, and
neuraloperator:

- ``_flatten_dense_tensors(tensors)``: one contiguous 1-D tensor, the
  tensors' elements one after another (ATen's ``flatten_dense_tensors``:
  a single tensor gives its own flattened view, no copy).
- ``_unflatten_dense_tensors(flat, tensors)``: a tuple of views into
  ``flat`` shaped like ``tensors`` (an empty one is a fresh empty tensor,
  sharing no storage), so writing one writes ``flat``.

(``torch.load`` / ``torch.save`` name ``torch._utils._rebuild_tensor_v2``
in their pickles; tracec's readers and writers resolve that name
themselves, ``tracec/torch_checkpoint.py``.)
"""
from __future__ import annotations

from tracec import creation
from tracec.shape_ops import cat

__all__ = ["_flatten_dense_tensors", "_unflatten_dense_tensors"]


def _flatten_dense_tensors(tensors):
    """The tensors' elements in one contiguous 1-D tensor."""
    flat = [t.contiguous().view(-1) for t in tensors]
    return flat[0] if len(flat) == 1 else cat(flat)


def _unflatten_dense_tensors(flat, tensors):
    """Views of ``flat`` with the sizes of ``tensors``, in order."""
    out, offset = [], 0
    for t in tensors:
        n = t.numel()
        if n == 0:
            out.append(creation.empty(0, dtype=flat.dtype, device=flat.device))
        else:
            out.append(flat.narrow(0, offset, n).view(t.shape))
            offset += n
    return tuple(out)
