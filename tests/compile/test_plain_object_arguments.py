"""Plain objects passed to a compiled function (the Annotated Transformer's
``Batch(src, tgt)``, an ``argparse.Namespace``) are flattened like
dataclasses (``tracec.pytree``): a new object at every call, holding
tensors of the same shapes, reuses the trace instead of retracing every
call.  Objects that own modules or optimizers, objects past the size budget,
and classes whose instance a call changed stay keyed by identity."""
import argparse

import numpy as np
import pytest

import tracec
import tracec.nn.functional as F


class Batch:
    """The Annotated Transformer's batch object, reduced."""

    def __init__(self, src, tgt, pad=0):
        self.src = src
        self.tgt = tgt[:, :-1]
        self.tgt_y = tgt[:, 1:]
        self.ntokens = (self.tgt_y != pad).sum()


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [Batch(tracec.tensor(rng.integers(1, 7, (3, 5))), tracec.tensor(rng.integers(0, 7, (3, 6))))
            for _ in range(n)]


def _model():
    tracec.manual_seed(0)
    emb = tracec.nn.Embedding(7, 4)
    head = tracec.nn.Linear(4, 7)
    return emb, head, tracec.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.1)


def _step(emb, head, opt):
    def step(batch):
        opt.zero_grad()
        logits = head(emb(batch.src) + emb(batch.tgt).mean(1, keepdim=True))
        loss = F.cross_entropy(logits.reshape(-1, 7), batch.tgt_y.reshape(-1),
                               reduction="sum") / batch.ntokens
        loss.backward()
        opt.step()
        return loss
    return step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_new_batch_object_every_call_reuses_one_trace_and_equals_eager(backend):
    eager = _step(*_model())
    emb, head, opt = _model()
    comp = tracec.compile(_step(emb, head, opt), backend=backend)
    for b in _batches(6):
        want, got = eager(b), comp(b)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    info = comp.cache_info()
    assert info.traces == 1 and info.hits == 5, info.reasons
    eager_w = _model()
    for b in _batches(6):
        _step(*eager_w)(b)
    np.testing.assert_allclose(head.weight.detach().numpy(),
                               eager_w[1].weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_namespace_and_nested_plain_objects_are_flattened():
    class Inner:
        def __init__(self, x):
            self.x, self.scale = x, 2.0

    @tracec.compile
    def f(ns):
        return (ns.inner.x * ns.inner.scale + ns.bias).sum()

    for i in range(4):
        ns = argparse.Namespace(inner=Inner(tracec.full((3,), float(i))), bias=tracec.ones(3))
        assert f(ns).item() == pytest.approx(3 * (2 * i + 1))
    assert f.cache_info().traces == 1
    # A changed Python number inside is a new key, as in a dataclass.
    ns = argparse.Namespace(inner=Inner(tracec.ones(3)), bias=tracec.ones(3))
    ns.inner.scale = 5.0
    assert f(ns).item() == pytest.approx(18.0)
    assert f.cache_info().traces == 2


def test_a_tensor_of_a_plain_object_written_in_place_is_written_back():
    class Acc:
        def __init__(self):
            self.total = tracec.zeros(3)

    @tracec.compile
    def f(acc, x):
        acc.total.add_(x)
        return acc.total.sum()

    acc = Acc()
    for i in range(4):
        f(acc, tracec.full((3,), float(i)))
    np.testing.assert_allclose(acc.total.numpy(), [6.0, 6.0, 6.0])
    other = Acc()
    f(other, tracec.ones(3))
    np.testing.assert_allclose(other.total.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(acc.total.numpy(), [6.0, 6.0, 6.0])


def test_an_agent_owning_a_module_stays_keyed_by_identity():
    class Agent:
        def __init__(self):
            self.net = tracec.nn.Linear(3, 2)
            self.epsilon = 1.0

    agent = Agent()

    @tracec.compile
    def act(agent, x):
        return agent.net(x).sum() * agent.epsilon

    x = tracec.ones(3)
    for i in range(6):
        agent.epsilon = 0.9 ** i
        want = agent.net(x).sum().item() * agent.epsilon
        assert act(agent, x).item() == pytest.approx(want, rel=1e-5)
    # Identity keys it, and guards see its changed number (numbers nested
    # in arguments are not lifted: each value is its own trace).
    reasons = act.cache_info().reasons
    assert all("guarded Python state changed" in r for r in reasons[1:]), reasons
    from tracec import pytree
    assert pytree.flatten_args((agent, x), {})[0][0][0][0] == "O"


def test_a_large_plain_object_is_keyed_by_identity():
    class Buffer:
        def __init__(self):
            self.items = [tracec.ones(2) for _ in range(100)]

    @tracec.compile
    def f(buf):
        return buf.items[0].sum()

    f(Buffer())
    f(Buffer())
    info = f.cache_info()
    assert info.traces == 2 and "keyed by identity" in info.reasons[1]


def test_a_call_changing_its_plain_object_runs_eagerly_and_keys_the_class_by_identity():
    class Lazy:
        def __init__(self, x):
            self.x = x

    @tracec.compile
    def f(obj):
        obj.double = obj.x * 2      # a Python side effect on the argument
        return obj.double.sum()

    a = Lazy(tracec.ones(3))
    assert f(a).item() == 6.0 and a.double.sum().item() == 6.0
    from tracec import pytree
    assert Lazy in pytree.KEYED_BY_IDENTITY
    assert f.cache_info().compiles == 0
