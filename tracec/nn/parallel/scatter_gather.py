"""``torch.nn.parallel.scatter_gather``: ``scatter`` / ``scatter_kwargs``
split a nest of tensors into one piece per target device (``chunk`` along
``dim``, as PyTorch's ``comm.scatter``; other objects are repeated) and
``gather`` concatenates per-device results back.  tracec holds tensors on
one CPU device, so the pieces stay where they are; the nesting rules
(namedtuples, tuples, lists, dicts) are PyTorch's."""
from __future__ import annotations

from typing import Any, Sequence

from tracec.shape_ops import cat
from tracec.tensor import Tensor

__all__ = ["gather", "is_namedtuple", "scatter", "scatter_kwargs"]


def is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


_is_namedtuple = is_namedtuple


def scatter(inputs: Any, target_gpus: Sequence, dim: int = 0) -> Any:
    """One copy of ``inputs`` per entry of ``target_gpus``, its tensors chunked."""
    def scatter_map(obj):
        if isinstance(obj, Tensor):
            return list(obj.chunk(len(target_gpus), dim))
        if is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in target_gpus]

    return scatter_map(inputs)


def scatter_kwargs(inputs: tuple, kwargs: dict | None, target_gpus: Sequence,
                   dim: int = 0) -> tuple[tuple, tuple]:
    """``scatter`` of the positional and keyword arguments, padded to equal counts."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs: Any, target_device: Any, dim: int = 0) -> Any:
    """The per-device ``outputs`` joined: tensors concatenated along ``dim``."""
    def gather_map(outputs):
        out = outputs[0]
        if isinstance(out, Tensor):
            return cat([o if o.dim() else o.reshape(1) for o in outputs], dim if out.dim() else 0)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outputs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outputs])) for k in out)
        if is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outputs)))
        return type(out)(map(gather_map, zip(*outputs)))

    return gather_map(outputs)
