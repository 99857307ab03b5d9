"""What the programs24 public programs found, each against torch 2.13:

* a float32 / float64 tensor to a Python-scalar exponent is one
  PowBackward0 node saving ``self`` alone (a saved-tensor pack hook runs
  once, as PyTorch's; it ran twice for ``x ** 2`` and four times for
  ``x ** 3``), with PyTorch's values (``x*x*x``, ``1/sqrt(x)`` at -0 and
  -inf too) and gradient (``grad * (e * x ** (e - 1))``; zeros for ``e == 0``
  even at infinities), compiled equal to eager;
* a custom-Function node (GELU's) drops what a pack hook returned once
  backward has run, as PyTorch's (the tutorial's self-deleting temp files
  were left on disk while the output lived);
* an optimizer step in ``register_post_accumulate_grad_hook`` compiles: the
  backward is recorded op by op with the hooks' ops, so every compiled call
  repeats them (it raised);
* ``load_state_dict`` into meta parameters warns per key that the copy is a
  no-op; reading ``.grad`` of a non-leaf that does not retain it warns;
  ``retain_grad`` on a tensor that does not require grad raises.
"""
import copy
import gc
import weakref

import numpy as np
import pytest
import torch

import tracec

EXPONENTS = [2, 3, 0.5, -0.5, 1, 2.0, 3.0, -1, -2, 0, 1.5, 4]
SPECIAL = [-0.0, 0.0, float("inf"), -float("inf"), float("nan")]


def _data(np_dtype):
    x = np.random.RandomState(0).randn(64).astype(np_dtype) * 3
    x[:len(SPECIAL)] = SPECIAL
    return x


def _same(a, b, max_ulps=0):
    """Equal where ``b`` is not finite (inf's and zero's sign too, NaN's
    not); finite values within ``max_ulps``."""
    a, b = np.asarray(a), np.asarray(b)
    fin = np.isfinite(b)
    odd = ~fin & ~np.isnan(b)
    if not (np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[odd], b[odd])
            and np.array_equal(np.signbit(a[odd]), np.signbit(b[odd]))):
        return False
    if max_ulps == 0:
        return np.array_equal(a[fin], b[fin]) and \
            np.array_equal(np.signbit(a[fin]), np.signbit(b[fin]))
    np.testing.assert_array_max_ulp(a[fin], b[fin], maxulp=max_ulps)
    return True


#: exponents PyTorch's CPU kernels compute exactly (x*x, x*x*x, 1, a copy):
#: equal to the bit; the others go through its vectorized (Sleef) pow,
#: which rounds differently from the C library's by an ulp or two
EXACT = {2, 3, 1, 0}


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("e", EXPONENTS)
def test_pow_scalar_values_and_grads_match_torch(e, np_dtype):
    x = _data(np_dtype)
    g = np.random.RandomState(1).randn(64).astype(np_dtype)
    tx = torch.tensor(x, requires_grad=True)
    ty = tx.pow(e)
    ty.backward(torch.tensor(g))
    cx = tracec.tensor(x, requires_grad=True)
    cy = cx.pow(e)
    cy.backward(tracec.tensor(g))
    assert type(cy.grad_fn).__name__ == type(ty.grad_fn).__name__ == "PowBackward0"
    ulps = 0 if e in EXACT else 2
    assert _same(cy.detach().numpy(), ty.detach().numpy(), ulps)
    assert _same(cx.grad.numpy(), tx.grad.numpy(), ulps)


@pytest.mark.parametrize("e", [2, 3, 0.5, -0.5, 1, 0, -1])
def test_pow_scalar_compiled_equals_eager(e):
    x = tracec.tensor(_data(np.float32))
    f = tracec.compile(lambda a: a.pow(e) + 1.0)
    assert _same(f(x).numpy(), (x.pow(e) + 1.0).numpy())
    assert _same(f(x).numpy(), (x.pow(e) + 1.0).numpy())   # (the compiled call, replayed)


def _packs(mod, op):
    seen = []

    def pack(t):
        seen.append(tuple(t.shape))
        return t
    x = mod.ones(3, requires_grad=True)
    with mod.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        op(mod, x).sum().backward()
    return seen, x.grad.tolist()


@pytest.mark.parametrize("op", [
    lambda m, x: x.pow(2), lambda m, x: m.pow(x, 3.0), lambda m, x: x ** 0.5,
    lambda m, x: x ** -0.5, lambda m, x: x.pow(1), lambda m, x: m.square(x),
    lambda m, x: x.pow(2.5), lambda m, x: x * x, lambda m, x: 2.0 ** x,
    lambda m, x: x.pow(m.full((3,), 2.0))])
def test_saved_tensor_hooks_pack_what_torch_packs(op):
    assert _packs(tracec, op) == _packs(torch, op)


def test_saved_result_only_for_a_tensor_exponent():
    x = tracec.ones(3, requires_grad=True)
    assert not hasattr(x.pow(3).grad_fn, "_saved_result")
    assert x.pow(tracec.full((3,), 2.0)).grad_fn._saved_result.shape == (3,)


@pytest.mark.parametrize("mod", [torch, tracec])
def test_function_node_releases_packed_values_after_backward(mod):
    alive = []

    class Box:
        def __init__(self, t):
            self.t = t

    def pack(t):
        b = Box(t)
        alive.append(weakref.ref(b))
        return b
    m = mod.nn.Sequential(mod.nn.Linear(4, 4), mod.nn.GELU())
    with mod.autograd.graph.saved_tensors_hooks(pack, lambda b: b.t):
        y = m(mod.randn(2, 4))
    y.sum().backward()
    gc.collect()
    assert alive and all(r() is None for r in alive)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_optimizer_step_in_backward_hook_compiles():
    tracec.manual_seed(0)
    model = tracec.nn.Sequential(tracec.nn.Linear(4, 8), tracec.nn.Tanh(), tracec.nn.Linear(8, 2))
    opts = {p: tracec.optim.Adam([p], lr=0.1, foreach=False) for p in model.parameters()}

    def hook(p):
        opts[p].step()
        opts[p].zero_grad()
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)

    def step(x):
        loss = model(x).pow(2).sum()
        loss.backward()
        return loss
    xs = [tracec.randn(3, 4) for _ in range(4)]
    s0 = copy.deepcopy(model.state_dict())
    o0 = {p: copy.deepcopy(o.state_dict()) for p, o in opts.items()}
    compiled = tracec.compile(step)
    got = [compiled(x).item() for x in xs]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(s0)
    for p, o in opts.items():
        o.load_state_dict(o0[p])
    want = [step(x).item() for x in xs]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(after[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
    assert all(p.grad is None for p in model.parameters())


def _meta_load_warnings(mod):
    with mod.device("meta"):
        m = mod.nn.Sequential(mod.nn.Linear(2, 3), mod.nn.BatchNorm1d(3))
    sd = mod.nn.Sequential(mod.nn.Linear(2, 3), mod.nn.BatchNorm1d(3)).state_dict()
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.load_state_dict(sd)
        m.load_state_dict(sd, assign=True)
    return [str(x.message) for x in w], m[0].weight.is_meta


def test_copying_into_a_meta_parameter_warns_as_torch():
    got, want = _meta_load_warnings(tracec), _meta_load_warnings(torch)
    assert got == want and len(want[0]) == 7


def _grad_reads(mod):
    import warnings
    x = mod.ones(2, requires_grad=True)
    z = x * 2
    out = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for t in (z, x, x.detach(), z.detach()):
            t.grad
            out.append(len(w))
        z.retain_grad()
        z.grad
        out.append(len(w))
        z.sum().backward()
        z.grad
        out.append(len(w))
    return out, [str(m.message).split(" (Triggered")[0] for m in w]


def test_reading_grad_of_a_non_leaf_warns_as_torch():
    assert _grad_reads(tracec) == _grad_reads(torch)


@pytest.mark.parametrize("mod", [torch, tracec])
def test_retain_grad_without_requires_grad_raises(mod):
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        mod.ones(2).retain_grad()
    with mod.no_grad():
        t = mod.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="can't retain_grad"):
        t.retain_grad()


def _swap_load(mod, assign):
    class Doubling(mod.Tensor):
        """A subclass whose __torch_function__ transforms what is loaded."""
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is mod.Tensor.module_load:
                return (args[1] * 2).as_subclass(cls)
            return super().__torch_function__(func, types, args, kwargs)

    mod.manual_seed(0)
    m = mod.nn.Linear(2, 3)
    m.weight = mod.nn.Parameter(m.weight.detach().as_subclass(Doubling))
    w, b = m.weight, m.bias
    sd = {"weight": mod.ones(3, 2), "bias": mod.full((3,), 3.0)}
    mod.__future__.set_swap_module_params_on_conversion(True)
    try:
        m.load_state_dict(sd, assign=assign)
    finally:
        mod.__future__.set_swap_module_params_on_conversion(False)
    plain = mod.ones(2).module_load(mod.zeros(2, requires_grad=True), assign=assign)
    return (m.weight is w, m.bias is b, type(m.weight).__name__, type(m.weight).__mro__[1].__name__,
            m.weight.tolist(), m.bias.tolist(), m.bias.requires_grad, plain.tolist(),
            plain.requires_grad, sd["bias"].tolist())


@pytest.mark.parametrize("assign", [False, True])
def test_load_state_dict_swap_path_uses_module_load(assign):
    assert _swap_load(tracec, assign) == _swap_load(torch, assign)


def test_post_accumulate_hook_added_after_compiling_retraces():
    tracec.manual_seed(0)
    lin = tracec.nn.Linear(3, 1)
    seen = []

    def step(x):
        lin(x).sum().backward()
    f = tracec.compile(step)
    x = tracec.ones(2, 3)
    f(x)
    f(x)
    lin.weight.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    f(x)
    assert len(seen) == 1 and seen[0].tolist() == [[6.0, 6.0, 6.0]]


@pytest.mark.parametrize("e", [2, 3, 0.5, 1, 0])
def test_pow_scalar_compiled_gradient_equals_eager(e):
    x0 = np.abs(_data(np.float32)[len(SPECIAL):]) + 0.5

    def step(a):
        loss = a.pow(e).sum()
        loss.backward()
        return loss
    a = tracec.tensor(x0, requires_grad=True)
    tracec.compile(step)(a)
    got = a.grad.numpy().copy()
    a.grad = None
    step(a)
    np.testing.assert_array_max_ulp(got, a.grad.numpy(), maxulp=0 if e in EXACT else 1)


def test_parameter_isinstance_never_asks_a_non_tensor_for_is_param():
    """AlphaZero's ``dotdict`` raises KeyError from ``__getattr__``: assigning
    one to a module must not ask it for ``_is_param`` (PyTorch checks Tensor first)."""
    class dotdict(dict):
        def __getattr__(self, name):
            return self[name]

    m = tracec.nn.Module()
    m.args = dotdict(lr=0.1)
    assert not isinstance(dotdict(), tracec.nn.Parameter)
    assert m.args.lr == 0.1
