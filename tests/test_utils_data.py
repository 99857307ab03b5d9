"""tracec.utils.data against torch.utils.data: batches, len, drop_last,
collation (dtypes, containers, errors), samplers, random_split,
DistributedSampler, and shuffling that tracec.manual_seed makes repeatable."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import tracec
import tracec.utils.data as data
from tracec.utils.data.distributed import DistributedSampler

from nn_helpers import assert_same_containers


def _as_np(x):
    if isinstance(x, (tracec.Tensor, torch.Tensor)):
        return np.asarray(x.tolist())
    return np.asarray(x)


def _same_leaf(a, b):
    if isinstance(b, torch.Tensor):
        assert isinstance(a, tracec.Tensor), type(a)
        assert a.dtype.name == str(b.dtype).removeprefix("torch."), (a.dtype, b.dtype)
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(_as_np(a), _as_np(b))
    else:
        assert a == b


def _same(a, b):
    """tracec batch ``a`` equals torch batch ``b`` (values, dtype, containers)."""
    assert_same_containers(a, b, _same_leaf)


def _pair_datasets(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64) % 4
    return (data.TensorDataset(tracec.tensor(x), tracec.tensor(y)),
            tud.TensorDataset(torch.tensor(x), torch.tensor(y)))


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (5, True),
                                                  (10, False), (16, False), (16, True)])
def test_sequential_batches_and_len_match_torch(batch_size, drop_last):
    ours, theirs = _pair_datasets()
    a = data.DataLoader(ours, batch_size=batch_size, drop_last=drop_last)
    b = tud.DataLoader(theirs, batch_size=batch_size, drop_last=drop_last)
    assert len(a) == len(b)
    got, want = list(a), list(b)
    assert len(got) == len(want) == len(a)
    for x, y in zip(got, want):
        _same(x, y)


def test_batch_size_none_converts_without_batching():
    samples = [np.full(2, i, np.float32) for i in range(3)]
    a = list(data.DataLoader(samples, batch_size=None))
    b = list(tud.DataLoader(samples, batch_size=None))
    for x, y in zip(a, b):
        _same(x, y)


def test_shuffle_is_a_permutation_repeatable_under_manual_seed():
    ours, _ = _pair_datasets(50)
    dl = data.DataLoader(ours, batch_size=7, shuffle=True)

    tracec.manual_seed(123)
    first = [int(v) // 3 for xb, _ in dl for v in xb[:, 0].tolist()]
    second = [int(v) // 3 for xb, _ in dl for v in xb[:, 0].tolist()]
    tracec.manual_seed(123)
    again = [int(v) // 3 for xb, _ in dl for v in xb[:, 0].tolist()]
    assert sorted(first) == list(range(50)) and sorted(second) == list(range(50))
    assert first != list(range(50))          # shuffled
    assert first != second                   # a new order each epoch
    assert first == again                    # the seed fixes the order
    tracec.manual_seed(124)
    assert [int(v) // 3 for xb, _ in dl for v in xb[:, 0].tolist()] != first


def test_shuffle_with_a_generator():
    ds = list(range(20))
    g = tracec.Generator()
    g.manual_seed(7)
    a = [i for b in data.DataLoader(ds, batch_size=4, shuffle=True, generator=g)
         for i in b.tolist()]
    g.manual_seed(7)
    tracec.manual_seed(999)   # the global generator plays no part
    b = [i for b in data.DataLoader(ds, batch_size=4, shuffle=True, generator=g)
         for i in b.tolist()]
    assert a == b and sorted(a) == ds


def test_default_collate_dtypes_and_containers_match_torch():
    Point = collections.namedtuple("Point", "x y")
    batches = [
        [1, 2, 3],
        [1.5, 2.5],
        [True, False],
        [np.float32(1.5), np.float32(2)],
        [np.int32(3), np.int32(4)],
        [np.ones((2, 2), np.float64), np.zeros((2, 2), np.float64)],
        [np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int64)],
        ["a", "b"],
        [(1, 2.0, "s"), (3, 4.0, "t")],
        [[1, 2], [3, 4]],
        [{"img": np.ones(3, np.float32), "label": 1}, {"img": np.zeros(3, np.float32),
                                                       "label": 2}],
        [collections.OrderedDict(a=1.0), collections.OrderedDict(a=2.0)],
        [Point(1, 2.0), Point(3, 4.0)],
    ]
    for batch in batches:
        _same(data.default_collate(batch), tud.default_collate(batch))


def test_default_collate_stacks_tensors():
    xs = [np.random.default_rng(i).standard_normal((2, 3)).astype(np.float32) for i in range(4)]
    a = data.default_collate([tracec.tensor(x) for x in xs])
    b = tud.default_collate([torch.tensor(x) for x in xs])
    _same(a, b)
    pairs = [(tracec.tensor(x), i) for i, x in enumerate(xs)]
    got = data.default_collate(pairs)
    assert isinstance(got, list) and tuple(got[0].shape) == (4, 2, 3)
    assert got[1].dtype is tracec.int64 and got[1].tolist() == [0, 1, 2, 3]


def test_collate_errors_name_the_item_and_the_reason():
    # samples of other shapes: torch.stack's error, as in PyTorch
    batch = [tracec.zeros(2, 4)] * 3 + [tracec.zeros(2, 5)]
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got "
                                           r"\[2, 4\] at entry 0 and \[2, 5\] at entry 3"):
        data.default_collate(batch)
    with pytest.raises(RuntimeError, match=r"but got \[2\] at entry 0 and \[3\] at entry 1"):
        data.default_collate([{"x": np.zeros(2)}, {"x": np.zeros(3)}])

    class Thing:
        pass
    with pytest.raises(TypeError, match="found .*Thing"):
        data.default_collate([Thing(), Thing()])
    with pytest.raises(TypeError, match="found a NumPy array of dtype object"):
        data.default_collate([np.array([object()]), np.array([object()])])
    with pytest.raises(TypeError, match="batch item 1 is str but item 0 is int"):
        data.default_collate([1, "x"])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal "
                                           "size"):
        data.default_collate([[1, 2], [1]])
    with pytest.raises(KeyError, match="'a'"):       # (the first sample's keys, as PyTorch)
        data.default_collate([{"a": 1}, {"b": 1}])
    # through a DataLoader too
    dl = data.DataLoader([np.zeros(2), np.zeros(2), np.zeros(3)], batch_size=3)
    with pytest.raises(RuntimeError, match="at entry 2"):
        next(iter(dl))


@pytest.mark.parametrize("kwargs,msg", [
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    (dict(shuffle=True, sampler=[0, 1]), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    (dict(batch_size=0), "batch_size should be a positive integer value"),
])
def test_argument_errors_match_torch(kwargs, msg):
    ds = list(range(4))
    with pytest.raises(ValueError, match=msg):
        tud.DataLoader(ds, **kwargs)
    with pytest.raises(ValueError, match=msg):
        data.DataLoader(ds, **kwargs)


def test_num_workers_loads_in_process():
    ours, theirs = _pair_datasets(9)
    a = data.DataLoader(ours, batch_size=4, num_workers=2, persistent_workers=True,
                        prefetch_factor=4, worker_init_fn=lambda i: None)
    b = tud.DataLoader(theirs, batch_size=4)
    for x, y in zip(list(a), list(b)):
        _same(x, y)
    assert data.get_worker_info() is None


def test_pin_memory_warns_as_each_iterator_starts_from_one_place():
    # PyTorch warns when iter() starts (not at construction), from inside
    # the library: the default filter then shows it once for all loaders.
    import warnings
    for lib in (tud, data):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            loaders = [lib.DataLoader(list(range(4)), batch_size=2, pin_memory=True)
                       for _ in range(2)]
            assert got == []
            for loader in loaders:
                list(loader)
                iter(loader)
        msgs = {str(w.message) for w in got}
        assert msgs == {"'pin_memory' argument is set as true but no accelerator is found, "
                        "then device pinned memory won't be used."}, lib
        assert len(got) == 4
        assert len({(w.filename, w.lineno) for w in got}) == 1
        assert "test_utils_data" not in got[0].filename
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            iter(lib.DataLoader([1], pin_memory=True, pin_memory_device="cuda"))
        assert str(got[0].message) == ("pin_memory_device is deprecated, the current accelerator "
                                       "will be used as the device,ignore "
                                       "pin_memory_device='cuda'."), lib


def test_batch_sampler_and_custom_sampler():
    ds = list(range(10))
    bs = [[0, 1], [5], [9, 8, 7]]
    assert [b.tolist() for b in data.DataLoader(ds, batch_sampler=bs)] == \
        [b.tolist() for b in tud.DataLoader(ds, batch_sampler=bs)]
    sampler = [3, 1, 4, 1, 5]
    assert [b.tolist() for b in data.DataLoader(ds, batch_size=2, sampler=sampler)] == \
        [b.tolist() for b in tud.DataLoader(ds, batch_size=2, sampler=sampler)]
    assert list(data.BatchSampler(data.SequentialSampler(ds), 3, True)) == \
        list(tud.BatchSampler(tud.SequentialSampler(ds), 3, True))
    assert len(data.BatchSampler(range(10), 3, False)) == 4


def test_random_samplers():
    tracec.manual_seed(0)
    rs = data.RandomSampler(range(10), num_samples=25)
    got = list(rs)
    assert len(got) == len(rs) == 25
    assert sorted(got[:10]) == list(range(10)) and sorted(got[10:20]) == list(range(10))
    rr = data.RandomSampler(range(5), replacement=True, num_samples=2000)
    counts = np.bincount(list(rr), minlength=5)
    assert counts.sum() == 2000 and counts.min() > 300
    sub = list(data.SubsetRandomSampler([10, 20, 30]))
    assert sorted(sub) == [10, 20, 30]
    w = list(data.WeightedRandomSampler([0.0, 1.0, 3.0], 4000))
    counts = np.bincount(w, minlength=3)
    assert counts[0] == 0 and 2.6 < counts[2] / counts[1] < 3.4
    wo = list(data.WeightedRandomSampler([1.0, 0.0, 2.0, 5.0], 3, replacement=False))
    assert sorted(wo) == [0, 2, 3]
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        data.RandomSampler(range(3), num_samples=0)


def test_iterable_dataset():
    def counter(base):
        class Count(base):
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                return iter(range(self.n))

            def __len__(self):
                return self.n
        return Count

    Count, TCount = counter(data.IterableDataset), counter(tud.IterableDataset)

    for bs, dl in [(3, False), (3, True), (None, False)]:
        a = data.DataLoader(Count(7), batch_size=bs, drop_last=dl)
        b = tud.DataLoader(TCount(7), batch_size=bs, drop_last=dl)
        assert len(a) == len(b)
        assert [_as_np(x).tolist() for x in a] == [_as_np(x).tolist() for x in b]
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        data.DataLoader(Count(3), shuffle=True)
    chained = Count(2) + Count(3)
    assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5


def test_concat_subset_and_random_split():
    a, b = list(range(3)), list(range(10, 15))
    cat = data.ConcatDataset([a, b])
    tcat = tud.ConcatDataset([a, b])
    assert len(cat) == len(tcat) == 8
    assert [cat[i] for i in range(-8, 8)] == [tcat[i] for i in range(-8, 8)]
    assert cat.cumulative_sizes == tcat.cumulative_sizes
    with pytest.raises(ValueError, match="absolute value of index should not exceed"):
        cat[-9]
    sub = data.Subset(list("abcdef"), [5, 0, 2])
    assert [sub[i] for i in range(len(sub))] == ["f", "a", "c"]

    ds = list(range(10))
    for lengths in ([3, 7], [0.3, 0.7], [0.25, 0.25, 0.5], [0.33, 0.33, 0.34]):
        ours = data.random_split(ds, lengths)
        theirs = tud.random_split(ds, lengths)
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(i for s in ours for i in s) == ds
    tracec.manual_seed(5)
    x = [list(s) for s in data.random_split(ds, [4, 6])]
    tracec.manual_seed(5)
    assert [list(s) for s in data.random_split(ds, [4, 6])] == x
    g1 = tracec.Generator().manual_seed(1)
    g2 = tracec.Generator().manual_seed(1)
    assert [list(s) for s in data.random_split(ds, [5, 5], generator=g1)] == \
        [list(s) for s in data.random_split(ds, [5, 5], generator=g2)]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        data.random_split(ds, [3, 3])
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        tud.random_split(ds, [3, 3])


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (2, 4, False),
                                                  (12, 4, True), (7, 2, False)])
def test_distributed_sampler_shards_like_torch(n, replicas, drop_last):
    ds = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(ds, num_replicas=replicas, rank=rank, shuffle=False,
                                  drop_last=drop_last)
        theirs = tud.DistributedSampler(ds, num_replicas=replicas, rank=rank, shuffle=False,
                                        drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    shards = [list(DistributedSampler(ds, num_replicas=replicas, rank=r, drop_last=drop_last))
              for r in range(replicas)]
    flat = [i for s in shards for i in s]
    if drop_last:
        assert len(set(flat)) == len(flat)
    else:
        assert set(flat) == set(ds)


def test_distributed_sampler_epochs_and_errors():
    ds = list(range(20))
    s = DistributedSampler(ds, num_replicas=2, rank=1, seed=3)
    e0 = list(s)
    assert list(s) == e0
    s.set_epoch(1)
    assert list(s) != e0
    assert list(DistributedSampler(ds, num_replicas=2, rank=1, seed=3)) == e0
    with pytest.raises(RuntimeError, match="num_replicas and rank must be given when no "
                                           "process group is initialized"):
        DistributedSampler(ds)
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval "
                                         r"\[0, 1\]"):
        DistributedSampler(ds, num_replicas=2, rank=2)


def test_random_sampler_with_replacement_draws_lazily():
    # minGPT's trainer: RandomSampler(ds, replacement=True, num_samples=int(1e10)),
    # consumed until the training loop stops.
    import itertools
    s = tracec.utils.data.RandomSampler(range(7), replacement=True, num_samples=int(1e10))
    first = list(itertools.islice(iter(s), 100))
    assert len(first) == 100 and set(first) <= set(range(7)) and len(set(first)) == 7
    assert len(s) == int(1e10)


# --- num_workers > 0, emulated in process with PyTorch's semantics ------------------------

def _workers_case(L, kind):
    U = L.utils.data

    class Sharded(U.IterableDataset):
        """PyTorch's documented pattern: each worker reads its own share."""
        def __init__(self, start, end):
            self.start, self.end = start, end

        def __iter__(self):
            info = U.get_worker_info()
            if info is None:
                lo, hi = self.start, self.end
            else:
                per = -(-(self.end - self.start) // info.num_workers)
                lo = self.start + info.id * per
                hi = min(lo + per, self.end)
            return iter(range(lo, hi))

    class Whole(U.IterableDataset):
        def __iter__(self):   # not sharded: every worker yields all of it
            return iter(range(5))

    class Tagged(U.Dataset):
        def __len__(self):
            return 9

        def __getitem__(self, i):
            info = U.get_worker_info()
            return i * 10 + (-1 if info is None else info.id)

    class Ranged(U.IterableDataset):
        def __init__(self):
            self.start, self.end = 0, 11

        def __iter__(self):
            return iter(range(self.start, self.end))

    def init(worker_id):      # the docs' worker_init_fn sharding
        info = U.get_worker_info()
        ds = info.dataset
        per = -(-(ds.end - ds.start) // info.num_workers)
        ds.start = ds.start + worker_id * per
        ds.end = min(ds.start + per, ds.end)

    cases = {
        "sharded": lambda: U.DataLoader(Sharded(3, 20), batch_size=3, num_workers=3),
        "sharded_drop_last": lambda: U.DataLoader(Sharded(0, 17), batch_size=4, num_workers=2,
                                                  drop_last=True),
        "sharded_unbatched": lambda: U.DataLoader(Sharded(0, 7), batch_size=None, num_workers=2),
        "whole": lambda: U.DataLoader(Whole(), batch_size=2, num_workers=2),
        "map": lambda: U.DataLoader(Tagged(), batch_size=2, num_workers=3),
        "map_main": lambda: U.DataLoader(Tagged(), batch_size=4),
        "init_fn": lambda: U.DataLoader(Ranged(), batch_size=2, num_workers=3, worker_init_fn=init),
    }
    return [b.tolist() if hasattr(b, "tolist") else b for b in cases[kind]()]


@pytest.mark.parametrize("kind", ["sharded", "sharded_drop_last", "sharded_unbatched", "whole",
                                  "map", "map_main", "init_fn"])
def test_workers_batches_and_order_match_pytorch(kind):
    torch = pytest.importorskip("torch")
    assert _workers_case(tracec, kind) == _workers_case(torch, kind)


def test_worker_random_state_is_its_own():
    """Each worker draws from its own stream (seeded base_seed + id); the
    main process's stream is not advanced by the workers' draws."""
    U = tracec.utils.data

    class Noisy(U.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return tracec.rand(()).item(), np.random.rand(), U.get_worker_info().seed

    tracec.manual_seed(0)
    rows = [b for b in U.DataLoader(Noisy(), batch_size=None, num_workers=2)]
    after = tracec.rand(()).item()
    seeds = [r[2] for r in rows]
    assert seeds[0::2] == [seeds[0]] * 3 and seeds[1::2] == [seeds[0] + 1] * 3
    assert len({r[0] for r in rows}) == 6 and len({r[1] for r in rows}) == 6
    tracec.manual_seed(0)
    rows2 = [b for b in U.DataLoader(Noisy(), batch_size=None, num_workers=2)]
    assert rows2 == rows                       # reproducible under manual_seed
    assert tracec.rand(()).item() == after     # one base-seed draw, as PyTorch's
    assert U.get_worker_info() is None
