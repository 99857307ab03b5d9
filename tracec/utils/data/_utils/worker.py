"""``torch.utils.data._utils.worker``: ``get_worker_info`` and
``WorkerInfo`` (``tracec.utils.data.workers``)."""
from tracec.utils.data import get_worker_info  # noqa: F401
from tracec.utils.data.workers import WorkerInfo  # noqa: F401

__all__ = ["get_worker_info", "WorkerInfo"]
