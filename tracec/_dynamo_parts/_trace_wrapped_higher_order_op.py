"""``torch._dynamo._trace_wrapped_higher_order_op`` (a submodule of
``tracec._dynamo``, which is one file): what libraries import
from it, ``TransformGetItemToIndex``."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.creation import tensor
from tracec.overrides import TorchFunctionMode
from tracec.tensor import Tensor
from tracec.utils import _pytree

__all__ = ["TransformGetItemToIndex"]


class TransformGetItemToIndex(TorchFunctionMode):
    """``x[i]`` with integer / tensor indices becomes the advanced index
    ``aten.index(x, [tensor(i), ...])`` (PyTorch's: so a 0-d tensor index
    is never read as a Python number, as ``vmap``'d mask functions need)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is Tensor.__getitem__:
            x = args[0]
            leaves = _pytree.tree_leaves(args[1])
            if all(isinstance(i, (Tensor, int)) for i in leaves):
                index = tuple(tensor(i, dtype=dt.int64) if isinstance(i, int) else i for i in leaves)
                return x[index]
        return func(*args, **(kwargs or {}))
