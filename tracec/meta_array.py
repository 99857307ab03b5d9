"""Storage of tensors on the ``meta`` device: a shape and a dtype, no data.

PyTorch's meta tensors let a program build a model without memory (``with
torch.device("meta"): model = Big()``), inspect shapes, then materialize it
(``model.to_empty(device="cpu")``, ``load_state_dict(..., assign=True)``).
Here a meta tensor is an ordinary ``Tensor`` whose ``_data`` is a
``MetaArray``: an ndarray subclass over one zero element with every
stride 0, so a shape of any size costs no memory.  Everything that reads a
tensor's storage keeps working on it; what makes the result meta again:

* ``Tensor._bind_primitive`` gives a primitive with a meta operand a meta
  result of the shape and dtype its rules compute, without running it
  (``meta_result``);
* NumPy ufuncs and functions called on a ``MetaArray`` by the composites
  that work on arrays directly return ``MetaArray`` results
  (``__array_ufunc__`` / ``__array_function__``: they compute on the zeros,
  then drop the values);
* writes into one are dropped (``__setitem__``, and ``Tensor._write_data``),
  as PyTorch's in-place ops on meta tensors do nothing.

Invariant: a ``MetaArray`` is never written and its values are never read
as data: ``item()``, ``tolist()``, ``numpy()`` and copies to "cpu" refuse a
meta tensor with PyTorch's errors.  ``USED[0]`` turns True when the first
one is made, so code paths pay nothing for meta support until then.
"""
from __future__ import annotations

import numpy as np

__all__ = ["MetaArray", "USED", "is_meta", "meta_like", "strip"]

#: Whether any meta array was made in this process (hot paths check it first).
USED = [False]


class MetaArray(np.ndarray):
    """A zero-strided, read-only ndarray standing for data that does not exist."""

    @staticmethod
    def of(shape, dtype) -> "MetaArray":
        USED[0] = True
        shape = tuple(int(s) for s in shape)
        base = np.zeros(1, dtype=dtype)
        a = np.lib.stride_tricks.as_strided(base, shape=shape, strides=(0,) * len(shape),
                                            writeable=False)
        return a.view(MetaArray)

    def __setitem__(self, key, value):
        pass        # an in-place write to a meta tensor does nothing

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        if out is not None and any(isinstance(o, MetaArray) for o in out):
            return out[0] if len(out) == 1 else out
        res = getattr(ufunc, method)(*strip(inputs), **kwargs)
        return meta_like(res)

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.copyto, np.put, np.place, np.putmask):
            if isinstance(args[0] if args else None, MetaArray):
                return None
        res = func(*strip(args), **strip(kwargs))
        return meta_like(res)


def is_meta(a) -> bool:
    return type(a) is MetaArray


def strip(x):
    """``x`` with every MetaArray in it (nested in tuples, lists, dicts)
    seen as a plain ndarray (the same zeros, for NumPy to compute on)."""
    if type(x) is MetaArray:
        return x.view(np.ndarray)
    if isinstance(x, (tuple, list)):
        return type(x)(strip(v) for v in x)
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items()}
    return x


def meta_like(res):
    """A NumPy result (an array, a scalar, or a tuple of them) as meta arrays."""
    if isinstance(res, tuple):
        return tuple(meta_like(r) for r in res)
    if isinstance(res, list):
        return [meta_like(r) for r in res]
    if isinstance(res, (np.ndarray, np.generic)):
        return MetaArray.of(np.shape(res), res.dtype)
    return res
