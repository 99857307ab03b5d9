"""``torch.fx.passes.shape_prop``: ``ShapeProp`` runs a ``GraphModule`` on
example inputs node by node and records each tensor result's
``TensorMetadata`` in ``node.meta['tensor_meta']`` (and its type in
``node.meta['type']``), as PyTorch's pass does; tuples and lists of tensors
get a tuple / list of metadata."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

from tracec.fx import Interpreter, Node
from tracec.tensor import Tensor
from tracec.tensor_meta import channels_last, channels_last_3d, contiguous_format

__all__ = ["TensorMetadata", "ShapeProp"]


class TensorMetadata(NamedTuple):
    shape: Any
    dtype: Any
    requires_grad: bool
    stride: Tuple[int, ...]
    memory_format: Optional[Any]
    is_quantized: bool
    qparams: dict


def _extract_tensor_metadata(result: Tensor) -> TensorMetadata:
    memory_format = next((f for f in (contiguous_format, channels_last, channels_last_3d)
                          if result.is_contiguous(memory_format=f)), None)
    return TensorMetadata(result.shape, result.dtype, result.requires_grad, result.stride(),
                          memory_format, False, {})


def _map_tensors(result, fn):
    if isinstance(result, Tensor):
        return fn(result)
    if isinstance(result, (tuple, list)):
        return type(result)(_map_tensors(r, fn) for r in result) \
            if not hasattr(result, "_fields") else result
    if isinstance(result, dict):
        return {k: _map_tensors(v, fn) for k, v in result.items()}
    return result


class ShapeProp(Interpreter):
    """``ShapeProp(gm).propagate(*args)``: runs ``gm`` and annotates its nodes."""

    def __init__(self, gm, fake_mode=None):
        super().__init__(gm)

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        found = []

        def extract(obj):
            found.append(True)
            return _extract_tensor_metadata(obj)
        meta = _map_tensors(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        """Run the module on ``args`` (its ``placeholder`` values), annotating
        every node; returns the module's result."""
        return super().run(*args)
