"""PyTorch's deprecated ``Module.register_backward_hook`` (Grad-CAM and
saliency code, gradient loggers), checked against torch: the hook sits on
the ``grad_fn`` of the module's output and sees that node's grad_inputs
(addmm's (bias, input, weight.t()), convolution's (input, weight, bias),
one entry for an activation or a Sequential ending in one), in PyTorch's
order and shapes with its ``None`` entries; a returned tuple replaces
them; PyTorch's FutureWarning is given.  tracec used to run it as a full
backward hook (module input gradients only: wrong values for
``Sequential(Linear, Tanh)``)."""
import warnings

import numpy as np
import pytest
import torch

import tracec


def _build(lib, name):
    nn = lib.nn
    lib.manual_seed(0)

    class Add(nn.Module):
        def __init__(s):
            super().__init__()
            s.l = nn.Linear(4, 4)

        def forward(s, x):
            return s.l(x) + x

    class Mul(nn.Module):
        def __init__(s):
            super().__init__()
            s.w = nn.Parameter(lib.linspace(-1, 1, 4))

        def forward(s, x):
            return x * s.w

    return {"lin2d": (lambda: nn.Linear(4, 3), (2, 4)),
            "lin1d": (lambda: nn.Linear(4, 3), (4,)),
            "lin3d": (lambda: nn.Linear(4, 3), (2, 5, 4)),
            "linnb": (lambda: nn.Linear(4, 3, bias=False), (2, 4)),
            "linnb3": (lambda: nn.Linear(4, 3, bias=False), (2, 5, 4)),
            "conv1": (lambda: nn.Conv1d(2, 3, 3), (2, 2, 7)),
            "conv2": (lambda: nn.Conv2d(2, 3, 3), (2, 2, 6, 6)),
            "conv2nb": (lambda: nn.Conv2d(2, 3, 3, bias=False), (2, 2, 6, 6)),
            "bn": (lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)),
            "bn_eval": (lambda: nn.BatchNorm2d(3).eval(), (2, 3, 4, 4)),
            "ln": (lambda: nn.LayerNorm(4), (2, 3, 4)),
            "ln_plain": (lambda: nn.LayerNorm(4, elementwise_affine=False), (2, 3, 4)),
            "softmax": (lambda: nn.Softmax(dim=-1), (2, 3, 4)),
            "avgpool": (lambda: nn.AvgPool2d(2), (2, 3, 4, 4)),
            "prelu": (lambda: nn.PReLU(3), (2, 3, 4, 4)),
            "groupnorm": (lambda: nn.GroupNorm(1, 3), (2, 3, 4, 4)),
            "upsample": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (2, 3, 4, 4)),
            "leakyrelu": (lambda: nn.LeakyReLU(0.1), (2, 3, 4)),
            "gap": (lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 4, 4)),
            "relu": (lambda: nn.ReLU(), (2, 3, 4)),
            "tanh": (lambda: nn.Tanh(), (2, 3, 4)),
            "sigmoid": (lambda: nn.Sigmoid(), (2, 3, 4)),
            "gelu": (lambda: nn.GELU(), (2, 3, 4)),
            "flatten": (lambda: nn.Flatten(), (2, 3, 4)),
            "dropout": (lambda: nn.Dropout(1.0), (2, 3, 4)),
            "maxpool": (lambda: nn.MaxPool2d(2), (2, 3, 4, 4)),
            "seq_lin_tanh": (lambda: nn.Sequential(nn.Linear(4, 3), nn.Tanh()), (2, 4)),
            "seq_tanh_lin": (lambda: nn.Sequential(nn.Tanh(), nn.Linear(4, 3)), (2, 4)),
            "seq_softmax": (lambda: nn.Sequential(nn.Linear(4, 3), nn.Softmax(-1)), (2, 4)),
            "seq_bn_eval": (lambda: nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)).eval(),
                            (2, 2, 5, 5)),
            "add": (lambda: Add(), (2, 4)),
            "mul": (lambda: Mul(), (2, 4))}[name]


def _run(lib, name, scale=None):
    make, shape = _build(lib, name)
    m = make()
    n = int(np.prod(shape))
    x = lib.tensor(np.sin(np.arange(n) * 0.7).reshape(shape).astype(np.float32),
                   requires_grad=True)
    seen = []

    def hook(mod, gi, go):
        seen.append(([None if g is None else g.detach().numpy().copy() for g in gi],
                     [None if g is None else g.detach().numpy().copy() for g in go]))
        if scale is not None:
            return tuple(None if g is None else g * scale for g in gi)
    m.register_backward_hook(hook)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = m(x)
    words = sorted({str(a.message) for a in w if a.category is FutureWarning})
    (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape))
                      .astype(np.float32))).sum().backward()
    grads = [x.grad] + [p.grad for p in m.parameters()]
    return seen, [None if g is None else g.numpy() for g in grads], words


def _same(a, b):
    if a is None or b is None:
        assert a is None and b is None
    else:
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("scale", [None, 3.0])
@pytest.mark.parametrize("name", ["lin2d", "lin1d", "lin3d", "linnb", "linnb3", "conv1", "conv2",
                                  "conv2nb", "bn", "bn_eval", "ln", "ln_plain", "softmax",
                                  "avgpool", "prelu", "groupnorm", "upsample", "leakyrelu",
                                  "gap", "relu", "tanh", "sigmoid", "gelu", "flatten",
                                  "dropout", "maxpool", "seq_lin_tanh", "seq_tanh_lin", "seq_softmax",
                                  "seq_bn_eval", "add",
                                  "mul"])
def test_legacy_backward_hook_sees_torchs_node(name, scale):
    (s0, g0, w0), (s1, g1, w1) = _run(torch, name, scale), _run(tracec, name, scale)
    assert w1 == w0
    assert len(s1) == len(s0) == 1
    for side in (0, 1):
        assert len(s1[0][side]) == len(s0[0][side])
        for a, b in zip(s1[0][side], s0[0][side]):
            _same(a, b)
    for a, b in zip(g1, g0):
        _same(a, b)


@pytest.mark.parametrize("make", [lambda nn: nn.InstanceNorm2d(3), lambda nn: nn.Softmin(1),
                                  lambda nn: nn.Sequential(nn.Conv2d(3, 3, 1),
                                                           nn.InstanceNorm2d(3))])
def test_legacy_backward_hook_refuses_a_node_it_cannot_form(make):
    m = make(tracec.nn)
    m.register_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="register_full_backward_hook instead"):
        m(tracec.rand(2, 3, 4, 4, requires_grad=True))


def test_legacy_and_full_hooks_do_not_mix():
    for lib in (torch, tracec):
        m = lib.nn.ReLU()
        m.register_backward_hook(lambda *a: None)
        with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks"):
            m.register_full_backward_hook(lambda *a: None)


def _chain(fn, depth=2):
    if fn is None:
        return "None"
    if depth == 0:
        return fn.name()
    return fn.name() + "(" + ",".join(_chain(n, depth - 1) for n, _ in fn.next_functions) + ")"


_GRAPHS = {"lin2d": lambda lib: lib.nn.Linear(4, 3)(lib.ones(2, 4, requires_grad=True)),
           "linnb": lambda lib: lib.nn.Linear(4, 3, bias=False)(lib.ones(2, 4, requires_grad=True)),
           "conv_nb": lambda lib: lib.nn.Conv1d(2, 3, 3, bias=False)(
               lib.ones(2, 2, 6, requires_grad=True)),
           "bn": lambda lib: lib.nn.BatchNorm2d(3)(lib.ones(2, 3, 4, 4, requires_grad=True)),
           "emb": lambda lib: lib.nn.Embedding(10, 4)(lib.tensor([1, 2])),
           "relu_lin": lambda lib: lib.relu(lib.nn.Linear(4, 3)(lib.ones(2, 4, requires_grad=True))),
           "maxpool": lambda lib: lib.nn.MaxPool2d(2)(lib.ones(1, 1, 4, 4, requires_grad=True)),
           "log_softmax": lambda lib: lib.ones(2, 3, requires_grad=True).log_softmax(-1),
           "softmax": lambda lib: lib.nn.Softmax(-1)(lib.ones(2, 3, requires_grad=True)),
           "layer_norm": lambda lib: lib.nn.LayerNorm(3)(lib.ones(2, 3, requires_grad=True)),
           "bn_eval": lambda lib: lib.nn.BatchNorm1d(3).eval()(lib.ones(2, 3, requires_grad=True)),
           "avg_pool": lambda lib: lib.nn.AvgPool2d(2)(lib.ones(1, 1, 4, 4, requires_grad=True)),
           "mse": lambda lib: lib.nn.functional.mse_loss(lib.ones(2, 3, requires_grad=True),
                                                         lib.zeros(2, 3)),
           "nll": lambda lib: lib.nn.functional.nll_loss(lib.ones(2, 3, requires_grad=True),
                                                         lib.tensor([0, 2]))}


@pytest.mark.parametrize("name", list(_GRAPHS))
def test_grad_fn_next_functions_read_as_torchs(name):
    assert _chain(_GRAPHS[name](tracec).grad_fn) == _chain(_GRAPHS[name](torch).grad_fn)


def test_grad_fn_register_hook_sees_addmm_and_convolution_grad_inputs():
    out = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        lin, conv = lib.nn.Linear(4, 3), lib.nn.Conv2d(1, 2, 3, bias=False)
        x = lib.tensor(np.linspace(-1, 1, 8).reshape(2, 4).astype(np.float32), requires_grad=True)
        seen = []
        y = lin(x)
        y.grad_fn.register_hook(lambda gi, go: seen.append(gi) or (gi[0], gi[1] * 2, None))
        c = conv(lib.tensor(np.cos(np.arange(25.0)).reshape(1, 1, 5, 5).astype(np.float32)))
        c.grad_fn.register_hook(lambda gi, go: seen.append(gi))
        (y.sum() + c.square().sum()).backward()
        out.append((seen, x.grad, lin.weight.grad, lin.bias.grad))
    for a, b in zip(*[[None if g is None else g.detach().numpy() for gi in o[0] for g in gi]
                      + [None if g is None else g.numpy() for g in o[1:]] for o in out]):
        _same(a, b)


def test_grad_fn_register_hook_warns_on_a_composite_node():
    y = tracec.nn.functional.layer_norm(tracec.ones(2, 4, requires_grad=True), (4,))
    with pytest.warns(UserWarning, match="several autograd steps"):
        y.grad_fn.register_hook(lambda gi, go: None)


def test_custom_function_node_has_edges_for_its_tensor_arguments_only():
    seen = {}
    for lib in (torch, tracec):
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, k, x, w):
                return x * w * k

            @staticmethod
            def backward(ctx, g):
                return None, g * 2, g
        y = Scale.apply(3.0, lib.ones(2, requires_grad=True), lib.ones(2))
        log = []
        y.grad_fn.register_hook(lambda gi, go: log.append([g is None for g in gi]))
        y.sum().backward()
        seen[lib] = ([n is None for n, _ in y.grad_fn.next_functions], log)
    assert seen[tracec] == seen[torch] == ([False, True], [[False, False]])


def test_register_module_backward_hook_is_the_global_legacy_hook():
    from tracec.nn.modules import backward_hooks
    seen = {}
    for lib in (torch, tracec):
        # the global kind sticks once set (PyTorch's too): an earlier test of
        # this worker may have registered a global full backward hook
        torch.nn.modules.module._global_is_full_backward_hook = None
        backward_hooks.GLOBAL_KIND[0] = None
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(), lib.nn.Linear(3, 2))
        log = []
        mod = lib.nn.modules.module
        h = mod.register_module_backward_hook(
            lambda m_, gi, go: log.append((type(m_).__name__,
                                           [None if g is None else tuple(g.shape) for g in gi])))
        try:
            with pytest.raises(RuntimeError, match="as a global Module hook"):
                mod.register_module_full_backward_hook(lambda *a: None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m(lib.ones(5, 4, requires_grad=True)).sum().backward()
        finally:
            h.remove()
            # (the kind sticks once set, in PyTorch too: reset for the other tests)
            torch.nn.modules.module._global_is_full_backward_hook = None
            backward_hooks.GLOBAL_KIND[0] = None
        seen[lib] = log
    assert seen[tracec] == seen[torch]
    assert [n for n, _ in seen[torch]] == ["Linear", "Sequential", "Tanh", "Linear"]


def test_one_node_module_keeps_its_graph_for_a_second_backward():
    res = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        m = lib.nn.LayerNorm(3)
        m.register_backward_hook(lambda *a: None)
        x = lib.tensor(np.sin(np.arange(6.0)).reshape(2, 3).astype(np.float32),
                       requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = (m(x) ** 3).sum()
        y.backward(retain_graph=True)
        (gx,) = lib.autograd.grad(y, x, create_graph=True)   # the retained graph, again
        res.append((gx.detach().numpy(), x.grad.numpy(), m.weight.grad.numpy()))
    for a, b in zip(*res):
        _same(a, b)
