"""Gaps found by the models20 public programs (tests/programs/models20),
each compared with torch."""
import argparse
import pickle
import warnings

import numpy as np
import pytest
import torch

import tracec


class _Center:
    """DINOLoss's center: a registered buffer replaced by its EMA under
    no_grad (``self.center = self.center * m + batch_center * (1 - m)``)."""

    @staticmethod
    def build(lib):
        class Loss(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("center", lib.zeros(1, 3))

            def forward(self, t, s):
                q = lib.nn.functional.softmax((t - self.center) / 0.5, dim=-1)
                loss = lib.sum(-q * lib.nn.functional.log_softmax(s, dim=-1), dim=-1).mean()
                self.update_center(t)
                return loss

            @lib.no_grad()
            def update_center(self, t):
                batch_center = lib.sum(t, dim=0, keepdim=True) / len(t)
                self.center = self.center * 0.9 + batch_center * (1 - 0.9)
        return Loss()


def test_compiled_call_replacing_a_registered_buffer_writes_it_like_eager():
    r = np.random.default_rng(0)
    ts = [r.normal(size=(4, 3)).astype(np.float32) for _ in range(4)]
    ss = [r.normal(size=(4, 3)).astype(np.float32) for _ in range(4)]
    ref = _Center.build(torch)
    want = [(ref(torch.from_numpy(t), torch.from_numpy(s)).item(), ref.center.numpy().copy())
            for t, s in zip(ts, ss)]
    mod = _Center.build(tracec)
    f = tracec.compile(lambda t, s: mod(t, s))
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no refused side effect, no eager fallback
        got = [(f(tracec.from_numpy(t), tracec.from_numpy(s)).item(), mod.center.numpy().copy())
               for t, s in zip(ts, ss)]
    for (gl, gc), (wl, wc) in zip(got, want):
        assert gl == pytest.approx(wl, rel=1e-5)
        np.testing.assert_allclose(gc, wc, rtol=1e-5, atol=1e-7)
    assert f.traces == 1
    assert list(mod.state_dict()) == ["center"] and mod.center.shape == (1, 3)


def test_compiled_call_replacing_a_buffer_with_a_graph_tensor_stays_refused():
    # a new value that needs grad cannot be written into the buffer: the
    # replacement stays a side effect (eager fallback), with eager's numbers
    class M(tracec.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", tracec.zeros(2))

        def forward(self, x):
            self.b = self.b + x
            return self.b.sum()

    m = M()
    f = tracec.compile(lambda x: m(x), fallback="eager")
    x = tracec.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        outs = [f(x).item() for _ in range(3)]
    assert outs == [2.0, 4.0, 6.0]
    assert m.b.requires_grad


def test_weights_only_refusal_is_an_unpickling_error_like_torch(tmp_path):
    # DINO's checkpoint holds its argparse.Namespace: torch.load's default
    # (weights_only=True) refuses it with pickle.UnpicklingError
    obj = {"w": [1.0], "args": argparse.Namespace(arch="vit_tiny")}
    torch.save({**obj, "w": torch.ones(2)}, tmp_path / "t.pth")
    tracec.save({**obj, "w": tracec.ones(2)}, tmp_path / "c.pth")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(tmp_path / "t.pth")
    with pytest.raises(pickle.UnpicklingError,
                       match="(?s)Weights only load failed.*`weights_only` set to `False`"):
        tracec.load(tmp_path / "c.pth")
    with pytest.raises(tracec.serialization.CheckpointError):
        tracec.load(tmp_path / "c.pth")
    # torch's file naming a class: refused by default, as an UnpicklingError too
    with pytest.raises(pickle.UnpicklingError,
                       match="GLOBAL argparse.Namespace was not an allowed global"):
        tracec.load(tmp_path / "t.pth")
    assert tracec.load(tmp_path / "c.pth", weights_only=False)["args"].arch == \
        tracec.load(tmp_path / "t.pth", weights_only=False)["args"].arch == \
        torch.load(tmp_path / "t.pth", weights_only=False)["args"].arch == "vit_tiny"


def test_cat_with_legacy_empty_tensor_promotes_like_torch():
    # DINO's MultiCropWrapper: output = torch.empty(0), then
    # output = torch.cat((output, _out)); the skipped empty tensor still
    # takes part in the result's dtype
    cases = [
        (lambda L: L.cat((L.empty(0), L.arange(3))), "float32"),
        (lambda L: L.cat((L.arange(2), L.empty(0))), "float32"),
        (lambda L: L.cat((L.empty(0), L.arange(3, dtype=L.int32))), "float32"),
        (lambda L: L.cat((L.empty(0, dtype=L.float64), L.ones(2))), "float64"),
        (lambda L: L.cat((L.empty(0, dtype=L.long), L.empty(0))), "float32"),
        (lambda L: L.cat([L.empty(0, dtype=L.float64), L.ones(2, 3)], dim=1), "float64"),
        (lambda L: L.cat((L.empty(0), L.ones(2, 4))), "float32"),
    ]
    for fn, name in cases:
        want, got = fn(torch), fn(tracec)
        assert str(want.dtype) == f"torch.{name}"
        assert str(got.dtype) == f"tracec.{name}"
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_legacy_tensor_constructor_of_a_tensor_is_an_alias_like_torch():
    for lib in (torch, tracec):
        for a in (lib.tensor(3), lib.tensor([1, 2], dtype=lib.int32), lib.tensor([True]),
                  lib.tensor([1.0, 2.0])):
            b = lib.Tensor(a)
            assert b.dtype == a.dtype and b.shape == a.shape and b is not a
            assert b.data_ptr() == a.data_ptr()
        z = lib.tensor([1.0, 2.0])
        lib.Tensor(z)[0] = 5.0
        assert z.tolist() == [5.0, 2.0]
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.Tensor(x * 2)
        assert y.requires_grad and y.grad_fn.name() == "AliasBackward0"
        y.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
        # the other legacy forms are unchanged: sizes, data, a Size, nothing
        assert lib.Tensor(2, 3).shape == (2, 3) and str(lib.Tensor([1, 2]).dtype).endswith("float32")
        assert lib.Tensor(lib.Size([2])).shape == (2,) and lib.Tensor().shape == (0,)
        assert str(lib.Tensor(np.ones(2)).dtype).endswith("float32")


def _critic(lib, r):
    D = lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3, 2, 1), lib.nn.LeakyReLU(0.2),
                          lib.nn.Conv2d(3, 4, 3, 1, 1), lib.nn.InstanceNorm2d(4, affine=True),
                          lib.nn.LeakyReLU(0.2), lib.nn.AvgPool2d(2, padding=1), lib.nn.Flatten(),
                          lib.nn.Linear(16, 1))
    with lib.no_grad():
        for p in D.parameters():
            p.copy_(lib.from_numpy(r.normal(0, 0.5, tuple(p.shape)).astype(np.float32)))
    return D


def test_gradient_penalty_of_a_conv_critic_views_the_input_gradient_like_torch():
    # PyTorch-GAN's wgan_gp.py: gradients = autograd.grad(..., create_graph=True)[0]
    # then gradients.view(gradients.size(0), -1); padding (and so conv,
    # conv-transpose and padded pooling) backward gives a dense gradient
    out = {}
    for lib in (torch, tracec):
        r = np.random.default_rng(0)
        D = _critic(lib, r)
        real = lib.from_numpy(r.normal(size=(3, 2, 6, 6)).astype(np.float32))
        fake = lib.from_numpy(r.normal(size=(3, 2, 6, 6)).astype(np.float32))
        alpha = lib.from_numpy(r.random((3, 1, 1, 1)).astype(np.float32))
        interpolates = (alpha * real + ((1 - alpha) * fake)).requires_grad_(True)
        d = D(interpolates)
        g = lib.autograd.grad(outputs=d, inputs=interpolates, grad_outputs=lib.ones(3, 1),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
        assert g.is_contiguous()
        gp = ((g.view(g.size(0), -1).norm(2, dim=1) - 1) ** 2).mean()
        gp.backward()
        out[lib.__name__] = [gp.detach().numpy()] + [None if p.grad is None else p.grad.numpy().copy()
                                                     for p in D.parameters()]
    for a, b in zip(out["tracec"], out["torch"]):
        # (the instance norm's bias: torch's double backward reaches it with
        # zeros, tracec's does not reach it; both are zero)
        if a is None or b is None:
            assert not np.any(a if b is None else b)
        else:
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)
    for lib in (torch, tracec):
        x = lib.ones(2, 3, 4, 4, requires_grad=True)
        for f in (lambda x: lib.nn.functional.pad(x, (1, 1, 1, 1)),
                  lambda x: lib.nn.functional.conv_transpose2d(x, lib.ones(3, 2, 4, 4), stride=2, padding=1),
                  lambda x: lib.nn.functional.avg_pool2d(x, 2, padding=1)):
            for cg in (True, False):
                g = lib.autograd.grad(f(x).sum(), x, create_graph=cg)[0]
                assert g.is_contiguous() and g.stride() == (48, 16, 4, 1)


def test_grad_outputs_dtype_is_cast_and_mismatches_named_like_torch():
    def err(fn):
        try:
            fn()
        except RuntimeError as e:
            return str(e).replace("tracec.", "torch.")
        return None

    for lib in (torch, tracec):
        p = lib.ones(2, requires_grad=True)
        (p * 2).backward(lib.ones(2, dtype=lib.int64))        # WGAN's backward(one)
        assert p.grad.tolist() == [2.0, 2.0] and str(p.grad.dtype).endswith("float32")
        g = lib.autograd.grad(p * 2, p, grad_outputs=lib.ones(2, dtype=lib.float64))[0]
        assert str(g.dtype).endswith("float32") and g.tolist() == [2.0, 2.0]
    cases = [
        lambda L: (lambda p: L.autograd.grad(p * 2, p, grad_outputs=L.ones(2, 3)))(L.ones(2, requires_grad=True)),
        lambda L: (lambda p: (p * 2).backward(L.ones(3)))(L.ones(2, requires_grad=True)),
        lambda L: (lambda q: L.autograd.grad(q * 2, q, grad_outputs=L.ones(2)))(
            L.ones(2, dtype=L.complex64, requires_grad=True)),
        lambda L: (lambda p: L.autograd.grad(p.sum(), p, grad_outputs=L.ones(1)))(L.ones(2, requires_grad=True)),
    ]
    for case in cases:
        assert err(lambda: case(tracec)) == err(lambda: case(torch)) is not None


def test_subset_batched_fetch_and_collate_error_like_torch():
    # Pytorch-UNet's random_split Subsets in a DataLoader: Subset hands the
    # DataLoader's batched fetch (__getitems__) on to its dataset, as torch's does
    def run(lib):
        seen = []

        class D(lib.utils.data.Dataset):
            def __len__(self):
                return 6

            def __getitem__(self, i):
                return i

            def __getitems__(self, idx):
                seen.append(list(idx))
                return [i * 10 for i in idx]

        sub = lib.utils.data.Subset(D(), [5, 4, 3])
        batches = [b.tolist() for b in lib.utils.data.DataLoader(sub, batch_size=2)]
        return batches, seen, sub.__getitems__([0, 2])

    assert run(tracec) == run(torch) == ([[50, 40], [30]], [[5, 4], [3], [5, 3]], [50, 30])

    def err(lib):
        try:
            lib.utils.data.default_collate([None, None])
        except TypeError as e:
            return str(e)
    assert err(tracec) == err(torch)


def test_normalization_of_a_half_precision_input_keeps_its_dtype_like_torch():
    # Pytorch-UNet with --amp on the CPU: the convolution's bf16 output goes
    # through BatchNorm2d's float32 parameters and stays bf16 (computed in
    # float32, rounded once), as do GroupNorm, LayerNorm and InstanceNorm
    r = np.random.default_rng(0)
    x0 = r.normal(size=(2, 4, 3, 3)).astype(np.float32)
    w = r.normal(size=(2, 4, 3, 3)).astype(np.float32)
    mods = [lambda L: L.nn.BatchNorm2d(4), lambda L: L.nn.BatchNorm2d(4).eval(),
            lambda L: L.nn.GroupNorm(2, 4), lambda L: L.nn.LayerNorm([3]),
            lambda L: L.nn.InstanceNorm2d(4, affine=True)]
    for make in mods:
        for half in ("bfloat16", "float16"):
            out = {}
            for lib in (torch, tracec):
                m = make(lib)
                rp = np.random.default_rng(1)
                with lib.no_grad():
                    for p in m.parameters():
                        p.copy_(lib.from_numpy(rp.normal(1, 0.2, tuple(p.shape)).astype(np.float32)))
                x = lib.from_numpy(x0).to(getattr(lib, half)).requires_grad_(True)
                y = m(x)
                (y.float() * lib.from_numpy(w)).sum().backward()
                rm = getattr(m, "running_mean", None)
                out[lib.__name__] = (str(y.dtype).split(".")[-1], str(x.grad.dtype).split(".")[-1],
                                     y.float().detach().numpy(), x.grad.float().numpy(),
                                     None if rm is None else rm.numpy().copy(),
                                     [p.grad.numpy().copy() for p in m.parameters()])
            got, want = out["tracec"], out["torch"]
            assert got[:2] == want[:2] == (half, half)
            np.testing.assert_allclose(got[2], want[2], rtol=1e-2, atol=1e-2)
            np.testing.assert_allclose(got[3], want[3], rtol=2e-2, atol=2e-2)
            if want[4] is not None:
                np.testing.assert_allclose(got[4], want[4], rtol=1e-5, atol=1e-6)
            for a, b in zip(got[5], want[5]):
                np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)


def test_half_precision_mean_softmax_log_softmax_round_once_like_torch():
    # computed in float32 and rounded once to bfloat16 / float16, as
    # PyTorch's CPU kernels do (tracec rounded every step: the sum before
    # the division, exp before the normalization)
    a = np.random.default_rng(0).normal(size=(2, 3, 6, 6)).astype(np.float32)
    cases = [("mean", lambda L, x: x.mean((2, 3))), ("mean all", lambda L, x: x.mean()),
             ("mean keepdim", lambda L, x: x.mean(1, keepdim=True)),
             ("softmax", lambda L, x: L.softmax(x, -1)),
             ("log_softmax 1", lambda L, x: L.log_softmax(x, 1)),
             ("log_softmax 0", lambda L, x: L.nn.functional.log_softmax(x, 0))]
    for half in ("bfloat16", "float16"):
        for name, f in cases:
            want = f(torch, torch.from_numpy(a).to(getattr(torch, half)))
            got = f(tracec, tracec.from_numpy(a).to(getattr(tracec, half)))
            assert str(got.dtype).split(".")[-1] == half
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy(), err_msg=f"{name} {half}")
    # and their gradients stay in the input's dtype
    x = tracec.from_numpy(a).to(tracec.bfloat16).requires_grad_(True)
    (tracec.log_softmax(x, 1) * 2).sum().backward()
    assert x.grad.dtype == tracec.bfloat16


def test_half_precision_bilinear_trilinear_area_resize_round_once_like_torch():
    # Pytorch-UNet's bilinear Up under CPU autocast (bf16): the resize is
    # computed in float32 and rounded once, not rounded after each axis
    r = np.random.default_rng(0)
    a4 = r.normal(size=(2, 3, 6, 6)).astype(np.float32)
    a5 = r.normal(size=(1, 2, 3, 4, 5)).astype(np.float32)
    cases = [(a4, dict(scale_factor=2, mode="bilinear")),
             (a4, dict(scale_factor=2, mode="bilinear", align_corners=True)),
             (a5, dict(scale_factor=2, mode="trilinear")),
             (a4, dict(size=(4, 4), mode="area")), (a4, dict(size=(5, 3), mode="area"))]
    for half in ("bfloat16", "float16"):
        for a, kw in cases:
            want = torch.nn.functional.interpolate(torch.from_numpy(a).to(getattr(torch, half)), **kw)
            got = tracec.nn.functional.interpolate(tracec.from_numpy(a).to(getattr(tracec, half)), **kw)
            assert str(got.dtype).split(".")[-1] == half
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy(), err_msg=f"{kw} {half}")
        for size in (1, (2, 3), 4):
            want = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(a4).to(getattr(torch, half)), size)
            got = tracec.nn.functional.adaptive_avg_pool2d(tracec.from_numpy(a4).to(getattr(tracec, half)), size)
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_func_transforms_stay_in_the_graph_of_closed_over_parameters_like_torch():
    # MeanFlow-style flow matching: u, dudt = torch.func.jvp(model, (z, r, t),
    # (v, 0, 1)) and the loss trained through u; a gradient penalty through
    # torch.func.grad: the results depend on the module's parameters, which
    # the function closes over, so they stay differentiable
    out = {}
    for lib in (torch, tracec):
        r = np.random.default_rng(0)
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.from_numpy(r.normal(size=(2, 3)).astype(np.float32)))
            lin.bias.copy_(lib.from_numpy(r.normal(size=(2,)).astype(np.float32)))
        x = lib.from_numpy(r.normal(size=(4, 3)).astype(np.float32))
        v = lib.from_numpy(r.normal(size=(4, 3)).astype(np.float32))
        f = lambda z: lib.tanh(lin(z)) * 2           # noqa: E731
        u, du = lib.func.jvp(f, (x,), (v,))
        g = lib.func.grad(lambda z: f(z).sum())(x)
        o, vjp_fn = lib.func.vjp(f, x)
        gv = vjp_fn(lib.ones(4, 2))[0]
        J = lib.func.jacrev(f)(x[0])
        flags = [t.requires_grad for t in (u, du, g, o, gv, J)]
        loss = ((u - (v[:, :2] - du).detach()) ** 2).mean() + ((g.norm(2, dim=1) - 1) ** 2).mean() \
            + gv.pow(2).mean() + J.sum()
        loss.backward()
        out[lib.__name__] = (flags, loss.item(), lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy())
        with lib.no_grad():
            assert not lib.func.jvp(f, (x,), (v,))[0].requires_grad
        lin.requires_grad_(False)
        assert not any(t.requires_grad for t in (lib.func.jvp(f, (x,), (v,))[1], lib.func.grad(
            lambda z: f(z).sum())(x), lib.func.vjp(f, x)[0]))
    got, want = out["tracec"], out["torch"]
    assert got[0] == want[0] == [True] * 6
    assert got[1] == pytest.approx(want[1], rel=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-4, atol=1e-6)


def test_sdpa_explicit_mask_with_is_causal_like_torch():
    # a decision-transformer / GPT block passing its padding mask and
    # is_causal=True: torch's CPU flash kernel (4-D inputs, no dropout, a
    # 2-D or 4-D mask) applies both; otherwise the math kernel refuses
    r = np.random.default_rng(0)
    q, k, v = (r.normal(size=(2, 2, 4, 3)).astype(np.float32) for _ in range(3))
    kl = r.normal(size=(2, 2, 6, 3)).astype(np.float32)
    m2 = np.ones((4, 4), bool)
    m2[:, 0] = False
    m4 = np.zeros((2, 1, 1, 4), np.float32)
    m4[0, 0, 0, 2:] = -1e4
    pad = np.ones((4, 6), bool)
    pad[:, 1] = False

    def run(L, q, k, v, mask, **kw):
        qt = L.from_numpy(q).requires_grad_(True)
        y = L.nn.functional.scaled_dot_product_attention(qt, L.from_numpy(k), L.from_numpy(v),
                                                         attn_mask=L.from_numpy(mask), is_causal=True, **kw)
        (y * 1.5).sum().backward()
        return y.detach().numpy(), qt.grad.numpy()

    for args in ((q, k, v, m2), (q, k, v, m4), (q, kl, kl, pad)):
        for a, b in zip(run(tracec, *args), run(torch, *args)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for args, kw in (((q[0], k[0], v[0], m2), {}), ((q, k, v, m2), {"dropout_p": 0.5}),
                     ((q, k, v, np.ones((2, 4, 4), bool)), {})):
        msgs = []
        for L in (tracec, torch):
            with pytest.raises(RuntimeError) as e:
                run(L, *args, **kw)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1] == ("_scaled_dot_product_attention: Explicit attn_mask should "
                                      "not be set when is_causal=True")


def test_embedding_index_and_shape_messages_like_torch():
    # decision-transformer's embed_timestep with a timestep past max_ep_len
    # (or a -1 pad) raises, as torch's embedding does, rather than reading
    # a row from the end
    def err(fn):
        try:
            fn()
        except (IndexError, RuntimeError, ValueError) as e:
            return type(e).__mro__[1 if type(e).__name__ == "ShapeError" else 0].__name__, str(e)
        return None

    cases = [lambda L: L.nn.Embedding(5, 2)(L.tensor([5])),
             lambda L: L.nn.Embedding(5, 2)(L.tensor([[0, -1]])),
             lambda L: L.nn.functional.embedding(L.tensor([1, 7], dtype=L.int32), L.ones(4, 3)),
             lambda L: L.randn(2, 3).expand(4, 3),
             lambda L: L.randn(2, 1).expand(5, 3, 4),
             lambda L: L.broadcast_to(L.randn(2, 3), (2, 4)),
             lambda L: L.nn.functional.binary_cross_entropy_with_logits(L.randn(3, 1), L.rand(3))]
    for case in cases:
        assert err(lambda: case(tracec)) == err(lambda: case(torch)) is not None
    np.testing.assert_array_equal(tracec.nn.functional.embedding(tracec.tensor([0, 3]), tracec.eye(4)).numpy(),
                                  np.eye(4, dtype=np.float32)[[0, 3]])


def test_class_index_target_dtypes_like_torch():
    # Pytorch-UNet's true_masks.to(dtype=torch.long): nll_loss / cross_entropy
    # take int64 and uint8 class indices; any other dtype is refused as torch does
    r = np.random.default_rng(0)
    x = r.normal(size=(3, 4)).astype(np.float32)
    for name in ("cross_entropy", "nll_loss"):
        for d in ("int32", "int16", "bool", "float32", "float64", "uint8", "int64"):
            res = []
            for L in (torch, tracec):
                t = L.tensor([0, 1, 1]).to(getattr(L, "bool" if d == "bool" else d))
                try:
                    res.append(round(getattr(L.nn.functional, name)(L.from_numpy(x), t).item(), 5))
                except RuntimeError as e:
                    res.append(str(e))
            assert res[0] == res[1], (name, d, res)
