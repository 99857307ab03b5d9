"""The ``functorch`` package under tracec (it imports ``torch._functorch``:
``deprecated`` and ``make_functional``, missing before, so ``import
functorch`` failed), ``torch.func.functionalize``, and vmap's message for
mapped sizes that differ, checked against torch."""
import sys
import warnings

import pytest
import torch

import tracec
from tracec._functorch import deprecated as tracec_functorch


def _functorch(lib):
    if lib is torch:
        import functorch
        return functorch
    return tracec_functorch


def _run(lib):
    ft = _functorch(lib)
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 1))
    x, t = lib.randn(5, 3), lib.randn(5, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fmodel, params = ft.make_functional(model)
        loss = lambda p, a, b: lib.nn.functional.mse_loss(fmodel(p, a), b)  # noqa: E731
        g = ft.grad(loss)(params, x, t)
        per = ft.vmap(ft.grad(loss), in_dims=(None, 0, 0))(params, x[:, None], t[:, None])
        bn = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2)).eval()
        fbn, bp, bb = ft.make_functional_with_buffers(bn, disable_autograd_tracking=True)
        fens, ep, eb = ft.combine_state_for_ensemble([bn, bn])
    out = [type(fmodel).__name__, [tuple(p.shape) for p in params],
           [p.requires_grad for p in params], [round(v.sum().item(), 5) for v in g],
           [round(v.sum().item(), 5) for v in per], [p.requires_grad for p in bp], len(bb),
           round(fbn(bp, bb, x).sum().item(), 5), [tuple(p.shape) for p in ep],
           [p.requires_grad for p in ep], round(ft.vmap(fens, in_dims=(0, 0, None))(ep, eb, x)
                                                .sum().item(), 5),
           [str(w.message) for w in caught if w.category is FutureWarning]]
    with pytest.raises(RuntimeError) as e:
        ft.make_functional(bn)
    out.append(str(e.value))
    with pytest.raises(RuntimeError) as e:
        ft.combine_state_for_ensemble([])
    out.append(str(e.value))
    return out


def test_functorch_matches_torch():
    assert _run(tracec) == _run(torch)


def test_functionalize_and_vmap_size_message_match_torch():
    out = []
    for lib in (torch, tracec):
        def f(a):
            b = a.clone()
            b.add_(1)
            a.mul_(2)
            return b.view(-1)
        x = lib.ones(2, 2)
        r = lib.func.functionalize(f)(x)
        with pytest.raises(RuntimeError) as e1:
            lib.func.functionalize(f, remove="views")
        with pytest.raises(ValueError) as e2:
            lib.vmap(lambda a, b: a + b)(lib.ones(3), lib.ones(4))
        out.append((r.tolist(), x.tolist(), str(e1.value), str(e2.value)))
    assert out[0] == out[1]
