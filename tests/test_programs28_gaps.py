"""What programs28 found missing, against PyTorch 2.13:

* ``torch._inductor.config.fallback_random = True`` (set by programs that
  want a compiled step's random numbers to be eager's: Inductor then calls
  the eager random kernels) was recorded and ignored: a compiled step drew
  from tracec's counter-based stream, and a Growing-NCA update's
  stochastic mask (``torch.rand(...) > fire_rate``) came out unlike the
  eager step's, silently.  With the flag set, a compiled function that
  draws random numbers now draws PyTorch's eager numbers while it is
  traced and runs eagerly from then on for that signature (saying so);
  one that draws nothing still compiles."""
import warnings

import numpy as np
import pytest
import torch

import tracec
from tracec import torch_rng


@pytest.fixture
def fallback_random():
    tracec._inductor.config.fallback_random = True
    try:
        yield
    finally:
        tracec._inductor.config.fallback_random = False


def _nca_step(lib, x, w):
    """A cellular-automaton update: a stochastic mask, dropout, a normal
    draw and a Bernoulli draw, then a loss."""
    mask = (lib.rand([x.size(0), x.size(1), 1]) > 0.5).float()
    h = lib.nn.functional.dropout(x @ w, 0.25) * mask
    noise = lib.randn(x.shape[0], w.shape[1]) * 0.1 + lib.bernoulli(lib.full((x.shape[0], 1), 0.3))
    return ((h.sum(1) + noise) ** 2).mean()


def _torch_losses(x, w, calls):
    torch.manual_seed(3)
    tx, tw = torch.tensor(x), torch.tensor(w, requires_grad=True)
    out = []
    for _ in range(calls):
        loss = _nca_step(torch, tx, tw)
        loss.backward()
        out.append((loss.item(), tw.grad.numpy().copy()))
        tw.grad = None
    return out


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_fallback_random_compiled_draws_are_torchs(fallback_random, backend):
    rng = np.random.RandomState(0)
    x = rng.randn(4, 5, 3).astype(np.float32)
    w = rng.randn(3, 6).astype(np.float32)
    want = _torch_losses(x, w, 3)
    tw = tracec.tensor(w, requires_grad=True)

    def step(x):
        loss = _nca_step(tracec, x, tw)
        loss.backward()
        return loss

    f = tracec.compile(step, backend=backend)
    tracec.manual_seed(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for loss_t, grad_t in want:
            loss = f(tracec.tensor(x))
            np.testing.assert_allclose(loss.item(), loss_t, rtol=1e-5)
            np.testing.assert_allclose(tw.grad.numpy(), grad_t, rtol=1e-5, atol=1e-6)
            tw.grad = None
    msgs = [str(c.message) for c in caught if "running eagerly" in str(c.message)]
    assert len(msgs) == 1 and "fallback_random" in msgs[0], msgs


def test_fallback_random_dynamic_sizes_draw_torchs(fallback_random):
    """A symbolic trace would draw from the counter-based stream: with the
    flag set the trace is static, and each size's draws are PyTorch's."""
    def f(lib, x):
        return x * lib.rand(x.size(0), 1) + lib.randn(x.shape).mul(0.1)

    torch.manual_seed(1)
    want = [f(torch, torch.ones(n, 2)).numpy() for n in (3, 4, 5)]
    cf = tracec.compile(lambda x: f(tracec, x), dynamic=True)
    tracec.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [cf(tracec.ones(n, 2)).numpy() for n in (3, 4, 5)]
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g, e)


def test_fallback_random_without_draws_still_compiles(fallback_random):
    f = tracec.compile(lambda x: (x * 2).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(tracec.ones(3)).item() == 6.0
        assert f(tracec.ones(3)).item() == 6.0
    assert len(f._cache) == 1 and not f._eager_keys


def test_fallback_random_flag_reads_back_and_resets():
    cfg = tracec._inductor.config
    assert cfg.fallback_random is False and torch_rng.FALLBACK_RANDOM[0] is False
    cfg.fallback_random = True
    try:
        assert cfg.fallback_random is True and torch_rng.FALLBACK_RANDOM[0] is True
    finally:
        cfg.fallback_random = False
    assert torch_rng.FALLBACK_RANDOM[0] is False
    # (the default: compiled draws come from the counter-based stream, as
    # torch.compile's Philox kernels: not eager's)
    cf = tracec.compile(lambda x: x + tracec.rand(4))
    tracec.manual_seed(0)
    got = cf(tracec.zeros(4)).numpy()
    torch.manual_seed(0)
    assert not np.array_equal(got, torch.rand(4).numpy())


# --- a deprecated backward hook on a convolution in a compiled step ---------
#
# pytorch-deform-conv-v2 puts ``register_backward_hook`` (the non-full
# hook) on its offset conv.  Eagerly tracec's convolution is one node, as
# PyTorch's; traced it is im2col primitives, whose last node cannot give
# PyTorch's (grad_input, grad_weight, grad_bias): registering raised a
# RuntimeError from inside the compiled step, where ``torch.compile`` runs
# the step.  While tracing, the hooked convolution now runs as one node
# named ConvolutionBackward0; a hook on a grad_fn then sends the step
# eagerly (fallback="eager", torch.compile's default) or is refused by name.

def _hooked_conv_step(lib, scale):
    lib.manual_seed(0)
    conv = lib.nn.Conv2d(2, 3, 3, padding=1, bias=scale is not None)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append([None if g is None else g.detach().clone() for g in grad_input])
        if scale is not None:
            return tuple(None if g is None else g * scale for g in grad_input)

    conv.register_backward_hook(hook)
    x = lib.randn(2, 2, 5, 5, requires_grad=True)

    def step(x):
        conv(x).pow(2).sum().backward()
        return x.grad

    return conv, seen, x, step


@pytest.mark.parametrize("scale", [None, 0.1], ids=["observe", "replace"])
def test_legacy_conv_hook_in_compiled_step_runs_eagerly_with_torchs_grads(scale):
    t_conv, t_seen, t_x, t_step = _hooked_conv_step(torch, scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gx_t = t_step(t_x).numpy()
    conv, seen, x, step = _hooked_conv_step(tracec, scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gx = tracec.compile(step, fallback="eager")(x).numpy()
    assert any("running eagerly" in str(c.message) and "ConvolutionBackward0" in str(c.message)
               for c in caught)
    np.testing.assert_allclose(gx, gx_t, rtol=1e-5, atol=1e-6)
    assert len(seen) == len(t_seen) == 1 and len(seen[0]) == len(t_seen[0]) == 3
    for g, g_t in zip(seen[0], t_seen[0]):
        assert (g is None) == (g_t is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), g_t.numpy(), rtol=1e-5, atol=1e-6)
    for name in ("weight",) + (("bias",) if scale is not None else ()):
        np.testing.assert_allclose(getattr(conv, name).grad.numpy(),
                                   getattr(t_conv, name).grad.numpy(), rtol=1e-5, atol=1e-6)


def test_legacy_conv_hook_in_fullgraph_step_is_refused_by_name():
    conv, seen, x, step = _hooked_conv_step(tracec, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(tracec.tracing.TraceError,
                           match=r"test_programs28_gaps.py:\d+: ConvolutionBackward0.register_hook"):
            tracec.compile(step)(x)


# --- binary_cross_entropy_with_logits' input gradient, float32 / float64 ---
#
# ESRGAN's relativistic discriminator loss (BasicSR: BCEWithLogitsLoss of
# real_pred - mean(fake_pred) and of fake_pred - mean(real_pred)) gives
# the last linear layer's bias a gradient that cancels to zero but for
# rounding; Adam then steps it by +-lr times that noise's sign.  PyTorch's
# backward is ((sigmoid(x) - t) * grad) * weight / numel; tracec
# differentiated its softplus composition instead (a few ulps off), and the
# bias stepped where PyTorch's did not: the discriminator's outputs left
# PyTorch's at the second digit after one step.  Every float dtype now
# takes PyTorch's formula (as half did).

def _bce_logits_formula(x, t, g, w, pw, reduction, dtype):
    s = tracec.sigmoid(tracec.tensor(x)).numpy().astype(dtype)
    if pw is None:
        k = s - t
    else:
        tp = pw * t
        k = (tp + dtype(1) - t) * s - tp
    out = k * g
    if w is not None:
        out = out * w
    return out / dtype(x.size) if reduction == "mean" else out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_with_logits_input_grad_is_torchs_formula(dtype, reduction, weighted):
    rng = np.random.RandomState(1)
    x = (rng.randn(6, 5) * 2).astype(dtype)
    t = rng.rand(6, 5).astype(dtype)
    w = rng.rand(6, 5).astype(dtype) if weighted else None
    pw = (rng.rand(5) + 0.5).astype(dtype) if weighted else None
    g = rng.randn(6, 5).astype(dtype) if reduction == "none" else dtype(0.75)
    grads = []
    for lib in (torch, tracec):
        xt = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy_with_logits(
            xt, lib.tensor(t), None if w is None else lib.tensor(w), reduction=reduction,
            pos_weight=None if pw is None else lib.tensor(pw))
        loss.backward(lib.tensor(g) if reduction == "none" else None) if reduction == "none" \
            else (loss * float(g)).backward()
        grads.append(xt.grad.numpy())
    want = _bce_logits_formula(x, t, g, w, pw, reduction, dtype)
    np.testing.assert_array_equal(grads[1], want)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5 if dtype is np.float32 else 1e-12,
                               atol=1e-7 if dtype is np.float32 else 1e-15)



@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bce_with_logits_input_grad_compiled_is_eagers(backend):
    rng = np.random.RandomState(2)
    x = (rng.randn(6, 5) * 2).astype(np.float32)
    t = rng.rand(6, 5).astype(np.float32)
    pw = (rng.rand(5) + 0.5).astype(np.float32)

    def grad_of(x, t):
        loss = tracec.nn.functional.binary_cross_entropy_with_logits(
            x, t, pos_weight=tracec.tensor(pw))
        (g,) = tracec.autograd.grad(loss, x)
        return loss, g

    xe = tracec.tensor(x, requires_grad=True)
    loss_e, g_e = grad_of(xe, tracec.tensor(t))
    loss_c, g_c = tracec.compile(grad_of, backend=backend)(xe, tracec.tensor(t))
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.binary_cross_entropy_with_logits(
        xt, torch.tensor(t), pos_weight=torch.tensor(pw)).backward()
    np.testing.assert_allclose(g_c.numpy(), g_e.numpy(), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(g_c.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(loss_c.item(), loss_e.item(), rtol=1e-6)


# --- SPADE's imports and optimizer ---------------------------------------
#
# ``import torch.nn.utils.spectral_norm as spectral_norm`` (SPADE, many
# GANs) binds PyTorch's function (the package attribute, which shadows its
# submodule); under ``tracec run`` the alias import set the submodule on
# the package, over the function: ``spectral_norm(conv)`` raised "'module'
# object is not callable".  And SPADE's ``Adam(betas=(0, 0.9))`` is
# refused by PyTorch 2.13 ("betas must be either both floats or both
# Tensors"); tracec accepted it.

_IMPORTS = """\
import torch.nn.utils.spectral_norm as spectral_norm
import torch.nn.utils.weight_norm as weight_norm
import torch.nn as nn
import torch.nn.utils as utils
conv = spectral_norm(nn.Conv2d(2, 3, 3))
lin = weight_norm(nn.Linear(2, 3))
print(type(spectral_norm).__name__, type(weight_norm).__name__, type(utils.spectral_norm).__name__,
      sorted(n for n, _ in conv.named_parameters()), sorted(n for n, _ in lin.named_parameters()))
"""


def test_spectral_norm_imported_as_submodule_name_is_the_function(tmp_path):
    from test_public_programs_tutorials2 import run_tracec
    from torch_recordings import script_output
    script = tmp_path / "spade_imports.py"
    script.write_text(_IMPORTS)
    out, _ = run_tracec(script, tmp_path)
    assert out == script_output("programs28/spade_imports", script, cwd=tmp_path)
    assert out.startswith("function function function")


@pytest.mark.parametrize("betas", [(0, 0.9), (0.9, 0), ("t", 0.9)], ids=["int0", "int1", "mixed"])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_int_or_mixed_betas_refused_as_torch(name, betas):
    errors = []
    for lib in (torch, tracec):
        p = lib.nn.Parameter(lib.ones(2))
        b = tuple(lib.tensor(0.5) if v == "t" else v for v in betas)
        with pytest.raises(ValueError) as e:
            getattr(lib.optim, name)([p], betas=b)
        errors.append(str(e.value))
    assert errors[1] == errors[0] == "betas must be either both floats or both Tensors"


def test_adam_float_or_tensor_betas_accepted():
    p = tracec.nn.Parameter(tracec.ones(2))
    tracec.optim.Adam([p], betas=(0.0, 0.9))
    tracec.optim.Adam([p], betas=(np.float64(0.5), 0.9))
    tracec.optim.Adam([p], betas=(tracec.tensor(0.5), tracec.tensor(0.9)))
