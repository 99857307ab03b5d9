"""Eager random draws follow PyTorch's CPU streams (``tracec.torch_rng``):
after the same ``manual_seed`` every eager draw, initializer, dropout mask,
sampler order and generator state equals torch 2.13's."""
import numpy as np
import pytest

import tracec
from tracec import torch_rng

torch = pytest.importorskip("torch")

CASES = {
    "rand": lambda L: L.rand(3, 40),
    "rand float64": lambda L: L.rand(7, dtype=L.float64),
    "rand float16": lambda L: L.rand(20, dtype=L.float16).float(),
    "rand bfloat16": lambda L: L.rand(20, dtype=L.bfloat16).float(),
    "randn small (cached second sample)": lambda L: L.cat([L.randn(3), L.randn(3), L.randn(1)]),
    "randn 16-blocks and a tail": lambda L: L.randn(37, 3),
    "randn float64": lambda L: L.randn(33, dtype=L.float64),
    "randn_like": lambda L: L.randn_like(L.zeros(3, 40)),
    "normal(mean, std, size)": lambda L: L.normal(2.0, 3.0, size=(40,)),
    "uniform_": lambda L: L.empty(50, 7).uniform_(-0.2, 0.3),
    "uniform_ on a transpose": lambda L: L.empty(20, 30).t().uniform_(),
    "normal_": lambda L: L.empty(50, 7).normal_(0.5, 2.0),
    "normal_ small": lambda L: L.empty(5).normal_(0.5, 2.0),
    "normal_ on a transpose": lambda L: L.empty(20, 30).t().normal_(),
    "randint": lambda L: L.randint(0, 7, (9, 4)),
    "randint wide": lambda L: L.randint(-5, 2 ** 33, (6,)),
    "randint_like": lambda L: L.randint_like(L.zeros(12), 3, 9),
    "randint with 0-d tensor bounds (hashnerf's cube corner)": lambda L: L.cat(
        [L.randint(0, L.tensor(5.0).int() - 1, (3,)), L.randint(L.tensor(2), L.tensor(9), (7,)),
         L.randint(L.tensor(6), (4,))]),
    "randperm": lambda L: L.randperm(300),
    "randperm of a 0-d tensor count (orobix's batch sampler)": lambda L: L.cat(
        [L.randperm(L.tensor(9)), L.randperm(L.zeros(4, dtype=L.int64).sum() + 6)]),
    "randperm large (block swaps)": lambda L: L.randperm(100000),
    "randperm int32 / float32": lambda L: L.cat([L.randperm(50, dtype=L.int32).double(),
                                                 L.randperm(50, dtype=L.float32).double()]),
    "bernoulli(p)": lambda L: L.bernoulli(L.full((4, 20), 0.4)),
    "bernoulli_(0.3)": lambda L: L.empty(100).bernoulli_(0.3),
    "bernoulli_(p tensor)": lambda L: L.empty(4, 25).bernoulli_(L.full((25,), 0.6)),
    "exponential_": lambda L: L.empty(40).exponential_(2.0),
    "random_()": lambda L: L.empty(10, dtype=L.int64).random_(),
    "random_(from, to)": lambda L: L.empty(10).random_(3, 17),
    "dropout": lambda L: L.nn.functional.dropout(L.ones(64, 30), 0.3, True),
    "dropout2d": lambda L: L.nn.functional.dropout2d(L.ones(4, 6, 3, 3), 0.5, True),
    "nn.Dropout module": lambda L: L.nn.Dropout(0.1)(L.ones(8, 50)),
    "Linear init": lambda L: L.cat([p.flatten() for p in L.nn.Linear(30, 20).parameters()]),
    "Conv2d init": lambda L: L.cat([p.flatten() for p in L.nn.Conv2d(3, 8, 3).parameters()]),
    "LSTM init": lambda L: L.cat([p.flatten() for p in L.nn.LSTM(5, 7, 2).parameters()]),
    "Embedding init": lambda L: L.nn.Embedding(100, 16).weight,
    "xavier_uniform_": lambda L: L.nn.init.xavier_uniform_(L.empty(10, 20)),
    "kaiming_normal_": lambda L: L.nn.init.kaiming_normal_(L.empty(10, 20)),
    "trunc_normal_ (redraws)": lambda L: L.nn.init.trunc_normal_(L.empty(100, 20), std=0.02),
    "trunc_normal_ (rejection)": lambda L: L.nn.init.trunc_normal_(L.empty(50, 20), a=-0.1, b=0.2),
    "orthogonal_": lambda L: L.nn.init.orthogonal_(L.empty(3, 8), gain=2.0),
    "gumbel_softmax": lambda L: L.nn.functional.gumbel_softmax(L.zeros(4, 5), tau=0.5),
    "multinomial with replacement": lambda L: L.multinomial(L.tensor([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]), 9, True),
    "multinomial without": lambda L: L.multinomial(L.tensor([0.1, 0.2, 0.3, 0.4]), 3),
    "Categorical.sample": lambda L: L.distributions.Categorical(logits=L.zeros(3, 6)).sample((4,)),
    "Normal.sample": lambda L: L.distributions.Normal(L.zeros(20), L.ones(20)).sample(),
    "randn float16 (blocks, a tail)": lambda L: L.randn(40, dtype=L.float16).float(),
    "randn bfloat16 (blocks, a tail)": lambda L: L.randn(1000, dtype=L.bfloat16).float(),
    "normal_ float16": lambda L: L.empty(37, dtype=L.float16).normal_(0.5, 2.0).float(),
    "randn float16 small": lambda L: L.randn(5, dtype=L.float16).float(),
    "log_normal_": lambda L: L.empty(40).log_normal_(0.5, 0.7),
    "geometric_": lambda L: L.empty(40).geometric_(0.3),
    "cauchy_": lambda L: L.empty(40).cauchy_(0.5, 2.0),
    "random_() bfloat16": lambda L: L.empty(10, dtype=L.bfloat16).random_().float(),
    "random_() float16": lambda L: L.empty(10, dtype=L.float16).random_().float(),
    "random_() bool / uint8 / int32": lambda L: L.cat([
        L.empty(10, dtype=t).random_().to(L.float64) for t in (L.bool, L.uint8, L.int32)]),
    "rrelu training": lambda L: L.nn.functional.rrelu(L.linspace(-3, 3, 41), training=True),
    "nn.RReLU module": lambda L: L.nn.RReLU(0.1, 0.4)(L.randn(6, 7)),
    "alpha_dropout": lambda L: L.nn.functional.alpha_dropout(L.ones(64, 30), 0.3, True),
    "feature_alpha_dropout": lambda L: L.nn.functional.feature_alpha_dropout(
        L.ones(4, 6, 3, 3), 0.3, True),
    "dropout1d / dropout3d": lambda L: L.cat([
        L.nn.functional.dropout1d(L.ones(4, 6, 5), 0.5, True).flatten(),
        L.nn.functional.dropout3d(L.ones(2, 6, 2, 3, 3), 0.5, True).flatten()]),
    "dropout float16": lambda L: L.nn.functional.dropout(
        L.ones(64, 30, dtype=L.float16), 0.3, True).float(),
    "dropout bfloat16": lambda L: L.nn.functional.dropout(
        L.ones(64, 30, dtype=L.bfloat16), 0.3, True).float(),
    "Exponential.sample": lambda L: L.distributions.Exponential(L.full((20,), 2.0)).sample(),
    "Cauchy.rsample": lambda L: L.distributions.Cauchy(L.zeros(20), L.ones(20)).rsample(),
    "rand_like of a transpose": lambda L: L.rand_like(L.zeros(20, 30).t()),
    "rand_like channels_last": lambda L: L.rand_like(
        L.zeros(2, 3, 4, 5).to(memory_format=L.channels_last)).contiguous(),
    "randn_like channels_last (scalar path)": lambda L: L.randn_like(
        L.zeros(2, 3, 4, 5).to(memory_format=L.channels_last)),
    "randn_like of a transpose": lambda L: L.randn_like(L.zeros(20, 30).t()),
    "randint_like of a transpose": lambda L: L.randint_like(L.zeros(20, 30).t(), 0, 9),
    "rand_like memory_format=channels_last": lambda L: L.rand_like(
        L.zeros(2, 3, 4, 5), memory_format=L.channels_last),
    "poisson (inversion and rejection)": lambda L: L.poisson(
        L.tensor([0.5, 1.0, 3.0, 9.9, 10.0, 20.0, 100.0, 0.0]).repeat(4)),
    "Poisson.sample": lambda L: L.distributions.Poisson(L.full((20,), 3.0)).sample(),
    "NegativeBinomial.sample": lambda L: L.distributions.NegativeBinomial(
        L.full((20,), 3.0), probs=L.full((20,), 0.4)).sample(),
    "Gamma.sample (alpha < 1 boost, float32)": lambda L: L.distributions.Gamma(
        L.tensor([0.1, 0.5, 2.0, 30.0]), L.tensor([1.0, 3.0, 0.5, 2.0])).sample((5,)),
    "Gamma.rsample float64": lambda L: L.distributions.Gamma(
        L.tensor([0.3, 4.0], dtype=L.float64), L.ones(2, dtype=L.float64)).rsample((6,)),
    "Dirichlet.sample": lambda L: L.distributions.Dirichlet(L.tensor([0.5, 1.0, 2.0])).sample((4,)),
    "_sample_dirichlet": lambda L: L._sample_dirichlet(L.tensor([[0.2, 1.0, 5.0], [1.0, 1.0, 1.0]])),
    "Beta.sample": lambda L: L.distributions.Beta(L.tensor([0.5, 2.0]), L.tensor([1.0, 3.0])).sample((4,)),
    "Chi2.sample": lambda L: L.distributions.Chi2(L.full((20,), 3.0)).sample(),
    "StudentT.sample": lambda L: L.distributions.StudentT(L.full((20,), 3.0)).sample(),
    "binomial (BTRS, inversion, p > 0.5)": lambda L: L.binomial(
        L.tensor([5.0, 10.0, 100.0, 3.0, 50.0, 1000.0, 0.0, 7.0]).repeat(6),
        L.tensor([0.2, 0.5, 0.9, 0.1, 0.3, 0.77, 0.5, 1.0]).repeat(6)),
    "binomial float64": lambda L: L.binomial(L.full((30,), 40.0, dtype=L.float64),
                                             L.full((30,), 0.35, dtype=L.float64)),
    "Binomial.sample": lambda L: L.distributions.Binomial(10, L.full((20,), 0.3)).sample(),
    "bernoulli(input, p) / Tensor.bernoulli(p)": lambda L: L.cat([
        L.bernoulli(L.zeros(30), 0.3), L.zeros(30).bernoulli(0.6)]),
    "VonMises.sample (rejection loop)": lambda L: L.distributions.VonMises(
        L.zeros(20), L.full((20,), 2.0)).sample(),
    "dropout of a transpose / channels_last (memory order)": lambda L: L.cat([
        L.nn.functional.dropout(L.ones(30, 20).t(), 0.3, True).flatten(),
        L.nn.functional.dropout(L.ones(2, 3, 4, 5).to(memory_format=L.channels_last), 0.3,
                                True).flatten()]),
    "alpha_dropout of a transpose": lambda L: L.nn.functional.alpha_dropout(
        L.ones(30, 20).t(), 0.3, True),
    "in-place draws on a transpose": lambda L: L.cat([
        L.empty(30, 20).t().cauchy_().flatten(), L.empty(30, 20).t().geometric_(0.3).flatten(),
        L.empty(30, 20).t().log_normal_().flatten(), L.empty(30, 20).t().exponential_().flatten()]),
    "float64 transforms (the C library's log, log1p, exp, tan; fused mean/std)": lambda L: L.cat([
        L.empty(3000, dtype=L.float64).exponential_(1.7),
        L.empty(3000, dtype=L.float64).geometric_(0.03),
        L.empty(3000, dtype=L.float64).cauchy_(0.2, 1.3),
        L.empty(3000, dtype=L.float64).log_normal_(0.2, 0.6),
        L.empty(3001, dtype=L.float64).normal_(0.3, 1.7),
        L.empty(7, dtype=L.float64).normal_(0.3, 1.7),
        L.randn(20000, dtype=L.float64)]),
    "a Generator of its own": lambda L: L.rand(5, generator=L.Generator().manual_seed(3)),
    "get / set_rng_state": lambda L: (lambda s: (L.rand(3), L.set_rng_state(s), L.rand(3))[2])(
        L.get_rng_state()),
}


#: Cases from the models36/models37 programs' parity work.
CASES.update({
    'geometric_ int64 on a transpose': lambda L: L.empty(4, 6, dtype=L.int64).t().geometric_(0.2),
    'poisson (both samplers)': lambda L: L.poisson(L.tensor([[0., 0.5, 3.0], [9.99, 10.0, 250.0]])),
    'poisson float64, many': lambda L: L.poisson(L.full((200,), 30.0, dtype=L.float64)),
    'Gamma.sample (boosted and not)': lambda L: L.distributions.Gamma(L.tensor([0.3, 1.0, 2.5, 10.0, 0.05] * 4), 1.0).sample(),
    "Beta.sample (mixup's)": lambda L: L.distributions.Beta(0.4, 0.4).sample((8,)),
    'Beta.rsample of tensors': lambda L: L.distributions.Beta(L.tensor([1.0, 3.0]), L.tensor([2.0, 0.5])).rsample((3,)),
    'Chi2 / StudentT / NegativeBinomial': lambda L: L.cat([
        L.distributions.Chi2(L.tensor([3.0, 1.0])).sample((3,)).flatten(),
        L.distributions.StudentT(L.tensor([3.0, 10.0])).sample((3,)).flatten(),
        L.distributions.NegativeBinomial(5.0, probs=L.tensor([0.3, 0.6])).sample((3,)).flatten()]),
    'Exponential.rsample': lambda L: L.distributions.Exponential(L.tensor([1.0, 2.0])).rsample((3,)),
    'Weibull / Pareto (Exponential-based)': lambda L: L.cat([
        L.distributions.Weibull(1.0, 2.0).rsample((3,)), L.distributions.Pareto(1.0, 2.0).rsample((3,))]),
    'log_normal_ (scalar path past 16)': lambda L: L.empty(40).log_normal_(0.5, 0.7),
    'log_normal_ float64 on a transpose': lambda L: L.empty(6, 4, dtype=L.float64).t().log_normal_(),
    'dropout on a transpose (memory order)': lambda L: L.nn.functional.dropout(
        L.arange(1.0, 31.0).reshape(6, 5).t(), 0.5, True),
    'dropout on a permuted 3-d view': lambda L: L.nn.Dropout(0.3)(L.ones(2, 5, 4).permute(2, 0, 1)),
    'dropout on a strided slice (C order)': lambda L: L.nn.functional.dropout(L.ones(8, 6)[:, ::2], 0.5, True),
    'binomial (inversion and BTRS, both tails)': lambda L: L.binomial(
        L.tensor([10., 50, 200, 0, 5, 1000, 30, 7, 100, 64]),
        L.tensor([0.3, 0.5, 0.9, 0.5, 1.0, 0.01, 0.75, 0.2, 0.45, 0.999])),
    'binomial float64, broadcast prob': lambda L: L.binomial(
        L.full((4, 5), 40.0, dtype=L.float64), L.tensor([0.1, 0.3, 0.5, 0.7, 0.95], dtype=L.float64)),
    'multinomial one sample with replacement': lambda L: L.cat(
        [L.multinomial(L.tensor([[0.3, 0.7], [0.6, 0.4]]), 1, True) for _ in range(8)]),
    'Categorical.sample() (one draw per row)': lambda L: L.distributions.Categorical(
        logits=L.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]])).sample(),
    'multinomial of a transpose (memory order)': lambda L: L.multinomial(L.arange(1., 16.).reshape(3, 5).t(), 2),
    'randn_like of a transpose (scalar path)': lambda L: L.randn_like(L.zeros(8, 5).t()),
    'randint_like of a permute': lambda L: L.randint_like(L.zeros(4, 6, 5).permute(2, 0, 1), 3, 9),
    'rand_like of a channels-last tensor': lambda L: L.rand_like(
        L.zeros(2, 3, 4, 4).to(memory_format=L.channels_last)),
    'VonMises.sample (rejection rounds)': lambda L: L.distributions.VonMises(
        L.tensor([0.0, 1.0]), L.tensor([2.0, 0.5])).sample((3,)),
    'rrelu in training': lambda L: L.nn.functional.rrelu(L.linspace(-3, 3, 40), training=True),
    'rrelu float64 on a transpose': lambda L: L.nn.functional.rrelu(
        L.linspace(-2, 1, 30, dtype=L.float64).reshape(5, 6).t(), 0.1, 0.4, training=True),
    'nn.AlphaDropout module': lambda L: L.nn.AlphaDropout(0.2)(L.ones(50)),
    'dropout on a transpose': lambda L: L.nn.functional.dropout(L.ones(6, 5, 8).transpose(0, 1), 0.3),
    "dropout on batch_first attention's output": lambda L: L.nn.Dropout(0.2)(
        L.nn.MultiheadAttention(16, 2, batch_first=True)(*[L.ones(3, 4, 16)] * 3)[0]),
    'randn_like of a permute (scalar normal path)': lambda L: L.randn_like(
        L.zeros(4, 6, 5).permute(2, 0, 1)),
    'randn_like channels_last': lambda L: L.randn_like(
        L.zeros(2, 3, 4, 4).to(memory_format=L.channels_last)),
    'bernoulli_(p tensor) on a transpose': lambda L: L.empty(5, 6).t().bernoulli_(
        L.full((6, 5), 0.5)),
    'Categorical.sample() (one draw)': lambda L: L.stack(
        [L.distributions.Categorical(L.tensor([[0.3, 0.7]])).sample() for _ in range(8)]),
    'poisson (small and large rates)': lambda L: L.poisson(
        L.tensor([[0.5, 3.0, 9.9, 10.0], [40.0, 0.0, 150.5, 1e4]]).repeat(6, 1)),
    'Gamma.sample (alpha below and above 1)': lambda L: L.distributions.Gamma(
        L.tensor([0.3, 1.0, 2.5, 7.0, 50.0]), L.tensor(2.0)).sample((6,)),
    'Gamma.sample float64': lambda L: L.distributions.Gamma(
        L.tensor([0.3, 4.0], dtype=L.float64), L.tensor(1.0, dtype=L.float64)).sample((5,)),
    "Beta.sample (mixup's lam)": lambda L: L.distributions.Beta(
        L.tensor([0.4]), L.tensor([0.4])).sample((8,)),
    'Exponential.sample (exponential_)': lambda L: L.distributions.Exponential(L.ones(5) * 2).sample((2,)),
    'Cauchy.sample (cauchy_)': lambda L: L.distributions.Cauchy(L.zeros(3), L.ones(3)).sample((3,)),
    'log_normal_ (scalar double normals)': lambda L: L.empty(5, 6).t().log_normal_(0.5, 0.3),
    'geometric_ (ceil(log(u) / log1p(-p)))': lambda L: L.empty(30).geometric_(0.3),
    'alpha_dropout (bernoulli_ noise)': lambda L: L.nn.functional.alpha_dropout(
        L.arange(80.).view(8, 10).t(), 0.3, True),
    'nn.RReLU float64': lambda L: L.nn.RReLU(0.1, 0.3).train()(L.randn(4, 5, dtype=L.float64)),
    'binomial (inversion and BTRS, p on both sides of 1/2)': lambda L: L.binomial(
        L.tensor([5.0, 5.0, 40.0, 200.0, 1000.0, 0.0, 7.0]).repeat(30),
        L.tensor([0.3, 0.8, 0.4, 0.7, 0.05, 0.3, 1.0]).repeat(30)),
})


#: Cases equal to rounding, not bit for bit: their arithmetic after the
#: draws is not PyTorch's kernels' (the draws are).
APPROXIMATE = {
    "orthogonal_": "QR by NumPy's LAPACK call, not PyTorch's",
    "gumbel_softmax": "log / softmax in NumPy's float32 arithmetic",
    "Weibull / Pareto (Exponential-based)": "the transforms' pow / exp in NumPy's float32",
}


@pytest.mark.parametrize("name", list(CASES))
def test_eager_draw_equals_torch(name):
    f = CASES[name]
    tracec.manual_seed(7)
    torch.manual_seed(7)
    with tracec.no_grad():
        a = np.asarray(f(tracec).detach().numpy(), np.float64)
    with torch.no_grad():
        b = np.asarray(f(torch).detach().numpy(), np.float64)
    assert a.shape == b.shape
    if name in APPROXIMATE:
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(a, b)
    # the streams stay aligned afterwards
    assert float(tracec.rand(())) == float(torch.rand(()))


@pytest.mark.parametrize("seed", [0, 7])
def test_float32_normals_are_bit_exact(seed):
    """PyTorch's AVX2 normal kernel (its own float32 log and sincos, with
    the compiler's fused multiply-adds) reproduced bit for bit, also for
    the float16 / bfloat16 blocks it computes in float32."""
    tracec.manual_seed(seed)
    torch.manual_seed(seed)
    for f in (lambda L: L.randn(100003), lambda L: L.empty(40, 50).normal_(0.5, 2.0),
              lambda L: L.nn.init.normal_(L.empty(300, 7), std=0.02),
              lambda L: L.randn(200003, dtype=L.float16).float(),
              lambda L: L.empty(30001, dtype=L.bfloat16).normal_(0.5, 2.0).float()):
        assert np.array_equal(f(tracec).numpy(), f(torch).numpy())
    assert float(tracec.rand(())) == float(torch.rand(()))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_uniform_ranges_are_bit_exact(dtype):
    """``uniform_(from, to)``: the kernel's fused multiply-add, and a value
    that rounds up to ``to`` replaced by ``from`` (1e4 .. 1e4 + 1 makes
    many; so does rounding float16 / bfloat16 uniforms up to 1)."""
    tracec.manual_seed(3)
    torch.manual_seed(3)
    for lo, hi in ((-0.2, 0.3), (0.0, 1.0), (1e4, 1e4 + 1), (-1e-3, 7.1), (-0.18257418, 0.18257418)):
        a = tracec.empty(20000, dtype=getattr(tracec, dtype)).uniform_(lo, hi)
        b = torch.empty(20000, dtype=getattr(torch, dtype)).uniform_(lo, hi)
        assert np.array_equal(a.double().numpy(), b.double().numpy()), (lo, hi)
    a = tracec.rand(20000, dtype=getattr(tracec, dtype))
    b = torch.rand(20000, dtype=getattr(torch, dtype))
    assert np.array_equal(a.double().numpy(), b.double().numpy())
    assert float(tracec.rand(())) == float(torch.rand(()))


def test_seeded_draws_with_a_range_are_bit_exact():
    """Initializers (uniform_ ranges), torch.normal(mean, std, size) (one
    rounding inside the kernel) and rrelu (its bounds in the opmath type,
    its float64 arithmetic unfused)."""
    tracec.manual_seed(4)
    torch.manual_seed(4)
    for f in (lambda L: L.cat([p.flatten() for p in L.nn.Linear(30, 20).parameters()]),
              lambda L: L.nn.init.xavier_uniform_(L.empty(10, 20)),
              lambda L: L.normal(2.0, 3.0, size=(40,)),
              lambda L: L.nn.functional.rrelu(L.randn(50, 40), 0.1, 0.4, training=True),
              lambda L: L.nn.functional.rrelu(L.randn(50, 40, dtype=L.float64), training=True)):
        assert np.array_equal(f(tracec).detach().numpy(), f(torch).detach().numpy())
    assert float(tracec.rand(())) == float(torch.rand(()))


def test_rng_state_is_pytorchs_bytes_and_loads_a_state_torch_saved():
    torch.manual_seed(123)
    torch.rand(700)
    torch.randn(3)                        # leaves a cached second normal sample
    tracec.manual_seed(123)
    tracec.rand(700)
    tracec.randn(3)
    ours, theirs = tracec.get_rng_state(), torch.get_rng_state()
    assert ours.dtype == tracec.uint8 and tuple(ours.shape) == (torch_rng.STATE_BYTES,)
    assert bytes(ours.numpy()) == bytes(theirs.numpy())
    tracec.set_rng_state(tracec.tensor(theirs.numpy()))
    np.testing.assert_array_equal(tracec.randn(5).numpy(), torch.randn(5).numpy())
    with pytest.raises(RuntimeError, match="RNG state size"):
        tracec.set_rng_state(tracec.zeros(100, dtype=tracec.uint8))


def _loader_orders(L):
    L.manual_seed(0)
    ds = L.utils.data.TensorDataset(L.arange(20))
    out = []
    for _ in range(2):
        for (b,) in L.utils.data.DataLoader(ds, batch_size=6, shuffle=True):
            out += b.tolist()
    out += L.utils.data.random_split(range(10), [3, 7])[0].indices
    out += list(L.utils.data.RandomSampler(range(10), replacement=True, num_samples=40))
    out += list(L.utils.data.SubsetRandomSampler([5, 6, 7, 8]))
    out.append(float(L.rand(())))
    return out


def test_dataloader_shuffles_splits_and_samplers_equal_torch():
    assert _loader_orders(tracec) == _loader_orders(torch)


def test_a_seeded_training_loop_prints_pytorchs_losses():
    """A program as users write it: manual_seed, default init, dropout, a
    shuffled DataLoader, Adam; every loss equals PyTorch's."""
    def run(L):
        L.manual_seed(42)
        model = L.nn.Sequential(L.nn.Linear(8, 32), L.nn.ReLU(), L.nn.Dropout(0.2),
                                L.nn.Linear(32, 3))
        x, y = L.randn(40, 8), L.randint(0, 3, (40,))
        loader = L.utils.data.DataLoader(L.utils.data.TensorDataset(x, y), batch_size=8,
                                         shuffle=True)
        opt = L.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            for xb, yb in loader:
                opt.zero_grad()
                loss = L.nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses
    np.testing.assert_allclose(run(tracec), run(torch), rtol=1e-5)


def test_mersenne_twister_seeding_and_words():
    """The engine itself: init_genrand of the seed's low 32 bits, then the
    tempered words std::mt19937 gives (its 10000th output is 4123659995)."""
    mt = torch_rng.MTState(5489)
    assert int(mt.random(10000)[-1]) == 4123659995
    a, b = torch_rng.MTState(7), torch_rng.MTState(7 + (1 << 32))
    assert np.array_equal(a.random(5), b.random(5))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_draws_repeat_under_a_seed_and_stay_fresh(backend):
    """Compiled code draws from the counter-based stream (not PyTorch's, as
    torch.compile's Philox): every call fresh numbers, the same numbers
    after the same seed, one trace; eager draws around it stay PyTorch's."""
    def f(x):
        return x + tracec.randn(3) + tracec.nn.functional.dropout(x, 0.5)
    comp = tracec.compile(f, backend=backend)
    x = tracec.ones(3)
    comp(x)
    tracec.manual_seed(0)
    a, b = comp(x).tolist(), comp(x).tolist()
    tracec.manual_seed(0)
    c = comp(x).tolist()
    assert a == c and a != b
    assert comp.cache_info().traces == 1
    tracec.manual_seed(5)
    torch.manual_seed(5)
    assert tracec.rand(4).tolist() == torch.rand(4).tolist()


def test_counter_draws_make_eager_equal_compiled():
    def f(x):
        return x + tracec.nn.functional.dropout(x, 0.5)
    comp = tracec.compile(f, backend="interp")
    x = tracec.ones(50)
    with torch_rng.counter_draws():
        comp(x)
        tracec.manual_seed(3)
        want = f(x).tolist()
        tracec.manual_seed(3)
        assert comp(x).tolist() == want


def _sampler_orders(L):
    out = []
    ds = L.utils.data.DistributedSampler(range(23), num_replicas=3, rank=1, shuffle=True, seed=5)
    for epoch in range(2):            # g.manual_seed(seed + epoch); randperm
        ds.set_epoch(epoch)
        out += list(ds)
    g = L.Generator().manual_seed(3)
    out += [i for b in L.utils.data.BatchSampler(
        L.utils.data.RandomSampler(range(17), generator=g), 4, False) for i in b]
    out += list(L.utils.data.SubsetRandomSampler([3, 5, 9, 11, 20], generator=g))
    out += list(L.utils.data.WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], 12))
    out += list(L.utils.data.WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], 3, replacement=False))
    out.append(float(L.rand(())))
    return out


def test_distributed_batch_weighted_samplers_equal_torch():
    tracec.manual_seed(1)
    torch.manual_seed(1)
    assert _sampler_orders(tracec) == _sampler_orders(torch)


def _transformed(L, T):
    import random
    # torchvision's RandomChoice / RandomOrder draw from Python's random
    random.seed(5)
    L.manual_seed(3)
    img = (L.arange(3 * 8 * 8, dtype=L.float32).reshape(3, 8, 8) % 17) / 17
    img8 = (img * 255).to(L.uint8)
    ts = [T.RandomCrop(5, padding=1), T.RandomHorizontalFlip(), T.RandomVerticalFlip(),
          T.RandomResizedCrop(6, antialias=True), T.RandomRotation(30),
          T.RandomAffine(20, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(5, 10, -5, 5)),
          T.RandomErasing(p=1.0), T.RandomErasing(p=1.0, value="random"),
          T.ColorJitter(0.3, 0.3, 0.3, 0.1), T.GaussianBlur(3, (0.1, 2.0)),
          T.RandomApply([T.RandomHorizontalFlip(1.0)], p=0.5),
          T.RandomChoice([T.RandomHorizontalFlip(1.0), T.RandomVerticalFlip(1.0)]),
          T.RandomOrder([T.RandomHorizontalFlip(0.5), T.RandomRotation(10)]),
          T.RandomGrayscale(0.5), T.RandomInvert(), T.RandomSolarize(0.5),
          T.RandomAdjustSharpness(2.0), T.RandomAutocontrast()]
    out = [t(img).numpy() for t in ts for _ in range(3)]
    ts8 = [T.RandomPosterize(4), T.RandomEqualize(), T.AutoAugment(), T.RandAugment(),
           T.TrivialAugmentWide(), T.AugMix()]
    out += [t(img8).numpy() for t in ts8 for _ in range(3)]
    return out, float(L.rand(()))


def test_vision_transforms_draw_torchvisions_numbers():
    from vision_oracle import optional
    tv, _ = optional()
    if tv is None:
        pytest.skip("torchvision (the test oracle) is not installed")
    from tracec.vision import transforms as T
    ours, our_next = _transformed(tracec, T)
    theirs, their_next = _transformed(torch, tv.transforms)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=1e-4)
    assert our_next == their_next


class _SeedEcho:
    """Each item: the worker's seed and a draw made in the worker."""

    def __init__(self, lib):
        self.lib = lib

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.lib.tensor([float(self.lib.initial_seed() % 1000003), float(self.lib.rand(()))])


def _worker_draws(L):
    L.manual_seed(11)
    loader = L.utils.data.DataLoader(_SeedEcho(L), batch_size=1, num_workers=2, shuffle=True)
    return [b.tolist() for b in loader], float(L.rand(()))


def test_dataloader_workers_get_pytorchs_base_seed():
    """num_workers > 0: the base seed drawn from the loader's generator
    (worker k seeded base + k) and the main stream after it are PyTorch's."""
    assert _worker_draws(tracec) == _worker_draws(torch)


class _Stream:
    """An iterable data set: each worker yields its id and two draws."""

    def __init__(self, lib):
        self.lib = lib

    def __iter__(self):
        info = self.lib.utils.data.get_worker_info()
        for _ in range(2):
            yield self.lib.tensor([float(info.id), float(self.lib.rand(()))])


def _epochs(L, iterable, persistent):
    L.manual_seed(5)
    inits = []
    data = type("S", (_Stream, L.utils.data.IterableDataset), {})(L) if iterable else _SeedEcho(L)
    loader = L.utils.data.DataLoader(data, batch_size=1, num_workers=2, shuffle=None if iterable else True,
                                     persistent_workers=persistent,
                                     worker_init_fn=lambda wid: inits.append(wid))
    epochs = [[b.tolist() for b in loader] for _ in range(3)]
    return epochs, float(L.rand(())), len(inits) if L is tracec else None


@pytest.mark.parametrize("iterable", [False, True], ids=["map", "iterable"])
@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "persistent"])
def test_dataloader_epochs_with_persistent_workers_are_pytorchs(iterable, persistent):
    """persistent_workers=True: one base seed for the loader's life, the
    workers' random streams go on across epochs (an iterable data set is
    iterated again in each), worker_init_fn runs once per worker; without
    it, every epoch draws a new base seed and starts new workers."""
    ours, our_next, inits = _epochs(tracec, iterable, persistent)
    theirs, their_next, _ = _epochs(torch, iterable, persistent)
    assert ours == theirs and our_next == their_next
    assert inits == (2 if persistent else 6)



@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_range_is_bit_exact(dtype):
    # ATen's x * (to - from) + from is one fused multiply-add: two roundings
    # differ from it in the last bit of ~half the draws (LSTM / Linear init)
    def draw(L):
        L.manual_seed(0)
        return np.concatenate([
            L.empty(5000, dtype=getattr(L, dtype)).uniform_(-0.14, 0.14).numpy(),
            L.empty(5000, dtype=getattr(L, dtype)).uniform_(-3.0, 0.01).numpy(),
            L.empty(5000, dtype=getattr(L, dtype)).uniform_(2.0, 3.5).numpy()])
    np.testing.assert_array_equal(draw(tracec), draw(torch))


def test_default_init_of_an_lstm_cell_is_bit_exact():
    def init(L):
        L.manual_seed(0)
        return np.concatenate([p.detach().numpy().ravel()
                               for p in L.nn.LSTMCell(1, 51).parameters()])
    np.testing.assert_array_equal(init(tracec), init(torch))
