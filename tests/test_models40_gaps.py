"""Gaps the public programs of ``tests/programs/models40`` found, each against
torch: the ``grad_fn`` names of recurrent layers' outputs (the "Sequence
Models and LSTM Networks" tutorial prints ``lstm(inputs, hidden)``'s output,
``grad_fn=<MkldnnRnnLayerBackward0>`` under PyTorch's CPU kernels);
``torch.fx`` (the Conv/BN fuser and FX profiler tutorials: symbolic_trace,
the printed graph and generated code, graph edits, recompile, Interpreter,
Transformer, ShapeProp, PyTorch's submodule names); ``tracec run`` leaking
its own ``from __future__ import annotations`` into the script (annotations
became strings), and the generic data classes evaluated annotations need;
the weights-only refusal of a pickled model (its type shown as
``_pickle.UnpicklingError``, PyTorch's message);
``consume_prefix_in_state_dict_if_present`` (a DataParallel checkpoint);
``testing.assert_allclose``'s deprecation warning."""
import copy
import os
import pathlib

import numpy as np
import pytest
import torch

import tracec
import torch_recordings
from program_runner import run_cli

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _grad_fn_names(lib, cls, kw, x):
    lib.manual_seed(0)
    m = getattr(lib.nn, cls)(3, 4, **kw)
    inp = lib.tensor(x)
    if inp.dtype == lib.float32 and x.dtype == np.float64:
        inp = inp.double()
    if x.dtype == np.float64:
        m = m.double()
    out, h = m(inp)
    h = h[0] if isinstance(h, tuple) else h
    return type(out.grad_fn).__name__, type(h.grad_fn).__name__


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"num_layers": 2},
                                {"bidirectional": True}, {"proj_size": 2}],
                         ids=["plain", "batch_first", "two_layers", "bidirectional", "proj"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_recurrent_output_grad_fn_names_match_torch(cls, kw, dtype):
    if "proj_size" in kw and cls != "LSTM":
        pytest.skip("proj_size is LSTM's")
    x = _arr(5, 2, 3).astype(dtype)
    assert _grad_fn_names(tracec, cls, kw, x) == _grad_fn_names(torch, cls, kw, x)


def test_lstm_tutorial_output_prints_like_torch():
    x = _arr(5, 1, 3)

    def run(lib):
        lib.manual_seed(1)
        out, hidden = lib.nn.LSTM(3, 3)(lib.tensor(x))
        return repr(out).split("grad_fn=")[1], [repr(h).split("grad_fn=")[1] for h in hidden]
    assert run(tracec) == run(torch) == ("<MkldnnRnnLayerBackward0>)", ["<StackBackward0>)"] * 2)


# --- torch.fx ---------------------------------------------------------------------------

def _fx_model(lib):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(2)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.bn(self.conv(x)) + x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Sequential(Block(), Block())
            self.scale = nn.Parameter(lib.ones(2, 1, 1) * 0.5)
            self.register_buffer("shift", lib.full((2, 1, 1), 0.25))
            self.fc = nn.Linear(8, 3)

        def forward(self, x, y: lib.Tensor):
            h = self.layer(x) * self.scale - self.shift
            h = F.relu(h).view(x.size(0), -1)
            h = lib.flatten(h, 1)[:, :8]
            return self.fc(h) + y.transpose(0, 1), -h.mean(dim=1, keepdim=True)

    lib.manual_seed(0)
    return Net().eval()


def _fx_inputs(lib):
    return lib.tensor(_arr(2, 2, 3, 3)), lib.tensor(_arr(3, 2, seed=1))


def test_symbolic_trace_graph_code_and_outputs_match_torch():
    def run(lib):
        m = _fx_model(lib)
        gm = lib.fx.symbolic_trace(m)
        outs = gm(*_fx_inputs(lib))
        dup = copy.deepcopy(gm)
        return (str(gm.graph), str(gm), type(gm).__name__, [n for n, _ in gm.named_children()],
                [n for n, _ in gm.named_parameters()], [n for n, _ in gm.named_buffers()],
                type(dup).__name__, dup.code == gm.code, dup.fc.weight is gm.fc.weight,
                bool((dup(*_fx_inputs(lib))[0] == outs[0]).all()),
                [o.detach().numpy() for o in outs],
                [o.detach().numpy() for o in m(*_fx_inputs(lib))])
    t, c = run(torch), run(tracec)
    assert c[:10] == t[:10]
    for a, b in zip(c[10] + c[11], t[10] + t[11]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fx_graph_edits_recompile_and_interpreter_match_torch():
    def run(lib):
        gm = lib.fx.symbolic_trace(_fx_model(lib))
        got = []
        for node in gm.graph.nodes:
            if node.op == "call_module" and node.target.endswith(".bn"):
                conv = node.args[0]
                try:
                    gm.graph.erase_node(conv)
                except RuntimeError as e:
                    got.append(str(e))
                node.replace_all_uses_with(conv)
                gm.graph.erase_node(node)
        # a node inserted after the placeholder, read by the first conv
        x = next(iter(gm.graph.nodes))
        with gm.graph.inserting_after(x):
            neg = gm.graph.call_function(lib.neg, (x,))
        first = next(n for n in gm.graph.nodes if n.op == "call_module")
        first.replace_input_with(x, neg)
        gm.graph.lint()
        gm.recompile()
        got += [gm.code, str(gm.graph), [len(n.users) for n in gm.graph.nodes]]

        class Count(lib.fx.Interpreter):
            def __init__(self, mod):
                super().__init__(mod)
                self.calls = {}

            def run_node(self, n):
                self.calls[n.name] = self.calls.get(n.name, 0) + 1
                return super().run_node(n)
        interp = Count(gm)
        out = [interp.run(*_fx_inputs(lib)) for _ in range(2)][-1]
        direct = gm(*_fx_inputs(lib))
        return got, interp.calls, [o.detach().numpy() for o in out], \
            [o.detach().numpy() for o in direct]
    t, c = run(torch), run(tracec)
    assert c[0] == t[0] and c[1] == t[1]
    for a, b in zip(c[2] + c[3], t[2] + t[3]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fx_lint_and_proxy_control_flow_errors_match_torch():
    def run(lib):
        class Branchy(lib.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x
                return -x
        errs = []
        try:
            lib.fx.symbolic_trace(Branchy())
        except Exception as e:
            errs.append((type(e).__name__, str(e)))
        g = lib.fx.Graph()
        a = g.placeholder("a")
        b = g.call_function(lib.relu, (a,))
        g.output(b)
        try:
            g.erase_node(a)
        except RuntimeError as e:
            errs.append(str(e))
        return errs, str(g), g.python_code("self").src
    assert run(tracec) == run(torch)


def test_tracec_run_keeps_the_scripts_annotations(tmp_path):
    script = tmp_path / "ann.py"
    script.write_text("import torch\n"
                      "def f(x: torch.Tensor, n: int = 2) -> torch.Tensor:\n"
                      "    return x\n"
                      "print(f.__annotations__)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = run_cli(["run", str(script)], tmp_path, env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ("{'x': <class 'torch.Tensor'>, 'n': <class 'int'>, "
                                "'return': <class 'torch.Tensor'>}")


def _lib(F):
    return torch if F is torch.nn.functional else tracec


_FX_CALLS = {
    "relu": lambda F, x: F.relu(x), "softmax": lambda F, x: F.softmax(x, dim=1),
    "log_softmax": lambda F, x: F.log_softmax(x, 1), "dropout": lambda F, x: F.dropout(x, 0.2),
    "gelu": lambda F, x: F.gelu(x), "layer_norm": lambda F, x: F.layer_norm(x, (4,)),
    "linear": lambda F, x: F.linear(x, x),
    "max_pool2d": lambda F, x: F.max_pool2d(x.view(1, 1, 2, 4), 2),
    "pad": lambda F, x: F.pad(x, (1, 1)),
    "cross_entropy": lambda F, x: F.cross_entropy(x, x.argmax(1)),
    "adaptive_avg_pool2d": lambda F, x: F.adaptive_avg_pool2d(x.view(1, 1, 2, 4), 1),
    "conv2d": lambda F, x: F.conv2d(x.view(1, 1, 2, 4), x.view(1, 1, 2, 4)[:, :, :, :2], padding=1),
    "sigmoid": lambda F, x: F.sigmoid(x), "logsigmoid": lambda F, x: F.logsigmoid(x),
    "cat": lambda F, x: _lib(F).cat([x, x], 1), "mean": lambda F, x: _lib(F).mean(x, dim=1),
    "getitem_shape": lambda F, x: x[:, 1:2, None].view(x.shape[0], -1),
    "math_and_reflected": lambda F, x: 1 - x * __import__("math").sqrt(x.size(1)) ** 2,
}


@pytest.mark.parametrize("name", list(_FX_CALLS))
def test_fx_records_calls_as_torch_does(name):
    """A traced function's call is recorded as PyTorch records it: the
    target's printed name (``torch._C._nn.gelu``, ``torch.nn.functional.relu``,
    ``torch.flatten``), functionals' arguments with their defaults
    (``relu(x, inplace=False)``), ``F.sigmoid`` as a method call; the
    generated code runs and gives torch's values."""
    def run(lib):
        F = lib.nn.functional

        def f(x):
            return _FX_CALLS[name](F, x)
        gm = lib.fx.symbolic_trace(f)
        return str(gm.graph), gm.code, gm(lib.tensor(_arr(2, 4))).numpy()
    (tg, tc, tv), (cg, cc, cv) = run(torch), run(tracec)
    assert (cg, cc) == (tg, tc)
    np.testing.assert_allclose(cv, tv, rtol=1e-5, atol=1e-6)


def test_fx_unpacks_a_proxy_as_torch_does():
    """``B, T, C = x.size()`` and ``q, k, v = t.split(...)`` in traced code
    become ``getitem`` nodes (PyTorch reads the caller's UNPACK_SEQUENCE);
    a loop over a proxy is refused with PyTorch's TraceError."""
    def run(lib):
        class Attn(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = lib.nn.Linear(8, 24)

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.qkv(x).split(C, dim=2)
                att = (q @ k.transpose(-2, -1)) * (1.0 / C ** 0.5)
                return lib.softmax(att, dim=-1) @ v
        lib.manual_seed(0)
        gm = lib.fx.symbolic_trace(Attn())

        def loop(x):
            for r in x:
                x = x + r
            return x
        try:
            lib.fx.symbolic_trace(loop)
        except Exception as e:
            err = (type(e).__name__, str(e))
        return gm.code, str(gm.graph), gm(lib.tensor(_arr(2, 3, 8))).detach().numpy(), err
    t, c = run(torch), run(tracec)
    assert c[:2] == t[:2] and c[3] == t[3]
    np.testing.assert_allclose(c[2], t[2], rtol=1e-5, atol=1e-6)


_REFUSED = """import os, pickle, sys, tempfile, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
path = os.path.join(tempfile.mkdtemp(), "whole.pth")
torch.save(Net(), path)
try:
    torch.load(path)
except Exception as e:
    print(type(e), type(e).__name__, isinstance(e, pickle.UnpicklingError),
          "Weights only load failed" in str(e))
print(type(torch.load(path, weights_only=False)).__name__)
"""


def test_weights_only_refusal_is_shown_as_pickles_unpicklingerror(tmp_path):
    """``torch.load`` of a whole pickled model under the default
    ``weights_only=True`` raises what PyTorch raises as far as a script can
    print it: ``<class '_pickle.UnpicklingError'>``."""
    script = tmp_path / "refused.py"
    script.write_text(_REFUSED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = run_cli(["run", str(script)], tmp_path, env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    want = torch_recordings.script_output("torch_compat/weights_only_refused", script, cwd=tmp_path,
                                          env=env)
    assert r.stdout == want == ("<class '_pickle.UnpicklingError'> UnpicklingError True True\n"
                                "Net\n")


def test_weights_only_refusal_message_is_torchs(tmp_path):
    """The refusal's text is PyTorch's, naming the global (a pickled class,
    a NumPy scalar's reconstruct function) and the calls that allow it."""
    import argparse

    def run(lib, sub):
        (tmp_path / sub).mkdir()
        msgs = []
        for obj in ({"args": argparse.Namespace(a=1)}, {"s": np.float64(1.5)}):
            lib.save(obj, tmp_path / sub / "f.pth")
            try:
                lib.load(tmp_path / sub / "f.pth")
            except Exception as e:
                msgs.append(str(e))
        return msgs
    assert run(tracec, "c") == run(torch, "t")


def test_consume_prefix_in_state_dict_if_present_matches_torch():
    """A DataParallel / DDP checkpoint's ``module.`` prefix stripped from the
    keys (renamed ones move to the end) and from ``_metadata``."""
    def run(lib):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        wrapped = lib.nn.DataParallel(net)
        sd = wrapped.state_dict()
        sd["extra"] = lib.zeros(1)
        lib.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
        fresh = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        del sd["extra"]
        res = fresh.load_state_dict(sd)
        return list(sd.keys()), list(sd._metadata.items()), repr(res), \
            fresh[0].weight.detach().numpy()
    (tk, tm, tr, tw), (ck, cm, cr, cw) = run(torch), run(tracec)
    assert (ck, cm, cr) == (tk, tm, tr)
    np.testing.assert_array_equal(cw, tw)


def _fx_attr_model(lib):
    nn = lib.nn

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(lib.ones(4))
            self.lin = nn.Linear(4, 4)

        def forward(self, x, scale=2.0):
            return self.lin(input=x) * self.w * scale

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
            self.register_buffer("mask", lib.tril(lib.ones(4, 4)))
            self.drop = nn.Dropout(0.1)
            self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
            self.const = lib.arange(4.0)

        def forward(self, x, y=None):
            h = self.inner(x, scale=3.0)
            for layer in self.layers:
                h = layer(h)
            h = h.masked_fill(self.mask[:2, :] == 0, float("-inf"))
            z = x.new_zeros(x.size(0), 4)
            h = lib.cat([h, z + self.const], dim=-1).relu_()
            h = self.drop(h)
            if y is not None:
                h = h + y
            return {"out": h.sum(-1), "shape": h.shape}
    lib.manual_seed(0)
    return M().eval()


def test_fx_module_attributes_constants_and_containers_match_torch():
    """Traced through: a non-leaf submodule called with keywords, a
    ModuleList loop, a buffer sliced, a plain tensor attribute read as
    ``get_attr`` of its own name, a new tensor constant
    (``_tensor_constant0``), a dict output with ``h.shape``."""
    def run(lib):
        gm = lib.fx.symbolic_trace(_fx_attr_model(lib))
        out = gm(lib.tensor(_arr(2, 4)), lib.tensor(_arr(2, 8, seed=1)))
        return (gm.code, str(gm.graph), sorted(k for k, _ in gm.named_buffers()),
                sorted(k for k, _ in gm.named_parameters()), tuple(out["shape"]),
                out["out"].detach().numpy())
    t, c = run(torch), run(tracec)
    assert c[:5] == t[:5]
    np.testing.assert_allclose(c[5], t[5], rtol=1e-5, atol=1e-6)


def test_fx_transformer_rewrites_like_torch():
    """The torch.fx docs' Transformer: call_function / call_method
    overrides calling torch functions and methods on proxies build the new
    graph; placeholders keep their defaults."""
    def run(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(3, 3)

            def forward(self, x, k: int = 2):
                return lib.sigmoid(self.lin(x)).relu() + lib.neg(x) * k

        class NegSigmSwapXformer(lib.fx.Transformer):
            def call_function(self, target, args, kwargs):
                if target == lib.sigmoid:
                    return lib.neg(*args, **kwargs)
                return super().call_function(target, args, kwargs)

            def call_method(self, target, args, kwargs):
                if target == "relu":
                    call_self, *args_tail = args
                    return call_self.sigmoid(*args_tail, **kwargs)
                return super().call_method(target, args, kwargs)
        lib.manual_seed(0)
        traced = lib.fx.symbolic_trace(M())
        t = NegSigmSwapXformer(traced).transform()
        return type(t).__name__, t.code, str(t.graph), t(lib.tensor(_arr(2, 3))).detach().numpy()
    t, c = run(torch), run(tracec)
    assert c[:3] == t[:3]
    np.testing.assert_allclose(c[3], t[3], rtol=1e-5, atol=1e-6)


def test_fx_submodules_and_shape_prop_match_torch():
    """``torch.fx.node.Node`` / ``graph_module.GraphModule`` / ... import as
    in PyTorch; ``ShapeProp(gm).propagate(x)`` leaves each node's
    ``tensor_meta`` (shape, dtype, requires_grad, stride, memory format)."""
    import importlib

    def run(lib):
        name = lib.__name__
        mods = [importlib.import_module(f"{name}.fx.{m}") for m in
                ("node", "graph", "graph_module", "interpreter", "proxy", "_symbolic_trace",
                 "passes.shape_prop")]
        assert mods[0].Node is lib.fx.Node and mods[2].GraphModule is lib.fx.GraphModule
        gm = lib.fx.symbolic_trace(_fx_model(lib))
        mods[-1].ShapeProp(gm).propagate(*_fx_inputs(lib))
        out = []
        for n in gm.graph.nodes:
            m = n.meta.get("tensor_meta")
            metas = m if isinstance(m, tuple) and not hasattr(m, "_fields") else (m,)
            out.append((n.name, n.meta["type"].__name__, [
                None if t is None else (tuple(t.shape), str(t.dtype).split(".")[-1],
                                        t.requires_grad, tuple(t.stride), str(t.memory_format),
                                        t.is_quantized)
                for t in metas]))
        return out
    assert run(tracec) == run(torch)


_GENERIC_DATA = """from typing import Iterator, Tuple
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler
class Pairs(Dataset[Tuple[Tensor, Tensor]]):
    def __init__(self): self.x = torch.arange(6.0).view(3, 2)
    def __len__(self) -> int: return 3
    def __getitem__(self, i: int) -> Tuple[Tensor, Tensor]: return self.x[i], self.x[i] * 2
class Evens(Sampler[int]):
    def __init__(self, n: int): self.n = n
    def __iter__(self) -> Iterator[int]: return iter(range(0, self.n, 2))
    def __len__(self) -> int: return (self.n + 1) // 2
class Stream(IterableDataset[int]):
    def __iter__(self): return iter(range(4))
def make(ds: Dataset[Tuple[Tensor, Tensor]]) -> DataLoader[Tuple[Tensor, Tensor]]:
    return DataLoader(ds, batch_size=2, sampler=Evens(len(ds)))
print([b[1].tolist() for b in make(Pairs())], list(DataLoader(Stream(), batch_size=3)))
print(isinstance(Pairs(), Dataset), make.__annotations__['ds'].__origin__.__name__)
"""


def test_data_classes_are_generic_as_in_torch(tmp_path):
    """``Dataset[...]`` / ``Sampler[int]`` / ``IterableDataset[int]`` as base
    classes and ``DataLoader[...]`` in (now evaluated) annotations, under
    ``tracec run`` as under torch."""
    script = tmp_path / "generic.py"
    script.write_text(_GENERIC_DATA)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = run_cli(["run", str(script)], tmp_path, env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    want = torch_recordings.script_output("torch_compat/generic_data_classes", script,
                                          cwd=tmp_path, env=env)
    assert r.stdout == want and "Dataset" in want


def test_assert_allclose_warns_as_deprecated_like_torch():
    """The FX fuser tutorial's ``torch.testing.assert_allclose``: PyTorch's
    FutureWarning, the same text."""
    import warnings

    def run(lib):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.testing.assert_allclose(lib.ones(2), lib.ones(2))
        return [(x.category, str(x.message)) for x in w]
    assert run(tracec) == run(torch) and len(run(torch)) == 1


def test_fx_graph_module_saves_and_loads_like_torch(tmp_path):
    """``torch.save(traced)`` / ``torch.load(..., weights_only=False)``: a
    GraphModule (its class made per instance) comes back as a
    ``GraphModule`` with the same code and outputs; deepcopy of the loaded
    one works too."""
    def run(lib, name):
        gm = lib.fx.symbolic_trace(_fx_model(lib))
        lib.save(gm, tmp_path / name)
        back = lib.load(tmp_path / name, weights_only=False)
        again = copy.deepcopy(back)
        x = _fx_inputs(lib)
        return (type(back).__name__, back.code == gm.code, str(back.graph) == str(gm.graph),
                again.code == gm.code, back(*x)[0].detach().numpy(), gm(*x)[0].detach().numpy())
    t, c = run(torch, "t.pt"), run(tracec, "c.pt")
    assert c[:4] == t[:4]
    np.testing.assert_array_equal(c[4], c[5])
    np.testing.assert_allclose(c[4], t[4], rtol=1e-5, atol=1e-6)
