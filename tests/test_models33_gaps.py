"""Gaps the models33 programs (tests/programs/models33) and the corners of
the APIs they use found in tracec, each checked against torch 2.13."""
import pytest

import tracec

pt = pytest.importorskip("torch")


def _outcome(fn):
    """(exception type name, message) or ("ok", result as a list)."""
    try:
        r = fn()
    except Exception as e:      # noqa: BLE001 - the type is what is compared
        return type(e).__name__, str(e).split("\n")[0]
    return "ok", r.tolist() if hasattr(r, "tolist") else r


def _same(case):
    got, want = _outcome(lambda: case(tracec)), _outcome(lambda: case(pt))
    assert got == want


@pytest.mark.parametrize("case", [
    # DGI's nn.PReLU() is one shared slope; PReLU(n) needs n channels at
    # dim 1, and a 1-D input has one channel (tracec took its length)
    lambda L: L.nn.functional.prelu(L.tensor([-1.0, 2.0]), L.tensor([0.5, 0.1])),
    lambda L: L.nn.PReLU(3)(L.tensor([-1.0, 2.0, -3.0])),
    lambda L: L.nn.functional.prelu(L.tensor([-1.0, 2.0]), L.tensor([0.5])),
    lambda L: L.nn.functional.prelu(L.tensor(-1.0), L.ones(3)),
    lambda L: L.nn.functional.prelu(L.tensor(-1.0), L.tensor(0.5)),
    lambda L: L.nn.functional.prelu(L.tensor([[-1.0, 2.0]]), L.tensor([[0.5, 0.1]])),
    lambda L: L.nn.functional.prelu(L.tensor([[-1.0, 2.0]]), L.tensor([0.5, 0.1], dtype=L.float64)),
    lambda L: L.nn.functional.prelu(L.ones(2, 3, 4), L.ones(4)),
    lambda L: L.nn.functional.prelu(L.tensor([[[-1.0], [2.0]]]), L.tensor([0.5, 0.1])),
], ids=["1d-two-slopes", "module-1d", "1d-one-slope", "0d-three-slopes", "0d-0d", "2d-weight",
        "dtypes", "channels", "3d"])
def test_prelu_checks_like_torch(case):
    _same(case)


@pytest.mark.parametrize("case", [
    # DGI's Discriminator: nn.Bilinear(n_h, n_h, 1) on (h, summary) pairs;
    # mismatched operands get PyTorch's bilinear() words, not a matmul's
    lambda L: L.nn.Bilinear(3, 4, 1)(L.ones(2, 3), L.ones(2, 3)),
    lambda L: L.nn.functional.bilinear(L.ones(2, 4), L.ones(2, 4), L.ones(1, 3, 4)),
    lambda L: L.nn.functional.bilinear(L.ones(2, 3), L.ones(5, 4), L.ones(1, 3, 4)),
    lambda L: L.nn.functional.bilinear(L.ones(2, 3), L.ones(2, 1, 4), L.ones(1, 3, 4)),
    lambda L: L.nn.functional.bilinear(L.ones(2, 3), L.ones(2, 4), L.ones(1, 3, 4), L.ones(2)),
    lambda L: L.nn.functional.bilinear(L.ones(2, 3), L.ones(2, 4), L.ones(3, 4)),
    lambda L: L.nn.functional.bilinear(L.ones(3), L.ones(4), L.ones(2, 3, 4), L.ones(2)),
    lambda L: L.nn.functional.bilinear(L.ones(5, 2, 3), L.ones(5, 2, 4), L.ones(2, 3, 4)).shape,
], ids=["input2", "input1", "batch", "ndim", "bias", "weight-2d", "1d-ok", "3d-ok"])
def test_bilinear_refusals_like_torch(case):
    _same(case)


@pytest.mark.parametrize("case", [
    # ArcFace's one_hot.scatter_(1, label.view(-1, 1).long(), 1) with a
    # label past the classes: PyTorch's scatter kernels raise RuntimeError
    lambda L: L.zeros(2, 3).scatter_(1, L.tensor([[3], [1]]), 1),
    lambda L: L.zeros(2, 3).scatter_(1, L.tensor([[-1], [1]]), 1.0),
    lambda L: L.zeros(2, 3).scatter(1, L.tensor([[3], [1]]), L.ones(2, 1)),
    lambda L: L.zeros(3).scatter_add(0, L.tensor([5]), L.ones(1)),
    lambda L: L.zeros(2, 3).scatter_reduce(1, L.tensor([[3], [1]]), L.ones(2, 1), "amax"),
    lambda L: L.zeros(2, 3).index_add_(0, L.tensor([2]), L.ones(1, 3)),
    lambda L: L.zeros(2, 3).index_fill_(0, L.tensor([2]), 1.0),
    lambda L: L.zeros(2, 3).index_copy_(0, L.tensor([2]), L.ones(1, 3)),
], ids=["scatter_", "negative", "scatter", "scatter_add", "scatter_reduce", "index_add_",
        "index_fill_", "index_copy_"])
def test_out_of_range_index_error_types_like_torch(case):
    _same(case)


def test_distribution_param_shape_is_a_size():
    # cleanrl's Categorical(logits=logits): param_shape is a torch.Size
    for lib in (tracec, pt):
        D = lib.distributions
        for d in (D.Categorical(logits=lib.zeros(2, 3)), D.Bernoulli(logits=lib.zeros(2)),
                  D.OneHotCategorical(probs=lib.ones(4, 3) / 3)):
            assert type(d.param_shape) is lib.Size
        assert D.Categorical(logits=lib.zeros(2, 3)).param_shape == lib.Size([2, 3])


@pytest.mark.parametrize("case", [
    # CenterLoss' distmat.addmm_(x, centers.t(), beta=1, alpha=-2) on a
    # distmat that is still an expanded view, or of a broadcastable shape
    lambda L: L.zeros(3, 1).expand(3, 4).addmm_(L.ones(3, 2), L.ones(2, 4), beta=1, alpha=-2),
    lambda L: L.zeros(3, 1).expand(3, 4).add_(1),
    lambda L: L.zeros(3, 1).expand(3, 4).clamp_(min=1e-12, max=1e+12),
    lambda L: L.ones(4).addmm_(L.ones(3, 2), L.ones(2, 4)),
    lambda L: L.ones(4).baddbmm_(L.ones(2, 3, 2), L.ones(2, 2, 4)),
    lambda L: L.ones(4).addmm_(L.ones(3, 2), L.ones(3, 4)),
    lambda L: L.ones(4).add_(L.ones(3, 4)),
    lambda L: L.ones(3, 4).addmm_(L.ones(3, 2), L.ones(2, 4), beta=1, alpha=-2),
], ids=["addmm_-expanded", "add_-expanded", "clamp_-expanded", "addmm_-broadcast",
        "baddbmm_-broadcast", "addmm_-bad-mats", "add_-broadcast", "addmm_-ok"])
def test_inplace_refusals_like_torch(case):
    _same(case)
