"""``torch.utils.data._utils.fetch``: the fetchers (``tracec.utils.data.fetch``)."""
from tracec.utils.data.fetch import (  # noqa: F401
    _BaseDatasetFetcher, _IterableDatasetFetcher, _MapDatasetFetcher)

__all__ = ["_BaseDatasetFetcher", "_IterableDatasetFetcher", "_MapDatasetFetcher"]
