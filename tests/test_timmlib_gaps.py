"""Gaps that running the published ``timm`` package (``tests/programs/timmlib``)
on tracec found, each checked against torch without timm:

- ``torch.hub.urlparse``: torch.hub's module-level name, which timm's
  ``_hub.py`` imports from there;
- ``torch.jit.annotations`` is a module (``torch.jit`` a package): timm's
  densenet imports ``List`` from it;
- ``addmm`` / ``baddbmm`` in float16 / bfloat16 round once (the float32
  accumulator scales and adds), as PyTorch's CPU GEMM does: timm's Muon
  orthogonalizes with ``addmm(A, A, A, beta=b, alpha=c, out=B)`` in bfloat16;
- ``torch._foreach_*`` (timm's ModelEmaV3 updates with ``_foreach_lerp_``);
- an eager-only op met by ``compile`` (timm's Kron compiles
  ``linalg.solve_triangular`` with ``fullgraph=True``) is named as such, not
  as data-dependent control flow;
- ``torch.fx``: ``torch._assert`` bound before the trace (timm's layers),
  ``fx.wrap`` / ``autowrap_functions`` leaves, typed signatures' code, and
  ``torchvision.models.feature_extraction`` (timm's ``feature_cls='fx'``)
  against the real torchvision.
"""
import importlib

import numpy as np
import pytest
import torch

import tracec


def test_hub_exports_urlparse_as_torch_hub_does():
    from tracec.hub import urlparse
    from torch.hub import urlparse as torch_urlparse
    assert urlparse is torch_urlparse
    assert urlparse("https://x.org/a/b-1234abcd.pth").path == "/a/b-1234abcd.pth"


def test_jit_annotations_is_a_submodule_with_typing_names():
    ours = importlib.import_module("tracec.jit.annotations")
    theirs = importlib.import_module("torch.jit.annotations")
    for name in ("List", "Tuple", "Dict", "Optional", "Any"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.BroadcastingList2[int] is theirs.BroadcastingList2[int] is None
    # the package keeps what ``torch.jit`` offers
    assert tracec.jit.script is not None and tracec.jit.Final is torch.jit.Final


def _bits(t):
    return t.detach().float().numpy()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("beta,alpha,bias", [(1, 1, "mat"), (1, 1, "row"), (-4.77, 2.03, "mat"),
                                             (0.0, 1.3, "mat")])
def test_addmm_reduced_precision_rounds_once(dtype, beta, alpha, bias):
    r = np.random.default_rng(0)
    m1, m2 = r.standard_normal((8, 16)), r.standard_normal((16, 8))
    inp = r.standard_normal((8, 8) if bias == "mat" else (8,))
    outs = []
    for lib in (torch, tracec):
        d = getattr(lib, dtype)
        a, b, c = (lib.tensor(v, dtype=lib.float32).to(d) for v in (inp, m1, m2))
        y = lib.addmm(a, b, c, beta=beta, alpha=alpha)
        o = lib.empty(8, 8, dtype=d)
        lib.addmm(a, b, c, beta=beta, alpha=alpha, out=o)
        assert y.dtype == d and o.dtype == d
        outs.append((_bits(y), _bits(o)))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    np.testing.assert_array_equal(outs[1][1], outs[0][1])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_baddbmm_reduced_precision_rounds_once_with_grads(dtype):
    r = np.random.default_rng(1)
    vals = [r.standard_normal((2, 8, 8)) for _ in range(3)]
    outs = []
    for lib in (torch, tracec):
        d = getattr(lib, dtype)
        a, b, c = (lib.tensor(v, dtype=lib.float32).to(d).requires_grad_() for v in vals)
        y = lib.baddbmm(a, b, c, beta=-4.77, alpha=2.03)
        y.float().pow(2).sum().backward()
        assert y.dtype == d and type(y.grad_fn).__name__ == "BaddbmmBackward0"
        outs.append([_bits(y)] + [_bits(t.grad) for t in (a, b, c)])
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    for g1, g0 in zip(outs[1][1:], outs[0][1:]):
        np.testing.assert_allclose(g1, g0, rtol=2e-2, atol=2e-2)


def test_addmm_under_autocast_rounds_once():
    r = np.random.default_rng(2)
    vals = [r.standard_normal(s) for s in ((8,), (8, 16), (16, 8))]
    outs = []
    for lib in (torch, tracec):
        a, b, c = (lib.tensor(v, dtype=lib.float32) for v in vals)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = lib.addmm(a, b, c, beta=0.5, alpha=3.0)
        assert y.dtype == lib.bfloat16
        outs.append(_bits(y))
    np.testing.assert_array_equal(outs[1], outs[0])


# --- torch._foreach_* (timm's ModelEmaV3: _foreach_lerp_, or _foreach_mul_ + _foreach_add_) ---

def _lists(lib, r, dtype="float32"):
    return [lib.tensor(r.standard_normal(s), dtype=getattr(lib, dtype)) for s in ((3,), (2, 4))]


def _cases():
    return [
        ("_foreach_add", lambda L, a, b: (1.5,), {}),
        ("_foreach_add", lambda L, a, b: (b,), {"alpha": 0.25}),
        ("_foreach_add", lambda L, a, b: ([2.0, -1.0],), {}),
        ("_foreach_add", lambda L, a, b: (L.tensor(0.5),), {"alpha": 2}),
        ("_foreach_sub", lambda L, a, b: (b,), {"alpha": 2}),
        ("_foreach_mul", lambda L, a, b: (), {"scalar": 0.5}),
        ("_foreach_mul", lambda L, a, b: (L.tensor(3.0),), {}),
        ("_foreach_div", lambda L, a, b: (b,), {}),
        ("_foreach_maximum", lambda L, a, b: (b,), {}),
        ("_foreach_minimum", lambda L, a, b: (0.1,), {}),
        ("_foreach_clamp_min", lambda L, a, b: ([0.0, 0.2],), {}),
        ("_foreach_clamp_max", lambda L, a, b: (0.3,), {}),
        ("_foreach_pow", lambda L, a, b: (2,), {}),
        ("_foreach_lerp", lambda L, a, b: (b, 0.25), {}),
        ("_foreach_lerp", lambda L, a, b: (b, [0.1, 0.9]), {}),
        ("_foreach_addcmul", lambda L, a, b: (b, b), {"value": 0.5}),
        ("_foreach_addcdiv", lambda L, a, b: (b, [x.abs() + 1 for x in b], [1.0, -2.0]), {}),
        ("_foreach_sqrt", lambda L, a, b: None, {}),
        ("_foreach_exp", lambda L, a, b: None, {}),
        ("_foreach_neg", lambda L, a, b: None, {}),
        ("_foreach_sign", lambda L, a, b: None, {}),
    ]


@pytest.mark.parametrize("case", range(len(_cases())))
def test_foreach_ops_match_torch_in_and_out_of_place(case):
    name, args, kw = _cases()[case]
    res = []
    for lib in (torch, tracec):
        r = np.random.default_rng(case)
        a, b = _lists(lib, r), _lists(lib, r)
        if name == "_foreach_sqrt":
            a = [x.abs() for x in a]
        extra = args(lib, a, b) or ()
        out = getattr(lib, name)(a, *extra, **kw)
        assert isinstance(out, tuple) and len(out) == 2
        inplace = [x.clone() for x in a]
        ret = getattr(lib, name + "_")(inplace, *extra, **kw)
        assert ret is inplace          # the in-place form returns its first list
        res.append([o.numpy() for o in out] + [x.numpy() for x in inplace])
    for x, y in zip(res[1], res[0]):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_foreach_reductions_copy_zero_clone_and_pow_of_scalar():
    res = []
    for lib in (torch, tracec):
        r = np.random.default_rng(7)
        a, b = _lists(lib, r), _lists(lib, r)
        vals = list(lib._foreach_norm(a)) + list(lib._foreach_norm(a, 1)) + \
            list(lib._foreach_norm(a, float("inf"))) + list(lib._foreach_max(a)) + \
            list(lib._foreach_pow(2.0, a)) + list(lib._foreach_clone(b))
        assert lib._foreach_copy_(a, b) is a
        vals += [x.clone() for x in a]
        lib._foreach_zero_(b)
        vals += b
        res.append([v.numpy() for v in vals])
    for x, y in zip(res[1], res[0]):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_foreach_out_of_place_is_differentiable():
    grads = []
    for lib in (torch, tracec):
        p = [lib.ones(2, requires_grad=True), lib.full((3,), 2.0, requires_grad=True)]
        out = lib._foreach_mul(lib._foreach_add(p, p, alpha=0.5), 3.0)
        sum(o.pow(2).sum() for o in out).backward()
        grads.append([x.grad.numpy() for x in p])
    for x, y in zip(grads[1], grads[0]):
        np.testing.assert_allclose(x, y)


@pytest.mark.parametrize("call", [
    lambda L, a: L._foreach_add(a, [L.ones(2)]),
    lambda L, a: L._foreach_add([], 1),
    lambda L, a: L._foreach_add(a, [1.0]),
    lambda L, a: L._foreach_mul(a, L.ones(3)),
    lambda L, a: L._foreach_add_([L.ones(2, dtype=L.long)], 1.5),
    lambda L, a: L._foreach_add_([L.ones(2, requires_grad=True)], 1),
])
def test_foreach_errors_are_pytorchs(call):
    msgs = []
    for lib in (torch, tracec):
        with pytest.raises(RuntimeError) as e:
            call(lib, [lib.ones(2), lib.ones(3)])
        msgs.append(str(e.value).split("\n")[0])
    assert msgs[1] == msgs[0]


# --- an eager-only op under compile (timm's Kron: torch.compile(fullgraph=True) around
# linalg.solve_triangular, eager only above 64x64: smaller ones trace,
# tests/test_compiled_linalg.py) is named as such, not as data-dependent control flow ---

def _solve_right(X, A):
    return tracec.linalg.solve_triangular(A, X, upper=True, left=False)


def test_eager_only_op_under_fullgraph_compile_says_what_it_is():
    X, A = tracec.randn(3, 65), tracec.eye(65) + tracec.randn(65, 65).triu()
    fn = tracec.compile(_solve_right, fullgraph=True)
    with pytest.raises(tracec.TraceError) as e:
        fn(X, A)
    msg = str(e.value)
    assert "LinalgSolveTriangular() (eager only: LAPACK through NumPy for matrices larger " \
           "than 64x64, here 65x65" in msg and "cannot be recorded" in msg
    assert "control flow" not in msg and 'fallback="eager"' in msg


def test_eager_only_op_under_eager_fallback_runs_as_torch():
    r = np.random.default_rng(3)
    x, a = r.standard_normal((3, 65)), 8 * np.eye(65) + np.triu(r.standard_normal((65, 65)))
    ref = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(x), upper=True, left=False)
    with pytest.warns(UserWarning, match="running eagerly"):
        got = tracec.compile(_solve_right, fallback="eager")(tracec.tensor(x), tracec.tensor(a))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12)


# --- torch.fx: torch._assert bound before the trace (timm's layers do
# `from torch import _assert` and check shapes with it) is recorded, as PyTorch's
# _assert hands a Proxy condition to Proxy.__torch_function__ ---

def _bound_assert_module(lib):
    check = lib._assert          # bound before tracing, as `from torch import _assert`

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            y = self.conv(x)
            check(y.ndim == 4, "expected 4D input")
            return y.flatten(1).relu()
    return Net()


def test_fx_records_assert_bound_before_the_trace():
    codes, outs = [], []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        m = _bound_assert_module(lib)
        gm = lib.fx.symbolic_trace(m)
        asserts = [n for n in gm.graph.nodes if n.name == "_assert"]
        assert len(asserts) == 1 and asserts[0].op == "call_function"
        assert asserts[0].target is lib._assert
        codes.append(gm.code)
        x = lib.ones(2, 3, 6, 6)
        outs.append((gm(x).detach().numpy(), m(x).detach().numpy()))
    assert codes[1] == codes[0]
    np.testing.assert_allclose(outs[1][0], outs[1][1])
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6, atol=1e-6)


def test_assert_outside_tracing_still_asserts():
    for lib in (torch, tracec):
        lib._assert(True, "fine")
        with pytest.raises(AssertionError, match="shape"):
            lib._assert(False, "shape")


# --- torchvision.models.feature_extraction (timm's features_only=True, feature_cls='fx'),
# against the real torchvision's on the same module ---

def _fe_net(lib):
    nn = lib.nn

    class Leaf(nn.Module):
        def forward(self, x):
            return x * 2

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            y = lib.relu(self.bn(self.conv(x)))
            y = y + x
            return lib.relu(y + 1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
            self.layer1 = nn.Sequential(Block(), Block())
            self.leaf = Leaf()
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(4, 5)

        def forward(self, x):
            x = self.layer1(self.stem(x))
            x = self.leaf(x).mean((2, 3))
            return self.fc(self.drop(x))
    return Net(), Leaf


def test_feature_extraction_matches_torchvision():
    from vision_oracle import optional
    tv, _ = optional()
    if tv is None:
        pytest.skip("torchvision (the test oracle) is not installed")
    from torchvision.models import feature_extraction as tv_fe
    from tracec.vision.models import feature_extraction as tc_fe
    res = []
    for lib, fe in ((torch, tv_fe), (tracec, tc_fe)):
        lib.manual_seed(0)
        net, leaf = _fe_net(lib)
        kw = {"leaf_modules": [leaf]}
        names = fe.get_graph_node_names(net, tracer_kwargs=kw)
        ext = fe.create_feature_extractor(
            net, {"layer1.0": "b0", "layer1.1.add_1": "last_add", "leaf": "leaf", "fc": "out"},
            tracer_kwargs=kw)
        x = lib.ones(2, 3, 8, 8)
        lib.manual_seed(1)
        train = ext(x)
        ext.eval()
        ev = ext(x)
        with pytest.raises(ValueError) as e:
            fe.create_feature_extractor(net, ["nope"])
        res.append((names, list(train), [v.detach().numpy() for v in train.values()],
                    [v.detach().numpy() for v in ev.values()], ext.training, net.training,
                    str(e.value)))
    (n0, k0, t0, e0, *rest0), (n1, k1, t1, e1, *rest1) = res
    assert n1 == n0 and k1 == k0 and rest1 == rest0
    for a, b in zip(t1 + e1, t0 + e0):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --- torch.fx leaf functions: fx.wrap("name") at module scope and a tracer's
# autowrap_functions (timm registers its no-trace helpers this way) are recorded as
# call_function nodes, not traced through ---

def int_of_leaf(x):
    return int(x)


def half_width_leaf(x):
    return x.shape[-1] // 2 if x.shape[-1] > 2 else 1


torch.fx.wrap("half_width_leaf")
tracec.fx.wrap("half_width_leaf")


def _leafy(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(3, 2, 3)

        def forward(self, x):
            int_of_leaf(x.shape[0])
            y = self.conv(x)
            return y * half_width_leaf(y)
    return Net()


def test_fx_wrap_and_autowrap_functions_are_leaves():
    res = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        net = _leafy(lib)
        with pytest.raises(TypeError):       # int() of a Proxy, traced through
            lib.fx.symbolic_trace(net)
        graph = lib.fx.Tracer(autowrap_functions=(int_of_leaf,)).trace(net)
        gm = lib.fx.GraphModule(net, graph)
        calls = [(n.name, n.target) for n in graph.nodes if n.op == "call_function"]
        assert calls[-2:] == [("half_width_leaf", half_width_leaf), ("mul", calls[-1][1])]
        assert ("int_of_leaf", int_of_leaf) in calls
        res.append(([c[0] for c in calls], gm(lib.ones(2, 3, 6, 6)).detach().numpy()))
    # the globals are restored after the trace
    assert globals()["int_of_leaf"].__name__ == "int_of_leaf" and type(half_width_leaf).__name__ == "function"
    assert res[1][0] == res[0][0]
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-6, atol=1e-6)


# --- torch.fx code for typed signatures (timm's ViT: forward(x, attn_mask:
# Optional[torch.Tensor] = None)) is valid and written as PyTorch writes it ---

def _typed(lib):
    from typing import Dict, List, Optional, Tuple

    class Net(lib.nn.Module):
        def forward(self, x, mask: Optional[lib.Tensor] = None, ks: List[int] = [1],
                    t: Tuple[int, float] = (1, 2.0), d: Dict[str, lib.Tensor] = None,
                    z: int = 3) -> lib.Tensor:
            return x + z
    return Net()


def test_fx_code_of_typed_signature_is_pytorchs():
    codes = []
    for lib in (torch, tracec):
        gm = lib.fx.symbolic_trace(_typed(lib))
        assert gm(lib.ones(2)).tolist() == [4.0, 4.0]
        codes.append(gm.code)
    assert codes[1] == codes[0]


def test_fx_sees_functions_bound_in_traced_modules_torchvision_models():
    """tracec.vision's models call ``flatten`` bound at import (``from
    tracec.shape_ops import flatten``), as torchvision's call torch.flatten:
    traced, it is recorded as torch.flatten (a ResNet's code equals
    torchvision's); torchvision.ops modules are leaves of
    get_graph_node_names by default."""
    from vision_oracle import optional
    tv, _ = optional()
    if tv is None:
        pytest.skip("torchvision (the test oracle) is not installed")
    from torchvision.models.feature_extraction import get_graph_node_names as tv_names
    import tracec.vision as tcv
    from tracec.vision.models.feature_extraction import get_graph_node_names as tc_names
    out = []
    for lib, vis, names in ((torch, tv, tv_names), (tracec, tcv, tc_names)):
        lib.manual_seed(0)
        rn = vis.models.resnet
        res = rn.ResNet(rn.BasicBlock, [1, 1, 1, 1], num_classes=3).eval()
        gm = lib.fx.symbolic_trace(res)
        mob = lib.nn.Sequential(vis.ops.Conv2dNormActivation(3, 4),
                                vis.ops.SqueezeExcitation(4, 2), lib.nn.Flatten())
        # (the body: tracec.vision's forward signatures carry no annotations)
        body = [ln for ln in gm.code.splitlines() if not ln.startswith("def forward")]
        # densenet's layer concatenates its inputs with a bound cat (an out= wrapper's inner
        # function in tracec)
        dl = lib.fx.symbolic_trace(vis.models.densenet._DenseBlock(2, 4, 2, 2, 0.0).eval())
        body += [ln for ln in dl.code.splitlines() if not ln.startswith("def forward")]
        # torchvision.ops.stochastic_depth is an fx.wrap leaf (its draw reads the shape)
        sd = lib.fx.symbolic_trace(vis.ops.StochasticDepth(0.2, "row"))
        leaves = [(n.op, n.name, n.args[1:]) for n in sd.graph.nodes if n.op == "call_function"]
        # and swin's _patch_merging_pad (it reads the shape to pad)
        pm = lib.fx.symbolic_trace(vis.models.swin_transformer.PatchMerging(4))
        leaves += [(n.op, n.name) for n in pm.graph.nodes if n.op == "call_function"]
        out.append((body, names(mob), gm(lib.ones(1, 3, 32, 32)).detach().numpy(), leaves))
    assert out[1][0] == out[0][0]
    assert out[1][1] == out[0][1]
    assert out[1][3] == out[0][3] == [("call_function", "stochastic_depth", (0.2, "row", True)),
                                      ("call_function", "_patch_merging_pad")]
    np.testing.assert_allclose(out[1][2], out[0][2], rtol=1e-4, atol=1e-5)
