"""Gaps the models43 programs (tests/programs/models43: gpt-fast, llama2.c's
train.py, meta's llama, modded-nanogpt, airbench) and their probes found in
tracec, each against torch: a compiled model whose forward sets a module
attribute to a tensor that requires grad (llama2.c's ``self.last_loss``)
read and backpropagated outside the compiled call; lerp / addcmul / addcdiv
of bfloat16 / float16 tensors computed in float32 and rounded once, and
float32 ones rounded left to right, as PyTorch's CPU kernels (Adam on
modded-nanogpt's bfloat16 parameters)."""
import warnings

import numpy as np
import pytest
import torch as real_torch

import tracec as torch


def _last_loss_model(m):
    class Net(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = m.nn.Embedding(11, 6)
            self.fc = m.nn.Linear(6, 11)
            self.last_loss = None

        def forward(self, tokens, targets=None):
            logits = self.fc(m.tanh(self.emb(tokens)))
            if targets is not None:
                self.last_loss = m.nn.functional.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                self.last_loss = None
            return logits
    return Net()


def test_compiled_model_setting_last_loss_backpropagates_outside_compiled():
    # llama2.c's train.py: model = torch.compile(model); model(X, Y);
    # loss = raw_model.last_loss; (loss / accum).backward().  tracec ran such a
    # call eagerly ("sets the module attribute last_loss to a tensor that
    # requires grad"); the attribute's tensor is now a result of the compiled
    # call with a compiled backward, as a returned loss is.
    real_torch.manual_seed(0)
    r = _last_loss_model(real_torch)
    t = _last_loss_model(torch)
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in r.state_dict().items()})
    rng = np.random.default_rng(0)
    c = torch.compile(t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no "running eagerly"
        for step in range(4):
            x = rng.integers(0, 11, (3, 5))
            y = rng.integers(-1, 11, (3, 5))  # some ignored targets
            c(torch.tensor(x), torch.tensor(y))
            got = c.last_loss / 2
            got.backward()
            r(real_torch.tensor(x), real_torch.tensor(y))
            want = r.last_loss / 2
            want.backward()
            assert got.requires_grad and got.grad_fn is not None
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
            for (n, p), q in zip(t.named_parameters(), r.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5,
                                           atol=1e-7, err_msg=n)
        # inference (no targets) sets it to None, as eager
        c(torch.tensor(x))
        assert c.last_loss is None
    info = c.cache_info()
    assert info.eager_signatures == 0 and info.traces >= 1


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_lerp_addcmul_addcdiv_round_as_torch(dtype):
    # PyTorch's CPU kernels compute a bfloat16 / float16 lerp / addcmul /
    # addcdiv in float32 and round once, and a float32 one as
    # self + value * t1 (op) t2 left to right; tracec rounded each step to
    # the tensor's dtype, and multiplied by value last.
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(4096).astype(np.float32) for _ in range(3))
    c = np.abs(c) + 0.1
    def run(m):
        d = getattr(m, dtype)
        x, y, z = (m.tensor(v).to(d) for v in (a, b, c))
        w = m.tensor(rng2.random(4096).astype(np.float32)).to(d)
        out = [m.lerp(x, y, 0.3), m.lerp(x, y, 0.8), m.lerp(x, y, w),
               m.addcmul(x, y, z, value=0.37), m.addcdiv(x, y, z, value=-0.013),
               x.clone().lerp_(y, 0.05), x.clone().addcmul_(y, z, value=1e-3),
               x.clone().addcdiv_(y, z, value=0.7)]
        return [o.float().numpy() for o in out]
    rng2 = np.random.default_rng(1)
    got = run(torch)
    rng2 = np.random.default_rng(1)
    want = run(real_torch)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=str(i))


@pytest.mark.parametrize("opt", ["Adam", "AdamW"])
def test_adam_on_bfloat16_parameters_matches_torch(opt):
    # modded-nanogpt's model.bfloat16(): Adam's moments and the update of a
    # bfloat16 parameter (lerp_, addcmul_, addcdiv_ rounded once from float32).
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(64).astype(np.float32)
    grads = [rng.standard_normal(64).astype(np.float32) * 0.05 for _ in range(5)]

    def run(m):
        p = m.nn.Parameter(m.tensor(p0).to(m.bfloat16))
        o = getattr(m.optim, opt)([p], lr=0.04, betas=(0.8, 0.95))
        for g in grads:
            p.grad = m.tensor(g).to(m.bfloat16)
            o.step()
        st = o.state[p]
        return [t.detach().float().numpy() for t in (p, st["exp_avg"], st["exp_avg_sq"])]
    for g, w in zip(run(torch), run(real_torch)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_tensor_with_scalar_operands_rounds_as_torch(dtype):
    # PyTorch casts a number added to / subtracted from a bfloat16 tensor to
    # bfloat16 (tracec kept it in float32), and reads a one-element float
    # tensor of another dtype multiplying / dividing it in float32 (tracec
    # cast it to the half type): Adam's exp_avg_sq.sqrt() / bias_correction2_sqrt.
    rng = np.random.default_rng(0)
    a = rng.standard_normal(4096).astype(np.float32)

    def run(m):
        x = m.tensor(a).to(getattr(m, dtype))
        s64 = m.tensor(0.9486833, dtype=m.float64)
        out = [x + 1e-3, x - 0.3337, 1.3337 - x, x.add(0.3337, alpha=2), x.clone().add_(1e-8),
               x / s64, x * s64, m.mul(x, m.tensor(0.9486833)), x.clone().div_(s64),
               m.tensor(0.9486833) * x, x * 0.9486833, x / 0.9486833,
               x + m.tensor(0.3337, dtype=m.float64), x / m.tensor([0.37])]
        return [o.float().numpy() for o in out]
    for i, (g, w) in enumerate(zip(run(torch), run(real_torch))):
        np.testing.assert_array_equal(g, w, err_msg=str(i))


def test_normalize_with_tensor_mean_and_std_does_not_warn():
    # airbench's T.Normalize(CIFAR_MEAN, CIFAR_STD) with tensors: torchvision
    # converts them with torch.as_tensor, silently; tracec used
    # torch.tensor and warned "To copy construct from a tensor ...".
    from tracec.vision import transforms as T
    mean, std = torch.tensor((0.4914, 0.4822, 0.4465)), torch.tensor((0.2470, 0.2435, 0.2616))
    x = torch.rand(2, 3, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = T.Normalize(mean, std)(x)
        y16 = T.Normalize(mean, std)(x.half())
    np.testing.assert_allclose(y.numpy(), ((x - mean.view(-1, 1, 1)) / std.view(-1, 1, 1)).numpy())
    assert y16.dtype == torch.float16


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_compiled_lerp_addcmul_addcdiv_and_bfloat16_addends_match_torch(dtype):
    # The same roundings in compiled code (the fused forms are casts and
    # float64 arithmetic, which the backend must not fold away).
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))

    def f(m, x, y, z):
        return [m.lerp(x, y, 0.3), m.lerp(x, y, 0.8), m.addcmul(x, y, z, value=0.37),
                m.addcdiv(x, y, z.abs() + 1, value=-0.013), x + 0.3337, 1.3337 - x]
    got = torch.compile(lambda x, y, z: f(torch, x, y, z))(
        *(torch.tensor(v).to(getattr(torch, dtype)) for v in (a, b, c)))
    want = f(real_torch, *(real_torch.tensor(v).to(getattr(real_torch, dtype)) for v in (a, b, c)))
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g.float().numpy(), w.float().numpy(), err_msg=str(i))


def test_half_precision_composites_keep_torch_grad_fn_names():
    # computed in float32 and cast back, their grad_fn was the cast's
    # (ToCopyBackward0); PyTorch's is the op's own
    def names(m):
        x = m.randn(3, dtype=m.float16, requires_grad=True)
        y = m.randn(3, dtype=m.bfloat16, requires_grad=True)
        outs = (m.lerp(y, y.detach(), 0.3), m.addcmul(y, y, y, value=0.1),
                m.addcdiv(x, x, x.detach() + 2), x * 0.5, x / 3,
                y * m.tensor(0.3, dtype=m.float64), y / m.tensor(0.3))
        return [o.grad_fn.name() for o in outs]
    assert names(torch) == names(real_torch)


def test_float16_matmul_is_the_float32_gemm_rounded_once():
    # airbench's half-precision net: NumPy's float16 matmul is a loop without
    # BLAS (~20x slower than the float32 GEMM; the half-precision airbench
    # trained in 13 s instead of 4); tracec now computes it as the float32
    # GEMM rounded once, as PyTorch's CPU kernels accumulate in float32 (both
    # an ulp off PyTorch's for about 0.25% of the elements, its sums' order).
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 512)).astype(np.float16)
    b = rng.standard_normal((512, 64)).astype(np.float16)
    got = (torch.tensor(a) @ torch.tensor(b)).numpy()
    want = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    ref = (real_torch.tensor(a) @ real_torch.tensor(b)).numpy()
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)
