"""Statistical quality of tracec's random numbers, drawn as programs draw them.

An RL loop makes thousands of calls that draw one or two numbers each,
interleaved with dropout masks; these tests draw that way (and in bulk) and
check uniformity (chi-square on bins), independence (serial correlation and
chi-square on lag-1 pairs), that the counter advances by exactly the number
of draws (no value reused, none skipped), how many random bits each dtype
gets, and the distributions built on the generator: ``randn``, ``randint``,
``bernoulli``, ``multinomial``, ``randperm``, ``Categorical.sample``.  Last,
eager and compiled (interp, cpu) draws are bit-identical.

Every check is a test at a fixed seed with a limit at about 4.5 standard
deviations (a chance failure about 1 in 300 000 per check), loose enough that
a sound generator passes at any seed, tight enough that the broken generators
in ``test_checks_catch_*`` fail (those tests break the generator on purpose
and expect the checks to reject it).
"""
import itertools
import math

import numpy as np
import pytest

import tracec
import tracec.nn.functional as F
from tracec import ops
from tracec.creation import Generator
from tracec.distributions import Bernoulli, Categorical
from tracec.ops import random as random_op


# About the counter-based stream compiled code draws from: eager draws use
# it too here (by default they follow PyTorch's, tests/test_torch_rng.py).
pytestmark = pytest.mark.usefixtures("counter_rng")


Z = 4.5


def chi2_limit(df: int) -> float:
    """The chi-square quantile at ``Z`` standard normal deviations
    (Wilson-Hilferty), i.e. p about 3e-6."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + Z * math.sqrt(a)) ** 3


def assert_chi2(counts, expected, what):
    counts = np.asarray(counts, np.float64).ravel()
    expected = np.asarray(expected, np.float64).ravel()
    assert abs(counts.sum() - expected.sum()) < 1e-6 * expected.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    limit = chi2_limit(len(counts) - 1)
    assert stat < limit, f"{what}: chi-square {stat:.1f} >= {limit:.1f} ({len(counts) - 1} df)"


def assert_uniform01(x, what, bins=20):
    x = np.asarray(x, np.float64).ravel()
    assert x.min() >= 0.0 and x.max() < 1.0, f"{what}: outside [0, 1)"
    counts = np.histogram(x, bins=bins, range=(0.0, 1.0))[0]
    assert_chi2(counts, np.full(bins, len(x) / bins), what)


def assert_independent(x, what, lags=(1, 2, 3), grid=8):
    """Serial correlation at a few lags, and the joint distribution of
    non-overlapping pairs ``(x[2i], x[2i+1])`` on a ``grid`` x ``grid`` board."""
    x = np.asarray(x, np.float64).ravel()
    n = len(x)
    for lag in lags:
        r = float(np.corrcoef(x[:-lag], x[lag:])[0, 1])
        assert abs(r) < Z / math.sqrt(n - lag), f"{what}: lag-{lag} correlation {r:.4f}"
    a, b = x[0:n - 1:2], x[1::2]
    cells = np.minimum((a * grid).astype(int), grid - 1) * grid \
        + np.minimum((b * grid).astype(int), grid - 1)
    counts = np.bincount(cells, minlength=grid * grid)
    assert_chi2(counts, np.full(grid * grid, len(a) / grid ** 2), f"{what} (lag-1 pairs)")


def assert_discrete_independent(x, probs, what):
    """Non-overlapping pairs of a sequence of categories ``0..k-1`` drawn
    with ``probs``: their joint counts against the product of marginals,
    and the lag-1 serial correlation."""
    x = np.asarray(x).ravel()
    k = len(probs)
    a, b = x[0:len(x) - 1:2], x[1::2]
    counts = np.bincount(a * k + b, minlength=k * k)
    assert_chi2(counts, np.outer(probs, probs).ravel() * len(a), f"{what} (lag-1 pairs)")
    r = float(np.corrcoef(x[:-1], x[1:])[0, 1])
    assert abs(r) < Z / math.sqrt(len(x) - 1), f"{what}: lag-1 correlation {r:.4f}"


def single_draws(n, seed=0, k=1):
    tracec.manual_seed(seed)
    return np.stack([tracec.rand(k).numpy() for _ in range(n)])


# --- checks on deliberately broken generators: the checks below have power ---------------

def _weyl_only(z):
    """No mixing at all: the draws are a Weyl sequence (x + 0.618 mod 1),
    perfectly uniform and perfectly serially dependent."""
    return z


def test_checks_catch_a_generator_without_mixing(monkeypatch):
    monkeypatch.setattr(random_op, "splitmix64", _weyl_only)
    x = single_draws(4000)[:, 0]
    assert_uniform01(x, "weyl")                        # uniformity alone cannot tell
    with pytest.raises(AssertionError, match="lag-1 pairs|correlation"):
        assert_independent(x, "weyl")


def test_checks_catch_a_counter_that_does_not_advance(monkeypatch):
    def stuck(self, shape, dtype):
        with tracec.no_grad():
            return ops.random_uniform(self.state, shape, dtype)
    monkeypatch.setattr(Generator, "uniform", stuck)
    with pytest.raises(AssertionError):
        assert_uniform01(single_draws(2000)[:, 0], "stuck")


def test_checks_catch_a_counter_that_advances_one_too_few(monkeypatch):
    real = Generator.uniform

    def overlapping(self, shape, dtype):
        u = real(self, shape, dtype)
        self.state._data[1] -= 1                       # the next call reuses the last draw
        return u
    monkeypatch.setattr(Generator, "uniform", overlapping)
    x = single_draws(3000, k=2)
    with pytest.raises(AssertionError, match="correlation"):
        assert_independent(x.ravel(), "overlap")


def test_checks_catch_low_entropy_bits(monkeypatch):
    """A generator keeping 8 bits per draw: float32 draws on a 2**-8 grid."""
    monkeypatch.setattr(random_op, "uniform_bits", lambda d: 8)
    with pytest.raises(AssertionError, match="bit"):
        check_bits(tracec.float32, 24)


# --- rand: single draws, as an RL loop makes them ---------------------------------------

def test_single_draws_are_uniform_and_independent():
    x = single_draws(12000, seed=543)[:, 0]
    assert_uniform01(x, "rand(1)")
    assert_independent(x, "rand(1)")


def test_pairs_of_draws_are_independent_within_and_across_calls():
    x = single_draws(6000, seed=3, k=2)
    assert_uniform01(x, "rand(2)")
    r = float(np.corrcoef(x[:, 0], x[:, 1])[0, 1])
    assert abs(r) < Z / math.sqrt(len(x)), f"rand(2): within-call correlation {r:.4f}"
    assert_independent(x.ravel(), "rand(2) stream")
    # The last draw of one call against the first of the next.
    assert_independent(np.stack([x[:-1, 1], x[1:, 0]], 1).ravel(), "rand(2) call boundary",
                       lags=(1,))


def test_dropout_masks_and_single_draws_are_one_contiguous_stream():
    """REINFORCE's step: a 128-wide dropout mask, then one draw for the
    action.  Each consumes the next counters, so together they are exactly
    one long ``rand`` (nothing reused, nothing skipped), and the action draws
    are uniform, independent of each other and of the preceding mask."""
    steps, width, p = 1500, 128, 0.6
    tracec.manual_seed(6)
    masks, us = [], []
    ones = tracec.ones(1, width)
    for _ in range(steps):
        masks.append(F.dropout(ones, p, training=True).numpy()[0] > 0)
        us.append(float(tracec.rand(1)))
    masks, us = np.array(masks), np.array(us)
    assert _offset() == steps * (width + 1)
    tracec.manual_seed(6)
    ref = tracec.rand(steps, width + 1).numpy()
    np.testing.assert_array_equal(masks, ref[:, :width] < np.float32(1 - p))
    np.testing.assert_array_equal(us, ref[:, width])

    assert_uniform01(us, "action draws")
    assert_independent(us, "action draws")
    kept = masks.sum(1)
    mean, sd = width * (1 - p), math.sqrt(width * p * (1 - p))
    assert abs(kept.mean() - mean) < Z * sd / math.sqrt(steps)
    r = float(np.corrcoef(kept, us)[0, 1])
    assert abs(r) < Z / math.sqrt(steps), f"mask size vs next draw: correlation {r:.4f}"
    r = float(np.corrcoef(masks[:, -1], us)[0, 1])
    assert abs(r) < Z / math.sqrt(steps), f"last mask bit vs next draw: correlation {r:.4f}"


def _offset():
    return int(tracec.get_rng_state()[1])


@pytest.mark.parametrize("draw, count", [
    (lambda: tracec.rand(3, 4), 12),
    (lambda: tracec.rand(()), 1),
    (lambda: tracec.randn(5), 10),                     # Box-Muller: two uniforms each
    (lambda: tracec.randint(-2, 9, (7,)), 7),
    (lambda: tracec.randperm(6), 6),
    (lambda: tracec.bernoulli(tracec.full((3,), 0.5)), 3),
    (lambda: tracec.multinomial(tracec.ones(2, 5), 7, replacement=True), 14),
    (lambda: tracec.multinomial(tracec.ones(2, 5), 3), 10),
    (lambda: F.dropout(tracec.ones(4, 5), 0.3), 20),
    (lambda: Categorical(tracec.ones(3, 4)).sample((2,)), 6),
    (lambda: Bernoulli(tracec.full((3,), 0.2)).sample(), 3),
    (lambda: tracec.empty(4).uniform_(-1, 1), 4),
    (lambda: tracec.empty(4).normal_(), 8),
], ids=["rand", "rand0d", "randn", "randint", "randperm", "bernoulli", "multinomial_repl",
        "multinomial", "dropout", "categorical", "Bernoulli", "uniform_", "normal_"])
def test_state_advances_by_the_number_of_draws(draw, count):
    tracec.manual_seed(1)
    draw()
    before = _offset()
    draw()
    assert _offset() - before == count


# --- bits -------------------------------------------------------------------------------

def check_bits(dtype, bits, n=40000, seed=2):
    """Draws lie on the ``2**-bits`` grid, in [0, 1), and each of those bits
    (the lowest too) is set about half the time."""
    tracec.manual_seed(seed)
    u = tracec.rand(n, dtype=dtype).double().numpy()
    assert u.min() >= 0.0 and u.max() < 1.0, f"{dtype}: a draw outside [0, 1)"
    k = u * (1 << bits)
    assert np.array_equal(k, np.floor(k)), f"{dtype}: draws off the 2**-{bits} grid"
    k = k.astype(np.int64)
    freq = np.array([((k >> b) & 1).mean() for b in range(bits)])
    worst = int(np.argmax(abs(freq - 0.5)))
    assert abs(freq[worst] - 0.5) < Z * 0.5 / math.sqrt(n), \
        f"{dtype}: bit {worst} (from the lowest) is set in {freq[worst]:.4f} of draws"


@pytest.mark.parametrize("dtype, bits", [(tracec.float32, 24), (tracec.float64, 53),
                                         (tracec.float16, 11), (tracec.bfloat16, 8)])
def test_each_dtype_gets_its_significand_of_random_bits(dtype, bits):
    check_bits(dtype, bits)


@pytest.mark.parametrize("dtype", [tracec.float16, tracec.bfloat16])
def test_half_precision_draws_are_uniform_below_one(dtype):
    tracec.manual_seed(4)
    u = tracec.rand(60000, dtype=dtype).double().numpy()
    assert u.max() < 1.0
    assert_uniform01(u, str(dtype), bins=16)


# --- distributions built on the generator ----------------------------------------------

def _normal_cdf(z):
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


@pytest.mark.parametrize("dtype", [tracec.float32, tracec.float64])
def test_randn_moments_and_shape(dtype):
    n = 100000
    tracec.manual_seed(8)
    z = tracec.randn(n, dtype=dtype).double().numpy()
    assert abs(z.mean()) < Z / math.sqrt(n)
    assert abs(z.var() - 1.0) < Z * math.sqrt(2.0 / n)
    assert abs((z ** 3).mean()) < Z * math.sqrt(15.0 / n)           # skewness
    assert abs((z ** 4).mean() - 3.0) < Z * math.sqrt(96.0 / n)     # kurtosis
    assert_uniform01(_normal_cdf(z), f"Phi(randn) {dtype}", bins=40)


def test_single_randn_draws_are_independent():
    tracec.manual_seed(9)
    z = np.array([float(tracec.randn(1)) for _ in range(6000)])
    assert_independent(_normal_cdf(z), "Phi(randn(1))")


def test_randint_bounds_and_uniformity():
    tracec.manual_seed(10)
    x = tracec.randint(-3, 4, (70000,)).numpy()
    assert x.min() == -3 and x.max() == 3
    assert_chi2(np.bincount(x + 3, minlength=7), np.full(7, 10000), "randint(-3, 4)")
    single = np.array([int(tracec.randint(0, 2, (1,))) for _ in range(6000)])
    assert set(single.tolist()) == {0, 1}
    assert_discrete_independent(single, [0.5, 0.5], "randint(0, 2) single draws")


def test_randint_wide_range_uses_the_low_bits():
    tracec.manual_seed(11)
    x = tracec.randint(0, 2 ** 40, (20000,)).numpy()
    assert x.min() >= 0 and x.max() < 2 ** 40
    for b in (0, 1, 8, 15, 30, 39):
        f = float(((x >> b) & 1).mean())
        assert abs(f - 0.5) < Z * 0.5 / math.sqrt(len(x)), f"bit {b} set in {f:.4f}"


def test_bernoulli_frequencies():
    p = np.repeat(np.linspace(0.0, 1.0, 11), 4000)
    tracec.manual_seed(12)
    x = tracec.bernoulli(tracec.tensor(p, dtype=tracec.float32)).numpy().reshape(11, 4000)
    assert x[0].sum() == 0 and x[-1].sum() == 4000
    for pk, row in zip(p[::4000], x):
        sd = math.sqrt(max(pk * (1 - pk), 1e-12) / 4000)
        assert abs(row.mean() - pk) <= Z * sd + 1e-12, (pk, row.mean())
    tracec.manual_seed(13)
    y = np.array([float(Bernoulli(tracec.tensor(0.3)).sample()) for _ in range(6000)])
    assert abs(y.mean() - 0.3) < Z * math.sqrt(0.21 / 6000)
    assert_discrete_independent(y.astype(int), [0.7, 0.3], "Bernoulli(0.3) single samples")


P4 = np.array([0.1, 0.2, 0.3, 0.4])


def test_multinomial_with_replacement_frequencies():
    tracec.manual_seed(15)
    x = tracec.multinomial(tracec.tensor(P4 * 3.0), 40000, replacement=True).numpy()
    assert_chi2(np.bincount(x, minlength=4), 40000 * P4, "multinomial(replacement=True)")


def test_multinomial_without_replacement_draws_in_proportion():
    """First draw ~ p; second ~ p restricted to the rest, renormalized."""
    rows = 30000
    tracec.manual_seed(16)
    x = tracec.multinomial(tracec.tensor(np.tile(P4, (rows, 1))), 2).numpy()
    assert (x[:, 0] != x[:, 1]).all()
    counts = np.zeros((4, 4))
    np.add.at(counts, (x[:, 0], x[:, 1]), 1)
    expected = np.array([[P4[i] * P4[j] / (1 - P4[i]) if i != j else 0.0
                          for j in range(4)] for i in range(4)]) * rows
    off = ~np.eye(4, dtype=bool)
    assert_chi2(counts[off], expected[off], "multinomial pairs")


def test_randperm_of_4_draws_every_permutation_equally_often():
    perms = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    n = 9600
    tracec.manual_seed(17)
    counts = np.zeros(24)
    for _ in range(n):
        counts[perms[tuple(tracec.randperm(4).tolist())]] += 1
    assert_chi2(counts, np.full(24, n / 24), "randperm(4)")


def test_categorical_sample_frequencies_single_and_batched():
    probs = tracec.tensor(P4, dtype=tracec.float32)
    tracec.manual_seed(18)
    single = np.array([int(Categorical(probs).sample()) for _ in range(6000)])
    assert_chi2(np.bincount(single, minlength=4), 6000 * P4, "Categorical.sample() singles")
    assert_discrete_independent(single, P4, "Categorical.sample() singles")
    tracec.manual_seed(20)
    batched = Categorical(logits=probs.log() + 1.0).sample((40000,)).numpy()
    assert_chi2(np.bincount(batched, minlength=4), 40000 * P4, "Categorical.sample((n,))")
    two = tracec.tensor([[0.5, 0.5], [0.9, 0.1]])
    tracec.manual_seed(21)
    rows = np.array([Categorical(two).sample().tolist() for _ in range(4000)])
    assert abs(rows[:, 0].mean() - 0.5) < Z * 0.5 / math.sqrt(4000)
    assert abs(rows[:, 1].mean() - 0.1) < Z * 0.3 / math.sqrt(4000)


# --- eager and compiled draw the same bits ----------------------------------------------

def _draws(x):
    return (F.dropout(x, 0.6, training=True),
            tracec.rand(3, dtype=tracec.float64), tracec.rand(2, dtype=tracec.float16),
            tracec.rand(2, dtype=tracec.bfloat16), tracec.randn(2, 3),
            tracec.randint(0, 10, (4,)), tracec.randint(0, 2 ** 40, (3,)),
            tracec.bernoulli(tracec.full((5,), 0.3)),
            Categorical(probs=x.softmax(-1), validate_args=False).sample(),
            tracec.multinomial(x.softmax(-1), 2), tracec.randperm(5),
            x + tracec.rand(1))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_draws_are_bit_identical_to_eager(backend):
    x = tracec.ones(2, 6)

    def run(fn):
        tracec.manual_seed(22)
        outs = [[t.numpy().copy() for t in fn(x)] for _ in range(3)]
        return outs, tracec.get_rng_state().tolist()
    eager, eager_state = run(_draws)
    fn = tracec.compile(_draws, backend=backend)
    compiled, compiled_state = run(fn)
    assert fn.cache_info().hits == 2
    assert compiled_state == eager_state
    for call, (e, c) in enumerate(zip(eager, compiled)):
        for k, (a, b) in enumerate(zip(e, c)):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b, err_msg=f"call {call}, draw {k}")


def test_compiled_float64_randn_agrees_to_the_last_bit_of_log_and_cos():
    """float64 Box-Muller rounds the native log/cos, which may differ from
    NumPy's in the last ulp; the uniforms underneath are identical."""
    def f():
        return tracec.randn(2000, dtype=tracec.float64)
    tracec.manual_seed(23)
    eager = f().numpy()
    fn = tracec.compile(f, backend="cpu")
    tracec.manual_seed(23)
    fn()
    tracec.manual_seed(23)
    np.testing.assert_allclose(fn().numpy(), eager, rtol=4e-16, atol=4e-16)
