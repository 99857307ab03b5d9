"""einops on tracec, against einops on torch (tracec/einops_backend.py).

With a plain ``import tracec`` (this process: torch is imported too, as the
oracle) einops serves tracec tensors through ``TracecBackend``; under
``tracec run`` (``torch`` is tracec) through its own TorchBackend, and
``einops.layers.torch``'s Rearrange / Reduce / EinMix are tracec modules.
Values and gradients must match einops on torch, eagerly and compiled.
"""
import json
import os
import subprocess
import sys
import textwrap

import einops
import numpy as np
import pytest
import torch

import tracec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# (name, fn(ein, xs...), input shapes): ``ein`` is the einops module.
CASES = [
    ("rearrange_merge", lambda e, x: e.rearrange(x, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
     [(2, 3, 4, 6)]),
    ("rearrange_split", lambda e, x: e.rearrange(x, "b n (h d) -> b h n d", h=3), [(2, 5, 12)]),
    ("rearrange_list", lambda e, x, y: e.rearrange([x, y], "s b c -> b (s c)"), [(3, 4), (3, 4)]),
    ("rearrange_ellipsis", lambda e, x: e.rearrange(x, "b ... d -> b d ..."), [(2, 3, 4, 5)]),
    ("reduce_mean", lambda e, x: e.reduce(x, "b c (h h2) (w w2) -> b c h w", "mean", h2=2, w2=2),
     [(2, 3, 4, 4)]),
    ("reduce_max", lambda e, x: e.reduce(x, "b n c -> b c", "max"), [(2, 5, 3)]),
    ("reduce_min", lambda e, x: e.reduce(x, "b n c -> n", "min"), [(2, 5, 3)]),
    ("reduce_sum", lambda e, x: e.reduce(x, "b n c -> b () c", "sum"), [(2, 5, 3)]),
    ("reduce_prod", lambda e, x: e.reduce(x, "b n c -> c", "prod"), [(2, 2, 3)]),
    ("repeat_new_axis", lambda e, x: e.repeat(x, "() n d -> b n d", b=3), [(1, 4, 5)]),
    ("repeat_tile", lambda e, x: e.repeat(x, "h w -> (r h) (w s)", r=2, s=3), [(2, 3)]),
    ("einsum", lambda e, q, k: e.einsum(q, k, "b h i d, b h j d -> b h i j"),
     [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("pack_unpack", lambda e, x, y: e.unpack(e.pack([x, y], "b * c")[0] * 2.0,
                                             e.pack([x, y], "b * c")[1], "b * c")[1],
     [(2, 3, 4), (2, 5, 6, 4)]),
    ("parse_shape", lambda e, x: x.reshape(e.parse_shape(x, "b _ w")["b"], -1), [(2, 3, 4)]),
]


def _run(ein, lib, fn, arrays, compiled=False):
    xs = [lib.tensor(a, requires_grad=True) for a in arrays]
    f = (lambda *t: fn(ein, *t))
    if compiled:
        f = tracec.compile(f)
    out = f(*xs)
    w = lib.tensor(np.linspace(-1.0, 1.0, int(np.prod(tuple(out.shape)))).astype(np.float32)
                   .reshape(tuple(out.shape)))
    (out * w).sum().backward()
    return out.detach().numpy(), [x.grad.numpy() for x in xs]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_einops_on_tracec_matches_torch(name, fn, shapes, compiled):
    arrays = [_arr(*s, seed=i) for i, s in enumerate(shapes)]
    want, gwant = _run(einops, torch, fn, arrays)
    got, ggot = _run(einops, tracec, fn, arrays, compiled)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(ggot, gwant):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_backend_is_tracec_and_errors_are_einops_own():
    x = tracec.zeros(2, 3)
    backend = einops._backends.get_backend(x)
    assert backend.framework_name == "tracec" and type(backend).__name__ == "TracecBackend"
    assert einops._backends.get_backend(tracec.nn.Parameter(x)) is backend
    assert einops._backends.get_backend(torch.zeros(2)).framework_name == "torch"
    with pytest.raises(einops.EinopsError) as want:
        einops.rearrange(torch.zeros(2, 3), "a b -> a b c")
    with pytest.raises(einops.EinopsError) as got:
        einops.rearrange(x, "a b -> a b c")
    assert str(got.value).replace("tracec.Size", "torch.Size") == str(want.value)


def _python(code, cli=False, tmp_path=None):
    if cli:
        script = tmp_path / "prog.py"
        script.write_text(textwrap.dedent(code))
        cmd = [sys.executable, "-m", "tracec.cli", "run", str(script)]
    else:
        cmd = [sys.executable, "-c", textwrap.dedent(code)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.parametrize("order", ["tracec_first", "einops_first"])
def test_plain_import_either_order_without_torch(order):
    first, second = ("tracec", "einops") if order == "tracec_first" else ("einops", "tracec")
    out = _python(f"""
        import sys
        import {first}
        if "{first}" == "tracec":
            assert "einops" not in sys.modules   # importing tracec imports no einops
        import {second}
        import tracec as torch
        from einops import rearrange, reduce
        x = torch.arange(24.).reshape(2, 3, 4).requires_grad_()
        y = reduce(rearrange(x, "b c d -> b d c"), "b d c -> b d", "max")
        y.sum().backward()
        assert "torch" not in sys.modules
        print(y.tolist(), x.grad.sum().item())
    """)
    assert out.split() == "[[8.0, 9.0, 10.0, 11.0], [20.0, 21.0, 22.0, 23.0]] 8.0".split()


LAYERS_PROG = """
import json
import numpy as np
import torch
from torch import nn
from einops import einsum, pack, rearrange, reduce, repeat, unpack
from einops.layers.torch import EinMix, Rearrange, Reduce

model = nn.Sequential(
    Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
    EinMix("b n d_in -> b n d_out", weight_shape="d_in d_out", bias_shape="d_out",
           d_in=12, d_out=8),
    nn.GELU(),
    EinMix("b n d -> b m d", weight_shape="n m", n=4, m=3),
    Reduce("b m d -> b d", "mean"),
)
g = np.random.default_rng(1)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy((0.3 * g.standard_normal(p.shape)).astype(np.float32)))
x = torch.from_numpy(g.standard_normal((2, 3, 4, 4)).astype(np.float32))
cls = torch.from_numpy(g.standard_normal((1, 1, 8)).astype(np.float32))


def step(x):
    y = model(x)
    tokens = torch.cat((repeat(cls, "() n d -> b n d", b=2), rearrange(y, "b d -> b () d")), dim=1)
    packed, ps = pack([tokens, y], "b *")
    first, _ = unpack(packed * 0.5, ps, "b *")
    sim = einsum(first, tokens, "b n d, b m d -> b n m")
    return (tokens ** 2).mean() + reduce(sim, "b n m -> b", "max").sum() * 0.1


out = {"repr": repr(model[0]) + repr(model[4]),
       "backend": type(__import__("einops")._backends.get_backend(x)).__name__}
for mode, f in (("eager", step), ("compiled", torch.compile(step))):
    model.zero_grad()
    loss = f(x)
    loss.backward()
    out[mode] = [loss.item()] + [p.grad.flatten().tolist() for p in model.parameters()]
print(json.dumps(out))
"""


def test_layers_under_tracec_run_match_torch(tmp_path):
    got = json.loads(_python(LAYERS_PROG, cli=True, tmp_path=tmp_path))
    ns = {}
    exec(LAYERS_PROG.replace("print(json.dumps(out))", "")
         .replace("torch.compile(step)", "step"), ns)     # the reference: einops on torch
    want = ns["out"]
    assert got["repr"] == want["repr"]
    assert got["backend"] == want["backend"] == "TorchBackend"   # torch is tracec there
    for mode in ("eager", "compiled"):
        np.testing.assert_allclose(got[mode][0], want["eager"][0], rtol=1e-5)
        for g, w in zip(got[mode][1:], want["eager"][1:]):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
