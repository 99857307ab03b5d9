"""``torch.autocast`` on the CPU: the dtypes and values PyTorch gives, the
older ``torch.cuda.amp`` / ``torch.cpu.amp`` spellings, and compiled
functions that never reuse a trace across autocast states."""

import numpy as np
import pytest
import torch

import tracec
from program_runner import python_c


def _pair(mod_t, mod_c):
    mod_c.load_state_dict({k: tracec.tensor(v.detach().numpy()) for k, v in
                           mod_t.state_dict().items()})
    return mod_t, mod_c


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_linear_conv_loss_dtypes_and_values_match_torch(dtype):
    torch.manual_seed(0)
    lt, lc = _pair(torch.nn.Linear(6, 5), tracec.nn.Linear(6, 5))
    ct, cc = _pair(torch.nn.Conv2d(2, 3, 3), tracec.nn.Conv2d(2, 3, 3))
    x = np.random.RandomState(0).randn(4, 6).astype(np.float32)
    im = np.random.RandomState(1).randn(2, 2, 5, 5).astype(np.float32)
    y = np.array([0, 4, 2, 1])
    outs = []
    for lib, lin, conv in ((torch, lt, ct), (tracec, lc, cc)):
        with lib.autocast(device_type="cpu", dtype=getattr(lib, dtype)):
            h = lin(lib.tensor(x))
            c = conv(lib.tensor(im))
            m = lib.tensor(x) @ lib.tensor(x).T
            loss = lib.nn.functional.cross_entropy(h, lib.tensor(y))
            assert lib.is_autocast_enabled("cpu") and not lib.is_autocast_enabled()
        loss.backward()
        outs.append((h, c, m, loss, lin.weight.grad))
    for a, b in zip(*outs):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(b.detach().float().numpy(), a.detach().float().numpy(),
                                   rtol=2e-2, atol=2e-2)
    assert outs[1][3].dtype is tracec.float32 and outs[1][4].dtype is tracec.float32
    assert not tracec.is_autocast_enabled()


def test_disabled_and_cuda_autocast_change_nothing():
    lin = tracec.nn.Linear(3, 2)
    with tracec.autocast("cpu", enabled=False):
        assert lin(tracec.ones(1, 3)).dtype is tracec.float32
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = tracec.autocast(device_type="cuda")
    with ctx:
        assert lin(tracec.ones(1, 3)).dtype is tracec.float32

    @tracec.autocast(device_type="cpu")
    def f(x):
        return lin(x)
    assert f(tracec.ones(1, 3)).dtype is tracec.bfloat16


def test_compiled_function_keys_on_autocast_state():
    lin = tracec.nn.Linear(3, 2)
    f = tracec.compile(lambda x: lin(x) * 2)
    x = tracec.ones(4, 3)
    for _ in range(2):
        assert f(x).dtype is tracec.float32
        with tracec.autocast("cpu"):
            assert f(x).dtype is tracec.bfloat16
    info = f.cache_info()
    assert info.traces == 2 and "autocast changed" in info.reasons[1]


def test_compiled_backward_through_bf16_logits_and_f32_loss():
    # nanoGPT's `logits, loss = model(X, Y)` compiled under autocast: the
    # results differ in dtype (bf16 and f32); only the loss gets a gradient.
    torch.manual_seed(0)
    lt, lc = _pair(torch.nn.Linear(4, 3), tracec.nn.Linear(4, 3))
    x = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1])
    grads = []
    for lib, lin, compiled in ((torch, lt, False), (tracec, lc, False), (tracec, lc, True)):
        def f(a, b):
            with lib.autocast("cpu", dtype=lib.bfloat16):
                logits = lin(a)
                return logits, lib.nn.functional.cross_entropy(logits, b)
        lin.zero_grad()
        fn = tracec.compile(f) if compiled else f
        for _ in range(2):      # the second call runs the compiled backward
            logits, loss = fn(lib.tensor(x), lib.tensor(y))
            assert str(logits.dtype).endswith("bfloat16") and str(loss.dtype).endswith("float32")
            (loss * 2).backward()
        assert str(lin.weight.grad.dtype).endswith("float32")
        grads.append([lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy()])
    for ours in grads[1:]:
        for a, b in zip(ours, grads[0]):
            np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)


def test_legacy_amp_modules_under_install_as_torch():
    code = ("import tracec; tracec.install_as_torch()\n"
            "import torch, torch.cuda.amp, torch.cpu.amp\n"
            "from torch.cuda.amp import GradScaler\n"
            "s = GradScaler(enabled=torch.cuda.is_available())\n"
            "with torch.cpu.amp.autocast():\n"
            "    y = torch.nn.Linear(2, 2)(torch.ones(1, 2))\n"
            "with torch.cuda.amp.autocast(enabled=False):\n"
            "    z = torch.ones(1) @ torch.ones(1)\n"
            "print(y.dtype, z.dtype, s.is_enabled(), torch.cpu.is_available())\n")
    out = python_c(code, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch.bfloat16 torch.float32 False True"


def test_checkpoint_recomputes_under_the_forwards_autocast():
    """The recomputation that ``checkpoint`` runs at backward (outside the
    autocast block, as a training loop calls ``loss.backward()``) runs
    under the forward's autocast state, as PyTorch's does: a BatchNorm's
    bfloat16 output fed a float32 conv there ("Input type (bfloat16) and
    weight type (float32)"); its running statistics match torch's."""
    import numpy as np
    import torch
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    res = []
    for T in (torch, tracec):
        T.manual_seed(0)
        net = T.nn.Sequential(T.nn.Conv2d(3, 4, 3, padding=1, bias=False), T.nn.BatchNorm2d(4),
                              T.nn.ReLU(), T.nn.Conv2d(4, 4, 3, padding=1, bias=False))
        if T is tracec:
            net.load_state_dict({k: tracec.tensor(v.numpy()) for k, v in ref_sd.items()})
        else:
            ref_sd = {k: v.clone() for k, v in net.state_dict().items()}
        inp = T.tensor(x, requires_grad=True)
        with T.autocast("cpu", dtype=T.bfloat16):
            h = net[0](inp)          # bfloat16: the checkpointed block's input
            out = T.utils.checkpoint.checkpoint(net[1:], h, use_reentrant=False)
        out.float().sum().backward()
        res.append((net[1].running_mean.numpy().copy(), net[1].num_batches_tracked.item(),
                    inp.grad.float().numpy()))
    (m0, n0, g0), (m1, n1, g1) = res
    assert n0 == n1 == 2
    np.testing.assert_allclose(m1, m0, rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(g1, g0, rtol=5e-2, atol=5e-2)
