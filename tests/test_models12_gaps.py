"""Gaps the models12 programs (StyleGAN2, RWKV) found, against torch:
``repeat`` / ``repeat_interleave`` along size-1 dimensions return new
contiguous tensors (StyleGAN2's ConstantInput ``view``s its repeat), and a
compiled step that flips parameters' ``requires_grad`` (a GAN's
``requires_grad(generator, True)``) is guarded on the flags it found and
leaves the flags it set, so it compiles once instead of retracing at every
call."""
import numpy as np
import pytest
import torch

import tracec


@pytest.mark.parametrize("shape,reps", [((1, 4, 2, 2), (3, 1, 1, 1)), ((1, 3), (2, 1)),
                                        ((3,), (1,)), ((2, 1), (1, 4))])
def test_repeat_is_a_contiguous_copy(shape, reps):
    def run(m):
        p = m.nn.Parameter(m.arange(float(np.prod(shape))).reshape(shape))
        r = p.repeat(*reps)
        v = r.view(-1)                       # refused for a non-contiguous result
        r.data[(0,) * r.ndim] = -1.0          # must not write into p
        return r.is_contiguous(), tuple(r.stride()), v.shape[0], p.detach().numpy().copy()
    want, got = run(torch), run(tracec)
    assert got[:3] == want[:3]
    np.testing.assert_array_equal(got[3], want[3])


def test_repeat_interleave_of_size_one_dim_is_a_copy():
    def run(m):
        x = m.ones(1, 3)
        r = x.repeat_interleave(2, dim=0)
        r[0, 0] = 5.0
        return r.is_contiguous(), tuple(r.stride()), x.tolist(), r.tolist()
    assert run(tracec) == run(torch)


def _gan_steps(m, compile_):
    g = m.nn.Linear(3, 3)
    d = m.nn.Linear(3, 1)
    with m.no_grad():
        for i, p in enumerate(list(g.parameters()) + list(d.parameters())):
            p.copy_(m.from_numpy(np.linspace(-1, 1, p.numel(), dtype=np.float32).reshape(p.shape)
                                 * (i + 1) / 3))
    opt = m.optim.SGD(g.parameters(), lr=0.1)

    def requires_grad(model, flag=True):
        for p in model.parameters():
            p.requires_grad = flag

    def g_step(z):
        requires_grad(g, True)
        requires_grad(d, False)
        loss = m.nn.functional.softplus(-d(g(z))).mean()
        g.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = compile_(g_step)
    out = []
    for i in range(4):
        requires_grad(g, False)      # the D step's flags
        requires_grad(d, True)
        z = m.from_numpy(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) * (i + 1))
        out.append((step(z).item(), g.weight.requires_grad, d.weight.requires_grad,
                    d.weight.grad is None, g.weight.detach().numpy().copy()))
    return out, step


def test_compiled_step_flipping_requires_grad_compiles_once():
    want, _ = _gan_steps(torch, lambda f: f)
    got, step = _gan_steps(tracec, tracec.compile)
    for (wl, *wf, wg), (gl, *gf, gg) in zip(want, got):
        assert abs(gl - wl) <= 1e-5 * abs(wl)
        assert gf == wf == [True, False, True]
        np.testing.assert_allclose(gg, wg, rtol=1e-5, atol=1e-6)
    info = step.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1, info.reasons


def test_requires_grad_found_otherwise_retraces():
    lin = tracec.nn.Linear(2, 1)

    @tracec.compile
    def step(x):
        lin.weight.requires_grad = True
        return lin(x).sum()
    x = tracec.ones(1, 2)
    lin.weight.requires_grad = False
    step(x)
    step(x)
    lin.weight.requires_grad = True       # not the flag the trace found
    step(x)
    info = step.cache_info()
    assert info.traces == 2 and "requires_grad of lin.weight" in info.reasons[1]


def test_negative_zero_scalar_is_not_positive_zero():
    # weak scalars are cached by value, and -0.0 == 0.0: once 0.0 was used,
    # x * -0.0 gave x * 0.0 (eagerly and as a compiled constant)
    def run(m, compile_=lambda f: f):
        def f(x):
            a = x * 0.0
            return a, x * -0.0, x.clone().mul_(-0.0), m.full_like(x, -0.0) + 0.0 * x
        x = m.tensor([-2.0, 3.0, 0.0])
        return [np.signbit(t.numpy()).tolist() for t in compile_(f)(x)]
    want = run(torch)
    assert run(tracec) == want
    assert run(tracec, tracec.compile) == want
