"""The mutation epoch (tracec.mutation): compiled calls skip the module and
per-parameter optimizer guards while nothing they read changed.  Every way
of changing what those guards read must still retrace: each test changes
one thing between compiled calls and compares them with eager calls of an
identical twin (model, optimizer), step by step."""
import copy
import pickle

import numpy as np
import pytest

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tracec.mutation import EPOCH, WatchedDict, WatchedList, WatchedState


class Scale(nn.Module):
    """Multiplies by ``self.scale`` (1 when unset) and ``self.cfg[0]`` items."""

    def forward(self, x):
        s = getattr(self, "scale", 1.0)
        for c in getattr(self, "cfg", ((),))[0]:
            s = s * c
        return x * s


def twins(opt_cls=tracec.optim.SGD, **opt_kw):
    """Two identical (model, optimizer, step) triples: one run eagerly, one
    compiled."""
    out = []
    for _ in range(2):
        tracec.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4), Scale(), nn.Linear(4, 2))
        opt = opt_cls(model.parameters(), lr=0.1, **opt_kw)

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        out.append((model, opt, step))
    return out


def run(pairs, changes):
    """Call both twins; before call k apply ``changes.get(k)`` to each."""
    (m_e, o_e, eager), (m_c, o_c, step) = pairs
    comp = tracec.compile(step, backend="interp")
    x, y = tracec.ones(5, 3), tracec.zeros(5, 2)
    for k in range(7):
        if k in changes:
            changes[k](m_e, o_e)
            changes[k](m_c, o_c)
        want, got = eager(x, y), comp(x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        for a, b in zip(m_e.parameters(), m_c.parameters()):
            np.testing.assert_allclose(b.tolist(), a.tolist(), rtol=1e-6, atol=1e-7)
    return comp


def _entry(comp):
    return comp._last


def test_steady_state_skips_covered_guards_and_rechecks_after_a_change():
    pairs = twins(momentum=0.9)
    comp = run(pairs, {})
    e = _entry(comp)
    assert e._valid_epoch == EPOCH[0]
    model = pairs[1][0]
    model.training = model.training          # any change of watched state
    assert e._valid_epoch != EPOCH[0]


def _new_weight(m, o):
    m[0].weight = nn.Parameter(tracec.ones(4, 3) * 0.1)


def _table_write(m, o):
    m[2]._parameters["bias"] = nn.Parameter(tracec.ones(2))


def _set_scale(m, o):
    m[1].scale = 2.0


def _reset_scale(m, o):
    m[1].scale = 3.0


@pytest.mark.parametrize("change", [_new_weight, _table_write])
def test_replaced_parameters_retrace(change):
    # The optimizer keeps the old parameters (as in PyTorch): the twins still agree.
    comp = run(twins(), {3: change})
    assert comp.cache_info().traces >= 3, comp.cache_info().reasons


def test_module_attribute_set_and_deleted_retraces():
    comp = run(twins(), {2: _set_scale, 3: _reset_scale, 4: lambda m, o: delattr(m[1], "scale")})
    # scale unset, 2, 3, unset again (the first trace serves it)
    assert comp.cache_info().traces == 3, comp.cache_info().reasons


def test_tuple_attribute_holding_a_list_is_checked_every_call():
    cfgs = {}

    def setup(m, o):
        m[1].cfg = (cfgs.setdefault(id(m), []),)

    (m_e, o_e, _), (m_c, o_c, _) = pairs = twins()
    setup(m_e, o_e)
    setup(m_c, o_c)
    comp = run(pairs, {3: lambda m, o: cfgs[id(m)].append(2.0)})
    e = _entry(comp)
    # the module's guard reads a mutable value: checked at every call
    assert any(getattr(s, "__self__", None) is m_c[1] for s, _ in e._unwatched_guards())
    assert comp.cache_info().traces == 2, comp.cache_info().reasons


def test_optimizer_state_replaced_in_place_retraces():
    def swap(m, o):
        p = o.param_groups[0]["params"][0]
        o.state[p]["momentum_buffer"] = o.state[p]["momentum_buffer"].clone()
    comp = run(twins(momentum=0.9), {3: swap})
    assert comp.cache_info().traces == 2, comp.cache_info().reasons


def test_parameter_added_to_a_group_retraces():
    extra = {}

    def add(m, o):
        p = extra.setdefault(id(o), nn.Parameter(tracec.ones(2)))
        o.param_groups[0]["params"].append(p)
    comp = run(twins(momentum=0.9), {3: add})
    assert comp.cache_info().traces == 2, comp.cache_info().reasons


def test_load_state_dict_retraces_and_state_stays_watched():
    saved = {}

    def save(m, o):
        saved[id(o)] = copy.deepcopy(o.state_dict())

    def load(m, o):
        o.load_state_dict(saved[id(o)])
    pairs = twins(tracec.optim.Adam)
    comp = run(pairs, {2: save, 4: load})
    o = pairs[1][1]
    assert type(o.state) is WatchedState
    assert all(type(v) is WatchedDict for v in o.state.values())
    assert all(type(g["params"]) is WatchedList for g in o.param_groups)
    assert _entry(comp)._valid_epoch == EPOCH[0]
    # the first call (Adam's zero state made before it), then the loaded state
    assert comp.cache_info().traces == 2, comp.cache_info().reasons


def test_copies_of_modules_and_optimizers_stay_watched():
    (m, o, step), _ = twins(tracec.optim.Adam)
    step(tracec.ones(5, 3), tracec.zeros(5, 2))
    for m2, o2 in ((copy.deepcopy(m), copy.deepcopy(o)),
                   (pickle.loads(pickle.dumps(m)), pickle.loads(pickle.dumps(o)))):
        assert m2._guard_watched() and m2[0]._guard_watched()
        assert type(o2.state) is WatchedState and o2._guard_watched()


def test_watched_containers_advance_the_epoch_on_every_change():
    lst, d, st = WatchedList([1]), WatchedDict(a=1), WatchedState()
    changes = [lambda: lst.append(2), lambda: lst.extend([3]), lambda: lst.__setitem__(0, 5),
               lambda: lst.pop(), lambda: lst.insert(0, 1), lambda: lst.sort(),
               lambda: lst.reverse(), lambda: lst.remove(1), lambda: lst.clear(),
               lambda: d.__setitem__("b", 2), lambda: d.update(c=3), lambda: d.pop("a"),
               lambda: d.setdefault("e", 1), lambda: d.popitem(), lambda: d.clear(),
               lambda: st["p"], lambda: st["p"].__setitem__("k", 1),
               lambda: st.pop("p")]
    for change in changes:
        before = EPOCH[0]
        change()
        assert EPOCH[0] > before, change
