"""``tracec.nested``: PyTorch's ``torch.nested`` constructors and functions
(``nested_tensor``, ``as_nested_tensor``, ``to_padded_tensor``,
``narrow``) over ``NestedTensor`` (``tracec.nested.nested_tensor``).

Invariant: ``nested_tensor`` copies its inputs (a new leaf per entry, as
PyTorch's does); ``as_nested_tensor`` keeps them in the autograd graph;
both check the entries as PyTorch does, with its words.
"""
from __future__ import annotations

import warnings

from tracec import tensor_meta
from tracec.creation import as_tensor
from tracec.nested.nested_tensor import NestedTensor, new_ragged_id
from tracec.tensor import Tensor

__all__ = ["NestedTensor", "nested_tensor", "as_nested_tensor", "to_padded_tensor", "narrow",
           "nested_tensor_from_jagged"]

_STRIDED_WARNING = (
    "The PyTorch API of nested tensors is in prototype stage and will change in the near "
    "future. We recommend specifying layout=torch.jagged when constructing a nested tensor, "
    "as this layout receives active development, has better operator coverage, and works "
    "with torch.compile.")


def _build(entries, layout, op=None, contiguous=True) -> NestedTensor:
    """Check ``entries`` (dense tensors) for ``layout`` and wrap them."""
    if layout is None:
        layout = tensor_meta.strided
    if layout not in (tensor_meta.strided, tensor_meta.jagged):
        raise RuntimeError(f"Specified layout is unsupported for nested tensors: {layout}")
    if not entries:
        raise RuntimeError("nested tensors of no entries are not supported")
    ndim = entries[0].ndim
    for i, e in enumerate(entries):
        if e.ndim != ndim:
            raise RuntimeError("All Tensors given to nested_tensor must have the same dimension. "
                               f"Found dimension {e.ndim} for Tensor at index {i} and "
                               f"dimension {ndim} for Tensor at index 0.")
    if layout is tensor_meta.jagged:
        if ndim == 0 or any(e.shape[1:] != entries[0].shape[1:] for e in entries):
            raise RuntimeError(
                "Cannot represent given tensor list as a nested tensor with the jagged layout. "
                "Note that the jagged layout only allows for a single ragged dimension. For "
                "example: (B, *, D_0, D_1, ..., D_N), with ragged * dim.")
        return NestedTensor(entries, layout, ragged=1, ragged_id=new_ragged_id(), op=op,
                            contiguous=contiguous)
    warnings.warn(_STRIDED_WARNING, UserWarning, stacklevel=3)
    return NestedTensor(entries, layout, op=op, contiguous=contiguous)


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None,
                  requires_grad: bool = False, pin_memory: bool = False) -> NestedTensor:
    """A nested tensor of copies of ``tensor_list``'s entries (tensors or
    nested lists of numbers), each a new leaf."""
    entries = []
    for t in tensor_list:
        e = as_tensor(t.detach() if isinstance(t, Tensor) else t, dtype=dtype, device=device)
        e = e.clone() if isinstance(t, Tensor) else e
        entries.append(e.requires_grad_(requires_grad) if requires_grad else e)
    return _build(entries, layout)


def as_nested_tensor(ts, dtype=None, device=None, layout=None) -> NestedTensor:
    """A nested tensor of ``ts`` (a list of tensors, or a tensor split along
    its first dimension), keeping them in the autograd graph."""
    if isinstance(ts, Tensor):
        ts = list(ts.unbind(0))
    entries = [t.to(dtype=dtype or t.dtype, device=device or t.device) for t in ts]
    op = "nested_tensor_from_tensor_list" if any(e.requires_grad for e in entries) else None
    return _build(entries, layout, op)


def to_padded_tensor(input: NestedTensor, padding: float, output_size=None) -> Tensor:
    """``input.to_padded_tensor(padding, output_size)``."""
    if not isinstance(input, NestedTensor):
        raise RuntimeError("to_padded_tensor(): expected a nested tensor, got "
                           f"{type(input).__name__}")
    return input.to_padded_tensor(padding, output_size)


def narrow(tensor: Tensor, dim: int, start, length, layout=None) -> NestedTensor:
    """Entry ``i`` is ``tensor[i]`` narrowed along ``dim`` (1: the only one
    PyTorch supports) to ``length[i]`` items from ``start[i]`` (tensors,
    jagged layout) or the same ``start`` / ``length`` for all (ints)."""
    layout = tensor_meta.strided if layout is None else layout
    if dim != 1:
        raise RuntimeError("narrow(): only dim=1 supported for nested tensors")
    n = tensor.shape[0]
    starts = start.tolist() if isinstance(start, Tensor) else [int(start)] * n
    lengths = length.tolist() if isinstance(length, Tensor) else [int(length)] * n
    if layout is tensor_meta.strided:
        if isinstance(start, Tensor) or isinstance(length, Tensor):
            raise RuntimeError("start and length must be integers for the strided layout "
                               "NT impl")
        return as_nested_tensor([tensor[i].narrow(0, starts[i], lengths[i]) for i in range(n)])
    entries = [tensor[i].narrow(0, starts[i], lengths[i]) for i in range(n)]
    return _build(entries, layout, contiguous=False)


def nested_tensor_from_jagged(values: Tensor, offsets=None, lengths=None, jagged_dim=None,
                              min_seqlen=None, max_seqlen=None) -> NestedTensor:
    """A jagged nested tensor whose entry ``i`` is ``values[offsets[i]:
    offsets[i + 1]]`` (or ``lengths[i]`` rows from ``offsets[i]``), keeping
    ``values`` in the autograd graph."""
    if jagged_dim not in (None, 1):
        raise RuntimeError("nested_tensor_from_jagged(): only jagged_dim=1 is supported")
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): At least one of offsets or lengths "
                               "is required.")
        ends = lengths.cumsum(0).tolist()
        starts, lens = [0] + ends[:-1], lengths.tolist()
    else:
        offs = offsets.tolist()
        starts = offs[:-1]
        lens = (lengths.tolist() if lengths is not None
                else [b - a for a, b in zip(offs[:-1], offs[1:])])
    entries = [values.narrow(0, a, n) for a, n in zip(starts, lens)]
    contiguous = lengths is None
    op = "nested_view_from_values_offsets" if values.requires_grad else None
    return _build(entries, tensor_meta.jagged, op, contiguous=contiguous)
