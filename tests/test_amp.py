"""``tracec.amp.GradScaler`` against ``torch.amp.GradScaler("cpu")``: the
same scale, growth tracker, skipped steps and parameters through a run with
an overflowing step, and PyTorch's errors for misuse."""
import warnings

import numpy as np
import pytest
import torch

import tracec


def _pair():
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = torch.nn.Linear(4, 3)
    c = tracec.nn.Linear(4, 3)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w))
        t.bias.zero_()
    c.load_state_dict({"weight": tracec.tensor(w), "bias": tracec.zeros(3)})
    return t, c


@pytest.mark.parametrize("unscale_first", [False, True])
def test_grad_scaler_matches_torch(unscale_first):
    t, c = _pair()
    kw = dict(init_scale=2.0 ** 10, growth_interval=2, growth_factor=4.0, backoff_factor=0.25)
    ts, cs = torch.amp.GradScaler("cpu", **kw), tracec.amp.GradScaler("cpu", **kw)
    topt = torch.optim.SGD(t.parameters(), lr=0.1)
    copt = tracec.optim.SGD(c.parameters(), lr=0.1)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    for step in range(6):
        scale_by = 1e38 if step == 2 else 1.0    # step 2 overflows: skipped, scale backs off
        for lib, m, s, opt in ((torch, t, ts, topt), (tracec, c, cs, copt)):
            opt.zero_grad()
            loss = (m(lib.tensor(x)) ** 2).mean() * scale_by
            s.scale(loss).backward()
            if unscale_first:
                s.unscale_(opt)
                lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            s.step(opt)
            s.update()
        assert cs.get_scale() == ts.get_scale()
        assert cs.state_dict() == ts.state_dict()
        np.testing.assert_allclose(c.weight.detach().numpy(), t.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_grad_scaler_scale_nested_and_state_dict():
    cs = tracec.amp.GradScaler("cpu", init_scale=8.0)
    a, (b, d) = cs.scale([tracec.ones(2), (tracec.ones(1), tracec.ones(3))])
    assert a.tolist() == [8.0, 8.0] and d.tolist() == [8.0] * 3
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        cs.scale([1.0])
    other = tracec.amp.GradScaler("cpu")
    other.load_state_dict(cs.state_dict())
    assert other.get_scale() == 8.0 and other.state_dict() == cs.state_dict()
    cs.update(new_scale=2.0)
    assert cs.get_scale() == 2.0
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        other.load_state_dict(tracec.amp.GradScaler("cpu", enabled=False).state_dict())


def test_grad_scaler_misuse_raises_like_torch():
    _, c = _pair()
    opt = tracec.optim.SGD(c.parameters(), lr=0.1)
    s = tracec.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted step but _scale is None"):
        s.step(opt)
    s.scale(c(tracec.ones(1, 4)).sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step"):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        s.step(opt, closure=lambda: None)
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0."):
        tracec.amp.GradScaler("cpu", growth_factor=1.0)


def test_disabled_and_cuda_without_gpu_are_pass_through():
    _, c = _pair()
    opt = tracec.optim.SGD(c.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        s = tracec.amp.GradScaler()   # device="cuda", as nanoGPT's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = tracec.amp.GradScaler("cuda", enabled=False)
    for scaler in (s, off):
        loss = c(tracec.ones(1, 4)).sum()
        assert scaler.scale(loss) is loss and not scaler.is_enabled()
        before = c.bias.detach().clone()
        loss.backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        np.testing.assert_allclose(c.bias.detach().numpy(), before.numpy() - 0.1)
        opt.zero_grad()
        assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}
