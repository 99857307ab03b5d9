"""Gaps the public programs of ``tests/programs/models7`` found, each
against torch: ``torch.jit._overload_method`` (torchvision's _DenseLayer),
``torch.utils.checkpoint`` repeating the checkpointed function's side
effects where PyTorch's recomputation does (BatchNorm running statistics
and ``num_batches_tracked`` in DenseNet's memory-efficient layers, eager
and compiled) and its reentrant variant's no-grad forward,
``torch._assert`` (torchvision's Matcher), ``autocast(enabled=False)``
nested in an enabled region, ``torch.amp.custom_fwd`` / ``custom_bwd``,
and half-precision linear / convolution with a bias rounding once (the
AMP recipe's bfloat16 training)."""
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp

import tracec
import tracec.utils.checkpoint as ccp


def test_jit_overload_method_checks_the_body_and_returns_the_function():
    for lib in (tracec, torch):
        class M(lib.nn.Module):
            @lib.jit._overload_method  # noqa: F811
            def forward(self, x: int) -> int:
                pass

            @lib.jit._overload_method  # noqa: F811
            def forward(self, x: float) -> float:  # noqa: F811
                ...

            def forward(self, x):  # noqa: F811
                return x * 2
        assert M()(lib.ones(2)).tolist() == [2.0, 2.0]

        def bad(x):
            return x
        with pytest.raises(RuntimeError, match="Only `pass` statement or `...` can be the body"):
            lib.jit._overload(bad)


def _bn_block(lib, a):
    torch.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                          lib.nn.Linear(4, 2))
    with lib.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(lib.tensor(np.cos(np.arange(p.numel()) + i).reshape(tuple(p.shape)).astype(np.float32)))
    return m, lib.tensor(a, requires_grad=True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_repeats_batchnorm_updates_like_torch_recomputation(reentrant):
    a = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    got = []
    for lib, cp in ((tracec, ccp), (torch, tcp)):
        m, x = _bn_block(lib, a)
        y = cp.checkpoint(m, x, use_reentrant=reentrant)
        bn = m[1]
        assert bn.num_batches_tracked.item() == 1      # the forward, once
        (y ** 2).sum().backward()
        got.append((bn.num_batches_tracked.item(), bn.running_mean.numpy().copy(),
                    bn.running_var.numpy().copy(), x.grad.numpy().copy(),
                    m[0].weight.grad.numpy().copy()))
    (n1, *r1), (n2, *r2) = got
    assert n1 == n2 == 2
    for u, v in zip(r1, r2):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_checkpoint_replay_keeps_the_rng_and_runs_without_grad_mode():
    m = tracec.nn.Sequential(tracec.nn.Linear(3, 3), tracec.nn.Dropout(0.5), tracec.nn.BatchNorm1d(3))
    x = tracec.ones(4, 3, requires_grad=True)
    tracec.manual_seed(3)
    y = ccp.checkpoint(m, x, use_reentrant=False)
    state = tracec.get_rng_state()
    y.sum().backward()
    assert tracec.equal(tracec.get_rng_state(), state)   # the replay's draws are not the caller's
    assert m[2].num_batches_tracked.item() == 2
    with tracec.no_grad():                                # no grad: a plain call, no replay
        ccp.checkpoint(m, x, use_reentrant=False)
    assert m[2].num_batches_tracked.item() == 3


def test_checkpoint_reentrant_without_inputs_requiring_grad_gives_no_param_grads():
    for lib, cp in ((tracec, ccp), (torch, tcp)):
        lin = lib.nn.Linear(3, 2)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            y = cp.checkpoint(lin, lib.ones(2, 3), use_reentrant=True)
        assert not y.requires_grad
        y2 = cp.checkpoint(lin, lib.ones(2, 3), use_reentrant=False)
        assert y2.requires_grad


def test_compiled_checkpoint_step_matches_eager_side_effects():
    a = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    m, x = _bn_block(tracec, a)
    opt = tracec.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (ccp.checkpoint(m, x, use_reentrant=False) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    state = {k: v.clone() for k, v in m.state_dict().items()}
    eager = [step(x).item() for _ in range(2)]
    after = {k: v.clone() for k, v in m.state_dict().items()}
    m.load_state_dict(state)
    cstep = tracec.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # compiled, not run eagerly
        compiled = [cstep(x).item() for _ in range(2)]
    np.testing.assert_allclose(compiled, eager, rtol=1e-5)
    assert m[1].num_batches_tracked.item() == after["1.num_batches_tracked"].item() == 4
    for k in after:
        np.testing.assert_allclose(m.state_dict()[k].numpy(), after[k].numpy(), rtol=1e-5, atol=1e-6)


def test_torch_assert():
    for lib in (tracec, torch):
        lib._assert(True, "fine")
        with pytest.raises(AssertionError, match="low_threshold should be <= high_threshold"):
            lib._assert(0.5 <= 0.4, "low_threshold should be <= high_threshold")


def test_autocast_disabled_inside_an_enabled_region():
    a = np.ones((2, 3), np.float32)
    for lib in (tracec, torch):
        x = lib.tensor(a)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            assert (x @ x.t()).dtype == lib.bfloat16
            with lib.autocast("cpu", enabled=False):
                assert (x @ x.t()).dtype == lib.float32
                assert not lib.is_autocast_enabled("cpu")
                with lib.autocast("cpu", dtype=lib.float16):
                    assert (x @ x.t()).dtype == lib.float16
                assert (x @ x.t()).dtype == lib.float32
            with lib.autocast("cuda", enabled=False):   # another device's: CPU stays on
                assert (x @ x.t()).dtype == lib.bfloat16
            assert lib.is_autocast_enabled("cpu") and (x @ x.t()).dtype == lib.bfloat16
        assert not lib.is_autocast_enabled("cpu")


def _mm_fn(lib, cast, seen):
    class MyMM(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu", cast_inputs=cast)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            seen.append((str(a.dtype).split(".")[1], lib.is_autocast_enabled("cpu")))
            return a.mm(b)

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            seen.append((str(grad.mm(b.t()).dtype).split(".")[1], lib.is_autocast_enabled("cpu")))
            return grad.mm(b.t()), a.t().mm(grad)
    return MyMM


@pytest.mark.parametrize("cast", ["float32", None])
def test_amp_custom_fwd_and_custom_bwd(cast):
    a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    res = []
    for lib in (tracec, torch):
        seen = []
        fn = _mm_fn(lib, getattr(lib, cast) if cast else None, seen)
        x = lib.tensor(a, requires_grad=True)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = fn.apply(x, lib.tensor(a.T.copy()))
        y.float().sum().backward()
        res.append((str(y.dtype).split(".")[1], seen, str(x.grad.dtype).split(".")[1],
                    x.grad.float().numpy().tolist()))
    assert res[0] == res[1]
    for lib in (tracec, torch):
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
            lib.amp.custom_fwd(device_type=None)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_linear_and_conv_with_bias_round_once_like_torch(dtype):
    r = np.random.default_rng(0)
    x = r.standard_normal((5, 16)).astype(np.float32)
    w = r.standard_normal((7, 16)).astype(np.float32)
    b = r.standard_normal(7).astype(np.float32)
    xi = r.standard_normal((2, 3, 7, 7)).astype(np.float32)
    wc = r.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = {}
    for lib in (tracec, torch):
        d = getattr(lib, dtype)
        X = lib.tensor(x).to(d).requires_grad_()
        y = lib.nn.functional.linear(X, lib.tensor(w).to(d), lib.tensor(b).to(d))
        y.float().pow(2).sum().backward()
        with lib.autocast("cpu", dtype=d):
            ya = lib.nn.functional.linear(lib.tensor(x), lib.tensor(w), lib.tensor(b))
        yc = lib.nn.functional.conv2d(lib.tensor(xi).to(d), lib.tensor(wc).to(d), lib.tensor(b[:4]).to(d),
                                      padding=1)
        out[lib] = [str(y.dtype), y.grad_fn.name(), str(ya.dtype)] + [
            t.detach().float().numpy() for t in (y, X.grad, ya, yc)]
    got, want = out[tracec], out[torch]
    assert [s.split(".")[1] if "." in s else s for s in got[:3]] == \
        [s.split(".")[1] if "." in s else s for s in want[:3]]
    for g, w_ in zip(got[3:6], want[3:6]):
        np.testing.assert_array_equal(g, w_)
    # torch's CPU conv sums in an order its kernel picks per CPU (one element
    # 1 ulp off on an AMD EPYC): the conv output to within one ulp
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
    np.testing.assert_allclose(got[6], want[6], rtol=ulp, atol=0)


def test_compiled_bf16_linear_matches_eager():
    r = np.random.default_rng(2)
    lin = tracec.nn.Linear(8, 5)
    x = tracec.tensor(r.standard_normal((4, 8)).astype(np.float32))

    def f(x):
        with tracec.autocast("cpu", dtype=tracec.bfloat16):
            return lin(x)
    e, c = f(x), tracec.compile(f)(x)
    assert e.dtype == c.dtype == tracec.bfloat16
    np.testing.assert_array_equal(e.detach().float().numpy(), c.detach().float().numpy())


def _shift_fn(lib):
    class Shift(lib.autograd.Function):
        @staticmethod
        def forward(ctx, input, dim=-1):
            m, _ = input.max(dim=dim, keepdim=True)
            input -= m                       # pytorch-tabnet's sparsemax shifts its input in place
            out = lib.clamp(input + 0.5, min=0)
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            gi = g.clone()
            gi[out == 0] = 0
            return gi, None
    return Shift


def test_function_forward_shifting_its_input_in_place_keeps_the_gradient_path():
    a = np.array([[1.0, 2.0, 0.5, 2.2], [0.1, 0.0, -0.3, 0.05]], np.float32)
    c = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    grads = {}
    for lib in (tracec, torch):
        fn = _shift_fn(lib)
        w = lib.nn.Parameter(lib.tensor(a))

        def f():
            loss = (fn.apply(w * 1.0, -1) * lib.tensor(c)).sum()
            loss.backward()
            return loss
        f()
        grads[lib] = [w.grad.numpy().copy()]
        if lib is tracec:
            for _ in range(2):           # compiled: the traced call, then a replay
                w.grad = None
                tracec.compile(f)()
                grads[lib].append(w.grad.numpy().copy())
    for g in grads[tracec]:
        np.testing.assert_array_equal(g, grads[torch][0])
