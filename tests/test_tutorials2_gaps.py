"""What the tutorial programs of ``tests/programs/tutorials2`` needed, checked
against torch 2.13 (the oracle): ``torch.nn.utils.prune``; autograd.Function
with ``setup_context``, several outputs (one gradient each, materialized or
not), ``mark_non_differentiable`` and ``once_differentiable``;
``grid_sample`` bicubic and 5-D, its nearest mode's zero grid gradient,
``affine_grid`` backpropagated twice; the compiled steps of a spatial
transformer and of a pruned model against the same steps run eagerly."""
import numpy as np
import pytest
import torch
import torch.nn.utils.prune  # noqa: F401  (torch.nn.utils does not import it)

import tracec
import tracec.nn as tnn
import tracec.nn.functional as TFn
from tracec.nn.utils import prune as tprune

rng = np.random.default_rng(0)


def both(a):
    a = np.asarray(a)
    return tracec.from_numpy(a.copy()), torch.from_numpy(a.copy())


def close(t, r, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(np.asarray(t.detach().numpy()), r.detach().numpy(),
                               atol=atol, rtol=rtol)


# --- prune ----------------------------------------------------------------------

def _pair_linear(i, o):
    tm, rm = tnn.Linear(i, o), torch.nn.Linear(i, o)
    w = rng.standard_normal((o, i)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    with tracec.no_grad():
        tm.weight.copy_(tracec.from_numpy(w))
        tm.bias.copy_(tracec.from_numpy(b))
    with torch.no_grad():
        rm.weight.copy_(torch.from_numpy(w))
        rm.bias.copy_(torch.from_numpy(b))
    return tm, rm


def test_prune_l1_ln_global_remove_like_torch():
    tm, rm = _pair_linear(7, 5)
    tprune.l1_unstructured(tm, "weight", amount=0.3)
    torch.nn.utils.prune.l1_unstructured(rm, "weight", amount=0.3)
    close(tm.weight_mask, rm.weight_mask)
    close(tm.weight, rm.weight)
    assert list(tm.state_dict().keys()) == list(rm.state_dict().keys())
    assert [n for n, _ in tm.named_buffers()] == [n for n, _ in rm.named_buffers()]
    tprune.ln_structured(tm, "weight", amount=2, n=2, dim=0)
    torch.nn.utils.prune.ln_structured(rm, "weight", amount=2, n=2, dim=0)
    close(tm.weight_mask, rm.weight_mask)
    hook_t = next(iter(tm._forward_pre_hooks.values()))
    hook_r = next(iter(rm._forward_pre_hooks.values()))
    assert [type(h).__name__ for h in hook_t] == [type(h).__name__ for h in hook_r]
    x = rng.standard_normal((3, 7)).astype(np.float32)
    close(tm(tracec.from_numpy(x)), rm(torch.from_numpy(x)))
    tprune.remove(tm, "weight")
    torch.nn.utils.prune.remove(rm, "weight")
    assert sorted(tm.state_dict()) == sorted(rm.state_dict()) == ["bias", "weight"]
    close(tm.weight, rm.weight)
    assert not tprune.is_pruned(tm)

    pairs = [_pair_linear(6, 4), _pair_linear(4, 3)]
    tprune.global_unstructured([(p[0], "weight") for p in pairs],
                               pruning_method=tprune.L1Unstructured, amount=0.4)
    torch.nn.utils.prune.global_unstructured(
        [(p[1], "weight") for p in pairs],
        pruning_method=torch.nn.utils.prune.L1Unstructured, amount=0.4)
    for t, r in pairs:
        close(t.weight_mask, r.weight_mask)


def test_prune_random_counts_and_errors_like_torch():
    tm, rm = _pair_linear(10, 6)
    tprune.random_unstructured(tm, "weight", amount=0.25)
    assert int((tm.weight_mask == 0).sum()) == 15
    tprune.random_structured(tm, "weight", amount=2, dim=0)
    assert (tm.weight_mask.sum(1) == 0).int().sum().item() >= 2
    for args in [dict(amount=1.5), dict(amount=-1), dict(amount=1000)]:
        with pytest.raises(ValueError) as et:
            tprune.l1_unstructured(tnn.Linear(10, 6), "weight", **args)
        with pytest.raises(ValueError) as er:
            torch.nn.utils.prune.l1_unstructured(torch.nn.Linear(10, 6), "weight", **args)
        assert str(et.value) == str(er.value)
    with pytest.raises(ValueError, match="Structured pruning can only be applied"):
        tprune.random_structured(tm, "bias", amount=2, dim=0)
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        tprune.remove(tnn.Linear(2, 2), "weight")


def test_pruned_model_compiled_step_matches_eager():
    def make():
        tracec.manual_seed(0)
        m = tnn.Sequential(tnn.Linear(8, 16), tnn.ReLU(), tnn.Linear(16, 4))
        tprune.l1_unstructured(m[0], "weight", amount=0.5)
        tprune.ln_structured(m[2], "weight", amount=0.25, n=1, dim=1)
        return m, tracec.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = tracec.from_numpy(rng.standard_normal((5, 8)).astype(np.float32))
    y = tracec.from_numpy(rng.integers(0, 4, 5))
    losses = []
    for compiled in (False, True):
        m, opt = make()

        def step(x, y):
            opt.zero_grad()
            loss = TFn.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        f = tracec.compile(step) if compiled else step
        losses.append([f(x, y).item() for _ in range(3)])
        assert int((m[0].weight == 0).sum()) == 64
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


# --- autograd.Function ------------------------------------------------------------

def _cube(ns):
    class MyCube(ns.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3, 3 * x ** 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output[1])

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            return grad_output * dx + grad_dx * 6 * x
    return MyCube


def test_function_setup_context_multi_output_double_backward_like_torch():
    a = rng.standard_normal(5)
    res = []
    for ns in (tracec, torch):
        x = ns.from_numpy(a.copy()).requires_grad_()
        y, dx = _cube(ns).apply(x)
        assert y.grad_fn.name() == "MyCubeBackward" and dx.requires_grad
        g, = ns.autograd.grad((y * 2).sum() + dx.sum(), x, create_graph=True)
        gg, = ns.autograd.grad(g.sum(), x)
        res.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


def test_function_materialize_and_non_differentiable_like_torch():
    seen = {}
    for ns in (tracec, torch):
        class Two(ns.autograd.Function):
            @staticmethod
            def forward(ctx, x, materialize):
                ctx.set_materialize_grads(materialize)
                out, idx = x.sort()
                ctx.mark_non_differentiable(idx)
                return out, x * 2, idx

            @staticmethod
            def backward(ctx, g1, g2, g3):
                seen[(ns.__name__, ctx.materialize_grads if ns is tracec else None)] = \
                    (g1 is None, g2 is None, g3 is None)
                return (g1 if g1 is not None else 0) + (g2 if g2 is not None else 0), None

        for materialize in (True, False):
            x = ns.tensor([3., 1., 2.], requires_grad=True)
            out, dbl, idx = Two.apply(x, materialize)
            assert not idx.requires_grad and out.requires_grad and dbl.requires_grad
            out.sum().backward()
            assert x.grad.tolist() == [1., 1., 1.]
            seen[(ns.__name__, materialize)] = seen.pop(
                (ns.__name__, materialize if ns is tracec else None))
    assert seen[("tracec", True)] == seen[("torch", True)] == (False, False, False)
    assert seen[("tracec", False)] == seen[("torch", False)] == (False, True, True)


def test_once_differentiable_double_backward_raises_like_torch():
    msgs = []
    for ns in (tracec, torch):
        from_fn = ns.autograd.function.once_differentiable

        class Sq(ns.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @from_fn
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 2 * x * g

        x = ns.tensor([1., 2.], requires_grad=True)
        y = Sq.apply(x)
        g, = ns.autograd.grad(y, x, ns.ones(2, requires_grad=True), create_graph=True)
        assert g.requires_grad and g.tolist() == [2., 4.]
        with pytest.raises(RuntimeError) as e:
            g.sum().backward()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


# --- grid_sample / affine_grid ------------------------------------------------------

@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_modes_like_torch(nd, align):
    n, c = 2, 3
    sp = (4, 5) if nd == 2 else (3, 4, 5)
    xs = rng.standard_normal((n, c) + sp).astype(np.float32)
    gs = rng.uniform(-1.2, 1.2, (n, 3, 2) + ((2,) if nd == 3 else ()) + (nd,)).astype(np.float32)
    w = rng.standard_normal((n, c, 3, 2) + ((2,) if nd == 3 else ())).astype(np.float32)
    modes = ("bilinear", "nearest", "bicubic") if nd == 2 else ("bilinear", "nearest")
    for mode in modes:
        for pad in ("zeros", "border", "reflection"):
            res = []
            for ns, F in ((tracec, TFn), (torch, torch.nn.functional)):
                x = ns.from_numpy(xs.copy()).requires_grad_()
                g = ns.from_numpy(gs.copy()).requires_grad_()
                y = F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)
                gx, gg = ns.autograd.grad((y * ns.from_numpy(w.copy())).sum(), (x, g))
                res.append((y, gx, gg))
            for t, r in zip(*res):
                close(t, r, atol=1e-4, rtol=1e-4)


def test_grid_sample_errors_like_torch():
    x5, g5 = np.zeros((1, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 3), np.float32)
    cases = [(x5, g5, dict(mode="bicubic")),
             (x5, np.zeros((1, 1, 1, 2), np.float32), {}),
             (np.zeros((1, 1, 2, 2), np.float32), np.zeros((2, 1, 1, 2), np.float32), {}),
             (np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 1, 3), np.float32), {}),
             (np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 2), np.float32), {}),
             (np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 1), np.float32), {}),
             (np.zeros((2, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 2), np.float32), {})]
    for x, g, kw in cases:
        with pytest.raises(RuntimeError) as et:
            TFn.grid_sample(tracec.from_numpy(x), tracec.from_numpy(g), align_corners=False, **kw)
        with pytest.raises(RuntimeError) as er:
            torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(g),
                                            align_corners=False, **kw)
        assert str(et.value) == str(er.value)


def test_affine_grid_backward_twice_and_nearest_grid_grad():
    th = np.array([[[0.9, 0.1, 0.05], [-0.1, 1.1, -0.05]]], np.float32)
    for ns, F in ((tracec, TFn), (torch, torch.nn.functional)):
        t = ns.from_numpy(th.copy()).requires_grad_()
        grid = F.affine_grid(t, (1, 1, 4, 5), align_corners=False)
        a, = ns.autograd.grad(grid.sum(), t)
        b, = ns.autograd.grad((grid * grid).sum(), t)      # no retain_graph needed
        x = ns.ones(1, 1, 4, 5)
        y = F.grid_sample(x, grid, mode="nearest", align_corners=False)
        z, = ns.autograd.grad(y.sum(), t)
        assert z.abs().sum().item() == 0


def test_stn_compiled_step_matches_eager():
    def make():
        tracec.manual_seed(0)
        loc = tnn.Linear(16, 6)
        with tracec.no_grad():
            loc.weight.mul_(0.01)
            loc.bias.copy_(tracec.tensor([0.9, 0.1, 0.05, -0.1, 1.1, -0.05]))
        head = tnn.Linear(16, 3)
        params = list(loc.parameters()) + list(head.parameters())
        return loc, head, tracec.optim.SGD(params, lr=0.05)
    x = tracec.from_numpy(rng.standard_normal((4, 1, 4, 4)).astype(np.float32))
    y = tracec.from_numpy(rng.integers(0, 3, 4))
    losses = []
    for compiled in (False, True):
        loc, head, opt = make()

        def step(x, y):
            opt.zero_grad()
            theta = loc(x.flatten(1)).view(-1, 2, 3)
            grid = TFn.affine_grid(theta, x.size(), align_corners=False)
            xs = TFn.grid_sample(x, grid, mode="bicubic", padding_mode="border",
                                 align_corners=False)
            loss = TFn.cross_entropy(head(xs.flatten(1)), y)
            loss.backward()
            opt.step()
            return loss
        f = tracec.compile(step) if compiled else step
        losses.append([f(x, y).item() for _ in range(3)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


def test_dist_grad_fn_name():
    a = tracec.ones(3, requires_grad=True)
    assert tracec.dist(a, tracec.zeros(3)).grad_fn.name() == "DistBackward0"


# --- embedding max_norm, orthogonal cayley, func.linearize ---------------------------------

@pytest.mark.parametrize("bag", [False, True])
def test_embedding_max_norm_like_torch(bag):
    w = rng.standard_normal((8, 3)).astype(np.float32) * 2
    idx = np.array([1, 2, 2, 5, 7, 1])
    res = []
    for ns in (tracec, torch):
        if bag:
            m = ns.nn.EmbeddingBag.from_pretrained(ns.from_numpy(w.copy()), freeze=False,
                                                   max_norm=1.5, norm_type=1.0, mode="sum")
            out = m(ns.from_numpy(idx), ns.tensor([0, 2]))
        else:
            m = ns.nn.Embedding.from_pretrained(ns.from_numpy(w.copy()), freeze=False,
                                                max_norm=1.0)
            out = m(ns.from_numpy(idx.reshape(2, 3)))
        out.pow(2).sum().backward()
        res.append((out, m.weight, m.weight.grad))
    for t, r in zip(*res):
        close(t, r, atol=1e-5, rtol=1e-5)


def test_orthogonal_cayley_like_torch():
    # square: a wide or tall weight's base is completed with random columns
    w = rng.standard_normal((4, 4)).astype(np.float32)
    delta = rng.standard_normal((4, 4)).astype(np.float32) * 0.3
    res = []
    for ns in (tracec, torch):
        lin = ns.nn.Linear(4, 4)
        with ns.no_grad():
            lin.weight.copy_(ns.from_numpy(w.copy()))
        lin = ns.nn.utils.parametrizations.orthogonal(lin, orthogonal_map="cayley")
        with ns.no_grad():
            lin.parametrizations.weight.original.add_(ns.from_numpy(delta.copy()))
        W = lin.weight
        W.sum().backward()
        res.append((W, lin.parametrizations.weight.original.grad))
        assert ns.dist(W @ W.T, ns.eye(4)).item() < 1e-5
    for t, r in zip(*res):
        close(t, r, atol=1e-5, rtol=1e-4)


def test_func_linearize_like_torch():
    a = rng.standard_normal(4)
    res = []
    for ns in (tracec, torch):
        out, jvp_fn = ns.func.linearize(lambda x: x.sin() * x.sum(), ns.from_numpy(a.copy()))
        res.append((out, jvp_fn(ns.ones(4, dtype=ns.float64)),
                    jvp_fn(ns.arange(4, dtype=ns.float64))))
    for t, r in zip(*res):
        close(t, r, atol=1e-12, rtol=1e-12)
