"""Gaps the models33 programs (tests/programs/models33) and the corners of
the APIs they use found in tracec, each checked against torch 2.13."""
import numpy as np
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


def _grads(lib, fn, *values):
    xs = [lib.tensor(v, requires_grad=True) for v in values]
    out = fn(lib, *xs)
    out.backward(lib.ones_like(out))
    return out.tolist(), [x.grad.tolist() for x in xs]


def _assert_close_lists(got, want, zero_signs=True):
    import math
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            if math.isnan(b) or math.isinf(b) or b == 0:
                assert (math.isnan(a) and math.isnan(b)) or (a == b and (
                    not zero_signs or math.copysign(1, a) == math.copysign(1, b))), (g, w)
            else:
                assert abs(a - b) <= 1e-6 * abs(b), (g, w)


@pytest.mark.parametrize("name", ["acos", "asin"])
def test_acos_asin_gradients_at_the_domain_edges_like_torch(name):
    # SphereFace-style heads take acos of a cosine that reaches +-1: PyTorch's
    # derivative there is an infinity (tracec's composite gave nan), at 0 it
    # is -1 / 1 (tracec gave 0 through atan2's abs), beyond |x| = 1 nan
    vals = [1.0, -1.0, 0.0, -0.0, 0.5, -0.3, 0.9999999, 1.5, -2.0]
    got = _grads(tracec, lambda L, x: getattr(L, name)(x), vals)
    want = _grads(pt, lambda L, x: getattr(L, name)(x), vals)
    _assert_close_lists([got[0]] + got[1], [want[0]] + want[1])


def test_atan2_gradients_on_the_axes_and_at_the_origin_like_torch():
    # x * recip to y and -y * recip to x, an infinite recip (the origin, an
    # underflowed x*x + y*y) counted as 0; tracec's abs gave 0 on the axes
    # (an infinite operand is left out: PyTorch's inf * 0 gradient is nan,
    # tracec's 0, which keeps the value finite)
    ys = [0.0, 1.0, 0.0, -2.0, 3.0, 0.0, -0.0, 1e-30, 1e20]
    xs = [1.0, 0.0, -2.0, 0.0, 4.0, 0.0, -1.0, 1e-30, 1.0]
    got = _grads(tracec, lambda L, y, x: L.atan2(y, x), ys, xs)
    want = _grads(pt, lambda L, y, x: L.atan2(y, x), ys, xs)
    _assert_close_lists([got[0]], [want[0]])
    # the gradients' values; their zeros' signs are not PyTorch's on the
    # axes (+0.0 for -0.0): the coefficients' own gradient paths, which
    # give the second derivatives (below), add zeros
    _assert_close_lists(got[1], want[1], zero_signs=False)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_atan2_second_derivatives_like_torch(dtype):
    # the derivative's coefficients had their gradient stopped: a
    # create_graph backward gave 0 for d2/dy2 (and, composed, wrong Hessians)
    def hess(L):
        m = L.tensor([[0.3, -1.2, 0.5], [2.0, 0.7, -0.4], [0.1, 1.5, -2.2]],
                     dtype=getattr(L, dtype), requires_grad=True)
        g, = L.autograd.grad((L.atan2(m, m.T + 2) * m).sum(), m, create_graph=True)
        h, = L.autograd.grad((g * g).sum(), m)
        y = L.tensor([0.3, 2.0, 0.0], dtype=getattr(L, dtype), requires_grad=True)
        x = L.tensor([0.7, -0.4, 1.5], dtype=getattr(L, dtype), requires_grad=True)
        gy, = L.autograd.grad(L.atan2(y, x).sum(), y, create_graph=True)
        return g.tolist(), h.tolist(), L.autograd.grad(gy.sum(), (y, x))
    got, want = hess(tracec), hess(pt)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(got[0], want[0], rtol=tol)
    np.testing.assert_allclose(got[1], want[1], rtol=tol)
    for a, b in zip(got[2], want[2]):
        np.testing.assert_allclose(a.tolist(), b.tolist(), rtol=tol, atol=tol)


def test_acos_gradient_compiled_matches_eager():
    def f(x):
        return tracec.acos(x.clamp(-1, 1)).sum() + tracec.atan2(x, tracec.ones(())).sum()
    x = tracec.tensor([1.0, 0.3, 0.0, -1.0], requires_grad=True)
    eager = tracec.autograd.grad(f(x), x)[0].tolist()
    compiled = tracec.autograd.grad(tracec.compile(f)(x), x)[0].tolist()
    assert eager[0] == compiled[0] == float("-inf") and eager[3] == compiled[3] == float("-inf")
    assert compiled[1:3] == pytest.approx(eager[1:3], rel=1e-6)


def _set_data(L, value, requires_grad=True):
    p = L.nn.Parameter(L.tensor([-1.0, 1.0]), requires_grad=requires_grad)
    p.data = value(L) if callable(value) else value
    return [str(p.dtype).split(".")[-1], list(p.shape), p.requires_grad]


@pytest.mark.parametrize("case", [
    # LTC's apply_weight_constraints: w.data = relu(w.data); a float64 or
    # reshaped value is taken, an integer one refused on a parameter that
    # requires grad, a non-tensor refused naming its type
    lambda L: _set_data(L, lambda L: L.ones(3, dtype=L.float64)),
    lambda L: _set_data(L, lambda L: L.tensor([1, 2])),
    lambda L: _set_data(L, lambda L: L.tensor([1, 2]), requires_grad=False),
    lambda L: _set_data(L, [1.0]),
    lambda L: _set_data(L, __import__("numpy").ones(2)),
    # factories and Parameter with requires_grad=True on an integer dtype
    lambda L: L.nn.Parameter(L.ones(2, dtype=L.long)),
    lambda L: L.nn.Parameter(L.ones(2, dtype=L.bool)),
    lambda L: L.ones(2, dtype=L.long, requires_grad=True),
    lambda L: L.tensor([1, 2], requires_grad=True),
    lambda L: L.zeros_like(L.ones(2, dtype=L.long), requires_grad=True),
    lambda L: L.full((2,), 3, requires_grad=True),
    lambda L: L.arange(3, requires_grad=True),
    lambda L: L.ones(2, dtype=L.long).requires_grad_(),
    lambda L: L.tensor([1j], requires_grad=True).requires_grad,
], ids=["float64", "int", "int-no-grad", "list", "ndarray", "param-int", "param-bool", "ones",
        "tensor", "zeros_like", "full", "arange", "requires_grad_", "complex"])
def test_data_assignment_and_integer_requires_grad_like_torch(case):
    _same(case)


@pytest.mark.parametrize("case", [
    # cleanrl's torch.zeros((num_steps, num_envs) + obs_shape): with a Size
    # on the right (a tensor's .shape[1:]) the sum is a Size, printed as one
    lambda L: repr((8, 4) + L.ones(2, 3, 5).shape[1:]).split(".", 1)[-1],
    lambda L: type((2,) + L.Size([3])).__name__,
    lambda L: type(() + L.Size([3])).__name__,
    lambda L: type(L.Size([1]) + L.Size([3])).__name__,
    lambda L: type(L.Size([2]) * 2).__name__,
    lambda L: type(2 * L.Size([2])).__name__,
    lambda L: L.zeros((4,) + L.Size([2])).shape == (4, 2),
    lambda L: [1] + L.Size([3]),
], ids=["repr", "tuple+size", "empty+size", "size+size", "size*n", "n*size", "zeros", "list+size"])
def test_size_arithmetic_like_torch(case):
    got, want = _outcome(lambda: case(tracec)), _outcome(lambda: case(pt))
    if got[0] == "TypeError":     # (the type's printed name differs: torch.Size)
        assert want[0] == "TypeError"
    else:
        assert got == want


@pytest.mark.parametrize("case", [
    lambda L: L.clamp(L.ones(2)),
    lambda L: L.ones(2).clamp(),
    lambda L: L.ones(2).clamp_(),
    lambda L: L.clip(L.ones(2)),
], ids=["fn", "method", "inplace", "clip"])
def test_clamp_without_bounds_message_like_torch(case):
    _same(case)


def _dtype(t):
    return str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("case", [
    # DGI's b_xent(logits, lbl): BCEWithLogitsLoss composes (1 - target)
    # .mul_(input).sub_(log_sigmoid(input)), so the loss takes the target's
    # float dtype and an integer / bool target is refused by those steps
    lambda L: _dtype(L.nn.functional.binary_cross_entropy_with_logits(
        L.zeros(1, 4), L.ones(1, 4, dtype=L.float64))),
    lambda L: _dtype(L.nn.functional.binary_cross_entropy_with_logits(
        L.zeros(1, 4, dtype=L.float64), L.ones(1, 4))),
    lambda L: _dtype(L.nn.BCEWithLogitsLoss(pos_weight=L.ones(4, dtype=L.float64))(
        L.zeros(1, 4), L.ones(1, 4))),
    lambda L: _dtype(L.nn.BCEWithLogitsLoss(weight=L.ones(4, dtype=L.float64))(
        L.zeros(1, 4), L.ones(1, 4))),
    lambda L: L.nn.BCEWithLogitsLoss()(L.zeros(1, 4), L.ones(1, 4, dtype=L.long)),
    lambda L: L.nn.BCEWithLogitsLoss(reduction="sum")(L.zeros(1, 4), L.ones(1, 4, dtype=L.int32)),
    lambda L: L.nn.BCEWithLogitsLoss()(L.zeros(1, 4), L.ones(1, 4, dtype=L.bool)),
    # binary_cross_entropy's kernel wants the target in the input's dtype
    lambda L: L.nn.functional.binary_cross_entropy(L.full((1, 4), 0.5), L.ones(1, 4, dtype=L.long)),
    lambda L: L.nn.functional.binary_cross_entropy(L.full((1, 4), 0.5), L.ones(1, 4, dtype=L.float64)),
], ids=["f64-target", "f64-input", "f64-pos_weight", "f64-weight", "long", "int32", "bool",
        "bce-long", "bce-f64"])
def test_bce_dtypes_like_torch(case):
    _same(case)


def test_bce_with_logits_float64_target_values_and_gradient():
    out = []
    for L in (tracec, pt):
        x = L.tensor([[0.3, -1.2, 2.0, -0.5]], requires_grad=True)
        t = L.tensor([[1.0, 0.0, 0.5, 1.0]], dtype=L.float64)
        loss = L.nn.functional.binary_cross_entropy_with_logits(
            x, t, pos_weight=L.tensor([2.0, 1.0, 0.5, 3.0]), weight=L.tensor([1.0, 0.5, 2.0, 1.0]))
        loss.backward()
        out.append((str(loss.dtype).split(".")[-1], loss.item(), str(x.grad.dtype).split(".")[-1],
                    x.grad.tolist()[0]))
    assert out[0][0] == out[1][0] == "float64" and out[0][2] == out[1][2] == "float32"
    assert out[0][1] == pytest.approx(out[1][1], rel=1e-6)
    assert out[0][3] == pytest.approx(out[1][3], rel=1e-6)


@pytest.mark.parametrize("case", [
    # PixelCNN++'s nn.ZeroPad2d((0, 0, 1, 0)); PyTorch's padding modules keep
    # a tuple of any length and F.pad judges it in forward
    lambda L: tuple(L.nn.ZeroPad2d((1, 2))(L.ones(1, 1, 4, 4)).shape),
    lambda L: tuple(L.nn.ZeroPad1d((1, 2, 3, 4))(L.ones(1, 1, 4, 4)).shape),
    lambda L: tuple(L.nn.ConstantPad2d((1, 2, 3, 4, 5, 6), 0.5)(L.ones(1, 1, 4, 4)).shape),
    lambda L: L.nn.ZeroPad2d((1, 2, 3))(L.ones(1, 1, 4, 4)),
    lambda L: tuple(L.nn.ReplicationPad2d((1, 2, 3, 4, 5, 6))(L.ones(1, 1, 4, 4)).shape),
    lambda L: L.nn.ReflectionPad2d((1, 2))(L.ones(1, 1, 4, 4)),
    lambda L: L.nn.functional.pad(L.ones(4), (1, 1), mode="reflect"),
    lambda L: L.nn.functional.pad(L.ones(1, 4), (1, 1, 1, 1), mode="replicate"),
    lambda L: L.nn.functional.pad(L.ones(1, 1, 2, 4, 4), (1,) * 8, mode="circular"),
    lambda L: L.nn.functional.pad(L.arange(10.0).reshape(2, 5), (1, 2), mode="reflect"),
], ids=["zero2d-2", "zero1d-4", "const2d-6", "odd", "replicate-6", "reflect-2-on-4d",
        "reflect-1d", "replicate-2d-4", "circular-8", "reflect-2d"])
def test_padding_lengths_like_torch(case):
    got, want = _outcome(lambda: case(tracec)), _outcome(lambda: case(pt))
    assert got[0] == want[0] and str(got[1]).split("\n")[0] == str(want[1]).split("\n")[0]
