"""The fetchers a DataLoader iterator reads samples through (PyTorch's
``torch.utils.data._utils.fetch``): one per data set kind, made by
``_DatasetKind.create_fetcher``.  ``fetch(index)`` turns one item of the
loader's ``_index_sampler`` (a batch of keys with auto-collation, else a
key) into what the loader yields, collated; it raises StopIteration when
an iterable data set has nothing left for it."""
from __future__ import annotations

__all__ = ["_BaseDatasetFetcher", "_IterableDatasetFetcher", "_MapDatasetFetcher"]


class _BaseDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, possibly_batched_index):
        raise NotImplementedError


class _IterableDatasetFetcher(_BaseDatasetFetcher):
    """Reads the next samples of ``iter(dataset)`` (taken when made): as
    many as the index has keys (the keys themselves are ignored); a short
    last batch is kept unless ``drop_last``."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last) -> None:
        super().__init__(dataset, auto_collation, collate_fn, drop_last)
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in possibly_batched_index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(possibly_batched_index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return self.collate_fn(data)


class _MapDatasetFetcher(_BaseDatasetFetcher):
    """``dataset[key]`` for each key (``dataset.__getitems__(keys)`` when the
    data set has a true one)."""

    def fetch(self, possibly_batched_index):
        if self.auto_collation:
            if hasattr(self.dataset, "__getitems__") and self.dataset.__getitems__:
                data = self.dataset.__getitems__(possibly_batched_index)
            else:
                data = [self.dataset[idx] for idx in possibly_batched_index]
        else:
            data = self.dataset[possibly_batched_index]
        return self.collate_fn(data)
