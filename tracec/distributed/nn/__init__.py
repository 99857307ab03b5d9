"""``tracec.distributed.nn``: PyTorch's differentiable collectives
(``torch.distributed.nn``, imported by libraries that average statistics
across ranks, e.g. vector-quantize-pytorch's LFQ): ``all_reduce``,
``broadcast`` and ``all_gather`` returning new tensors that autograd
differentiates (``functional``).  PyTorch's RPC ``RemoteModule`` is not
provided."""
from tracec.distributed.nn.functional import all_gather, all_reduce, broadcast  # noqa: F401

__all__ = ["all_gather", "all_reduce", "broadcast"]
