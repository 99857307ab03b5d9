"""``DistributedDataParallel``: data-parallel training over a process group.

Each rank holds a full replica of ``module`` and trains it on its own
batch; after every ``backward()`` that follows a forward through the
wrapper, each parameter's ``.grad`` holds the mean over the ranks of their
``.grad`` -- so with equal batch sizes and a mean loss, N ranks on batches
b1..bN take the step one process takes on their concatenation.

How (PyTorch's reducer, simplified): parameters are grouped into buckets
(reverse registration order, by dtype, ``bucket_cap_mb`` each); when
``backward()`` has accumulated the gradients, each bucket's gradients are
flattened into one buffer, averaged over the ranks in one collective
(``all_reduce`` AVG: the world size is read when it runs) and copied back
into the ``.grad`` tensors in place.  The
reduction runs inside ``backward()`` (an autograd backward listener), after
the gradient computation rather than overlapped with it: tracec's
collectives are blocking.  Every op of it is an ordinary tracec op, so
under ``tracec.compile`` the reduction is part of the traced step and its
all-reduces run in native code.

Invariants: the reduction (and the buffers' broadcast) runs in every world
size, one included, so a step traced in one process is the step any number
of ranks runs (``tracec build`` of a DDP step); at construction every rank's
parameters and buffers are
overwritten with rank 0's; inside ``no_sync()`` gradients accumulate
locally, and the first backward after it reduces the accumulated
gradients (as PyTorch does); ``state_dict`` keys carry the ``module.``
prefix; ranks whose buckets differ (a parameter without a gradient on one
rank only) get a ``CollectiveShapeError`` naming the bucket's parameters,
on every rank.
"""
from __future__ import annotations

import contextlib
import weakref

from tracec import autograd, graph
from tracec import distributed as dist
from tracec.distributed import _tcp
from tracec.nn.modules.module import Module
from tracec.ops import collective as _c
from tracec.shape_ops import cat

__all__ = ["DistributedDataParallel"]

_PENDING: "weakref.WeakSet[DistributedDataParallel]" = weakref.WeakSet()


def _on_backward(tensors, grads, inputs, create_graph):
    """Backward listener: reduce the gradients of every wrapper whose
    forward ran since its last reduction, once the backward has run."""
    if inputs == autograd.GRAD_CALL or not _PENDING:
        return None
    models = list(_PENDING)
    _PENDING.clear()

    def after():
        for m in models:
            m._reduce_gradients()
    return after


autograd.BACKWARD_LISTENERS.append(_on_backward)


class DistributedDataParallel(Module):
    """Wraps ``module``; ``forward`` is the module's own."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None,
                 bucket_cap_mb: float = 25, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, **_torch_only):
        super().__init__()
        self.module = module
        self.process_group = dist.default_group(process_group)
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._names = {id(p): "module." + n for n, p in named}
        self._buckets = self._make_buckets([p for _, p in named])
        with graph.no_grad():
            for t in [*module.parameters(), *module.buffers()]:
                dist.broadcast(t, 0, self.process_group)

    def _make_buckets(self, params) -> list[list]:
        """Reverse registration order (gradients of the last layers are
        ready first), one dtype per bucket, at most ``bucket_bytes_cap``
        bytes each (a larger parameter gets a bucket of its own)."""
        buckets, size, cur = [], 0, []
        for p in reversed(params):
            nbytes = p.numel() * p.dtype.itemsize
            if cur and (size + nbytes > self.bucket_bytes_cap or p.dtype is not cur[0].dtype):
                buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            buckets.append(cur)
        return buckets

    def forward(self, *args, **kwargs):
        pg = self.process_group
        if graph.is_grad_enabled() and self.require_backward_grad_sync:
            _PENDING.add(self)
        if self.broadcast_buffers:
            with graph.no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, 0, pg)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients without reducing."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _reduce_gradients(self) -> None:
        pg = self.process_group
        with graph.no_grad():
            for bucket in self._buckets:
                params = [p for p in bucket if p.grad is not None]
                if not params:
                    continue
                grads = [p.grad for p in params]
                flat = cat([g.reshape(-1) for g in grads]) if len(grads) > 1 \
                    else grads[0].reshape(-1)
                try:
                    if isinstance(pg, _tcp.TCPGroup):       # gloo: eagerly, over TCP
                        mean = flat.clone()
                        dist.all_reduce(mean, dist.ReduceOp.AVG, pg)
                    else:
                        mean = _c.all_reduce(flat, _c.AVG, pg.fint)
                except _c.CollectiveShapeError as e:
                    names = ", ".join(self._names[id(p)] for p in bucket)
                    missing = [self._names[id(p)] for p in bucket if p.grad is None]
                    raise _c.CollectiveShapeError(
                        f"DistributedDataParallel: the gradient bucket of [{names}] differs "
                        f"across ranks; parameters without a gradient on rank {pg.rank()}: "
                        f"{missing or 'none'} ({e})") from None
                off = 0
                for g in grads:
                    k = g.numel()
                    g.copy_(mean[off:off + k].reshape(g.shape))
                    off += k
