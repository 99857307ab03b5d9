"""``default_collate`` and ``default_convert``: how a ``DataLoader`` turns
samples into batches.

Rules (PyTorch's): tensors are stacked along a new first dimension; NumPy
arrays and NumPy scalars become tensors and are stacked; a batch whose
first element is a Python int or bool becomes the tensor of the whole batch
with its inferred dtype (int64, bool, or float32 when floats are mixed in),
one whose first element is a float a float64 tensor; strings and bytes stay lists;
dicts (by the first sample's keys), namedtuples, tuples and lists are
collated field by field (a tuple comes back as a list, as in PyTorch).
Samples that do not fit fail with PyTorch's errors (``torch.stack``'s for
tensors of other shapes, "each element in list of batch should be of equal
size"); the type mismatches tracec checks name the batch item and the field
path inside the sample.

PyTorch's extension point is here too: ``collate(batch, collate_fn_map=)``
and ``default_collate_fn_map`` (type -> ``fn(batch, *, collate_fn_map)``),
which libraries extend (MONAI registers its MetaTensor's collate).  An entry
for the batch's first element (its exact type, else the first key it is an
instance of) that is not one of the built-in ones below decides the
element's collation; the built-in ones are the rules above.
"""
from __future__ import annotations

import collections.abc
import copy
import numbers
import re
import sys

import numpy as np

from tracec import dtypes as dt
from tracec.creation import as_tensor, tensor
from tracec.shape_ops import stack
from tracec.tensor import Tensor

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map",
           "collate_tensor_fn", "collate_numpy_array_fn", "collate_numpy_scalar_fn",
           "collate_float_fn", "collate_int_fn", "collate_str_fn", "np_str_obj_array_pattern",
           "default_collate_err_msg_format"]

#: PyTorch's: NumPy dtypes that do not collate (strings and objects)
np_str_obj_array_pattern = re.compile(r"[SaUO]")
default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    "found {}")

_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")


def _type_name(x) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _where(path: str) -> str:
    return f" (at {path})" if path else ""


def _bad_numpy(a) -> bool:
    return a.dtype.kind in "USO" or a.dtype.kind == "V"


def _stack_tensors(batch, path):
    # (items that are no tensors, or of other shapes: torch.stack's errors,
    # as PyTorch's collate_tensor_fn gives them)
    # torch.stack as PyTorch's collate calls it, the package's public entry
    # (looked up, not imported: this layer is below the package's top), so
    # that a Tensor subclass's __torch_function__ sees it (MONAI's
    # MetaTensor batches stay MetaTensors)
    return getattr(sys.modules.get("tracec"), "stack", stack)(list(batch), 0)


def _registered(elem, fn_map):
    """The non-built-in entry of ``fn_map`` for ``elem``, or None."""
    fn = fn_map.get(type(elem))
    if fn is None:
        for key, f in fn_map.items():
            if isinstance(elem, key):
                fn = f
                break
    return None if fn in _BUILT_IN else fn


def _collate(batch, path, fn_map=None):
    elem = batch[0]
    if fn_map:
        fn = _registered(elem, fn_map)
        if fn is not None:
            return fn(batch, collate_fn_map=fn_map)
    if isinstance(elem, Tensor):
        return _stack_tensors(batch, path)
    if isinstance(elem, np.ndarray) or isinstance(elem, (np.bool_, np.number)):
        for i, a in enumerate(batch):
            if not isinstance(a, (np.ndarray, np.bool_, np.number)):
                raise TypeError(f"default_collate: batch item {i}{_where(path)} is "
                                f"{_type_name(a)} but item 0 is a NumPy "
                                f"{'array' if isinstance(elem, np.ndarray) else 'scalar'}")
            if _bad_numpy(np.asarray(a)):
                raise TypeError(_ERR.format(f"a NumPy array of dtype {a.dtype}") +
                                f" in batch item {i}{_where(path)}")
        if isinstance(elem, np.ndarray):
            return _stack_tensors([as_tensor(a) for a in batch], path)
        return as_tensor(np.array(batch))
    if isinstance(elem, numbers.Integral):
        # PyTorch's collate_int_fn (bools too) is torch.tensor(batch): the
        # dtype is inferred from the whole batch, so ints mixed with floats
        # (a regression target written 0 in one sample, 0.5 in another)
        # make a float32 tensor and bools mixed with ints an int64 one.
        return tensor(_same_kind(batch, (numbers.Real, np.bool_), path))
    if isinstance(elem, float):
        return tensor(_same_kind(batch, numbers.Real, path), dtype=dt.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        # PyTorch's: the first sample's keys (another sample's extra keys are
        # ignored, a missing one is a KeyError); a mutable mapping is a copy
        # of the first sample updated, so its type and extra state survive
        out = {k: _collate([d[k] for d in batch], f"{path}[{k!r}]", fn_map) for k in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(out)
                return clone
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(_collate(s, f"{path}.{f}", fn_map)
                            for f, s in zip(elem._fields, zip(*batch))))
    if isinstance(elem, collections.abc.Sequence):
        _equal_lengths(batch, path)
        # Each field's batch is a tuple, as in PyTorch (strings come back as one).
        out = [_collate(s, f"{path}[{j}]", fn_map) for j, s in enumerate(zip(*batch))]
        if isinstance(elem, tuple):
            return out
        try:
            return type(elem)(out)
        except TypeError:
            return out
    raise TypeError(_ERR.format(type(elem)) + _where(path))   # PyTorch's "<class 'X'>"


def _same_kind(batch, kind, path):
    for i, x in enumerate(batch):
        if not isinstance(x, kind):
            raise TypeError(f"default_collate: batch item {i}{_where(path)} is "
                            f"{_type_name(x)} but item 0 is {_type_name(batch[0])}")
    return list(batch)


def _equal_lengths(batch, path):
    # PyTorch's check (``len`` of an item without one is Python's TypeError)
    n = len(batch[0])
    if not all(len(s) == n for s in batch[1:]):
        raise RuntimeError("each element in list of batch should be of equal size")


def collate(batch, *, collate_fn_map=None):
    """Collate a list of samples into a batch, with the entries of
    ``collate_fn_map`` (see the module docstring)."""
    if len(batch) == 0:
        raise ValueError("default_collate: the batch is empty")
    return _collate(batch, "", collate_fn_map)


def default_collate(batch):
    """Collate a list of samples into a batch (see the module docstring)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


# PyTorch's per-type collate functions (what a registered entry may call,
# as MONAI's MetaTensor collate calls collate_tensor_fn).
def collate_tensor_fn(batch, *, collate_fn_map=None):
    return _stack_tensors(batch, "")


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    return _collate(list(batch), "")


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _collate(list(batch), "")


def collate_float_fn(batch, *, collate_fn_map=None):
    return tensor(list(batch), dtype=dt.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return tensor(list(batch))


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


_BUILT_IN = frozenset((collate_tensor_fn, collate_numpy_array_fn, collate_numpy_scalar_fn,
                       collate_float_fn, collate_int_fn, collate_str_fn))

#: type -> collate function, as PyTorch's (extended by libraries)
default_collate_fn_map: dict = {
    Tensor: collate_tensor_fn, np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn, float: collate_float_fn,
    int: collate_int_fn, str: collate_str_fn, bytes: collate_str_fn}


def default_convert(data):
    """What a ``DataLoader`` with ``batch_size=None`` applies to each
    sample: NumPy arrays (not of strings or objects) become tensors, inside
    dicts, namedtuples, tuples and lists too; everything else is unchanged."""
    if isinstance(data, np.ndarray) and not _bad_numpy(data):
        return as_tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:
            return out
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
