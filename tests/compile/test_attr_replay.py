"""A compiled call that sets a module attribute to a tensor it computed or
to None (llama2.c's ``self.last_loss``) sets it likewise at every compiled
call; the guard keeps only whether the attribute held None (a new tensor
object each call would otherwise retrace every call)."""
import numpy as np
import pytest

import tracec


class Net(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tracec.nn.Linear(3, 2)
        self.last_loss = None

    def forward(self, x, y=None):
        out = self.lin(x)
        if y is not None:
            self.last_loss = ((out - y) ** 2).mean()
        else:
            self.last_loss = None
        return out


def test_attribute_set_by_the_call_is_set_by_compiled_calls():
    tracec.manual_seed(0)
    m = Net()
    f = tracec.compile(m, backend="interp", fullgraph=True)
    x, y = tracec.randn(4, 3), tracec.randn(4, 2)
    pattern = [(x, y), (x, y), (x,), (x, y), (x,), (x,), (x, y), (x * 2, y), (x,)]
    with tracec.no_grad():
        for args in pattern:
            got = f(*args)
            got_loss = m.last_loss
            want = m(*args)
            if len(args) == 1:
                assert got_loss is None and m.last_loss is None
            else:
                assert isinstance(got_loss, tracec.Tensor) and got_loss is not m.last_loss
                np.testing.assert_allclose(got_loss.numpy(), m.last_loss.numpy(), rtol=1e-6)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    info = f.cache_info()
    # no side effect refused; a trace per (targets given, last_loss None at entry)
    assert info.traces <= 4 and info.hits >= len(pattern) - 4


def test_training_step_reading_the_attribute_it_set():
    """llama2.c's step: ``model(X, Y)``, ``loss = model.last_loss``, backward, step."""
    def make():
        tracec.manual_seed(0)
        m = Net()
        return m, tracec.optim.AdamW(m.parameters(), lr=0.1)

    def step_of(m, opt):
        def step(x, y):
            m(x, y)
            loss = m.last_loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step
    me, oe = make()
    mc, oc = make()
    eager, compiled = step_of(me, oe), tracec.compile(step_of(mc, oc), backend="interp",
                                                       fullgraph=True)
    x, y = tracec.randn(4, 3), tracec.randn(4, 2)
    for _ in range(4):
        a, b = eager(x, y), compiled(x, y)
        assert a.item() == pytest.approx(b.item(), rel=1e-5)
        assert mc.last_loss.item() == pytest.approx(me.last_loss.item(), rel=1e-5)
    assert compiled.cache_info().hits >= 2


def test_attribute_read_then_set_is_never_stale():
    """A tensor attribute the call reads and replaces (an EMA): compiled
    calls read the tensor the attribute holds at each call
    (``Recording.attr_state``), never the one the trace saw; one trace
    serves every call (it retraced at every call before, up to
    ``max_traces``)."""
    class Ema(tracec.nn.Module):
        def __init__(self):
            super().__init__()
            self.avg = tracec.zeros(2)

        def forward(self, x):
            self.avg = self.avg * 0.5 + x
            return self.avg * 1.0

    e, c = Ema(), Ema()
    f = tracec.compile(c, backend="interp", max_traces=3)
    x = tracec.ones(2)
    for _ in range(6):
        np.testing.assert_allclose(f(x).numpy(), e(x).numpy())
    np.testing.assert_allclose(c.avg.numpy(), e.avg.numpy())
    assert f.cache_info().traces == 1, f.cache_info().reasons


def test_attribute_that_needs_a_backward_outside_gets_a_compiled_backward():
    """compile(model), then model.last_loss.backward() outside (llama2.c's
    train.py with compile=True): the attribute's tensor is a result of the
    compiled call with a backward, as a returned loss is; the gradients are
    eager's."""
    tracec.manual_seed(0)
    m, e = Net(), Net()
    e.load_state_dict(m.state_dict())
    f = tracec.compile(m, backend="interp", fullgraph=True)
    x, y = tracec.randn(4, 3), tracec.randn(4, 2)
    for _ in range(3):
        f(x, y)
        e(x, y)
        m.zero_grad()
        e.zero_grad()
        (m.last_loss / 2).backward()
        (e.last_loss / 2).backward()
        np.testing.assert_allclose(m.lin.weight.grad.numpy(), e.lin.weight.grad.numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(m.lin.bias.grad.numpy(), e.lin.bias.grad.numpy(), rtol=1e-6)
    assert f.cache_info().eager_signatures == 0


def test_tuple_attribute_that_needs_a_backward_outside_runs_eagerly():
    """A tuple of tensors that require grad set as an attribute (an RNN's
    ``self.hidden = (h, c)`` under grad): the signature runs eagerly, and says why."""
    class Pair(tracec.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tracec.nn.Linear(3, 2)
            self.pair = None

        def forward(self, x):
            out = self.lin(x)
            self.pair = (out.sum(), out.mean())
            return out.detach()

    tracec.manual_seed(0)
    m = Pair()
    f = tracec.compile(m, backend="interp")
    x = tracec.randn(4, 3)
    with pytest.warns(UserWarning, match="sets the module attribute pair to a tensor "
                                         "that requires grad"):
        f(x)
    for _ in range(2):
        f(x)
        m.zero_grad()
        m.pair[0].backward()
        assert m.lin.weight.grad is not None


def test_attribute_set_to_a_tensor_that_existed_before_is_that_tensor():
    class Pick(tracec.nn.Module):
        def __init__(self, a, b):
            super().__init__()
            self.a, self.b, self.chosen = a, b, None

        def forward(self, x, first: bool):
            self.chosen = self.a if first else self.b
            return x * 2

    a, b = tracec.ones(2), tracec.zeros(2)
    m = Pick(a, b)
    f = tracec.compile(m, backend="interp", fullgraph=True)
    for first in (True, False, True, False, True):
        f(tracec.ones(2), first)
        assert m.chosen is (a if first else b)
    assert f.cache_info().hits >= 1


class BaseModel:
    """junyanz/pytorch-CycleGAN-and-pix2pix's BaseModel pattern: a plain
    object (not a Module) holding the networks, the inputs set_input stored
    and the tensors forward computed."""

    def __init__(self):
        tracec.manual_seed(0)
        self.netG = tracec.nn.Linear(3, 3)
        self.optimizer_G = tracec.optim.SGD(self.netG.parameters(), lr=0.1)
        self.fake_B = None

    def set_input(self, real_A):
        self.real_A = real_A

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def optimize_parameters(self):
        self.forward()
        self.optimizer_G.zero_grad()
        self.loss_G = (self.fake_B - self.real_A).pow(2).mean()
        self.loss_G.backward()
        self.optimizer_G.step()


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_tensors_set_on_a_plain_object_are_set_by_compiled_calls(backend):
    def run(compiled):
        model = BaseModel()

        def step(x):
            model.set_input(x)
            model.optimize_parameters()
            return model.loss_G
        f = tracec.compile(step, backend=backend) if compiled else step
        out = []
        for k in range(5):
            x = tracec.full((2, 3), float(k))
            loss = f(x)
            assert model.real_A is x                  # this call's argument itself
            out.append((loss.item(), model.fake_B.detach().numpy().copy(),
                        model.loss_G.item()))
        return out, f
    a, _ = run(False)
    b, f = run(True)
    for (la, fa, ga), (lb, fb, gb) in zip(a, b):
        assert la == pytest.approx(lb, rel=1e-6) and ga == pytest.approx(gb, rel=1e-6)
        np.testing.assert_allclose(fb, fa, rtol=1e-6)
    info = f.cache_info()
    # the first call creates the attributes; then one trace serves
    assert info.traces == 2 and info.hits == 3 and info.eager_signatures == 0, info


def test_a_plain_object_tensor_the_trace_reads_is_not_replayed():
    """``self.prev = self.cur`` reads the tensor the previous call left
    there: compiled code would read a stale object, so the step runs
    eagerly (fallback) with eager's results."""
    class Holder:
        def __init__(self):
            self.cur = tracec.zeros(2)
            self.prev = None

    h = Holder()

    def step(x):
        h.prev = h.cur
        h.cur = h.prev + x
        return h.cur.sum()
    f = tracec.compile(step, fallback="eager")
    with pytest.warns(UserWarning):
        outs = [f(tracec.ones(2)).item() for _ in range(4)]
    assert outs == [2.0, 4.0, 6.0, 8.0]


class _Tagger:
    """The Bi-LSTM CRF tutorial's ``self.hidden = self.init_hidden()`` then
    ``lstm_out, self.hidden = self.lstm(embeds, self.hidden)``: a module
    attribute set to a tuple of tensors inside the compiled step."""

    @staticmethod
    def make(lib):
        class Tagger(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = lib.nn.LSTM(3, 2, bidirectional=True)
                self.out = lib.nn.Linear(4, 5)
                self.hidden = self.init_hidden()

            def init_hidden(self):
                return (lib.zeros(2, 1, 2), lib.ones(2, 1, 2) * 0.5)

            def forward(self, x):
                self.hidden = self.init_hidden()
                y, self.hidden = self.lstm(x, self.hidden)
                return self.out(y).logsumexp(-1).sum()
        gen = np.random.default_rng(1)
        m = Tagger()
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.from_numpy(gen.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
        return m, lib.optim.SGD(m.parameters(), lr=0.01, weight_decay=1e-4)


def _tagger_run(lib, compiled):
    m, opt = _Tagger.make(lib)

    def step(x):
        m.zero_grad()
        loss = m(x)
        loss.backward()
        opt.step()
        return loss
    if compiled:
        step = tracec.compile(step, fullgraph=True) if lib is tracec else step
    x = lib.from_numpy(np.random.default_rng(2).standard_normal((4, 1, 3)).astype(np.float32))
    losses, hiddens = [], []
    for _ in range(4):
        losses.append(step(x).item())
        assert type(m.hidden) is tuple and len(m.hidden) == 2
        hiddens.append([h.detach().numpy().copy() for h in m.hidden])
    return losses, hiddens, step


def test_a_tuple_of_tensors_set_by_the_call_is_set_by_compiled_calls():
    torch = pytest.importorskip("torch")
    got, got_h, f = _tagger_run(tracec, True)
    eager, eager_h, _ = _tagger_run(tracec, False)
    want, want_h, _ = _tagger_run(torch, False)
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for a, b, c in zip(got_h, eager_h, want_h):
        for x, y, z in zip(a, b, c):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(x, z, rtol=1e-4, atol=1e-6)
    info = f.cache_info()
    assert info.traces <= 2 and info.hits >= 2, info


def test_train_called_inside_the_compiled_step_is_replayed():
    # A GNN tutorial's @torch.compile train_step(): model.train() inside,
    # model.eval() outside for validation: no side effect to refuse, the
    # flag set by every compiled call, batch norm per the mode.
    import copy
    import warnings
    tracec.manual_seed(0)
    m = tracec.nn.Sequential(tracec.nn.Linear(3, 4), tracec.nn.BatchNorm1d(4))
    twin = copy.deepcopy(m)
    x = tracec.randn(8, 3)

    def step(model):
        return lambda x: (model.train(), model(x).sum())[1]

    f = tracec.compile(step(m), backend="interp", fullgraph=True)
    eager = step(twin)
    with warnings.catch_warnings(), tracec.no_grad():
        warnings.simplefilter("error")
        for i in range(4):
            for model in (m, twin):
                model.eval()
            assert m(x).sum().item() == pytest.approx(twin(x).sum().item(), rel=1e-5)
            assert f(x).item() == pytest.approx(eager(x).item(), rel=1e-5, abs=1e-5)
            assert m.training and m[1].training
            np.testing.assert_allclose(m[1].running_mean.numpy(), twin[1].running_mean.numpy(),
                                       rtol=1e-5)
    assert f.cache_info().traces <= 2
    m.eval()      # a compiled eval-mode call is its own trace (the flag is still guarded)
    g = tracec.compile(lambda x: m(x).sum(), backend="interp", fullgraph=True)
    with tracec.no_grad():
        assert g(x).item() == pytest.approx(m(x).sum().item(), rel=1e-6)
        m.train()
        want = copy.deepcopy(m)(x).sum().item()
        assert g(x).item() == pytest.approx(want, rel=1e-5, abs=1e-5)
