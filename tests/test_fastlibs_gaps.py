"""Gaps that fastai (``tests/programs/fastlibs``) found in tracec, each
checked against torch without fastai."""
import io
import itertools

import numpy as np
import pytest
import torch

import tracec


def _fake_loader(lib, items):
    """A loader-like object as fastai's ``_FakeLoader``: no DataLoader, only
    the attributes PyTorch's iterators read; an iterable "data set" that is
    the object itself, an infinite index sampler, no collation."""
    kind = lib.utils.data.dataloader._DatasetKind

    class Fake:
        _IterableDataset_len_called, _auto_collation, drop_last, in_order = None, False, False, True
        generator, prefetch_factor, dataset_kind = None, 2, kind.Iterable
        _dataset_kind = kind.Iterable
        num_workers, timeout, pin_memory, pin_memory_device = 0, 0, False, ""
        persistent_workers, worker_init_fn, multiprocessing_context = False, None, None

        def __init__(self):
            self.dataset = self
            self._index_sampler = itertools.count()

        @staticmethod
        def collate_fn(x):
            return x

        def __iter__(self):
            return iter(items)
    return Fake()


def test_dataloader_iterator_reads_a_loader_like_object():
    """``_SingleProcessDataLoaderIter(obj)`` needs only PyTorch's attribute
    names on ``obj`` (fastai's DataLoader iterates its ``_FakeLoader`` so),
    and draws the base seed from the global generator as PyTorch's does."""
    got = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        it = lib.utils.data.dataloader._SingleProcessDataLoaderIter(_fake_loader(lib, "abc"))
        got.append((list(it), it._num_yielded, lib.rand(2).tolist()))
    assert got[1] == got[0] and got[0][0] == ["a", "b", "c"]


@pytest.mark.parametrize("auto", [True, False])
def test_dataset_fetchers_are_pytorchs(auto):
    """``_DatasetKind.create_fetcher`` and the fetchers' ``fetch``: a map
    data set indexed by a batch of keys (or one key), an iterable one cut
    into batches, a short last batch dropped or kept."""
    out = []
    for lib in (torch, tracec):
        kind = lib.utils.data.dataloader._DatasetKind
        res = [kind.Map, kind.Iterable]
        f = kind.create_fetcher(kind.Map, [10, 11, 12, 13], auto, lambda x: x, False)
        res.append(f.fetch([2, 0]) if auto else f.fetch(3))
        for drop in (False, True):
            f = kind.create_fetcher(kind.Iterable, range(5), auto, lambda x: x, drop)
            got = []
            try:
                while True:
                    got.append(f.fetch([None, None]))
            except StopIteration:
                pass
            res.append(got)
        out.append(res)
    assert out[1] == out[0]


def test_dataloader_with_workers_is_unchanged():
    """The emulated workers (now fed by the iterator's indices) give
    PyTorch's batches: map-style from worker i % n, an iterable data set
    read by every worker until each ends, a persistent loader over two
    epochs."""
    class Squares(torch.utils.data.Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return i * i

    def batches(lib, **kw):
        lib.manual_seed(0)
        ds = type("S", (lib.utils.data.Dataset,), dict(vars(Squares)))()
        dl = lib.utils.data.DataLoader(ds, batch_size=2, num_workers=2, **kw)
        return [[b.tolist() for b in dl] for _ in range(2)]
    for kw in ({}, {"persistent_workers": True}, {"shuffle": True}):
        assert batches(tracec, **kw) == batches(torch, **kw)


def test_torch_amp_is_a_package_with_grad_scaler_and_autocast_mode():
    """``from torch.amp.grad_scaler import OptState`` (fastai's fp16
    callback) and ``torch.amp.autocast_mode.autocast``."""
    import importlib
    for path in ("amp.grad_scaler", "amp.autocast_mode"):
        importlib.import_module("torch." + path)
        importlib.import_module("tracec." + path)
    from torch.amp.grad_scaler import OptState as want
    from tracec.amp.grad_scaler import GradScaler, OptState
    from tracec.amp.autocast_mode import autocast
    assert [(s.name, s.value) for s in OptState] == [(s.name, s.value) for s in want]
    assert GradScaler is tracec.amp.GradScaler and autocast is tracec.autocast


def test_flatten_and_unflatten_dense_tensors():
    """``torch._utils._flatten_dense_tensors`` / ``_unflatten_dense_tensors``
    (fastai's fp16_utils): one contiguous flat tensor, and views of it."""
    from torch._utils import _flatten_dense_tensors as f0, _unflatten_dense_tensors as u0
    from tracec._utils import _flatten_dense_tensors as f1, _unflatten_dense_tensors as u1
    out = []
    for lib, f, u in ((torch, f0, u0), (tracec, f1, u1)):
        a = lib.arange(6.).reshape(2, 3).t()
        b = lib.ones(2)
        flat = f([a, b])
        parts = u(flat * 2, [a, b])
        out.append((flat.tolist(), f([a]).tolist(), type(parts).__name__,
                    [(p.tolist(), p.shape, p.stride()) for p in parts]))
        flat.zero_()
        assert u(flat, [a, b])[0].sum().item() == 0      # views of flat
    assert out[1] == out[0]


def test_save_with_cloudpickle_in_pytorchs_format():
    """``torch.save(obj, f, pickle_module=cloudpickle)`` from a script run
    as PyTorch (fastai's ``Learner.export``): a local function pickled by
    value, the class ``torch.Tensor`` by PyTorch's name, so that torch
    loads it."""
    cloudpickle = pytest.importorskip("cloudpickle")
    from tracec import as_torch, dtypes
    scale = 3.0

    def local(x):
        return x * scale
    dtypes.PUBLIC_NAME[0] = "torch"        # as `tracec run` installs it
    as_torch._rename_classes(True)
    try:
        buf = io.BytesIO()
        tracec.save({"fn": local, "cls": tracec.Tensor, "w": tracec.arange(3.)}, buf,
                    pickle_module=cloudpickle, pickle_protocol=2)
    finally:
        as_torch._rename_classes(False)
        dtypes.PUBLIC_NAME[0] = "tracec"
    buf.seek(0)
    got = torch.load(buf, weights_only=False)
    assert got["cls"] is torch.Tensor
    assert got["fn"](got["w"]).tolist() == [0.0, 3.0, 6.0]
    assert np.array_equal(got["w"].numpy(), np.arange(3.0, dtype=np.float32))


def test_module_to_none_changes_nothing():
    """``model.to(None)`` (fastai's TrainEvalCallback moves the model to
    ``dls.device``, None for DataLoaders made from plain data sets)."""
    for lib in (torch, tracec):
        m = lib.nn.Linear(2, 2)
        assert m.to(None) is m and m.to(None, None) is m
        assert m.to(device=None, dtype=None).weight.dtype == lib.float32
        assert m.to(None, lib.float64).weight.dtype == lib.float64


@pytest.mark.parametrize("fn", ["new_empty", "new_zeros", "new_ones", "new_full"])
def test_new_tensor_methods_take_layout_and_pin_memory(fn):
    """``x.new_empty(*size, layout=torch.strided, pin_memory=False)``
    (fastai's TensorBase.new_empty passes both on)."""
    out = []
    for lib in (torch, tracec):
        x = lib.ones(2, dtype=lib.float64)
        args = ((2, 3), 7.0) if fn == "new_full" else (2, 3)
        y = getattr(x, fn)(*args, layout=lib.strided, pin_memory=False)
        out.append((tuple(y.shape), y.dtype.itemsize, y.tolist() if fn != "new_empty" else None))
    assert out[1] == out[0]
    with pytest.raises(NotImplementedError):
        getattr(tracec.ones(2), fn)(*(((2,), 1.0) if fn == "new_full" else (2,)),
                                     layout=tracec.sparse_coo)


def test_subclass_new_may_take_keywords_init_does_not_see():
    """A Tensor subclass whose ``__new__`` takes keywords of its own
    (fastai's ``TensorBase(x, img_size=(4, 4))``): PyTorch's Tensor has no
    ``__init__`` to refuse them; a plain Tensor still refuses them."""
    got = []
    for lib in (torch, tracec):
        class Meta(lib.Tensor):
            def __new__(cls, x, **kwargs):
                res = lib.as_tensor(x).as_subclass(cls)
                for k, v in kwargs.items():
                    setattr(res, k, v)
                return res
        t = Meta([1.0, 2.0], img_size=(4, 4))
        got.append((type(t).__name__, t.img_size, t.tolist()))
        with pytest.raises(TypeError):
            lib.Tensor([1.0], img_size=3)
    assert got[1] == got[0]


def test_cuda_autocast_without_cuda_warns_pytorchs_words():
    """``autocast('cuda')`` on a machine without CUDA (fastai's to_fp16 /
    to_bf16 on CPU) disables itself with PyTorch 2.13's warning."""
    import warnings
    msgs = []
    for lib in (torch, tracec):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autocast("cuda", dtype=lib.float16):
                y = lib.ones(2, 2) @ lib.ones(2, 2)
        msgs.append(([(str(x.message), x.filename) for x in w], y.dtype.itemsize))
    assert msgs[1] == msgs[0]


def _sharded_loader(lib):
    """fastai's pattern: the worker_init_fn writes its shard onto an object
    the data set holds (``info.dataset.d.offs = info.id``)."""
    class Holder:
        offs, n = 0, 1

    class Stream(lib.utils.data.IterableDataset):
        def __init__(self):
            self.d = Holder()

        def __iter__(self):
            return iter([i for i in range(10) if i % self.d.n == self.d.offs])

    def init(worker_id):
        info = lib.utils.data.get_worker_info()
        info.dataset.d.n, info.dataset.d.offs = info.num_workers, info.id
    return lib.utils.data.DataLoader(Stream(), batch_size=2, num_workers=3, worker_init_fn=init)


def test_workers_own_everything_their_data_set_reaches():
    """Each emulated worker has a forked process's copy of the data set,
    down to the objects it holds: a worker_init_fn's writes to one do not
    reach the other workers (fastai's DataLoader with ``num_workers > 0``
    gave the last worker's shard to every worker: wrong batches)."""
    want = [b.tolist() for b in _sharded_loader(torch)]
    got = [b.tolist() for b in _sharded_loader(tracec)]
    assert got == want == [[0, 3], [1, 4], [2, 5], [6, 9], [7], [8]]


def test_deepcopy_of_a_subclass_whose_new_takes_the_data():
    """``copy.deepcopy`` of a Tensor subclass whose ``__new__`` needs
    arguments (fastai's ``TensorBase(x, **kwargs)``; its DataLoader's
    batch transforms hold such tensors, and each emulated worker deep-copies
    its data set): PyTorch makes the copy without calling ``__new__``."""
    import copy
    got = []
    for lib in (torch, tracec):
        class Base(lib.Tensor):
            def __new__(cls, x, **kwargs):
                res = lib.as_tensor(x).as_subclass(cls)
                for k, v in kwargs.items():
                    setattr(res, k, v)
                return res

            def new_empty(self, size, **kwargs):    # (fastai's; PyTorch's deepcopy calls it)
                cls = type(self)
                return self.as_subclass(lib.Tensor).new_empty(size, **kwargs).as_subclass(cls)
        t = Base([1.0, 2.0], meta={"size": 2})
        c = copy.deepcopy({"a": t, "b": t})
        c["a"].add_(1)
        c["a"].meta["size"] = 3
        got.append((type(c["a"]).__name__, c["a"] is c["b"], c["a"].tolist(), t.tolist(),
                    t.meta, c["b"].meta))
    assert got[1] == got[0]


def test_tensor_from_a_read_only_array_shares_and_writes_through():
    """pandas' copy-on-write ``.values`` is a read-only NumPy array (fastai's
    ``tensor(df.values)``): PyTorch shares it, warns once that writing is
    undefined, and in-place ops write through; a broadcast view stays
    refused.  tracec raised an internal-overlap error for any write."""
    import warnings
    from tracec import creation
    got = []
    for lib in (torch, tracec):
        base = np.arange(3.0)
        a = base[:]
        a.flags.writeable = False              # as pandas' .values
        creation._READONLY_WARNED[0] = False
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = lib.as_tensor(a)
            u = lib.from_numpy(a)
        if lib is tracec:
            assert [(str(x.message)[:42], x.filename) for x in w] == \
                [("The given NumPy array is not writable, and", __file__)]
        t.add_(1)
        b = lib.from_numpy(np.broadcast_to(np.arange(2.0), (2, 2)))
        with pytest.raises(RuntimeError, match="single memory location"):
            b.add_(1)
        got.append((t.tolist(), u.tolist(), base.tolist(), a.flags.writeable))
    assert got[1] == got[0] == ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], False)


def test_flatten_modules_keep_a_tensor_subclass():
    """``nn.Flatten`` / ``nn.Unflatten`` call the Tensor methods, which a
    subclass's ``__torch_function__`` sees (a fastai TensorImage batch
    through a plain torch model stays a TensorImage, so its loss
    dispatches as in PyTorch)."""
    got = []
    for lib in (torch, tracec):
        class Marked(lib.Tensor):
            pass
        x = lib.arange(24.).reshape(2, 3, 4).as_subclass(Marked)
        f = lib.nn.Flatten()(x)
        u = lib.nn.Unflatten(1, (2, -1))(f)
        u2 = lib.nn.Unflatten(1, lib.Size([4, 3]))(f)
        got.append([(type(t).__name__, tuple(t.shape), t.sum().item()) for t in (f, u, u2)])
    assert got[1] == got[0]


def test_no_handler_error_names_the_function_as_pytorch():
    """Two subclasses that both decline (fastai's TensorImage logits with a
    TensorCategory target in ``F.cross_entropy``): PyTorch's TypeError,
    naming ``torch.nn.functional.cross_entropy`` under ``tracec run``."""
    from tracec import dtypes
    msgs = []
    for lib in (torch, tracec):
        class A(lib.Tensor):
            pass

        class B(lib.Tensor):
            pass
        a = lib.zeros(2, 3).as_subclass(A)
        b = lib.tensor([0, 1]).as_subclass(B)
        if lib is tracec:
            dtypes.PUBLIC_NAME[0] = "torch"     # as `tracec run` installs it
        try:
            with pytest.raises(TypeError) as info:
                lib.nn.functional.cross_entropy(a, b)
        finally:
            dtypes.PUBLIC_NAME[0] = "tracec"
        msgs.append(str(info.value).split(":")[0])
    assert msgs[1] == msgs[0]


def test_operators_between_declining_subclasses_follow_pythons_protocol():
    """PyTorch's binary operators answer NotImplemented where every
    ``__torch_function__`` declines, so Python raises its own TypeError
    (``!=`` compares identities); ``==`` hands only the first overloaded
    type to __torch_function__ (fastai's ``preds == TensorCategory``
    accuracy works); functions raise PyTorch's dispatcher error."""
    got = []
    for lib in (torch, tracec):
        class A(lib.Tensor):
            pass

        class B(lib.Tensor):
            pass
        a = lib.tensor([1, 0]).as_subclass(A)
        b = lib.tensor([1, 1]).as_subclass(B)
        t = lib.tensor([1, 1])
        res = []
        for f in (lambda: a == b, lambda: b == a, lambda: t == a, lambda: a != b,
                  lambda: a < b, lambda: a + b, lambda: a * b, lambda: lib.add(a, b),
                  lambda: lib.cat([a, b]), lambda: a.eq(b)):
            try:
                r = f()
                res.append((type(r).__name__, r if isinstance(r, bool) else r.tolist()))
            except TypeError as e:
                res.append(str(e).replace("tracec", "torch").split(";")[0])
        got.append(res)
    assert got[1] == got[0]
