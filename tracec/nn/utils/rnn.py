"""``tracec.nn.utils.rnn``: variable-length batches for recurrent layers,
PyTorch's ``PackedSequence``, ``pack_padded_sequence``,
``pad_packed_sequence``, ``pad_sequence``, ``unpad_sequence``,
``pack_sequence``, ``unpack_sequence`` and ``invert_permutation``.

Invariants (PyTorch's layout):
  * a ``PackedSequence``'s ``data`` holds the time steps one after the
    other, step ``t`` being the first ``batch_sizes[t]`` sequences of the
    batch sorted by decreasing length; ``batch_sizes`` is an int64 CPU
    tensor, non-increasing;
  * ``sorted_indices[i]`` is the original batch index of sorted row ``i``
    and ``unsorted_indices`` its inverse (both None when the input was
    already sorted);
  * packing and unpacking are gathers, so gradients flow back to the padded
    input exactly (padding positions receive none).

Ties in lengths with ``enforce_sorted=False`` are broken stably (PyTorch's
sort leaves their order unspecified); unpacking restores the original order
either way.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

import numpy as np

from tracec import creation
from tracec import dtypes as dt
from tracec import shape_ops as S
from tracec.tensor import Tensor

__all__ = ["PackedSequence", "batch_size_list", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]

_PackedSequenceBase = namedtuple("PackedSequence_",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(_PackedSequenceBase):
    """The packed form of a batch of variable-length sequences (see the
    module docstring).  Build it with ``pack_padded_sequence`` or
    ``pack_sequence``, not by hand.  Those keep ``batch_sizes`` also as
    Python ints (``_sizes``), so the layers consuming it read no tensor."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif str(batch_sizes.device) != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence "
                             "should never be created manually. They should be instantiated "
                             "by functions like pack_sequence and pack_padded_sequences in "
                             "nn.utils.rnn. https://pytorch.org/docs/stable/nn.html"
                             "#torch.nn.utils.rnn.pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """``data.to(...)``; the index tensors follow its device only."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t):
            return t.to(data.device)
        out = type(self)(data, self.batch_sizes, _bind(self.sorted_indices, move),
                         _bind(self.unsorted_indices, move))
        out._sizes = getattr(self, "_sizes", None)
        return out

    def cuda(self, *args, **kwargs) -> "PackedSequence":
        return self.to(*args, device="cuda", **kwargs)

    def cpu(self, *args, **kwargs) -> "PackedSequence":
        return self.to(*args, device="cpu", **kwargs)

    def double(self) -> "PackedSequence":
        return self.to(dtype=dt.float64)

    def float(self) -> "PackedSequence":
        return self.to(dtype=dt.float32)

    def half(self) -> "PackedSequence":
        return self.to(dtype=dt.float16)

    def long(self) -> "PackedSequence":
        return self.to(dtype=dt.int64)

    def int(self) -> "PackedSequence":
        return self.to(dtype=dt.int32)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation):
    """The inverse permutation (``out[permutation[i]] = i``), or None."""
    if permutation is None:
        return None
    return _inverse(np.asarray(permutation.detach().cpu().numpy(), np.int64)).to(
        permutation.dtype).to(permutation.device)


def _lengths_list(lengths) -> list:
    """The lengths as Python ints; like PyTorch's one-dimensional int64
    tensor of them, else its error."""
    if isinstance(lengths, Tensor):
        ndim = lengths.ndim
    else:
        lengths = list(lengths)
        ndim = 1 + max((np.ndim(v) for v in lengths if isinstance(v, (list, tuple))), default=0)
    if ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{ndim}D cpu Long tensor")
    if isinstance(lengths, Tensor):
        return [int(v) for v in lengths.detach().cpu().numpy()]
    return [int(v) for v in lengths]


def _batch_sizes(lengths: list) -> list:
    """``batch_sizes[t]`` = how many of the (sorted) sequences reach step ``t``."""
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0])] if lengths else []


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``[T, B, *]`` (``[B, T, *]`` if ``batch_first``)
    of sequences of the given ``lengths``."""
    # Python-side lengths stay Python values: nothing here reads a tensor
    # unless the caller gave the lengths as one (so a traced call records
    # no data-dependent reads for list lengths)
    lens = _lengths_list(lengths)
    sorted_indices = None
    if not enforce_sorted:
        order = np.argsort(-np.asarray(lens, np.int64), kind="stable")
        lens = [lens[i] for i in order]
        sorted_indices = creation.tensor(order, dtype=dt.int64, device=input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if input.ndim < 2:
        raise RuntimeError(f"pack_padded_sequence: expected input of 2 or more dimensions, got "
                           f"{input.ndim}")
    x = S.transpose(input, 0, 1) if batch_first else input
    steps, batch = x.shape[0], x.shape[1]
    if len(lens) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={batch})")
    if any(n <= 0 for n in lens):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")
    if lens[0] > steps:
        # PyTorch reads past the input here; a clear error is the only safe answer
        raise RuntimeError(f"pack_padded_sequence: a length ({lens[0]}) exceeds the padded "
                           f"sequence length ({steps})")
    sizes = _batch_sizes(lens)
    rows = np.concatenate([t * batch + np.arange(b) for t, b in enumerate(sizes)])
    flat = S.reshape(x, (steps * batch,) + tuple(x.shape[2:]))
    data = flat[creation.tensor(rows, dtype=dt.int64, device=input.device)]
    packed = PackedSequence(data, creation.tensor(sizes, dtype=dt.int64), sorted_indices,
                            _inverse(order) if not enforce_sorted else None)
    packed._sizes = sizes
    return packed


def batch_size_list(packed: PackedSequence) -> list:
    """``packed.batch_sizes`` as Python ints: the copy kept at packing time
    when there is one (no tensor read, so tracing records none), else read."""
    sizes = getattr(packed, "_sizes", None)
    return list(sizes) if sizes is not None else _lengths_list(packed.batch_sizes)


def _inverse(order) -> Tensor:
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    return creation.tensor(inv, dtype=dt.int64)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """Inverse of ``pack_padded_sequence``: ``(padded, lengths)`` in the
    original batch order; ``total_length`` pads the time dim further."""
    sizes = batch_size_list(sequence)
    max_len = len(sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_len}")
        max_len = total_length
    data = sequence.data
    batch = sizes[0]
    n = data.shape[0]
    # source row of every (t, b) position: its packed row, or the padding row ``n``
    src = np.full((max_len, batch), n, np.int64)
    offset = 0
    for t, b in enumerate(sizes):
        src[t, :b] = offset + np.arange(b)
        offset += b
    pad_row = creation.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                            device=data.device)
    rows = S.cat([data, pad_row], 0)[creation.tensor(src.reshape(-1), dtype=dt.int64,
                                                     device=data.device)]
    padded = S.reshape(rows, (max_len, batch) + tuple(data.shape[1:]))
    if batch_first:
        padded = S.transpose(padded, 0, 1)
    lengths = creation.tensor([sum(1 for s in sizes if s > b) for b in range(batch)],
                              dtype=dt.int64)
    if sequence.unsorted_indices is not None:
        idx = sequence.unsorted_indices
        return padded.index_select(0 if batch_first else 1, idx), lengths.index_select(0, idx)
    return padded, lengths


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences ``[L_i, *]`` into ``[L_max, B, *]`` (``[B, L_max, *]``
    if ``batch_first``), padded on ``padding_side`` with ``padding_value``."""
    if isinstance(sequences, Tensor):
        sequences = S.unbind(sequences, 0)
    elif not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    sequences = tuple(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    first = sequences[0]
    trailing = tuple(first.shape[1:])
    max_len = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            dim = next(i for i, (a, b) in enumerate(zip(s.shape[1:], trailing)) if a != b) \
                if s.ndim == first.ndim else 0
            raise RuntimeError(f"The size of tensor a ({trailing[dim] if trailing else 1}) must "
                               f"match the size of tensor b ({s.shape[1 + dim]}) at "
                               f"non-singleton dimension {dim + 1}")
        s = s.to(first.dtype)
        extra = max_len - s.shape[0]
        if extra:
            fill = creation.full((extra,) + trailing, padding_value, dtype=first.dtype,
                                 device=first.device)
            s = S.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return S.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The list of unpadded sequences of a padded batch.  Like PyTorch's,
    with ``batch_first=False`` it transposes ``padded_sequences`` in place."""
    if not batch_first:
        padded_sequences.transpose_(0, 1)
    lens = _lengths_list(lengths)
    return [seq[:n] for seq, n in zip(S.unbind(padded_sequences, 0), lens)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of variable-length sequences ``[L_i, *]``."""
    lengths = creation.tensor([s.shape[0] for s in sequences], dtype=dt.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences a ``PackedSequence`` holds, in original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
