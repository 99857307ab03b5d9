"""Gaps that peft, captum and opacus (``tests/programs/hf2libs``) found in
tracec, each checked against torch without the libraries."""
import pytest
import torch

import tracec


@pytest.mark.parametrize("spec", ["mps", "mps:0", "xpu:1", "hpu", "xla", "privateuseone"])
def test_every_torch_device_type_can_be_named(spec):
    """torch.device parses all of PyTorch's device types, whatever the build
    (peft's load_peft_weights compares with ``torch.device("mps")``); only
    cpu and meta hold tensors."""
    a, b = torch.device(spec), tracec.device(spec)
    assert (str(b), repr(b), b.type, b.index) == (str(a), repr(a), a.type, a.index)
    assert (b == tracec.device("cpu")) is False


def test_unknown_device_type_message_lists_torchs_types():
    with pytest.raises(RuntimeError) as want:
        torch.device("foo")
    with pytest.raises(RuntimeError) as got:
        tracec.device("foo")
    assert str(got.value) == str(want.value)


def test_tensor_on_a_device_this_build_lacks_is_refused():
    with pytest.raises(NotImplementedError):
        torch.empty(1, device="mps")
    with pytest.raises(NotImplementedError, match="MPS"):
        tracec.empty(1, device="mps")


def test_future_is_generic_and_named_at_the_top():
    """``torch.futures.Future[Tensor]`` evaluates (captum annotates with it)
    and ``torch.Future`` is the futures' class (captum's isinstance)."""
    for lib in (torch, tracec):
        assert lib.futures.Future[lib.Tensor] is not None
        f = lib.futures.Future()
        assert isinstance(f, lib.Future)
        f.set_result(3)
        assert f.wait() == 3


def test_module_hook_tables_exist_from_the_start():
    """Every hook table PyTorch's Module.__init__ makes can be read, empty
    (captum's DeepLift: ``len(module._backward_hooks)``), and fills as
    hooks are registered."""
    names = ["_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks",
             "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
             "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
             "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"]
    for lib in (torch, tracec):
        m = lib.nn.Linear(2, 2)
        assert [len(getattr(m, n)) for n in names] == [0] * len(names)
        h = m.register_full_backward_hook(lambda *a: None)
        assert len(m._backward_hooks) == 1
        h.remove()
        assert len(m._backward_hooks) == 0


def test_scatter_gather_on_one_device():
    """torch.nn.parallel.scatter_gather (captum's import): scatter chunks
    tensors per target (torch.chunk's pieces; PyTorch's own needs GPUs to
    run) and repeats other objects; gather concatenates."""
    from tracec.nn.parallel import scatter_gather as got
    x = torch.arange(10.0).reshape(5, 2)
    t = tracec.tensor(x.numpy())
    ins, kws = got.scatter_kwargs((t, "a"), {"k": t}, [0, 1, 2], dim=0)
    assert [i[0].tolist() for i in ins] == [c.tolist() for c in x.chunk(3, 0)]
    assert [i[1] for i in ins] == ["a"] * 3
    assert [k["k"].tolist() for k in kws] == [c.tolist() for c in x.chunk(3, 0)]
    assert got.gather([i[0] for i in ins], "cpu").tolist() == x.tolist()
    assert got.scatter_kwargs((), {"k": t}, ["cpu"])[0] == ((),)


def test_private_import_paths_libraries_use():
    """Names opacus imports from PyTorch's private and old paths."""
    import importlib
    for path, name in [("torch.distributed._tensor.experimental", "implicit_replication"),
                       ("torch.distributed._tensor", "DTensor"),
                       ("torch.utils.data._utils.collate", "default_collate"),
                       ("torch.utils.data.dataloader", "_collate_fn_t")]:
        assert hasattr(importlib.import_module(path), name)
        assert hasattr(importlib.import_module(path.replace("torch", "tracec", 1)), name)
    from tracec.distributed._tensor.experimental import implicit_replication
    with implicit_replication():          # no DTensors: nothing to replicate
        pass
    from tracec.utils.data._utils.collate import default_collate
    assert default_collate([tracec.ones(2), tracec.zeros(2)]).tolist() == [[1, 1], [0, 0]]


def test_full_backward_hook_warns_when_no_input_needs_grad():
    """PyTorch warns when a full backward hook fires at the outputs because
    no input requires grad (the first layer of every opacus model), naming
    the caller's line."""
    import warnings
    msgs = []
    for lib in (torch, tracec):
        m = lib.nn.Linear(2, 2)
        seen = []
        m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go[0].shape)))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            m(lib.ones(3, 2)).sum().backward()
        assert seen == [((None,), (3, 2))]
        msgs.append([(str(x.message), x.filename) for x in w])
    assert msgs[1] == msgs[0] and len(msgs[0]) == 1 and msgs[0][0][1] == __file__


def test_save_load_round_trip_whatever_the_header_length():
    """A tracec.save file whose safetensors header length begins with the
    bytes of a pickle's opening (0x80 0x02..0x05: opacus' clone_module of
    an LSTM model hit 0x0580) loads: the header wins over the pickle sniff."""
    import io
    import struct
    hit = 0
    for k in range(1, 400):
        buf = io.BytesIO()
        tracec.save({"w" * k: tracec.ones(2)}, buf)
        raw = buf.getvalue()
        if raw[0] == 0x80 and 1 <= raw[1] <= 5:
            hit += 1
            assert struct.unpack("<Q", raw[:8])[0] < len(raw)
            buf.seek(0)
            assert tracec.load(buf)["w" * k].tolist() == [1.0, 1.0]
    assert hit


@pytest.mark.parametrize("reduction,conv", [("sum", False), ("mean", False), ("sum", True)])
def test_call_for_per_sample_grads_matches_torch(reduction, conv):
    """torch.nn.utils._per_sample_grad.call_for_per_sample_grads (opacus'
    grad_sample_mode="ew"): per-sample gradients in ``grad_sample``
    (scaled by the batch size for a mean loss), no ``grad``."""
    import numpy as np
    res = []
    for lib in (torch, tracec):
        from importlib import import_module
        psg = import_module(f"{lib.__name__}.nn.utils._per_sample_grad")
        lib.manual_seed(0)
        if conv:
            m = lib.nn.Sequential(lib.nn.Conv2d(2, 4, 3), lib.nn.GroupNorm(2, 4),
                                  lib.nn.Flatten(), lib.nn.Linear(16, 2))
            x = lib.randn(5, 2, 4, 4)
        else:
            m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
            x = lib.randn(5, 3)
        out = psg.call_for_per_sample_grads(m, loss_reduction=reduction)(x)
        (out.pow(2).mean() if reduction == "mean" else out.pow(2).sum()).backward()
        res.append((out.detach().numpy(), [p.grad_sample.numpy() for p in m.parameters()],
                    [p.grad for p in m.parameters()]))
    (o0, g0, d0), (o1, g1, d1) = res
    np.testing.assert_allclose(o1, o0, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g0):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert d0 == d1 == [None] * len(d0)


def _sparse_rows(lib):
    s = lib.tensor([[0., 1., 0.], [2., 0., 3.], [0., 0., 4.]]).to_sparse()
    rows = list(s)
    out = [(r.is_sparse, r.is_coalesced(), r._nnz(), r._indices().tolist(), r.to_dense().tolist())
           for r in rows + [s[-1], s.select(1, 2), s.unbind(0)[1]]]
    st = lib.stack(rows)
    st1 = lib.stack([s[1], s[2]], 1)
    out += [(t.is_sparse, t.is_coalesced(), t._indices().tolist(), t._values().tolist(),
             t.to_dense().tolist()) for t in (st, st1)]
    one = lib.tensor([0., 5., 6.]).to_sparse()
    out.append((one[1].is_sparse, one[1].item(), lib.stack([one, one]).is_sparse))
    return out


def test_sparse_coo_rows_and_stack_stay_sparse():
    """Iterating / indexing / selecting / unbinding a COO tensor's rows
    gives COO tensors, and stacking them gives one back (sentence-
    transformers' SparseEncoder.encode extends a list with the rows of each
    batch's sparse embeddings, then stacks them): coalesced only with at
    most one entry, as PyTorch's."""
    assert _sparse_rows(tracec) == _sparse_rows(torch)


@pytest.mark.parametrize("dtype", ["int32", "int16", "uint8"])
def test_sparse_coo_tensor_converts_its_indices_to_int64(dtype):
    """torch.sparse_coo_tensor takes indices of any integer dtype (peft's
    SHiRA builds int32 ones) and holds them as int64."""
    got = []
    for lib in (torch, tracec):
        idx = lib.tensor([[0, 1, 1], [1, 0, 2]], dtype=getattr(lib, dtype))
        s = lib.sparse_coo_tensor(idx, lib.tensor([1., 2., 3.]), (2, 3), check_invariants=False)
        got.append((s._indices().dtype == lib.int64, s.to_dense().tolist()))
    assert got[0] == got[1] == (True, [[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])


def test_cpp_extension_load_fails_so_libraries_fall_back():
    """torch.utils.cpp_extension imports; a JIT build raises (tracec has no
    C++ ABI), which peft's BOFT catches to take its Python path."""
    from tracec.utils import cpp_extension
    assert cpp_extension.CUDA_HOME is None
    with pytest.raises(RuntimeError, match="cannot build"):
        cpp_extension.load(name="x", sources=["x.cpp"])
