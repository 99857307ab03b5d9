"""Gaps that running the published ``timm`` package (``tests/programs/timmlib``)
on tracec found, each checked against torch without timm:

- ``torch.hub.urlparse``: torch.hub's module-level name, which timm's
  ``_hub.py`` imports from there;
- ``torch.jit.annotations`` is a module (``torch.jit`` a package): timm's
  densenet imports ``List`` from it;
- ``addmm`` / ``baddbmm`` in float16 / bfloat16 round once (the float32
  accumulator scales and adds), as PyTorch's CPU GEMM does: timm's Muon
  orthogonalizes with ``addmm(A, A, A, beta=b, alpha=c, out=B)`` in bfloat16.
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
