"""Gaps the models23 programs (tests/programs/models23) found in tracec."""
import warnings

import numpy as np
import pytest

import tracec as torch
from tracec import nn

pt = pytest.importorskip("torch")


def test_randint_and_arange_by_keyword_default_low_and_start_to_zero():
    # TransE-PyTorch: torch.randint(high=2, size=heads.size()) and
    # torch.arange(end=entities_count)
    h = torch.randint(high=3, size=torch.Size([50]))
    assert h.dtype == torch.int64 and tuple(h.shape) == (50,)
    assert 0 <= int(h.min()) and int(h.max()) <= 2
    r = torch.randint(low=5, high=7, size=(20,))
    assert 5 <= int(r.min()) and int(r.max()) <= 6
    np.testing.assert_array_equal(torch.arange(end=5).numpy(), pt.arange(end=5).numpy())
    assert torch.arange(end=5).dtype == torch.int64
    np.testing.assert_array_equal(torch.arange(start=2, end=7, step=2).numpy(),
                                  pt.arange(start=2, end=7, step=2).numpy())
    np.testing.assert_allclose(torch.arange(end=2.5).numpy(), pt.arange(end=2.5).numpy())


class _Score(nn.Module):
    def __init__(self, mod):
        super().__init__()
        self.gamma = mod.nn.Parameter(mod.Tensor([6.0]), requires_grad=False)
        self.w = mod.nn.Parameter(mod.from_numpy(np.linspace(-1, 1, 6, dtype=np.float32)))

    def forward(self, x):
        return (self.gamma.item() - (x * self.w).abs().sum()) ** 2


def test_compiled_item_of_a_frozen_one_element_float_parameter_is_guarded_not_refused():
    # KnowledgeGraphEmbedding: score = self.gamma.item() - norm(...), with
    # gamma = nn.Parameter(torch.Tensor([gamma]), requires_grad=False)
    x = np.arange(6, dtype=np.float32) / 3
    m = _Score(torch)
    ref_m = pt.nn.Module()
    ref_m.gamma = pt.nn.Parameter(pt.Tensor([6.0]), requires_grad=False)
    ref_m.w = pt.nn.Parameter(pt.from_numpy(np.linspace(-1, 1, 6, dtype=np.float32)))
    opt, ref_opt = torch.optim.SGD([m.w], lr=0.01), pt.optim.SGD([ref_m.w], lr=0.01)

    def step(inp):
        opt.zero_grad()
        loss = m(inp)
        loss.backward()
        opt.step()
        return loss

    f = torch.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            if i == 2:      # a new gamma: the guard sees it and the call retraces
                m.gamma.data.fill_(4.0)
                ref_m.gamma.data.fill_(4.0)
            got = f(torch.from_numpy(x)).item()
            ref_opt.zero_grad()
            want = (ref_m.gamma.item() - (pt.from_numpy(x) * ref_m.w).abs().sum()) ** 2
            want.backward()
            ref_opt.step()
            np.testing.assert_allclose(got, want.item(), rtol=1e-5)
            np.testing.assert_allclose(m.w.detach().numpy(), ref_m.w.detach().numpy(), rtol=1e-5)
    assert f.traces == 2


@pytest.mark.parametrize("kind", ["trained parameter", "buffer"])
def test_compiled_item_of_a_float_that_takes_gradients_or_a_buffer_is_still_refused(kind):
    # (a buffer, e.g. a running value, would change at nearly every call)
    w = torch.nn.Parameter(torch.tensor([1.5])) if kind == "trained parameter" \
        else torch.tensor([1.5])

    def step(x):
        return x * w.item()

    f = torch.compile(step, fallback="eager")
    with pytest.warns(UserWarning, match="item\\(\\) on a traced tensor"):
        out = f(torch.ones(2))
    np.testing.assert_allclose(out.numpy(), [1.5, 1.5])


def test_margin_ranking_loss_dimension_error_names_sizes_as_torch_does():
    # TransE-PyTorch passes a target of shape [1] against [B] distances (same
    # ndim, broadcast); a target of another ndim is refused with torch's words
    args = (np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.ones(2, np.float32))
    msgs = []
    for mod in (torch, pt):
        with pytest.raises(RuntimeError) as e:
            mod.nn.functional.margin_ranking_loss(*(mod.from_numpy(a) for a in args))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    a = np.array([3.0, 1.0, 2.0], np.float32)
    b = np.array([1.0, 2.0, 2.5], np.float32)
    got = torch.nn.MarginRankingLoss(margin=1.0, reduction='none')(
        torch.from_numpy(a), torch.from_numpy(b), torch.tensor([-1]))
    want = pt.nn.MarginRankingLoss(margin=1.0, reduction='none')(
        pt.from_numpy(a), pt.from_numpy(b), pt.tensor([-1]))
    np.testing.assert_allclose(got.numpy(), want.numpy())


@pytest.mark.parametrize("args,kwargs", [
    ((10, (3,)), {}), ((2, 5, (3,)), {}), ((5,), {"size": (3,)}), ((2, 5), {"size": (3,)}),
    ((), {"high": 4, "size": (3,)}), ((), {"low": 2, "high": 4, "size": (3,)}),
    ((2,), {"high": 4, "size": (3,)}), ((), {"low": 2, "size": (3,)}),
    ((5,), {"low": 2, "size": (3,)}), ((3, 3, (2,)), {}), ((5, 3, (2,)), {})])
def test_randint_overloads_read_the_bounds_as_torch_does(args, kwargs):
    # low= alone is not the high (torch refuses it; tracec used to draw from
    # [0, low)), and an empty range is refused in torch's words
    def outcome(mod):
        try:
            t = mod.randint(*args, **kwargs)
        except (TypeError, RuntimeError) as e:
            msg = str(e)
            return type(e).__name__, msg if "random_" in msg or "missing" in msg else None
        lo = kwargs.get("low", args[0] if len(args) == 3 or (len(args) == 2 and "size" in kwargs)
                        or (args and "high" in kwargs) else 0)
        hi = kwargs.get("high", args[1] if len(args) >= 2 and not isinstance(args[1], tuple)
                        else (args[0] if args else None))
        v = t.numpy()
        return "ok", tuple(t.shape), str(t.dtype).split(".")[-1], bool(((v >= lo) & (v < hi)).all())
    assert outcome(torch) == outcome(pt)


@pytest.mark.parametrize("args,kwargs", [
    ((5,), {}), ((1, 5), {}), ((), {"end": 5}), ((1,), {"end": 5}), ((), {"start": 1, "end": 5}),
    ((), {"start": 3}), ((), {"start": 1, "end": 7, "step": 3}), ((0.0, 1.0, 0.25), {})])
def test_arange_overloads_read_the_bounds_as_torch_does(args, kwargs):
    # start= alone is not the end: torch refuses it (tracec used to return
    # arange(start)); end= alone starts at 0 (TransE-PyTorch's entity ids)
    def outcome(mod):
        try:
            t = mod.arange(*args, **kwargs)
        except TypeError as e:
            return str(e)
        return t.tolist(), str(t.dtype).split(".")[-1]
    assert outcome(torch) == outcome(pt)


@pytest.mark.parametrize("key", [0, np.int64(0), slice(0, 1), (0, 0), [0], None, Ellipsis])
def test_indexing_a_0d_tensor_is_refused_in_torchs_words(key):
    # graphsage-simple's original `print batch, loss.data[0]`: modern torch
    # refuses the int index and says to use .item()
    def outcome(mod, set_=False):
        t = mod.tensor(1.5)
        try:
            if set_:
                t[key] = 2.0
                return "ok", t.tolist()
            return "ok", t[key].tolist()
        except IndexError as e:
            return str(e)
    assert outcome(torch) == outcome(pt)
    assert outcome(torch, True) == outcome(pt, True)


@pytest.mark.parametrize("make", [
    lambda m: m.LongTensor(np.array(5)), lambda m: m.Tensor(np.array(3)),
    lambda m: m.ones(2).new(np.array(4)), lambda m: m.FloatTensor(np.array(2.5)),
    lambda m: m.Tensor(3.0), lambda m: m.FloatTensor(np.float64(2.0)), lambda m: m.Tensor(True),
    lambda m: m.ones(2).new(3.0), lambda m: m.LongTensor(np.int64(3))])
def test_legacy_constructors_read_a_lone_number_as_torch_does(make):
    # a 0-d integer ndarray is a size (its __index__), as an int is; a lone
    # float or bool is neither a size nor data
    def outcome(mod):
        try:
            t = make(mod)
        except TypeError as e:
            return str(e)
        return tuple(t.shape), str(t.dtype).split(".")[-1]
    assert outcome(torch) == outcome(pt)
