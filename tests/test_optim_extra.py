"""Adamax, NAdam, RAdam, ASGD, Rprop and SparseAdam against torch.optim:
signatures, trajectories (float32 and float64), state (keys, dtypes,
values), state-dict round trips, and a compiled step equal to eager."""
import inspect

import numpy as np
import pytest
import torch

import tracec
import tracec.optim as toptim
from test_optim import (_case_id, assert_traj_close, run_tc, run_th, tc_loss, tc_params,
                        th_params)

NAMES = ["Adamax", "NAdam", "RAdam", "ASGD", "Rprop", "SparseAdam"]


def _signature(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", NAMES)
def test_constructor_signature_and_defaults_match_torch(name):
    assert _signature(getattr(toptim, name).__init__) == \
        _signature(getattr(torch.optim, name).__init__)
    g = getattr(toptim, name)(tc_params()).param_groups[0]
    tg = getattr(torch.optim, name)(th_params()).param_groups[0]
    assert {k: v for k, v in g.items() if k != "params"} == \
        {k: v for k, v in tg.items() if k != "params"}


CASES = [
    ("Adamax", dict()), ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.05, betas=(0.3, 0.9), eps=1e-4)),
    ("NAdam", dict()), ("NAdam", dict(lr=0.01, momentum_decay=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()), ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, decoupled_weight_decay=True)),
    ("ASGD", dict()), ("ASGD", dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
    ("Rprop", dict()), ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.02))),
    ("Rprop", dict(lr=0.01, maximize=True)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{_case_id(kw)}" for n, kw in CASES])
def test_trajectory_and_state_match_torch(name, kw, dtype):
    a, opt, ps = run_tc(lambda ps: getattr(toptim, name)(ps, **kw), dtype=dtype)
    b, topt, tps = run_th(lambda ps: getattr(torch.optim, name)(ps, **kw), dtype=dtype)
    assert_traj_close(a, b, dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for p, tp in zip(ps, tps):
        st, tst = opt.state[p], topt.state[tp]
        assert list(st) == list(tst)
        for k in st:
            assert str(st[k].dtype).split(".")[-1] == str(tst[k].dtype).split(".")[-1], k
            np.testing.assert_allclose(st[k].numpy(), tst[k].numpy(), rtol=rtol, atol=rtol / 10)


@pytest.mark.parametrize("name", ["NAdam", "ASGD", "Rprop"])
def test_state_dict_round_trip_continues_like_torch(name):
    kw = dict(t0=2) if name == "ASGD" else {}
    ps = tc_params()
    opt = getattr(toptim, name)(ps, lr=0.01, **kw)
    for _ in range(3):
        opt.zero_grad()
        tc_loss(ps).backward()
        opt.step()
    sd = opt.state_dict()
    tps = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in ps]
    topt = getattr(torch.optim, name)(tps, lr=0.01, **kw)
    topt.load_state_dict({"state": {k: {n: torch.tensor(v.numpy()) for n, v in s.items()}
                                    for k, s in sd["state"].items()},
                          "param_groups": sd["param_groups"]})
    ps2 = [tracec.tensor(p.detach().numpy(), requires_grad=True) for p in ps]
    opt2 = getattr(toptim, name)(ps2, lr=0.01, **kw)
    opt2.load_state_dict(sd)
    from test_optim import th_loss
    for _ in range(3):
        opt2.zero_grad()
        tc_loss(ps2).backward()
        opt2.step()
        topt.zero_grad()
        th_loss(tps).backward()
        topt.step()
    for p, tp in zip(ps2, tps):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


def test_sparse_adam_refuses_dense_gradients_like_torch():
    for lib, ps in ((toptim, tc_params()), (torch.optim, th_params())):
        opt = lib.SparseAdam(ps)
        (ps[0] * 2).sum().backward()
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            opt.step()
    with pytest.raises(ValueError, match="Invalid learning rate"):
        toptim.SparseAdam(tc_params(), lr=0.0)


def _sparse_model(lib, kind, **kw):
    rng = np.random.default_rng(3)
    if kind == "Embedding":
        m = lib.nn.Embedding(7, 3, sparse=True, **kw)
    else:
        m = lib.nn.EmbeddingBag(7, 3, mode="sum", sparse=True, **kw)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(rng.standard_normal((7, 3)).astype(np.float32)))
    return m


# batches of looked-up rows: rows 5 and 6 are never looked up, row 0 only at first
SPARSE_BATCHES = [[[0, 2, 2], [1, 4, 0]], [[1, 2, 3], [3, 4, 1]], [[4, 4, 4], [2, 1, 3]]]


def _sparse_run(lib, kind, step, opt_kw, emb_kw, batches):
    m = _sparse_model(lib, kind, **emb_kw)
    opt = lib.optim.SparseAdam(m.parameters(), **opt_kw)
    w = lib.tensor(np.linspace(-1, 1, 6 if kind == "Embedding" else 6).astype(np.float32))

    def train_step(idx):
        opt.zero_grad()
        out = m(idx)
        loss = (out.flatten()[:6] * w).sum() + (out ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    f = step(train_step) if step is not None else train_step
    losses = [f(lib.tensor(b)).item() for b in batches]
    return losses, m.weight.detach().numpy().copy(), opt


@pytest.mark.parametrize("kind", ["Embedding", "EmbeddingBag"])
@pytest.mark.parametrize("opt_kw,emb_kw", [
    (dict(), dict()), (dict(lr=0.05, betas=(0.5, 0.9), maximize=True), dict()),
    (dict(lr=0.1, eps=1e-3), dict(padding_idx=2))], ids=["defaults", "maximize", "padding_idx"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_sparse_adam_on_sparse_embeddings_matches_torch(kind, opt_kw, emb_kw, compiled):
    """SparseAdam updates only the rows the sparse gradient holds (rows never
    looked up keep their moments and values), with PyTorch's bias
    corrections; compiled (one trace: the step counter is a tensor) as eager."""
    batches = SPARSE_BATCHES * 2
    want, w_want, topt = _sparse_run(torch, kind, None, opt_kw, emb_kw, batches)
    got, w_got, opt = _sparse_run(tracec, kind, tracec.compile if compiled else None, opt_kw,
                                  emb_kw, batches)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_got, w_want, rtol=1e-5, atol=1e-6)
    st, tst = opt.state_dict()["state"][0], topt.state_dict()["state"][0]
    assert float(st["step"]) == tst["step"] == len(batches)
    for k in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_allclose(st[k].numpy(), tst[k].numpy(), rtol=1e-5, atol=1e-7)
    # the rows never looked up: untouched
    np.testing.assert_array_equal(w_got[5:], _sparse_model(tracec, kind, **emb_kw).weight.detach().numpy()[5:])


def test_sparse_adam_functional_embedding_and_dense_refusal():
    w = tracec.nn.Parameter(tracec.ones(4, 2))
    lin = tracec.nn.Parameter(tracec.ones(2))
    opt = toptim.SparseAdam([w], lr=0.1)
    (tracec.nn.functional.embedding(tracec.tensor([1, 3]), w, sparse=True) ** 2).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy()[:, 0], [1, 0.9, 1, 0.9], rtol=1e-6)
    dense = toptim.SparseAdam([lin])
    (tracec.nn.functional.embedding(tracec.tensor([1]), tracec.ones(4, 2)) * lin).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        dense.step()


@pytest.mark.parametrize("name,kw", [("RAdam", dict(lr=0.01)), ("NAdam", dict(lr=0.01)),
                                     ("ASGD", dict(lr=0.05, t0=2)), ("Rprop", dict(lr=0.01))])
def test_compiled_step_equals_eager(name, kw):
    """One trace serves every step (the step-dependent schedules are tensor
    ops on the step counter), and the compiled trajectory is eager's."""
    eager, _, _ = run_tc(lambda ps: getattr(toptim, name)(ps, **kw), steps=8)
    ps = tc_params()
    opt = getattr(toptim, name)(ps, **kw)

    @tracec.compile
    def step():
        opt.zero_grad()
        loss = tc_loss(ps)
        loss.backward()
        opt.step()
        return loss

    traj = []
    for _ in range(8):
        step()
        traj.append([p.detach().numpy().copy() for p in ps])
    for a, b in zip(traj, eager):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6)


def _lars(lib):
    # facebookresearch/mae's util/lars.py: a subclass with its own step that
    # makes its state on the first step and reads lr from the group
    class LARS(lib.optim.Optimizer):
        def __init__(self, params, lr=0, weight_decay=0, momentum=0.9, trust_coefficient=0.001):
            defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                            trust_coefficient=trust_coefficient)
            super().__init__(params, defaults)

        @lib.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g['params']:
                    dp = p.grad
                    if dp is None:
                        continue
                    if p.ndim > 1:
                        dp = dp.add(p, alpha=g['weight_decay'])
                        param_norm = lib.norm(p)
                        update_norm = lib.norm(dp)
                        one = lib.ones_like(param_norm)
                        q = lib.where(param_norm > 0.,
                                      lib.where(update_norm > 0,
                                                (g['trust_coefficient'] * param_norm / update_norm), one),
                                      one)
                        dp = dp.mul(q)
                    param_state = self.state[p]
                    if 'mu' not in param_state:
                        param_state['mu'] = lib.zeros_like(p)
                    mu = param_state['mu']
                    mu.mul_(g['momentum']).add_(dp)
                    p.add_(mu, alpha=-g['lr'])
    return LARS


@pytest.mark.parametrize("compiled", [False, True])
def test_custom_optimizer_step_state_and_lr_under_compile(compiled):
    """A subclass's own step (no built-in guard): its first step's state
    creation and a learning rate changed between calls must not be replayed
    from the first trace (compiled calls used to keep re-creating zero
    momentum and the traced lr)."""
    r = np.random.default_rng(0)
    w0 = r.standard_normal((4, 3)).astype(np.float32)
    b0 = r.standard_normal(4).astype(np.float32)
    xs = [r.standard_normal((5, 3)).astype(np.float32) for _ in range(6)]

    def run(lib, wrap):
        w = lib.nn.Parameter(lib.tensor(w0))
        b = lib.nn.Parameter(lib.tensor(b0))
        opt = _lars(lib)([w, b], lr=0.5, trust_coefficient=0.1)

        def step(x):
            loss = ((x @ w.t() + b) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        fn = wrap(step) if wrap else step
        losses = []
        for i, x in enumerate(xs):
            if i == 4:
                opt.param_groups[0]["lr"] = 0.05
            losses.append(float(fn(lib.tensor(x))))
        return losses, w.detach().numpy().copy(), opt.state[b]["mu"].numpy().copy()

    want = run(torch, None)
    got = run(tracec, tracec.compile if compiled else None)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-6)
