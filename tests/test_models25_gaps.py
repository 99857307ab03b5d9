"""Gaps the models25 programs (tests/programs/models25) found in tracec."""
import warnings

import numpy as np
import pytest

import tracec as torch
import tracec.functions as tracec_functions
from tracec import nn

pt = pytest.importorskip("torch")
# (PyTorch's own __array_wrap__ takes no context: NumPy 2 warns about it)
pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")


def test_batchnorm_modules_name_the_bases_as_pytorch():
    # davda54/sam's bypass_bn.py: `from torch.nn.modules.batchnorm import
    # _BatchNorm`; tracec had no torch.nn.modules.batchnorm (ModuleNotFoundError
    # under `tracec run`) and no _BatchNorm class at all.
    from tracec.as_torch import _FINDER
    from tracec.nn.modules.batchnorm import _BatchNorm, _NormBase
    from tracec.nn.modules.instancenorm import _InstanceNorm
    for name in ("torch.nn.modules.batchnorm", "torch.nn.modules.instancenorm"):
        assert _FINDER.find_spec(name) is not None
    cases = {"BatchNorm1d": (3,), "BatchNorm2d": (3,), "BatchNorm3d": (3,), "SyncBatchNorm": (3,),
             "LazyBatchNorm2d": (), "InstanceNorm2d": (3,), "LazyInstanceNorm1d": (),
             "LayerNorm": (3,), "GroupNorm": (1, 3)}
    for name, args in cases.items():
        ours, ref = getattr(nn, name)(*args), getattr(pt.nn, name)(*args)
        for mine, theirs in ((_BatchNorm, pt.nn.modules.batchnorm._BatchNorm),
                             (_NormBase, pt.nn.modules.batchnorm._NormBase),
                             (_InstanceNorm, pt.nn.modules.instancenorm._InstanceNorm)):
            assert isinstance(ours, mine) == isinstance(ref, theirs), (name, mine)


def _bn_net(lib):
    # (no bias right before a norm: its gradient is rounding noise)
    return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3, padding=1, bias=False), lib.nn.BatchNorm2d(3),
                             lib.nn.ReLU(), lib.nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
                             lib.nn.Tanh(), lib.nn.Flatten(), lib.nn.Linear(3 * 16, 2, bias=False),
                             lib.nn.BatchNorm1d(2))


def _bypass_run(lib, x):
    # sam's enable_running_stats / disable_running_stats around two passes
    from importlib import import_module
    base = import_module(lib.__name__ + ".nn.modules.batchnorm")._BatchNorm
    net = _bn_net(lib)
    with lib.no_grad():
        for p in net.parameters():
            p.copy_(lib.from_numpy(np.linspace(-1, 1, p.numel(), dtype=np.float32).reshape(tuple(p.shape))))

    def disable(m):
        if isinstance(m, base):
            m.backup_momentum = m.momentum
            m.momentum = 0

    def enable(m):
        if isinstance(m, base) and hasattr(m, "backup_momentum"):
            m.momentum = m.backup_momentum

    w = lib.from_numpy(np.array([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.0], [2.0, 1.0]], dtype=np.float32))
    out = []
    for _ in range(2):
        net.apply(enable)
        (net(x) * w).sum().backward()
        net.apply(disable)
        (net(x * 2) * w).sum().backward()
        out += [b.numpy().copy() for b in net.buffers()] + [p.grad.numpy().copy() for p in net.parameters()]
    out.append(np.array([getattr(m, "momentum", -1) for m in net]))
    return out


def test_momentum_backed_up_and_zeroed_on_every_batch_norm_only():
    x = np.random.default_rng(0).normal(size=(4, 2, 4, 4)).astype(np.float32)
    got = _bypass_run(torch, torch.from_numpy(x))
    want = _bypass_run(pt, pt.from_numpy(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * (1 + np.abs(w).max()))


def test_convert_sync_batchnorm_converts_every_batch_norm_subclass():
    # PyTorch converts any _BatchNorm (a user's subclass of BatchNorm2d
    # included); tracec matched class names starting with "BatchNorm".
    class MyBN(nn.BatchNorm2d):
        pass

    net = nn.Sequential(MyBN(3), nn.InstanceNorm2d(3), nn.BatchNorm1d(2))
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert [type(m).__name__ for m in conv] == ["SyncBatchNorm", "InstanceNorm2d", "SyncBatchNorm"]
    assert conv[0].weight is net[0].weight and conv[0].running_mean is net[0].running_mean


_NUMBER_FIRST = [
    ("add", lambda lib, a, b, c: a.add(0.5, b)), ("add", lambda lib, a, b, c: lib.add(a, -2, b)),
    ("add_", lambda lib, a, b, c: a.clone().add_(0.25, b)),
    ("sub", lambda lib, a, b, c: a.sub(3, c)), ("sub_", lambda lib, a, b, c: a.clone().sub_(0.5, b)),
    ("sub", lambda lib, a, b, c: lib.sub(a, 1.5, b)),
    ("addcmul", lambda lib, a, b, c: a.addcmul(0.1, b, c)),
    ("addcmul_", lambda lib, a, b, c: a.clone().addcmul_(-0.5, b, b)),
    ("addcmul", lambda lib, a, b, c: lib.addcmul(a, 2, b, c)),
    ("addcdiv", lambda lib, a, b, c: a.addcdiv(0.3, b, c)),
    ("addcdiv_", lambda lib, a, b, c: a.clone().addcdiv_(-1, b, c)),
    ("addcdiv", lambda lib, a, b, c: lib.addcdiv(a, 0.7, b, c)),
]


@pytest.mark.parametrize("name,fn", _NUMBER_FIRST, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_NUMBER_FIRST)])
def test_deprecated_number_first_overloads_compute_as_pytorch(name, fn):
    # michaelrzhang/lookahead's pullback: internal_momentum.mul_(a).add_(1.0 -
    # a, cached_mom); older optimizers write exp_avg_sq.addcmul_(1 - b2, g,
    # g) and p.data.addcdiv_(-step_size, m, denom). PyTorch still takes the
    # scalar first (with a deprecation warning); tracec raised TypeError.
    r = np.random.default_rng(0)
    arrs = [r.normal(size=(3, 4)).astype(np.float32) for _ in range(2)] + [
        (r.random((3, 4)) + 0.5).astype(np.float32)]
    outs, grads = [], []
    for lib in (torch, pt):
        ts = [lib.tensor(a, requires_grad=True) for a in arrs]
        if lib is torch:
            # (once per process, as PyTorch's: forget an earlier test's)
            tracec_functions._DEPRECATED_OVERLOAD_WARNED.clear()
            with pytest.warns(UserWarning, match=f"This overload of {name.rstrip('_')} is deprecated"):
                y = fn(lib, *ts)
        else:       # (PyTorch warns once per process)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = fn(lib, *ts)
        (y * lib.tensor(arrs[0])).sum().backward()
        outs.append(y.detach().numpy())
        grads.append([t.grad.numpy() if t.grad is not None else None for t in ts])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)
    for g, w in zip(*grads):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", [lambda lib, a, b: a.add(b, 2), lambda lib, a, b: a.add(2, b, alpha=3),
                                lambda lib, a, b: a.addcmul(b, 2, b), lambda lib, a, b: a.sub(a, b, b)])
def test_number_first_overloads_still_refuse_other_mixes(fn):
    for lib in (torch, pt):
        with pytest.raises(TypeError):
            fn(lib, lib.ones(2), lib.ones(2))


@pytest.mark.parametrize("fn", [
    lambda lib: np.isnan(lib.tensor([1.0, float("nan")])),
    lambda lib: np.sqrt(lib.tensor([4.0, 9.0])),
    lambda lib: np.exp(lib.tensor(1.0)),
    lambda lib: np.add(lib.ones(2, dtype=lib.float64), 1),
    lambda lib: np.maximum(lib.tensor([1, 5]), np.array([3, 2])),
    lambda lib: np.greater(lib.arange(4), 1),
    lambda lib: np.float32(2) * lib.ones(2),
])
def test_numpy_ufuncs_on_tensors_return_tensors(fn):
    # orobix's PrototypicalBatchSampler runs np.isnan over a tensor row;
    # PyTorch's __array_wrap__ turns a ufunc's result back into a tensor
    # (bool as uint8, a 0-d result a 0-d tensor); tracec gave ndarrays and
    # NumPy scalars.
    got, want = fn(torch), fn(pt)
    assert isinstance(got, torch.Tensor) and isinstance(want, pt.Tensor)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_numpy_ufunc_results_share_the_ufuncs_array():
    out = np.negative(torch.ones(3))
    out.add_(1)
    assert out.tolist() == [0.0, 0.0, 0.0]
    assert np.where(np.isnan(torch.tensor([0.0, float("nan"), 1.0])))[0].tolist() == [1]


class _Square:
    """A custom Function saving its input, built for either library."""

    @staticmethod
    def make(lib):
        class Sq(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 2 * x * g
        return Sq


def _saved_output(lib):
    x = lib.ones(3, requires_grad=True)
    y = x.exp()
    z = y * 2
    y.add_(1)
    z.sum().backward()


def _saved_input_rebased(lib):
    a = lib.ones(3, requires_grad=True).clone()
    b = a.sin()
    a.mul_(2)
    b.sum().backward()


def _saved_leaf(lib):
    w = lib.ones(3, requires_grad=True)
    z = (w * w).sum()
    with lib.no_grad():
        w.add_(1)
    z.backward()


def _embedding_net_l2(lib):
    # adambielski's EmbeddingNetL2: output /= output.pow(2).sum(1, keepdim=True).sqrt()
    o = lib.ones(4, 2, dtype=lib.float64, requires_grad=True) + 1
    o /= o.pow(2).sum(1, keepdim=True).sqrt()
    o.sum().backward()


def _custom_function_input(lib):
    a = lib.ones(3, requires_grad=True) * 1
    y = _Square.make(lib).apply(a)
    a.add_(1)
    y.sum().backward()


def _anomaly_mode(lib):
    with lib.autograd.set_detect_anomaly(True):
        _saved_output(lib)


@pytest.mark.parametrize("case", [_saved_output, _saved_input_rebased, _saved_leaf, _embedding_net_l2,
                                  _custom_function_input, _anomaly_mode])
def test_modified_saved_tensor_error_says_what_pytorch_says(case):
    # siamese-triplet's EmbeddingNetL2 fails its backward this way; tracec's
    # message named tracec's dtype, the saving node's input slot and no hint,
    # where PyTorch names the legacy type, the node producing the tensor now
    # ("output 0 of Div") and the anomaly-detection hint.
    msgs = []
    for lib in (torch, pt):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError) as info:
                case(lib)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_modified_input_of_a_compiled_call_says_what_pytorch_says():
    f = torch.compile(lambda x: (x * x).sum())
    x = torch.ones(3, requires_grad=True) * 1
    y = f(x)
    with torch.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation has "
                                           r"been modified by an inplace operation: \[torch\.FloatTensor "
                                           r"\[3\]\], which is output 0 of Mul, is at version 1; expected "
                                           r"version 0 instead\. Hint: enable anomaly detection"):
        y.backward()


def test_set_detect_anomaly_restores_the_flags_it_found():
    # `with set_detect_anomaly(True):` left anomaly detection on in tracec
    # (the flag was set in __init__, then __enter__ saved the new value as
    # the one to restore); PyTorch restores the flags found at construction.
    for lib in (torch, pt):
        assert not lib.is_anomaly_enabled()
        with lib.autograd.set_detect_anomaly(True, check_nan=False):
            assert lib.is_anomaly_enabled() and not lib.is_anomaly_check_nan_enabled()
        assert not lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()
        lib.autograd.set_detect_anomaly(True)          # a bare call switches it on
        assert lib.is_anomaly_enabled()
        lib.autograd.set_detect_anomaly(False)
        assert not lib.is_anomaly_enabled()


def _write_through_view_names(lib):
    leaf = lib.ones(2, 3, requires_grad=True)
    out = []
    a = leaf * 1
    a[0] = 5.0
    out.append(a.grad_fn.name())
    a = leaf * 1
    a[:, 1] *= 2
    out.append(repr(a.grad_fn).split(" object")[0])
    a = leaf * 1
    v = a.view(-1)
    v.add_(1)
    out.append((a.grad_fn.name(), v.grad_fn.name()))
    a = leaf * 1
    v = a[1]
    a.add_(1)             # v is stale: its grad_fn is regenerated
    out.append(v.grad_fn.name())
    a = leaf * 1
    a.masked_fill_(a > 0, 0.5)
    out.append(a.grad_fn.name())
    return out


def test_writes_through_views_name_their_nodes_as_pytorch():
    # an in-place write through a view makes the base's grad_fn CopySlices
    # and the view's AsStridedBackward0 in PyTorch; tracec showed the
    # WhereBackward0 / ViewBackward0 it builds them from (and the
    # modified-saved-tensor error named them so).
    assert _write_through_view_names(torch) == _write_through_view_names(pt)
    leaf = torch.ones(2, 3, requires_grad=True)
    a = leaf * 1
    b = a.pow(2)
    a[0].zero_()
    with pytest.raises(RuntimeError, match=r"which is output 0 of torch::autograd::CopySlices, is at"):
        b.sum().backward()
    # the gradient through the written view is still the right one
    a = leaf * 1
    a[0] = a[0] * 3
    a.sum().backward()
    assert leaf.grad.tolist() == [[3.0] * 3, [1.0] * 3]


def _named_errors(lib):
    class Foo:
        pass
    m = lib.nn.Linear(2, 2)
    out = [lib.typename(m), lib.typename(lib.ones(2, dtype=lib.uint8)), lib.typename(Foo()),
           lib.typename(lib.nn.Parameter(lib.ones(1))), lib.typename(3)]
    for f in (lambda: m.register_parameter("w", lib.ones(2)), lambda: setattr(m, "weight", lib.ones(2, 2)),
              lambda: m.register_buffer("b", [1]), lambda: setattr(m, "weight", lib.nn.Linear(1, 1)),
              lambda: lib.optim.SGD(m.weight, lr=0.1), lambda: lib.optim.SGD([m.weight, 3], lr=0.1)):
        with pytest.raises(TypeError) as info:
            f()
        out.append(str(info.value))
    sd = m.state_dict()
    sd["weight"] = [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    return out + [str(info.value)]


def test_objects_are_named_as_pytorch_names_them():
    # LARS / Lookahead users passing a bare tensor as params: PyTorch says
    # "but got torch.FloatTensor" (torch.typename); tracec said
    # "tracec.Parameter", and its Module errors "tracec.Tensor" /
    # "tracec.nn.Parameter" even when installed as torch. One typename now,
    # naming tracec's modules by the name tracec goes by.
    from tracec import dtypes
    dtypes.PUBLIC_NAME[0] = "torch"     # as `tracec run` installs it
    try:
        got = _named_errors(torch)
    finally:
        dtypes.PUBLIC_NAME[0] = "tracec"
    want = _named_errors(pt)
    assert got[0] == "torch.nn.modules.linear.Linear" and got[1:] == want[1:]
    assert want[0] == "torch.nn.modules.linear.Linear"


def test_soft_margin_loss_refuses_a_target_that_requires_grad():
    # PyTorch's soft_margin_loss has no derivative for its target: a target
    # still attached to the graph (a sign of the model's output, as metric
    # learning code builds them) raises; tracec computed a gradient for it.
    a = np.array([[0.3, -1.2], [2.0, 0.1]], dtype=np.float32)
    msgs = []
    for lib in (torch, pt):
        x = lib.tensor(a, requires_grad=True)
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.soft_margin_loss(x, x.sign() * 2)
        msgs.append(str(info.value))
        with lib.no_grad():
            lib.nn.functional.soft_margin_loss(x, x.sign() * 2)
        loss = lib.nn.SoftMarginLoss()(x, (x * 2).detach().sign())
        loss.backward()
        msgs.append((round(loss.item(), 6), np.round(x.grad.numpy(), 6).tolist()))
    assert msgs[:2] == msgs[2:]


def test_a_module_attribute_set_and_put_back_inside_a_compiled_step_keeps_its_trace():
    # davda54/sam's bypass_bn around the two forward passes of a step:
    # enable_running_stats sets each batch norm's momentum (0 -> 0.1) for the
    # first forward, disable_running_stats sets it back to 0 for the second.
    # The batch norm's guard was snapshot when the step first called it
    # (momentum 0.1), but every call begins with 0: each call retraced.
    from tracec.nn.modules.batchnorm import _BatchNorm

    def set_momentum(model, on):
        def f(m):
            if isinstance(m, _BatchNorm):
                if on and hasattr(m, "backup_momentum"):
                    m.momentum = m.backup_momentum
                elif not on:
                    m.backup_momentum = m.momentum
                    m.momentum = 0
        model.apply(f)

    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                              torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32))

    def step(x):
        set_momentum(net, True)
        net(x).pow(2).mean().backward()
        set_momentum(net, False)
        net(x * 2).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        return net[1].running_mean.clone()

    import copy
    start = copy.deepcopy(net.state_dict())
    eager = [step(x) for _ in range(3)]
    after = copy.deepcopy(net.state_dict())
    net.load_state_dict(start)
    compiled = torch.compile(step)
    got = [compiled(x) for _ in range(3)]
    assert compiled.traces == 1
    assert all(torch.allclose(a, b) for a, b in zip(eager, got))
    assert all(torch.allclose(net.state_dict()[k].double(), after[k].double(), atol=1e-6) for k in after)
    # a value the step leaves changed is no attribute put back: still guarded
    net[1].momentum = 0.5
    compiled(x)
    assert compiled.traces == 2 and net[1].momentum == 0


class _CountingAdam(torch.optim.Optimizer):
    """A custom optimizer as AdaBelief / RAdam ports write them: a Python int
    ``state['step']`` and bias corrections computed from it in Python."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.99), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        import math
        for group in self.param_groups:
            beta1, beta2 = group['betas']
            for p in group['params']:
                state = self.state[p]
                if len(state) == 0:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p)
                    state['exp_avg_sq'] = torch.zeros_like(p)
                state['step'] += 1
                bias_correction1 = 1 - beta1 ** state['step']
                bias_correction2 = 1 - beta2 ** state['step']
                state['exp_avg'].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                state['exp_avg_sq'].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (state['exp_avg_sq'].sqrt() / math.sqrt(bias_correction2)).add_(group['eps'])
                p.addcdiv_(state['exp_avg'], denom, value=-group['lr'] / bias_correction1)


class _EveryOther(torch.optim.Optimizer):
    """michaelrzhang's Lookahead: wraps another optimizer, never calls
    Optimizer.__init__, counts its steps in a plain attribute."""

    def __init__(self, optimizer, k=2, alpha=0.5):
        from collections import defaultdict
        self.optimizer, self._la_step, self.k, self.alpha = optimizer, 0, k, alpha
        self.state = defaultdict(dict)
        for group in optimizer.param_groups:
            for p in group['params']:
                self.state[p]['cached_params'] = p.data.clone()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self, closure=None):
        loss = self.optimizer.step(closure)
        self._la_step += 1
        if self._la_step >= self.k:
            self._la_step = 0
            for group in self.optimizer.param_groups:
                for p in group['params']:
                    cached = self.state[p]['cached_params']
                    p.data.mul_(self.alpha).add_(cached, alpha=1.0 - self.alpha)
                    cached.copy_(p.data)
        return loss


@pytest.mark.parametrize("make", [
    lambda ps: _CountingAdam(ps),
    lambda ps: _EveryOther(torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
    lambda ps: _EveryOther(_CountingAdam(ps), k=3),
], ids=["int_step_state", "attribute_counter", "both"])
def test_compiled_custom_optimizer_counting_in_python_numbers_matches_eager(make):
    # AdaBelief's state['step'] += 1 (an int in the optimizer's per-parameter
    # state) and Lookahead's self._la_step: the optimizer's guard compared
    # neither, and the call's changes to them went unseen, so compiled calls
    # replayed the first call's bias corrections / branch: silently wrong
    # from the third step. They are now found like a learning rate the step
    # changes: lifted, carried by the compiled code, decisions guarded.
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32))
    runs = []
    for compiled in (False, True):
        torch.manual_seed(0)
        net = torch.nn.Linear(3, 2)
        opt = make(net.parameters())

        def step(x):
            opt.zero_grad()
            loss = net(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()

        f = torch.compile(step) if compiled else step
        runs.append(([f(x).item() for _ in range(7)], [p.detach().clone() for p in net.parameters()],
                     [v for s in opt.state.values() for v in s.values() if isinstance(v, int)]))
    (el, ep, es), (cl, cp, cs) = runs
    assert np.allclose(el, cl, rtol=1e-5, atol=1e-7), (el, cl)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ep, cp))
    assert es == cs


def test_optimizer_state_prints_as_pytorchs_defaultdict():
    # print(optimizer.state) while debugging a custom optimizer (LARS's 'mu',
    # Lion's 'exp_avg'): PyTorch shows defaultdict(<class 'dict'>, {...});
    # tracec showed its WatchedState(<class 'tracec.mutation.WatchedDict'>, ...).
    outs = []
    for lib in (torch, pt):
        w = lib.nn.Parameter(lib.tensor([0.5]))
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        before = repr(opt.state)
        (w * 2).sum().backward()
        opt.step()
        outs.append((before, repr(opt.state).replace("tracec.", "torch.")))
    assert outs[0] == outs[1]


def test_detect_anomaly_warns_that_it_is_on_as_torch_does():
    def messages(lib):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                pass
        return [str(x.message) for x in w]
    assert messages(torch) == messages(pt) and messages(torch)
