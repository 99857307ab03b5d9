"""Gaps found by probing the parts of training programs around the model
(optimizers, schedulers, data loading, checkpoints, the nn.Module API),
each checked against torch 2.13 in the same process."""
import collections
import warnings

import numpy as np
import pytest
import torch

import tracec


def _hook_log(lib):
    import importlib
    oo = importlib.import_module(lib.__name__ + ".optim.optimizer")
    log = []
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 1)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    g = oo.register_optimizer_step_pre_hook(lambda o, a, k: log.append(("gpre", len(a), a[0] is o)))
    opt.register_step_pre_hook(lambda o, a, k: (a, {"closure": None}))
    opt.register_step_post_hook(lambda o, a, k: log.append(("post", len(a), dict(k))))
    opt.register_state_dict_pre_hook(lambda o: log.append("sd pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_load_state_dict_pre_hook(lambda o, sd: log.append(("lsd pre", sorted(sd))))
    opt.register_load_state_dict_post_hook(lambda o: log.append("lsd post"), prepend=True)
    m(lib.ones(1, 2)).sum().backward()
    opt.step()
    g.remove()
    opt.step()
    sd = opt.state_dict()
    log.append(sorted(sd))
    opt.load_state_dict(sd)
    return log


def test_optimizer_hooks_follow_torch():
    """State-dict hooks exist; step hooks see ``(self, *args)`` as PyTorch's
    ``profile_hook_step`` passes them; global step hooks run."""
    assert _hook_log(tracec) == _hook_log(torch)


def _saved_by_torch(tmp_path, obj, legacy):
    path = tmp_path / ("legacy.pt" if legacy else "zip.pt")
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path

_Pair = collections.namedtuple("_Pair", "a b")


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_saved_views_load_sharing_memory(tmp_path, legacy):
    """Tensors saved over one storage load as views of one memory with
    their strides (they were copies: a write to one no longer reached the
    other); a 0-d bool tensor loads (it raised); a legacy stream keeps
    torch.Size and namedtuples (they came back as plain tuples)."""
    base = torch.arange(24.).reshape(4, 6)
    obj = {"base": base, "sub": base[1:3, 2:5], "t": base.t(), "flag": torch.tensor(True),
           "half": torch.arange(4, dtype=torch.bfloat16)[1:], "size": torch.Size([2, 3]),
           "pair": _Pair(torch.ones(2), 3)}
    got = tracec.load(_saved_by_torch(tmp_path, obj, legacy), weights_only=False)
    assert got["sub"].stride() == (6, 1) and got["t"].stride() == (1, 6)
    got["sub"].fill_(-1.0)
    ref = torch.load(_saved_by_torch(tmp_path, obj, legacy), weights_only=False)
    ref["sub"].fill_(-1.0)
    assert got["base"].tolist() == ref["base"].tolist() and got["t"].tolist() == ref["t"].tolist()
    assert got["flag"].dtype == tracec.bool and got["flag"].shape == () and bool(got["flag"])
    assert got["half"].tolist() == [1.0, 2.0, 3.0]
    assert type(got["size"]) is tracec.Size and got["size"] == (2, 3)
    assert type(got["pair"]) is _Pair and got["pair"].b == 3


def _module_hook_log(lib):
    nn = lib.nn
    log = []
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    m[0].register_forward_hook(lambda mod, a, out: log.append(("always", out is None)),
                               always_call=True)
    m[0].register_forward_pre_hook(lambda mod, a: (_ for _ in ()).throw(ValueError("pre")))
    try:
        m(lib.ones(1, 2))
    except ValueError as e:
        log.append(str(e))
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix)))
    m[0].register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(("post", prefix,
                                                                                 sorted(sd))))
    sd = m.state_dict(prefix="p.")
    log.append(list(sd))
    m[0].register_load_state_dict_post_hook(
        lambda mod, keys: (log.append(("lpost", list(keys.missing_keys))),
                           keys.missing_keys.clear())[0])
    log.append(repr(m.load_state_dict({"0.weight": lib.ones(2, 2)})))
    m[0].register_state_dict_post_hook(lambda mod, sd, prefix, meta: sd)
    try:
        m.state_dict()
    except RuntimeError as e:
        log.append(str(e))
    return log


def test_module_state_dict_hooks_and_always_call_follow_torch():
    """``register_state_dict_pre_hook`` / ``_post_hook`` and
    ``register_load_state_dict_post_hook`` exist (AttributeError before);
    an ``always_call`` forward hook runs when a pre-hook raises (it ran
    only when forward itself raised)."""
    assert _module_hook_log(tracec) == _module_hook_log(torch)


def _complex_steps(lib, name):
    lib.manual_seed(0)
    p = lib.nn.Parameter(lib.randn(3, dtype=lib.complex64))
    opt = getattr(lib.optim, name)([p])
    for _ in range(8):
        opt.zero_grad()
        (p.abs() ** 2).sum().backward()
        opt.step()
    return lib.view_as_real(p.detach()).tolist()


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Adadelta", "Rprop", "ASGD"])
def test_complex_parameters_update_as_pairs_of_reals(name):
    """As PyTorch's (``view_as_real``), these optimizers update a complex
    parameter's real and imaginary parts as independent reals (second
    moments and maxima per component, Rprop's step size starting at lr for
    both); they used complex arithmetic (NAdam's ``g * g``, Adamax's
    ``|g|``, Rprop's complex sign and zero imaginary step size)."""
    np.testing.assert_allclose(_complex_steps(tracec, name), _complex_steps(torch, name),
                               rtol=1e-5, atol=1e-6)


def _backward_hook_log(lib):
    import importlib
    mm = importlib.import_module(lib.__name__ + ".nn.modules.module")
    nn = lib.nn
    log = []

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 2)

        def forward(self, a, b):
            return self.l(a) * b, a.sum() * 2

    class Dict(nn.Module):
        def forward(self, x):
            return {"y": x * 2}

    lib.manual_seed(0)
    m = Two()
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 10, go[1]))
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], None))
    g = mm.register_module_full_backward_hook(lambda mod, gi, go: log.append(type(mod).__name__))
    a = lib.randn(3, 2, requires_grad=True)
    b = lib.randn(3, 2, requires_grad=True)
    o1, o2 = m(a, b)
    (o1.sum() + o2).backward()
    d = Dict()
    d.register_full_backward_hook(lambda mod, gi, go: log.append("dict"))
    x = lib.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        d(x)["y"].sum().backward()
    log += [str(m.message).replace("torch.", "") for m in w]
    g.remove()

    class Args(nn.Module):
        def forward(self, x, mask, k, y):
            return x * 2 + y

    e = Args()
    e.register_full_backward_hook(lambda mod, gi, go: log.append(
        [None if t is None else t.tolist() for t in gi]))
    e(x, None, 3, lib.ones(2)).sum().backward()
    return log, np.round(np.array(a.grad.tolist()), 5).tolist(), b.grad


def test_full_backward_hooks_see_and_replace_all_gradients_at_once():
    """A full backward hook's replaced grad_input reaches every input (a
    None there leaves that input without a gradient: b.grad was computed
    anyway, since each input's gradient flowed on separately), a pre-hook's
    grad_output replaces every output's; global full backward hooks exist;
    a module returning a dict runs no full backward hook and warns, as in
    PyTorch; grad_input has an entry per positional argument, zeros for a
    tensor that needs no gradient."""
    assert _backward_hook_log(tracec) == _backward_hook_log(torch)


def _module_api_log(lib):
    nn = lib.nn
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    log = [len(list(seq.modules())), len(list(seq.modules(remove_duplicate=False)))]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sd = seq.state_dict(None, "p.", True)
    log += [list(sd), type(sd["p.0.weight"]).__name__, [x.category.__name__ for x in w]]
    seq.set_submodule("1", nn.Tanh())
    log.append(type(seq[1]).__name__)
    for bad in [lambda: seq.set_submodule("", nn.ReLU()), lambda: seq.set_submodule("0.weight", nn.ReLU()),
                lambda: seq.set_submodule("5", nn.ReLU(), strict=True)]:
        try:
            bad()
        except (ValueError, AttributeError) as e:
            log.append((type(e).__name__, str(e)))
    outer = nn.Sequential(nn.Linear(1, 1))
    outer.register_buffer("b", lib.ones(1))
    outer._apply(lambda t: t.double(), recurse=False)
    log.append((str(outer.b.dtype).split(".")[-1], str(outer[0].weight.dtype).split(".")[-1]))
    return log


def test_module_api_signatures_follow_torch():
    """``modules(remove_duplicate=)``, ``state_dict``'s deprecated positional
    (destination, prefix, keep_vars) with its FutureWarning,
    ``set_submodule`` and ``_apply(fn, recurse=)`` (TypeError /
    AttributeError before)."""
    assert _module_api_log(tracec) == _module_api_log(torch)


def _weights_only_log(lib, path, monkeypatch):
    import argparse
    import pickle
    log = []

    def attempt(**kw):
        try:
            log.append(type(lib.load(path, **kw)["a"]).__name__)
        except pickle.UnpicklingError:
            log.append("refused")
        except RuntimeError as e:
            log.append(str(e))
    torch.save({"a": argparse.Namespace(x=1)}, path)
    attempt(pickle_module=pickle)
    attempt(pickle_module=pickle, weights_only=True)
    attempt()
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attempt()
    attempt(weights_only=True)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    attempt(weights_only=False)
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    return log


def test_load_weights_only_default_follows_torch(tmp_path, monkeypatch):
    """``weights_only`` left unset is False when a ``pickle_module`` is
    given (tracec refused such a file), True with one is refused, and the
    TORCH_FORCE_(NO_)WEIGHTS_ONLY_LOAD variables apply as in PyTorch."""
    path = tmp_path / "ns.pt"
    assert _weights_only_log(tracec, path, monkeypatch) == _weights_only_log(torch, path,
                                                                            monkeypatch)


def test_load_with_map_location_meta_gives_meta_tensors(tmp_path):
    """``map_location="meta"`` (or a dict to "meta") loads shapes only,
    keeping Parameters and requires_grad leaves (tensors stayed on cpu)."""
    path = tmp_path / "m.pt"
    torch.save({"p": torch.nn.Parameter(torch.ones(2, 3)), "t": torch.ones(2, requires_grad=True),
                "i": torch.arange(3)}, path)
    for ml in ("meta", {"cpu": "meta"}):
        got = tracec.load(path, map_location=ml)
        ref = torch.load(path, map_location=ml)
        assert [(k, type(v).__name__, v.device.type, tuple(v.shape), str(v.dtype).split(".")[1],
                 v.requires_grad, v.is_leaf) for k, v in got.items()] == \
            [(k, type(v).__name__, v.device.type, tuple(v.shape), str(v.dtype).split(".")[1],
              v.requires_grad, v.is_leaf) for k, v in ref.items()]


def _clip_log(lib):
    nn = lib.nn
    a = nn.Parameter(lib.zeros(3))
    b = nn.Parameter(lib.zeros(2, dtype=lib.float64))
    h = nn.Parameter(lib.zeros(3, dtype=lib.float16))
    out = []
    for params, norm_type in (([a, b], 2.0), ([h], 2.0), ([h, a], "inf")):
        a.grad = lib.tensor([3.0, 4.0, 0.0])
        b.grad = lib.tensor([1.0, 2.0], dtype=lib.float64)
        h.grad = lib.tensor([100.0, -5.0, 2.0], dtype=lib.float16)
        total = nn.utils.clip_grad_norm_(params, 10.0, norm_type=norm_type)
        out.append((str(total.dtype).split(".")[1], total.item(),
                    [p.grad.tolist() for p in params]))
    return out


def test_clip_grad_norm_of_half_and_mixed_gradients():
    """A float16 gradient's norm accumulates in float32 as PyTorch's (it
    was summed in float16: 100.1875 for 100.125, and the clipped gradients
    differed); the total norm of mixed-dtype gradients has the promoted
    dtype (float64 / float32 for float32 + float64 / float16 + float32)."""
    assert _clip_log(tracec) == _clip_log(torch)


def _sgd_half(lib, dtype_name, kw):
    lib.manual_seed(0)
    p = lib.nn.Parameter(lib.randn(70).to(getattr(lib, dtype_name)))   # 64 vectorized + 6
    opt = lib.optim.SGD([p], **kw)
    for _ in range(4):
        opt.zero_grad()
        (p.float() ** 2).sum().backward()
        opt.step()
    return p.float().tolist()


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_sgd_on_half_parameters_rounds_as_torchs_kernels(dtype_name):
    """SGD's ``add_(..., alpha=)`` over float16 / bfloat16 parameters rounds
    as PyTorch's CPU kernel: alpha rounded to the dtype, float32 arithmetic
    rounded once over the vectorized 32-element blocks, the product
    rounded first in the tail (it rounded the product everywhere: the
    parameters drifted from PyTorch's by an ulp per step)."""
    kw = dict(lr=0.03, momentum=0.9, nesterov=True, weight_decay=0.01)
    assert _sgd_half(tracec, dtype_name, kw) == _sgd_half(torch, dtype_name, kw)
    kw = dict(lr=0.05, momentum=0.5, dampening=0.3)
    assert _sgd_half(tracec, dtype_name, kw) == _sgd_half(torch, dtype_name, kw)


def test_unsigned_tensors_save_in_torchs_format(tmp_path):
    """uint16 / uint32 / uint64 tensors are written as PyTorch writes them
    (an UntypedStorage and ``_rebuild_tensor_v3`` naming the dtype), so
    ``torch.load`` reads the checkpoint (a ``tracec run`` script's file
    fell back to tracec's format, which torch cannot read)."""
    from tracec import torch_save
    obj = {n: tracec.arange(5).to(getattr(tracec, n))[1:] for n in ("uint16", "uint32", "uint64")}
    obj["f"] = tracec.nn.Parameter(tracec.ones(2))
    path = tmp_path / "u.pt"
    with open(path, "wb") as fh:
        torch_save.save_torch(obj, fh, "u")
    got = torch.load(path)
    assert {k: (str(v.dtype), v.tolist(), v.storage_offset()) for k, v in got.items()} == {
        "uint16": ("torch.uint16", [1, 2, 3, 4], 1), "uint32": ("torch.uint32", [1, 2, 3, 4], 1),
        "uint64": ("torch.uint64", [1, 2, 3, 4], 1), "f": ("torch.float32", [1.0, 1.0], 0)}
    assert type(got["f"]) is torch.nn.Parameter


def _complex_module(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.to(lib.complex64)
    x = lib.randn(4, 3).to(lib.complex64)
    out = m(x)
    return ([str(p.dtype).split(".")[1] for p in m.parameters()], [x.category.__name__ for x in w],
            np.round(lib.view_as_real(out.detach()).numpy(), 5).tolist())


def test_module_to_a_complex_dtype():
    """``Module.to(torch.complex64)`` converts the floating parameters with
    PyTorch's UserWarning (it raised TypeError)."""
    assert _complex_module(tracec) == _complex_module(torch)


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_saved_conj_and_neg_views_load_their_values(tmp_path, legacy):
    """A lazily conjugated (or negated) tensor that torch.save wrote as its
    storage plus the conj / neg bit loads as the values it stands for (the
    bit was ignored: x.conj() came back unconjugated, wrong numbers); an
    nn.Buffer's flags come back as attributes, as torch.load sets them."""
    c = torch.tensor([1 + 2j, 3 - 4j])
    obj = {"conj": c.conj(), "neg": torch.tensor([1.5, -2.0])._neg_view(),
           "buf": torch.nn.Buffer(torch.ones(2), persistent=False)}
    got = tracec.load(_saved_by_torch(tmp_path, obj, legacy))
    assert tracec.view_as_real(got["conj"]).tolist() == [[1.0, -2.0], [3.0, 4.0]]
    assert got["neg"].tolist() == [-1.5, 2.0]
    assert (got["buf"].persistent, got["buf"]._is_buffer) == (False, True)


def test_buffers_save_in_torchs_format(tmp_path):
    """An nn.Buffer is written as PyTorch writes one (a plain tensor with
    its flags), so torch.load reads the file (a tracec run script's
    checkpoint holding one fell back to tracec's format)."""
    from tracec import torch_save
    path = tmp_path / "b.pt"
    with open(path, "wb") as fh:
        torch_save.save_torch({"b": tracec.nn.Buffer(tracec.ones(2), persistent=False)}, fh, "b")
    b = torch.load(path)["b"]
    assert (type(b), b.tolist(), b.persistent, b._is_buffer) == (torch.Tensor, [1.0, 1.0], False,
                                                                True)


def _registration_log(lib):
    import importlib
    mm = importlib.import_module(lib.__name__ + ".nn.modules.module")
    nn = lib.nn
    log = []
    hs = [mm.register_module_parameter_registration_hook(
              lambda m, n, p: log.append(("p", type(m).__name__, n))),
          mm.register_module_buffer_registration_hook(
              lambda m, n, b: log.append(("b", type(m).__name__, n))),
          mm.register_module_module_registration_hook(
              lambda m, n, c: log.append(("m", type(m).__name__, n, type(c).__name__)))]
    s = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    s.extra = nn.ReLU()
    s[1].running_mean = lib.zeros(3)
    for h in hs:
        h.remove()
    nn.Linear(1, 1)
    return log


def test_global_registration_hooks():
    """``register_module_{parameter,buffer,module}_registration_hook`` exist
    and run at every registration, assignments included (AttributeError
    before)."""
    assert _registration_log(tracec) == _registration_log(torch)
