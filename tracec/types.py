"""``torch.types``: the type aliases PyTorch's annotations (and programs'
own, ``from torch.types import _size, Number``) use.  Annotations only:
nothing here computes."""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any, Optional, Union  # noqa: F401

from tracec import dtypes as _dtypes
from tracec.device import device as _device
from tracec.tensor import Size, Tensor
from tracec.tensor_meta import layout as _layout

__all__ = ["Number", "Device", "FileLike", "Storage"]

_int = int
_float = float
_bool = bool
_complex = complex
_str = str
_bytes = bytes
_dtype = _dtypes.DType
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
_TensorOrOptionalTensors = Union[Tensor, Sequence[Optional[Tensor]]]
_size = Union[Size, list[int], tuple[int, ...]]
_symsize = Union[Size, Sequence[int]]
_Number = (int, float, bool)
Number = Union[int, float, bool]
Device = Optional[Union[_device, str, int]]
FileLike = Union[str, os.PathLike, IO[bytes]]
IntLikeType = int
FloatLikeType = float
BoolLikeType = bool


class Storage:
    """The annotation PyTorch gives untyped storages (tracec's tensors hold
    NumPy arrays, not storages)."""
