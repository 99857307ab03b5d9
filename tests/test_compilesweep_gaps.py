"""Gaps that compiling real programs' models and training steps found in
tracec (``torch.compile(model)`` / ``torch.compile(train_step)`` added to
programs of ``tests/programs`` that run eagerly): each test checks that the
compiled step equals tracec's eager run (and, where the eager numbers are
the point, torch's), and that the step runs natively: ``cache_info()``
shows no eager fallback and no trace per call."""
import dataclasses
import types

import numpy as np
import pytest
import torch

import tracec


def _run_steps(lib, compiled, steps, make, data):
    lib.manual_seed(0)
    step, state = make(lib)
    fn = tracec.compile(step) if compiled else step
    outs = [np.array([float(v) for v in fn(*data(lib, i))]) for i in range(steps)]
    return outs, [p.detach().numpy().copy() for p in state()], fn


def _swa_case(kw_of):
    def make(lib):
        nn = lib.nn
        m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
        sw = lib.optim.swa_utils.AveragedModel(m, **kw_of(lib))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            sw.update_parameters(m)
            return loss.detach(), sw(x).sum().detach()
        return step, lambda: list(sw.parameters()) + list(sw.buffers())
    return make


def _batches(lib, i):
    g = np.random.default_rng(i)
    return (lib.tensor(g.standard_normal((8, 4)).astype(np.float32)),)


@pytest.mark.parametrize("kind", ["default"])
def test_averaged_model_in_a_compiled_step_keeps_its_code(kind):
    """``AveragedModel.update_parameters`` in a compiled training step read
    ``n_averaged`` with ``.item()``: a value guard that changed at every
    call, so the step was traced again at every call (5 traces in 5 steps).
    Now the counter is decided on (``bool(n == 0)``, PyTorch's spelling),
    which a trace speculates: two traces (the first copy, then the
    averaging), the rest native; and the default average is PyTorch's CPU
    one, ``a + (p - a) / (n + 1)``, not a lerp."""
    kws = {"default": lambda lib: {},
           "ema_multi": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9)),
           "swa_multi": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn()),
           "ema_avg": lambda lib: dict(avg_fn=lib.optim.swa_utils.get_ema_avg_fn(0.9))}
    make = _swa_case(kws[kind])
    steps = 5
    ref, ref_state, _ = _run_steps(torch, False, steps, make, _batches)
    eager, eager_state, _ = _run_steps(tracec, False, steps, make, _batches)
    comp, comp_state, fn = _run_steps(tracec, True, steps, make, _batches)
    for a, b, c in zip(ref + ref_state, eager + eager_state, comp + comp_state):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
    info = fn.cache_info()
    assert info.eager_reasons == [] and info.traces == 2 and info.hits >= steps - 4, info


# --- globals read by a module's helper methods --------------------------------

_EPS = []
_SCALE = [2.0]
_OFFSET = 1.0


class _Reparam(tracec.nn.Module):
    """cvae's ``NumpyEpsVAE``: ``forward`` calls ``self.reparameterize``,
    which pops the noise from a global queue, and ``self.shift``, which
    reads a global number."""

    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)

    def reparameterize(self, x):
        return x + _EPS.pop(0) * _SCALE[0]

    def shift(self, x):
        return x + _OFFSET

    def forward(self, x):
        return self.shift(self.reparameterize(self.lin(x)))


def _reparam_outputs(compiled):
    global _OFFSET
    tracec.manual_seed(0)
    m = _Reparam()
    f = tracec.compile(m, fallback="eager") if compiled else m
    outs = []
    for i in range(4):
        _EPS.append(tracec.full((2,), float(i)))
        _OFFSET = 1.0 + (i // 2)
        outs.append(f(tracec.ones(1, 2)).detach().numpy().copy())
    assert _EPS == []
    return outs, f


def test_a_global_list_popped_by_a_helper_method_is_not_baked_in():
    """WRONG NUMBERS before: ``tracec.compile(model)`` guarded the globals of
    ``forward`` only, so the noise a helper method popped from a global list
    at the trace was reused by every compiled call (the list grew, the
    output stayed the first call's).  Now the globals of the methods
    ``forward`` reaches by name are guarded too: the pop is a side effect
    found at the second call, which runs eagerly from then on with a warning
    (``fallback="eager"``, torch.compile's default and ``tracec run``'s; an
    error otherwise), and the results are eager's."""
    eager, _ = _reparam_outputs(False)
    with pytest.warns(UserWarning, match=r"global '_EPS' .*read by _Reparam.reparameterize"):
        comp, f = _reparam_outputs(True)
    for a, b in zip(eager, comp):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert len(f.cache_info().eager_reasons) == 1


class _Shifted(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)

    def shift(self, x):
        return x * _SCALE[0] + _OFFSET

    def forward(self, x):
        return self.shift(self.lin(x))


def test_a_global_number_read_by_a_helper_method_retraces_when_it_changes():
    """A global a helper method reads, changed between calls (a schedule
    kept in a global), was baked in at its first value; now it is guarded:
    a new value traces again, and the results are eager's."""
    global _OFFSET
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _Shifted()
        f = tracec.compile(m) if compiled else m
        res = []
        for i in range(4):
            _OFFSET = float(i // 2)
            res.append(f(tracec.ones(1, 2)).detach().numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    info = f.cache_info()
    assert info.eager_reasons == [] and info.traces == 2 and info.hits == 2, info


# --- list and dict attributes of a module --------------------------------------

class _Queue(tracec.nn.Module):
    """A module that pops its noise from its own list (``self.queue``) and
    counts its calls in a dict (``self.seen``)."""

    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)
        self.queue = []
        self.seen = {}

    def forward(self, x):
        self.seen[len(self.seen)] = True
        return self.lin(x) * len(self.seen) + self.queue.pop(0)


def test_a_modules_list_attribute_popped_in_forward_is_not_baked_in():
    """WRONG NUMBERS before: a module's guard held its plain values and its
    tensors' identities, not its lists and dicts, so a compiled module that
    popped from ``self.queue`` (and counted in ``self.seen``) returned its
    first call's result at every call.  Now list and dict attributes are
    guarded by contents: the change is a side effect found at the second
    call (eager from then on, with the warning), the results are eager's."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _Queue()
        f = tracec.compile(m, fallback="eager") if compiled else m
        res = []
        for i in range(4):
            m.queue.append(tracec.full((2,), float(i)))
            res.append(f(tracec.ones(1, 2)).detach().numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert len(f.cache_info().eager_reasons) == 1


class _Table(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)
        self.scales = [1.0, 2.0]

    def forward(self, x):
        return self.lin(x) * self.scales[-1]


def test_a_modules_list_attribute_changed_between_calls_retraces():
    """A list attribute the program changes between calls (``scales[-1]``
    read by forward) was baked in at its first contents; now it traces again."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _Table()
        f = tracec.compile(m) if compiled else m
        res = []
        for i in range(4):
            if i == 2:
                m.scales.append(5.0)
            res.append(f(tracec.ones(1, 2)).detach().numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    info = f.cache_info()
    assert info.eager_reasons == [] and info.traces == 2 and info.hits == 2, info


# --- a custom Function whose forward shifts its input in place -----------------

def _sparsemax_cls(lib):
    class Sparsemax(lib.autograd.Function):
        """pytorch-tabnet's SparsemaxFunction (``input -= max_val`` in place)."""

        @staticmethod
        def forward(ctx, input, dim=-1):
            ctx.dim = dim
            max_val, _ = input.max(dim=dim, keepdim=True)
            input -= max_val
            srt, _ = lib.sort(input, descending=True, dim=dim)
            cumsum = srt.cumsum(dim) - 1
            rhos = lib.arange(1, input.size(dim) + 1, dtype=input.dtype).view(1, -1)
            support = rhos * srt > cumsum
            supp = support.sum(dim=dim).unsqueeze(dim)
            tau = cumsum.gather(dim, supp - 1) / supp.to(input.dtype)
            output = lib.clamp(input - tau, min=0)
            ctx.save_for_backward(supp, output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            supp, output = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad_input[output == 0] = 0
            v_hat = (grad_input.sum(dim=ctx.dim) / supp.to(output.dtype).squeeze()).unsqueeze(ctx.dim)
            return lib.where(output != 0, grad_input - v_hat, grad_input), None
    return Sparsemax


def test_a_compiled_module_differentiates_a_function_that_shifts_its_input_in_place():
    """WRONG NUMBERS before (pytorch-tabnet's TabNet compiled, backward
    outside): from the second call on, the gradients of every parameter
    before the sparsemax were zero.  The trace recorded the user Function's
    backward as the gradient of its input's value *after* the forward's
    ``input -= max_val``, a value computed without grad; now of the value
    before it (a copy taken before a traced forward, used when the forward
    wrote its input), as eager autograd and PyTorch do."""
    outs = []
    for lib, compiled in ((torch, False), (tracec, False), (tracec, True)):
        sparsemax = _sparsemax_cls(lib).apply

        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(4, 5)
                self.b = lib.nn.Linear(5, 1)

            def forward(self, x):
                return self.b(sparsemax(self.a(x), -1) * x.sum(-1, keepdim=True))

        lib.manual_seed(0)
        net = Net()
        with lib.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)),
                                   dtype=lib.float32))
        f = tracec.compile(net) if compiled else net
        res = []
        for i in range(3):
            net.zero_grad()
            x = lib.tensor(np.random.default_rng(10 + i).standard_normal((6, 4)) * 3,
                           dtype=lib.float32)
            loss = f(x).pow(2).sum()
            loss.backward()
            res.append([loss.item(), net.a.weight.grad.numpy().copy(),
                        net.b.weight.grad.numpy().copy()])
        outs.append(res)
    for ref, eager, comp in zip(*outs):
        for a, b, c in zip(ref, eager, comp):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(c, b, rtol=1e-4, atol=1e-5)
    info = f.cache_info()
    assert info.eager_reasons == [] and info.traces == 1 and info.hits == 2, info


# --- a plain object returned -------------------------------------------------

class _LossBreakdown:
    """rectified-flow-pytorch's ``LossBreakdown`` (a plain class)."""

    def __init__(self, total, main, data_match=None, velocity_match=None):
        self.total, self.main = total, main
        self.data_match, self.velocity_match = data_match, velocity_match


class _Flow(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(3, 3)

    def forward(self, x):
        main = self.lin(x).pow(2).mean()
        return main * 2, _LossBreakdown(main * 2, main, None, 3)


def test_a_compiled_module_may_return_a_plain_object():
    """rectified-flow's ``RectifiedFlow`` returns ``(loss, LossBreakdown(...))``:
    the compiled module ran eagerly ("may return ... not LossBreakdown").  Now
    an object of the program's own class is returned rebuilt at each call
    from its attributes (tensors requiring grad, numbers, None), and the
    step runs natively with a backward outside."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _Flow()
        f = tracec.compile(m) if compiled else m
        opt = tracec.optim.SGD(m.parameters(), lr=0.1)
        res = []
        for i in range(3):
            opt.zero_grad()
            loss, br = f(tracec.ones(2, 3) * i)
            br.main.backward()
            opt.step()
            assert type(br) is _LossBreakdown and br.velocity_match == 3 and br.data_match is None
            res.append([loss.item(), br.total.item(), m.lin.weight.detach().numpy().copy()])
        outs.append(res)
    for a, b in zip(*outs):
        for x, y in zip(a, b):
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-7)
    info = f.cache_info()
    assert info.eager_reasons == [] and info.traces == 1 and info.hits == 2, info


# --- a counter in a submodule ------------------------------------------------

class _Counted(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * (1.0 + 0.1 * self.calls)


class _Top(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = _Counted()

    def forward(self, x):
        return self.sub(x).sum()


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_counter_in_a_submodule_is_lifted_not_traced_again(wrapped):
    """A compiled training step calling a model whose block counts its calls
    (``self.calls += 1``; RWKV's ``GPT.step`` reached through
    ``torch.compile(gpt)``'s wrapper) traced again at every call: only the
    root module's own numbers were watched for changes the call made, so
    the block's guard failed at each call.  Now each submodule of the
    program's class is a root: the counter is lifted (read as an input,
    written back), one trace serves every call, and results equal eager."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        top = _Top()
        m = tracec.compile(top) if wrapped else top
        opt = tracec.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x)
            loss.backward()
            opt.step()
            return loss

        f = tracec.compile(step) if compiled else step
        res = [f(tracec.ones(1, 2)).item() for _ in range(5)]
        outs.append((res, top.sub.calls, top.sub.lin.weight.detach().numpy().copy()))
    (r0, c0, w0), (r1, c1, w1) = outs
    np.testing.assert_allclose(r1, r0, rtol=1e-5)
    np.testing.assert_allclose(w1, w0, rtol=1e-5)
    assert c0 == c1 == 5
    info = f.cache_info()
    assert info.eager_reasons == [] and info.traces == 1 and info.hits >= 3, info


class _MDN(tracec.nn.Module):
    """A mixture density network's head: forward returns the mixture."""

    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 3 + 3 * 2 * 2)

    def forward(self, x):
        D = tracec.distributions
        h = self.lin(x)
        logits, mu, ls = h[:, :3], h[:, 3:9].view(-1, 3, 2), h[:, 9:].view(-1, 3, 2)
        return D.MixtureSameFamily(D.Categorical(logits=logits),
                                   D.Independent(D.Normal(mu, ls.exp()), 1))


def test_a_compiled_module_may_return_a_distribution():
    """models16/mdn_mixture's ``MixtureDensityNetwork`` returns a
    ``MixtureSameFamily``: the compiled module ran eagerly ("may return ...
    not MixtureSameFamily").  Now a distribution is returned rebuilt from its
    attributes (tensors, sizes, inner distributions) and its log_prob's
    backward outside reaches the compiled forward."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _MDN()
        f = tracec.compile(m) if compiled else m
        opt = tracec.optim.Adam(m.parameters(), lr=0.01)
        res = []
        for i in range(3):
            opt.zero_grad()
            d = f(tracec.ones(4, 2) * i)
            assert type(d).__name__ == "MixtureSameFamily" and d.batch_shape == (4,)
            loss = -d.log_prob(tracec.ones(4, 2)).mean()
            loss.backward()
            opt.step()
            res.append([loss.item(), d.mean.detach().numpy().copy()])
        outs.append(res)
    for a, b in zip(*outs):
        for x, y in zip(a, b):
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)
    info = f.cache_info()
    assert info.eager_reasons == [] and info.traces == 1 and info.hits == 2, info


def test_an_orthogonal_parametrization_compiles():
    """``parametrizations.orthogonal`` (the matrix_exp map, a square weight's
    default) in a compiled training step ran eagerly: its scaling and
    squaring read the weight's norm with ``float()``.  Now the number of
    squarings comes from decisions on the norm, which a trace speculates:
    the step compiles, and equals eager and torch."""
    def make(lib):
        P = lib.nn.utils.parametrizations
        m = lib.nn.Sequential(P.orthogonal(lib.nn.Linear(4, 4)), lib.nn.Tanh(),
                              lib.nn.Linear(4, 2))
        with lib.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(lib.tensor(np.random.default_rng(i).standard_normal(tuple(p.shape)),
                                   dtype=lib.float32))
        opt = lib.optim.SGD(m.parameters(), lr=0.5)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            return (loss.detach(),)
        return step, lambda: list(m.parameters()) + [m[0].weight]

    ref, ref_state, _ = _run_steps(torch, False, 4, make, _batches)
    eager, eager_state, _ = _run_steps(tracec, False, 4, make, _batches)
    comp, comp_state, fn = _run_steps(tracec, True, 4, make, _batches)
    for a, b, c in zip(ref + ref_state, eager + eager_state, comp + comp_state):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
    info = fn.cache_info()
    assert info.eager_reasons == [] and info.traces == 1 and info.hits == 3, info


class _NumpyNoise(tracec.nn.Module):
    """attentive-neural-processes' NumpyNoiseLatentModel: ``sample`` draws
    its noise from a NumPy generator kept as a module attribute, once per
    ``self.eps = None`` the training loop sets."""

    def __init__(self, rng):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)
        self.rng = rng
        self.eps = None

    def forward(self, x):
        if self.eps is None:
            self.eps = tracec.from_numpy(self.rng.normal(size=(2,)).astype(np.float32))
        return self.lin(x) + self.eps


def test_a_numpy_generator_a_module_draws_from_is_not_baked_in():
    """WRONG NUMBERS before: a module's guard did not hold the state of a
    random generator object among its attributes, so from the third call on
    the compiled module reused the noise drawn while tracing.  Now the
    generator's state is part of the guard: a draw in forward is a side
    effect found at the second call (eager from then on, with the warning),
    and the results are eager's."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _NumpyNoise(np.random.default_rng(0))
        f = tracec.compile(m, fallback="eager") if compiled else m
        res = []
        for i in range(4):
            m.eps = None
            res.append(f(tracec.ones(1, 2)).detach().numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert len(f.cache_info().eager_reasons) == 1


class _ClassCounter(tracec.nn.Module):
    step = 0

    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(2, 2)

    def forward(self, x):
        _ClassCounter.step += 1
        return self.lin(x) * _ClassCounter.step


class _TypeCounter(_ClassCounter):
    ticks = 0.5

    def forward(self, x):
        type(self).ticks += 1
        return self.lin(x) * type(self).ticks


@pytest.mark.parametrize("cls", [_ClassCounter, _TypeCounter])
@pytest.mark.parametrize("how", ["module", "step"])
def test_a_class_attribute_counted_in_forward_is_not_baked_in(cls, how):
    """WRONG NUMBERS before: a class attribute a ``forward`` reads and
    counts (``C.step += 1``, ``type(self).ticks += 1``) was a constant of
    the trace: every compiled call multiplied by the traced call's count and
    left the counter where it was.  Now the data attributes of the program's
    classes are roots of the guard: the change is lifted (read as an input,
    written back) as a module attribute's."""
    outs, counts = [], []
    for compiled in (False, True):
        tracec.manual_seed(0)
        cls.step, cls.ticks = 0, 0.5
        m = cls()
        fn = m if how == "module" else (lambda x: m(x).sum())
        f = tracec.compile(fn) if compiled else fn
        outs.append([f(tracec.ones(1, 2)).detach().numpy().copy() for _ in range(5)])
        counts.append((cls.step, cls.ticks))
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert counts[0] == counts[1]
    info = f.cache_info()
    assert info.traces <= 2 and not info.eager_reasons, info


@dataclasses.dataclass
class _Cfg:
    temperature: float = 1.0
    sizes: tuple = (2, 2)


class _Tempered(tracec.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.lin = tracec.nn.Linear(*cfg.sizes)

    def forward(self, x):
        return (self.lin(x) / self.cfg.temperature).softmax(-1)


@pytest.mark.parametrize("make_cfg", [_Cfg, lambda: types.SimpleNamespace(temperature=1.0,
                                                                           sizes=(2, 2))])
def test_a_config_object_a_module_holds_is_guarded(make_cfg):
    """WRONG NUMBERS before: a module's guard left out its attributes that
    are plain data objects (a config dataclass, a namespace), so annealing
    ``model.cfg.temperature`` between compiled calls was not seen and every
    call used the traced temperature.  Now such an object's attributes are
    compared by value: a change retraces."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _Tempered(make_cfg())
        f = tracec.compile(m) if compiled else m
        res = []
        for i in range(4):
            m.cfg.temperature = 1.0 / (i + 1)
            res.append(f(tracec.ones(1, 2)).detach().numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert f.cache_info().traces == 4


def test_arguments_bound_by_functools_partial_are_guarded():
    """WRONG NUMBERS before: ``tracec.compile(functools.partial(f, s=d))``
    did not guard what the partial binds, so changing ``d["v"]`` or
    ``p.keywords["s"]`` between calls was not seen.  Now the bound
    arguments are roots, as a closure's cells are."""
    import functools

    def f(x, s, d):
        return x * s * d["v"]

    outs = []
    for compiled in (False, True):
        d = {"v": 1.0}
        p = functools.partial(f, s=1.0, d=d)
        g = tracec.compile(p) if compiled else p
        res = []
        for i in range(4):
            d["v"] = 1.0 + i
            p.keywords["s"] = 2.0 - i
            res.append(g(tracec.ones(2)).numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)


_cfgmod = types.ModuleType("_compilesweep_cfg")
_cfgmod.__file__ = __file__


def _cfg_scale(x):
    return x * _cfgmod.SCALE


def test_a_program_modules_attribute_is_guarded():
    """WRONG NUMBERS before: a compiled function reading ``config.SCALE``
    (an attribute of the program's own module, changed between calls by
    the program or by a function of that module) baked the traced value
    in.  Now ``name.attr`` of the program's modules (not of installed
    packages or tracec) are roots as globals are, and a function reached
    that way (``helpers.scale(x)``) has its globals guarded too."""
    outs = []
    for compiled in (False, True):
        _cfgmod.SCALE = 1.0
        _cfgmod.scale = _cfg_scale

        def step(x):
            return x * _cfgmod.SCALE + _cfgmod.scale(x)
        g = tracec.compile(step) if compiled else step
        res = []
        for i in range(4):
            _cfgmod.SCALE = 1.0 + i
            res.append(g(tracec.ones(2)).numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)


class _Helper:
    def __init__(self):
        self.scale = 1.0
        self.shift = tracec.zeros(2)


class _Helped(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.h = _Helper()
        self.lin = tracec.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x) * self.h.scale + self.h.shift


def test_a_helper_object_holding_a_tensor_is_guarded():
    """WRONG NUMBERS before: a plain object of the program's class held by a
    module (``self.h``, holding a number and a tensor) was guarded by
    identity only: its number changed between calls and its tensor rebound
    were not seen.  Now its attributes are compared (numbers by value,
    tensors by identity): a change retraces."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _Helped()
        f = tracec.compile(m) if compiled else m
        res = []
        for i in range(4):
            m.h.scale = 1.0 + i
            m.h.shift = tracec.full((2,), float(i))
            res.append(f(tracec.ones(1, 2)).detach().numpy().copy())
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-6)


class _FillsInputs(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(3, 1)

    def forward(self, inputs):
        y = self.lin(inputs["x"]).sum(-1)
        inputs["energy"] = y
        inputs["scaled"] = y * 2
        return y.sum()


def test_a_forward_storing_results_into_its_dict_argument_is_replayed():
    """Ran eagerly before (SchNet's ``inputs["energy"] = y``: "changed
    argument in place").  Now tensors a call stores under string keys of a
    dict argument are replayed: each compiled call stores its own results
    into that call's dict (new keys, or an entry replaced), gradients
    included; one trace, no eager fallback."""
    outs = []
    for compiled in (False, True):
        tracec.manual_seed(0)
        m = _FillsInputs()
        f = tracec.compile(m) if compiled else m
        opt = tracec.optim.SGD(m.parameters(), lr=0.1)
        res = []
        for i in range(4):
            d = {"x": tracec.full((2, 3), i / 3.0)}
            f(d)
            loss = (d["energy"] - 1).pow(2).mean() + d["scaled"].sum() * 0.1
            opt.zero_grad()
            loss.backward()
            opt.step()
            res.append([loss.item(), *d["scaled"].tolist(), sorted(d) == ["energy", "scaled", "x"]])
        outs.append(res)
    np.testing.assert_allclose(np.array(outs[1], float), np.array(outs[0], float), rtol=1e-6)
    info = f.cache_info()
    assert info.traces == 1 and not info.eager_reasons, info


def _hooked_step(lib, compiled, kind, calls=4):
    lib.manual_seed(0)
    lin = lib.nn.Linear(3, 1)
    handle, scale = [], [1.0]
    if kind == "rescaled":
        lin.weight.register_hook(lambda g: g * scale[0])

    def step(x):
        if kind == "inside":
            h = lin.weight.register_hook(lambda g: g * 0.5)
        elif kind == "kept":
            lin.weight.register_hook(lambda g: g * 0.5)
        loss = lin(x).pow(2).sum()
        loss.backward()
        if kind == "inside":
            h.remove()
        g = lin.weight.grad.clone()
        lin.weight.grad = lin.bias.grad = None
        return g
    f = tracec.compile(step, fallback="eager") if compiled else step
    out = []
    for i in range(calls):
        if kind == "outside" and i == 1:
            handle.append(lin.weight.register_hook(lambda g: g * 3))
        if kind == "outside" and i == 3:
            handle[0].remove()
        scale[0] = 1.0 + (i % 2)
        out.append(f(lib.full((2, 3), i + 1.0)).numpy().copy())
    return out, f


@pytest.mark.parametrize("kind", ["inside", "outside", "rescaled", "kept"])
def test_hooks_on_leaves_in_a_compiled_step(kind):
    """Ran eagerly before ("tensor hooks on leaves are not supported").  Now
    a backward reaching a leaf with hooks is recorded from the eager
    engine's run (the hook's tensor ops are traced), the hooks the leaf held
    when the call began are guarded (one added or removed between calls
    retraces, as does a number the hook reads changing), and a hook the
    call registers and leaves registered (eager
    calls would stack one more each time) falls back with the warning."""
    ref, _ = _hooked_step(torch, False, kind)
    outs, f = _hooked_step(tracec, True, kind)
    for a, b in zip(ref, outs):
        np.testing.assert_allclose(b, a, rtol=1e-5)
    info = f.cache_info()
    if kind == "kept":
        assert info.eager_reasons
    else:
        assert not info.eager_reasons and info.hits >= 1, info
