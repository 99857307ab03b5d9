"""What PyTorch Geometric, torchdiffeq and torchmetrics needed from tracec
(tests/test_public_programs_pyglibs.py runs the libraries themselves),
each against torch 2.13 without the libraries: ``torch.ops.aten``,
``torch._ops``, ``torch.utils.dlpack`` and ``Tensor.__dlpack__``,
``torch._tensor_str``, ``torch.distributed.rpc``, ``torch.futures`` and
the DataLoader's iterator classes."""
import importlib.util
import json
import os

import numpy as np
import pytest
import torch

import tracec

HERE = os.path.dirname(__file__)


def test_aten_table_is_what_the_script_writes_from_torch():
    spec = importlib.util.spec_from_file_location(
        "aten_names", os.path.join(HERE, "..", "scripts", "aten_names.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(HERE, "..", "tracec", "data", "aten_ops.json")) as f:
        assert json.load(f) == mod.names()


def test_aten_names_overloads_and_identity_are_torchs():
    a, ta = tracec.ops.aten, torch.ops.aten
    assert a.add.Tensor is a.add.Tensor and a.add is a.add     # usable as keys
    assert {a.sort.default: 1}[a.sort.default] == 1
    for obj, ref in [(a.add.Tensor, ta.add.Tensor), (a.sort.stable, ta.sort.stable)]:
        assert str(obj) == str(ref) and repr(obj) == repr(ref)
        assert obj.name() == ref.name() and obj.__name__ == ref.__name__
        assert obj._overloadname == ref._overloadname
        assert str(obj.overloadpacket) == str(ref.overloadpacket)
    assert repr(a.add) == repr(ta.add) and str(a.add) == str(ta.add)
    assert sorted(a.add.overloads()) == sorted(ta.add.overloads())
    assert isinstance(a.clone.default, tracec._ops.OpOverload)
    assert isinstance(a.clone, tracec._ops.OpOverloadPacket)
    for bad, ns in [(lambda m: m.not_an_op, (a, ta)), (lambda m: m.add.nope, (a, ta))]:
        msgs = []
        for m in ns:
            with pytest.raises(AttributeError) as e:
                bad(m)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


def _both(fn):
    """fn(library) under tracec and torch; results as NumPy arrays."""
    def arr(x):
        if isinstance(x, (list, tuple)):
            return [arr(v) for v in x]
        return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x)
    return arr(fn(tracec)), arr(fn(torch))


@pytest.mark.parametrize("call", [
    lambda L: L.ops.aten.add.Tensor(L.ones(2), L.ones(2), alpha=3),
    lambda L: L.ops.aten.add(L.ones(2), 2),
    lambda L: L.ops.aten.mm.default(L.arange(6.).reshape(2, 3), L.ones(3, 2)),
    lambda L: L.ops.aten.slice.Tensor(L.arange(10), 0, 2, 8, 2),
    lambda L: L.ops.aten.index.Tensor(L.arange(12).reshape(3, 4), [None, L.tensor([1, 3])]),
    lambda L: L.ops.aten._to_copy.default(L.ones(2), dtype=L.float64),
    lambda L: L.ops.aten.sum.dim_IntList(L.arange(6.).reshape(2, 3), [1]),
    lambda L: L.ops.aten.view.default(L.arange(6), [2, 3]),
    lambda L: L.ops.aten.t.default(L.arange(6).reshape(2, 3)),
    lambda L: L.ops.aten.relu_(L.tensor([-1., 1.])),
    lambda L: L.ops.aten.sort.default(L.tensor([3., 1., 2.]), 0, True),
    lambda L: L.ops.aten.cat.default([L.ones(2), L.zeros(1)]),
    lambda L: L.ops.aten.split.Tensor(L.arange(6), 2),
    lambda L: L.ops.aten.convolution.default(L.arange(16.).reshape(1, 1, 4, 4), L.ones(1, 1, 3, 3),
                                             None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    lambda L: L.ops.aten.native_layer_norm.default(L.arange(6.).reshape(2, 3), [3], None, None, 1e-5),
    lambda L: L.ops.aten.linalg_vector_norm.default(L.tensor([3., 4.])),
    lambda L: L.ops.aten.special_expit.default(L.tensor([0.])),
])
def test_aten_calls_give_torchs_values(call):
    got, want = _both(call)
    if not isinstance(want, list):
        got, want = [got], [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_an_aten_op_tracec_lacks_says_which():
    with pytest.raises(NotImplementedError, match=r"aten::_fused_moving_avg_obs_fq_helper\.default"):
        tracec.ops.aten._fused_moving_avg_obs_fq_helper.default(tracec.ones(1))


def test_dlpack_shares_memory_both_ways_as_torchs():
    from tracec.utils.dlpack import from_dlpack, to_dlpack
    t = tracec.arange(4.)
    u = from_dlpack(to_dlpack(t))
    u[0] = 9
    assert t.tolist() == [9., 1., 2., 3.]
    a = np.from_dlpack(t)       # Tensor.__dlpack__ / __dlpack_device__
    a[1] = 7
    assert t[1].item() == 7
    assert tuple(t.__dlpack_device__()) == tuple(torch.arange(1.).__dlpack_device__())
    v = from_dlpack(np.arange(3.))
    assert v.dtype == tracec.float64
    with pytest.raises(BufferError, match="require gradient"):
        tracec.ones(2, requires_grad=True).__dlpack__()
    # torch reads tracec's capsules
    w = torch.utils.dlpack.from_dlpack(to_dlpack(t))
    assert w.tolist() == t.tolist()


def test_tensor_str_is_torchs():
    from tracec._tensor_str import PRINT_OPTS, _tensor_str
    from torch._tensor_str import _tensor_str as torch_tensor_str
    cases = [lambda L: L.tensor([[1.5, 2], [3, 4]]), lambda L: L.tensor([1, 2]),
             lambda L: L.tensor([True]), lambda L: L.zeros(0), lambda L: L.arange(2000.),
             lambda L: L.tensor([1e-8, 1e8])]
    for make in cases:
        for indent in (0, 7):
            assert _tensor_str(make(tracec), indent) == torch_tensor_str(make(torch), indent)
    assert PRINT_OPTS.precision == 4


def test_rpc_is_the_module_of_a_build_without_rpc():
    from tracec.distributed import rpc
    assert rpc.is_available() is False and not hasattr(rpc, "api")


def test_futures_behave_as_torchs():
    for L in (tracec, torch):
        f = L.futures.Future()
        assert not f.done()
        g = f.then(lambda x: x.value() + 1)
        seen = []
        f.add_done_callback(lambda x: seen.append(x.value()))
        f.set_result(2)
        assert f.done() and g.wait() == 3 and seen == [2]
        with pytest.raises(RuntimeError, match="can only be marked completed once"):
            f.set_result(3)
        assert L.futures.wait_all([f, g]) == [2, 3]
        assert [x.value() for x in L.futures.collect_all([f, g]).wait()] == [2, 3]
        h = L.futures.Future()
        h.set_exception(ValueError("bad"))
        with pytest.raises(ValueError, match="bad"):
            h.wait()
        k = h.then(lambda x: x.value())
        with pytest.raises(RuntimeError, match="when running the callback: ValueError: bad"):
            k.wait()
        assert L.jit.fork(lambda: 3).wait() == 3
        assert hasattr(L.jit.fork(lambda: 3), "then")

        def boom():
            raise KeyError("now")
        with pytest.raises(KeyError):
            L.jit.fork(boom)        # raised by fork itself, as torch's


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_iterators_are_torchs_classes(workers):
    names = []
    for L in (tracec, torch):
        dl = L.utils.data.DataLoader(list(range(6)), batch_size=2, num_workers=workers)
        it = iter(dl)
        first = next(it)
        names.append((type(it).__name__, type(it).__mro__[1].__name__, first.tolist(),
                      it._num_yielded, len(it)))
    assert names[0] == names[1]


def test_a_loader_that_wraps_get_iterator_and_resets_a_persistent_one():
    """PyG's loaders subclass DataLoader and wrap ``_get_iterator()``; a
    persistent loader's iterator is the same object every epoch, reset."""
    out = []
    for L in (tracec, torch):
        class Doubled(L.utils.data.DataLoader):
            def _get_iterator(self):
                inner = super()._get_iterator()

                class It:
                    def __iter__(self):
                        return self

                    def __next__(self):
                        return next(inner) * 2

                    def __len__(self):
                        return len(inner)
                return It()
        d = Doubled(list(range(4)), batch_size=2)
        p = L.utils.data.DataLoader(list(range(4)), batch_size=2, num_workers=1,
                                    persistent_workers=True)
        a = iter(p)
        e1 = [b.tolist() for b in a]
        b = iter(p)
        out.append(([x.tolist() for x in d], a is b, e1, [x.tolist() for x in b], b._num_yielded))
    assert out[0] == out[1]


# --- what PyTorch Lightning needed ---------------------------------------

def _mode_log(L):
    log = []

    class Logging(L.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append((func.__name__, tuple(t.__name__ for t in types),
                        None if kwargs is None else sorted(kwargs)))
            return func(*args, **(kwargs or {}))

    class Sub(L.Tensor):
        pass

    a = L.ones(2)
    with Logging():
        b = a + 1
        L.add(a, b, alpha=2)
        L.nn.init.uniform_(a)
        s = a.as_subclass(Sub)
        log.append(type(s * 2).__name__)
        L.nn.functional.relu(a)
        a.sum(dim=0)
        with L._C.DisableTorchFunctionSubclass():
            a.sum()
        with L._C.DisableTorchFunction():
            a.mean()
    (a * 2).sum()           # after the block: not seen
    return log


def test_torch_function_mode_sees_the_calls_torchs_sees():
    assert _mode_log(tracec) == _mode_log(torch)


def test_torch_function_modes_nest_and_can_skip_nn_init():
    for L in (tracec, torch):
        order = []

        class Outer(L.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                order.append("outer")
                return func(*args, **(kwargs or {}))

        class Inner(L.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                order.append("inner")
                return func(*args, **(kwargs or {}))

        one = L.ones(1)     # (torch's modes see factories too; tracec's do not)
        with Outer(), Inner():
            L.mul(one, 2)
        assert order == ["inner", "outer"]

        class SkipInit(L.overrides.TorchFunctionMode):   # Lightning's _EmptyInit
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func.__name__.endswith("_") and "tensor" in kwargs:
                    return kwargs["tensor"]
                return func(*args, **kwargs)
        L.manual_seed(0)
        with SkipInit():
            w = L.nn.init.uniform_(L.zeros(3))
        assert w.tolist() == [0., 0., 0.]
        assert L.overrides.has_torch_function_unary(L.ones(1)) is False


def test_names_lightning_imports_exist_as_torchs():
    from tracec.distributed.constants import default_pg_timeout
    from torch.distributed.constants import default_pg_timeout as torch_timeout
    assert default_pg_timeout == torch_timeout
    assert tracec.distributed.ReduceOp.RedOpType.SUM == tracec.distributed.ReduceOp.SUM
    assert isinstance(tracec.distributed.ReduceOp.SUM, tracec.distributed.ReduceOp.RedOpType)
    assert isinstance(tracec.Tensor, tracec._C._TensorMeta)
    assert tracec.UntypedStorage(8).nbytes() == torch.UntypedStorage(8).nbytes() == 8
    assert isinstance(tracec.ones(2).untyped_storage(), tracec.UntypedStorage)
    assert tracec.ScriptModule is tracec.jit.ScriptModule
    from tracec._dynamo import OptimizedModule
    assert isinstance(tracec.compile(tracec.nn.Linear(2, 2)), OptimizedModule)
    assert tracec.profiler.kineto_available() is False      # tracec's profiler is its own
    with tracec.autograd.profiler.emit_nvtx(enabled=False):
        pass
    with pytest.raises(AssertionError, match="CUDA"):
        with tracec.autograd.profiler.emit_nvtx():
            pass
    assert tracec.distributed.is_torchelastic_launched() == torch.distributed.is_torchelastic_launched()


def test_parse_to_is_torchs():
    def norm(r):
        return tuple(None if x is None else str(x).replace("tracec.", "torch.") for x in r)
    cases = [(("cpu",), {}), ((lambda L: L.float64,), {}), (("cpu", lambda L: L.float16), {"non_blocking": True}),
             ((lambda L: L.ones(1, dtype=L.int32),), {}), ((), {"device": "cpu", "dtype": lambda L: L.float32}),
             ((), {"memory_format": lambda L: L.channels_last})]
    for args, kwargs in cases:
        got = []
        for L in (tracec, torch):
            a = [x(L) if callable(x) else x for x in args]
            k = {n: (v(L) if callable(v) else v) for n, v in kwargs.items()}
            got.append(norm(L._C._nn._parse_to(*a, **k)))
        assert got[0] == got[1]


def test_pytorch_file_reader_reads_torchs_archives(tmp_path):
    path = str(tmp_path / "ck.pt")
    torch.save({"a": torch.arange(3.), "b": torch.ones(2, dtype=torch.bfloat16)}, path)
    mine, theirs = tracec.PyTorchFileReader(path), torch.PyTorchFileReader(path)
    assert sorted(mine.get_all_records()) == sorted(theirs.get_all_records())
    for name in theirs.get_all_records():
        assert mine.get_record(name) == theirs.get_record(name)
        assert mine.has_record(name)
    assert not mine.has_record("nope")
    with pytest.raises(RuntimeError, match="failed locating file nope"):
        mine.get_record("nope")
    keys = sorted(n for n in mine.get_all_records() if n.startswith("data/"))
    vals = [mine.get_storage_from_record(k, n, d).tolist()
            for k, n, d in zip(keys, (3, 2), (tracec.float32, tracec.bfloat16))]
    assert vals == [[0., 1., 2.], [1., 1.]]


def test_pytree_internals_libraries_use_are_torchs():
    from tracec.utils import _pytree as mine
    from torch.utils import _pytree as theirs
    for m in (mine, theirs):
        node = m.SUPPORTED_NODES[dict]
        assert node.type is dict and m._get_node_type({"a": 1}) is dict
        children, context = node.flatten_fn({"a": 1, "b": 2})
        assert list(children) == [1, 2] and list(context) == ["a", "b"]
        spec = m.TreeSpec(dict, ["a", "b"], [m.LeafSpec(), m.LeafSpec()])
        assert m.tree_unflatten([5, 6], spec) == {"a": 5, "b": 6}


# --- what Hugging Face Accelerate needed -----------------------------------

def test_device_equals_only_devices_as_torchs():
    for L in (tracec, torch):
        d = L.device("cpu")
        got = (d == "cpu", d == "npu", d == "cuda:0", d == L.device("cpu", 0), d != "cpu",
               d == None, d == 5)   # noqa: E711 - the comparison under test
        assert got == (False, False, False, False, True, False, False)


def test_types_libraries_check_against_exist_and_refuse_construction():
    from tracec.distributed.algorithms.join import Join, Joinable, JoinHook
    from tracec.distributed.fsdp import FullyShardedDataParallel
    from tracec.distributed.tensor import DTensor
    from tracec._dynamo import eval_frame
    assert not isinstance(tracec.nn.Parameter(tracec.ones(1)), DTensor)
    with pytest.raises(NotImplementedError, match="DTensor"):
        DTensor.from_local(tracec.ones(1))
    with pytest.raises(NotImplementedError, match="FullyShardedDataParallel"):
        FullyShardedDataParallel(tracec.nn.Linear(1, 1))
    assert eval_frame.OptimizedModule is tracec._dynamo.OptimizedModule

    posts = []

    class Hook(JoinHook):
        def post_hook(self, is_last_joiner):
            posts.append(is_last_joiner)

    class Part(Joinable):
        def join_hook(self, **kwargs):
            return Hook()

        @property
        def join_device(self):
            return tracec.device("cpu")

        @property
        def join_process_group(self):
            return None

    with Join([Part()]):
        pass
    assert posts == [True]
    with pytest.raises(ValueError, match="at least one joinable"):
        Join([])


# --- what diffusers needed ----------------------------------------------------

def test_infer_schema_reads_string_annotations_and_pep604_unions():
    """A module with ``from __future__ import annotations`` hands custom_op
    string annotations ('torch.Tensor | None'): resolved as PyTorch does."""
    from torch.library import infer_schema as torch_infer
    from tracec.library.schema import infer_schema
    src = (
        "from __future__ import annotations\n"
        "import torch\n"
        "def f(q: torch.Tensor, k: torch.Tensor | None = None, scale: float | None = None,\n"
        "      causal: bool = False, n: int = 1) -> tuple[torch.Tensor, torch.Tensor]:\n"
        "    return q, q\n")
    schemas = []
    for lib in (tracec, torch):
        scope = {}
        exec(compile(src.replace("import torch", ""), "<op>", "exec"), {"torch": lib}, scope)
        fn = scope["f"]
        fn.__globals__["torch"] = lib
        schemas.append((infer_schema if lib is tracec else torch_infer)(fn, mutates_args=()))
    assert schemas[0] == schemas[1]


def test_streams_and_events_are_torchs_cpu_ones():
    for L in (tracec, torch):
        s = L.Stream()
        assert (s.query(), s.synchronize(), s.device_type, s.device_index, s.stream_id) == \
            (True, None, 0, -1, 0)
        assert s == L.Stream() and str(s.device) == "cpu"
        with s:
            pass
        with pytest.raises(RuntimeError, match="cpu backend doesn't support events"):
            s.record_event()
        with pytest.raises(RuntimeError, match="cpu backend doesn't support events"):
            L.Event().record()
        with pytest.raises(RuntimeError, match="not linked with support for cuda"):
            L.Stream("cuda")
    assert repr(tracec.Stream()) == repr(torch.Stream())


def test_get_device_module_and_device_mesh_names():
    assert tracec.get_device_module() is tracec.cpu
    assert tracec.get_device_module("cuda:0") is tracec.cuda
    assert tracec.get_device_module(tracec.device("cpu")) is tracec.cpu
    assert hasattr(tracec.distributed, "device_mesh")        # torch imports it with distributed
    from tracec.utils import _pytree as mine
    from torch.utils import _pytree as theirs
    for m in (mine, theirs):
        values, context = m._dict_flatten({"a": 1, "b": 2})
        assert m._dict_unflatten(values, context) == {"a": 1, "b": 2}


# --- what Pyro needed -----------------------------------------------------------

def test_under_tracec_run_torch_is_named_torch(tmp_path):
    """``torch.__name__`` is "torch" once tracec stands in for it (Pyro's
    patch_dependency asserts it), and its AttributeErrors name torch;
    uninstalling gives the name back."""
    from program_runner import python_c
    code = ("import tracec, tracec.as_torch as a; a.install_as_torch(); import torch\n"
            "print(torch.__name__, torch is tracec)\n"
            "try:\n    torch.no_such_name\nexcept AttributeError as e:\n    print(e)\n"
            "a.install_as_torch()\n"      # idempotent with the new name
            "a.uninstall_as_torch(); print(tracec.__name__)\n")
    out = python_c(code, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["torch True", "module 'torch' has no attribute "
                                       "'no_such_name'", "tracec"]


def test_distributions_have_docstrings_and_map_location_exists():
    import inspect
    from tracec import distributions as D
    bare = [n for n, c in vars(D).items()
            if inspect.isclass(c) and issubclass(c, D.Distribution) and not c.__doc__]
    assert bare == []       # Pyro concatenates each torch distribution's docstring
    from tracec.serialization import MAP_LOCATION   # noqa: F401  (Pyro's param store imports it)


# --- what kornia's import needed (kornia itself does not run yet: see the note) ---

def test_names_kornia_imports_are_torchs():
    assert tracec.torch is tracec and torch.torch is torch
    from tracec._subclasses.fake_tensor import is_fake
    from torch._subclasses.fake_tensor import is_fake as torch_is_fake
    for L, f in ((tracec, is_fake), (torch, torch_is_fake)):
        assert f(L.ones(1)) is False and f(3) is False
    from tracec.fx.experimental.proxy_tensor import get_proxy_mode
    from torch.fx.experimental.proxy_tensor import get_proxy_mode as torch_get_proxy_mode
    assert get_proxy_mode() is None and torch_get_proxy_mode() is None
    assert not isinstance(3, tracec.SymInt) and not isinstance(3.0, tracec.SymFloat)
    c, tc = tracec.complex32, torch.complex32
    assert (tracec.chalf is c, c.itemsize, c.is_complex, c.is_floating_point) == \
        (torch.chalf is tc, tc.itemsize, tc.is_complex, tc.is_floating_point)
    with pytest.raises(TypeError, match="complex32"):
        tracec.ones(1, dtype=c)


def test_functorch_transforms_active_inside_torch_func_only():
    """kornia's box_blur asks ``torch._C._are_functorch_transforms_active()``."""
    for L in (tracec, torch):
        seen = []

        def f(x):
            seen.append(L._C._are_functorch_transforms_active())
            return (x * x).sum()
        assert L._C._are_functorch_transforms_active() is False
        L.func.grad(f)(L.ones(2))
        L.func.vmap(f)(L.ones(2, 3))
        L.func.vjp(f, L.ones(2))
        L.func.jvp(f, (L.ones(2),), (L.ones(2),))
        assert L._C._are_functorch_transforms_active() is False
        assert seen and all(seen)


def test_dispatching_wrappers_keep_keyword_defaults():
    # MONAI's SwinUNETR feature-tests torch.meshgrid.__kwdefaults__ for
    # `indexing`; the wrapper a Tensor subclass turns on must keep it
    class Marked(tracec.Tensor):
        pass
    tracec.ones(1).as_subclass(Marked)
    assert tracec.meshgrid.__kwdefaults__ == torch.meshgrid.__kwdefaults__ == {"indexing": None}


def test_collate_fn_map_extends_default_collate_as_in_torch():
    # MONAI registers its MetaTensor's collate in default_collate_fn_map
    # (torch.utils.data._utils.collate) and calls collate_tensor_fn, whose
    # torch.stack a Tensor subclass's __torch_function__ sees
    import torch.utils.data._utils.collate as tcoll
    import tracec.utils.data._utils.collate as ccoll
    from tracec.utils.data import default_collate

    for lib, coll, default in ((torch, tcoll, torch.utils.data.default_collate),
                               (tracec, ccoll, default_collate)):
        class Tagged(lib.Tensor):
            pass

        def collate_tagged(batch, *, collate_fn_map=None, coll=coll):
            out = coll.collate_tensor_fn(batch)
            return type(out).__name__, out.shape[0]

        coll.default_collate_fn_map[Tagged] = collate_tagged
        try:
            batch = [{"x": lib.ones(2).as_subclass(Tagged), "y": 1.5, "s": "a"}] * 3
            got = default(batch)
            assert got["x"] == ("Tagged", 3), lib
            assert got["y"].dtype == lib.float64 and got["s"] == ["a"] * 3
            assert coll.collate([1, 2], collate_fn_map=coll.default_collate_fn_map).tolist() \
                == [1, 2]
            assert coll.np_str_obj_array_pattern.search(np.array(["a"]).dtype.str)
        finally:
            del coll.default_collate_fn_map[Tagged]
    import tracec.utils.data._utils as u
    assert u.MP_STATUS_CHECK_INTERVAL == torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL


def test_serialization_constants_and_backends_mutation_guard_are_torchs():
    import torch.backends
    import torch.serialization as ts

    import tracec.backends
    import tracec.serialization as cs
    for name in ("DEFAULT_PROTOCOL", "PROTOCOL_VERSION", "MAGIC_NUMBER", "LONG_SIZE",
                 "INT_SIZE", "SHORT_SIZE", "MAP_SHARED", "MAP_PRIVATE",
                 "STORAGE_KEY_SEPARATOR", "IS_WINDOWS"):
        assert getattr(cs, name) == getattr(ts, name), name
    # (MONAI's set_determinism sets cudnn flags inside it)
    with getattr(tracec.backends, "__allow_nonbracketed_mutation")():
        tracec.backends.cudnn.deterministic = True
    with getattr(torch.backends, "__allow_nonbracketed_mutation")():
        pass
    tracec.backends.cudnn.deterministic = False


def test_storage_sizeof_counts_its_bytes_as_torchs():
    # torchinfo's "Input size (MB)" sums sys.getsizeof(t.untyped_storage())
    import sys
    for shape in ((2, 3, 16, 16), (7,)):
        t, c = torch.ones(shape), tracec.ones(shape)
        extra_t = sys.getsizeof(t.untyped_storage()) - t.untyped_storage().nbytes()
        extra_c = sys.getsizeof(c.untyped_storage()) - c.untyped_storage().nbytes()
        assert 0 < extra_c < 200 and 0 < extra_t < 200


def test_deprecated_overload_warns_once_per_process_as_torch():
    # PyTorch's argument parser warns once for all the deprecated
    # scalar-first overloads (ranger's add_(1 - beta1, grad) in every step)
    import subprocess
    import sys
    code = ("import warnings; warnings.simplefilter('default'); import {lib} as t\n"
            "a, b = t.ones(2), t.ones(2)\n"
            "for _ in range(3):\n"
            "    a.add_(0.5, b); a.addcmul_(0.5, b, b); t.add(a, 2, b)\n")
    counts = []
    for lib in ("torch", "tracec"):
        r = subprocess.run([sys.executable, "-c", code.format(lib=lib)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        counts.append(r.stderr.count("is deprecated"))
    assert counts == [1, 1], counts


def test_distributed_backend_and_reduce_op_names_are_torchs():
    # PyTorch-Ignite reads dist.Backend.NCCL and dist.ReduceOp.PRODUCT at import
    import torch.distributed as tdist

    import tracec.distributed as cdist
    for name in ("UNDEFINED", "GLOO", "NCCL", "XCCL", "UCC", "MPI", "FAKE"):
        assert getattr(cdist.Backend, name) == getattr(tdist.Backend, name)
    for arg in ("GLOO", "nccl", "Mpi", "custom"):
        assert cdist.Backend(arg) == tdist.Backend(arg)
    assert cdist.Backend.backend_list == tdist.Backend.backend_list
    # (PyTorch's map grows when its fake backend registers: 'hpu': 'fake')
    for device, backend in cdist.Backend.default_device_backend_map.items():
        assert tdist.Backend.default_device_backend_map[device] == backend
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        assert hasattr(tdist.ReduceOp, name) and hasattr(cdist.ReduceOp, name)
    with pytest.raises(ValueError, match="string-ish"):
        cdist.Backend(3)


def test_rankwise_reductions_of_every_reduce_op():
    import tracec.distributed as cdist
    a, b = np.array([1, 6, 3]), np.array([4, 2, 5])
    got = {op: cdist._reduce_rankwise([a, b], op).tolist() for op in
           (cdist.ReduceOp.PRODUCT, cdist.ReduceOp.MIN, cdist.ReduceOp.BAND, cdist.ReduceOp.BXOR)}
    assert got == {cdist.ReduceOp.PRODUCT: [4, 12, 15], cdist.ReduceOp.MIN: [1, 2, 3],
                   cdist.ReduceOp.BAND: [0, 2, 1], cdist.ReduceOp.BXOR: [5, 4, 6]}
    with pytest.raises(NotImplementedError, match="PREMUL_SUM"):
        cdist._reduce_rankwise([a, b], cdist.ReduceOp.PREMUL_SUM)
    with pytest.raises(TypeError, match="integer or bool"):
        cdist._reduce_rankwise([a * 1.0, b * 1.0], cdist.ReduceOp.BOR)


def test_zero_redundancy_optimizer_is_refused_saying_so():
    from tracec.distributed.optim import ZeroRedundancyOptimizer
    with pytest.raises(NotImplementedError, match="does not shard optimizer state.*SGD"):
        ZeroRedundancyOptimizer(tracec.nn.Linear(2, 2).parameters(), tracec.optim.SGD, lr=0.1)
