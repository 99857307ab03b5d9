"""``tracec.nn.utils.convert_parameters``: ``parameters_to_vector`` and
``vector_to_parameters``, as PyTorch's.

Invariant (PyTorch's): ``vector_to_parameters`` rebinds each parameter's
``.data`` to a view of ``vec``, so afterwards the parameters share memory
with ``vec`` (and keep their identity, so optimizers still hold them).
"""
from __future__ import annotations

from tracec import shape_ops as S
from tracec.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_param_device(param: Tensor, old):
    """Every parameter on one device (PyTorch's rule and message)."""
    here = str(param.device)
    if old is not None and here != old:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return here


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened and concatenated, in iteration order."""
    device = None
    vec = []
    for p in parameters:
        device = _check_param_device(p, device)
        vec.append(S.reshape(p, -1))
    return S.cat(vec)


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Slice ``vec`` into the parameters' shapes, in iteration order."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device = None
    at = 0
    for p in parameters:
        device = _check_param_device(p, device)
        n = p.numel()
        p.data = S.reshape(vec[at:at + n], tuple(p.shape)).data
        at += n
