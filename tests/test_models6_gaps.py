"""Gaps the public programs of ``tests/programs/models6`` found, each
against torch: a value computed under ``no_grad`` from a tensor that
requires grad is a constant for the compiled backward too (the
spectral-norm GAN's power iteration ``with no_grad(): u.copy_(W @ v)``,
whose compiled gradient flowed back through ``u``)."""
import copy

import numpy as np
import torch

import tracec


def _no_grad_buffer_step(lib):
    r = np.random.default_rng(0)
    w = lib.tensor(r.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    u0 = r.standard_normal(3).astype(np.float32)
    u = lib.tensor(u0)

    def f():
        w.grad = None
        with lib.no_grad():
            u.copy_(w @ lib.ones(4))        # a constant: no gradient through it
        (u @ w).sum().backward()
        return w.grad

    return w, u, u0, f


def test_no_grad_value_in_compiled_backward_is_a_constant():
    tw, tu, _, tf = _no_grad_buffer_step(torch)
    want = tf().numpy().copy()
    w, u, u0, f = _no_grad_buffer_step(tracec)
    np.testing.assert_allclose(f().numpy(), want, rtol=1e-6)
    cf = tracec.compile(f)
    for _ in range(3):          # the trace, then the compiled code
        u.copy_(tracec.tensor(u0))
        np.testing.assert_allclose(cf().numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(u.numpy(), tu.numpy(), rtol=1e-6)


def _sn_conv(lib, sn):
    r = np.random.default_rng(1)
    conv = sn(lib.nn.Conv2d(3, 5, 3, padding=1))
    with lib.no_grad():
        for name, p in list(conv.named_parameters()) + list(conv.named_buffers()):
            p.copy_(lib.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32)))
    x = lib.tensor(r.standard_normal((2, 3, 4, 4)).astype(np.float32))
    g = lib.tensor(r.standard_normal((2, 5, 4, 4)).astype(np.float32))
    return conv, x, g


def _sn_grads(lib, sn, compiled):
    conv, x, g = _sn_conv(lib, sn)
    state = copy.deepcopy(conv.state_dict())

    def fb(x):
        conv.zero_grad()
        loss = (conv(x) * g).sum()
        loss.backward()
        return loss

    step = lib.compile(fb) if compiled else fb
    out = []
    for _ in range(3):
        conv.load_state_dict(state)
        loss = step(x)
        out.append((loss.item(), {n: p.grad.numpy().copy() for n, p in conv.named_parameters()},
                    {n: b.numpy().copy() for n, b in conv.named_buffers()}))
    return out


def _sn_hook(lib):
    return lib.nn.utils.spectral_norm


def _sn_param(lib):
    return lib.nn.utils.parametrizations.spectral_norm


def test_spectral_norm_compiled_gradients_match_torch():
    for sn in (_sn_hook, _sn_param):
        want = _sn_grads(torch, sn(torch), False)[0]
        for compiled in (False, True):
            for loss, grads, bufs in _sn_grads(tracec, sn(tracec), compiled):
                assert abs(loss - want[0]) <= 1e-4 * abs(want[0])
                for n in want[1]:
                    np.testing.assert_allclose(grads[n], want[1][n], rtol=1e-4, atol=1e-5)
                for n in want[2]:
                    np.testing.assert_allclose(bufs[n], want[2][n], rtol=1e-5, atol=1e-6)
