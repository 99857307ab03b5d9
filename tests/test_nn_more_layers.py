"""The added nn layers against torch.nn: constructor defaults, repr,
state_dict keys and parameter shapes; F forms' forward and backward in
float64; lazy modules; a few layers inside tracec.compile equal to eager."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tracec
import tracec.nn as tn
import tracec.nn.functional as tF

warnings.filterwarnings("ignore", message="Default grid_sample")

MODULES = [
    ("Threshold", (0.1, 2.)), ("PReLU", (3,)), ("SELU", ()), ("CELU", (0.5, True)),
    ("GLU", ()), ("Hardswish", ()), ("Hardsigmoid", ()), ("Hardshrink", ()),
    ("Softshrink", (0.3,)), ("Softsign", ()), ("Tanhshrink", ()), ("RReLU", ()),
    ("Softmax2d", ()), ("AlphaDropout", (0.2,)), ("FeatureAlphaDropout", ()),
    ("Dropout3d", ()), ("LocalResponseNorm", (3,)), ("CosineSimilarity", ()),
    ("PairwiseDistance", ()), ("Fold", ((4, 5), 2)), ("Unfold", (2,)),
    ("ChannelShuffle", (2,)), ("Conv3d", (2, 3, 2)), ("ConvTranspose3d", (2, 3, 2, 2)),
    ("MaxPool3d", (2,)), ("AvgPool3d", (2,)), ("AdaptiveAvgPool3d", (2,)),
    ("AdaptiveMaxPool1d", (2,)), ("AdaptiveMaxPool2d", ((2, 3), True)),
    ("MaxUnpool1d", (2,)), ("MaxUnpool2d", (2,)), ("MaxUnpool3d", (2, 1, 1)),
    ("LPPool1d", (2, 3)), ("LPPool2d", (2., 2)), ("EmbeddingBag", (10, 3)),
    ("BatchNorm3d", (3,)), ("InstanceNorm1d", (3,)), ("InstanceNorm2d", (3, True)),
    ("InstanceNorm3d", (3, 1e-5, 0.1, True, True)), ("ConstantPad1d", (2, 1.5)),
    ("ConstantPad2d", ((1, 2, 3, 4), 0.)), ("ConstantPad3d", (1, 2.)), ("ZeroPad1d", (2,)),
    ("ZeroPad2d", ((1, 2, 0, 1),)), ("ZeroPad3d", (1,)), ("ReflectionPad1d", (2,)),
    ("ReflectionPad2d", (1,)), ("ReflectionPad3d", (1,)), ("ReplicationPad1d", (2,)),
    ("ReplicationPad2d", ((1, 0, 2, 1),)), ("ReplicationPad3d", (1,)),
    ("CircularPad1d", (2,)), ("CircularPad2d", (1,)), ("CircularPad3d", (1,)),
    ("LazyLinear", (4,)), ("LazyConv2d", (4, 3)), ("LazyConv1d", (4, 3, 2, 1)),
    ("LazyBatchNorm1d", ()), ("LazyInstanceNorm2d", ()),
    ("MarginRankingLoss", ()), ("HingeEmbeddingLoss", ()), ("SoftMarginLoss", ()),
    ("CosineEmbeddingLoss", ()), ("TripletMarginLoss", ()),
    ("TripletMarginWithDistanceLoss", ()), ("MultiLabelSoftMarginLoss", ()),
    ("MultiLabelMarginLoss", ()), ("MultiMarginLoss", ()), ("PoissonNLLLoss", ()),
    ("GaussianNLLLoss", ()),
]


@pytest.mark.parametrize("name,args", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch_structure(name, args):
    t, c = getattr(torch.nn, name)(*args), getattr(tn, name)(*args)
    assert repr(c) == repr(t)
    assert list(c.state_dict()) == list(t.state_dict())
    if not name.startswith("Lazy"):
        assert [(k, tuple(v.shape)) for k, v in c.named_parameters()] == \
            [(k, tuple(v.shape)) for k, v in t.named_parameters()]


def _cmp(tc_fn, th_fn, *shapes, tol=1e-10, seed=0):
    """Forward and backward (random cotangent) of both, float64."""
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s) for s in shapes]
    ta = [torch.tensor(a, requires_grad=True) for a in arrs]
    ca = [tracec.tensor(a, requires_grad=True) for a in arrs]
    to, co = th_fn(*ta), tc_fn(*ca)
    if isinstance(to, tuple):
        for x, y in zip(co[1:], to[1:]):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        to, co = to[0], co[0]
    np.testing.assert_allclose(co.detach().numpy(), to.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(tuple(to.shape))
    to.backward(torch.tensor(g))
    co.backward(tracec.tensor(g))
    for a, b in zip(ca, ta):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)


def _f(name, **kw):
    return (lambda *a: getattr(tF, name)(*a, **kw)), (lambda *a: getattr(F, name)(*a, **kw))


FUNCTIONAL = [
    ("selu", {}, [(3, 4)]), ("celu", {}, [(3, 4)]), ("hardshrink", {}, [(3, 4)]),
    ("softshrink", {}, [(3, 4)]), ("softsign", {}, [(3, 4)]), ("tanhshrink", {}, [(3, 4)]),
    ("hardswish", {}, [(3, 4)]), ("threshold", dict(threshold=0.1, value=-2.), [(3, 4)]),
    ("glu", dict(dim=1), [(3, 4)]), ("prelu", {}, [(2, 3, 4), (3,)]),
    ("rrelu", {}, [(3, 4)]),
    ("conv3d", dict(padding=1, stride=(1, 2, 1)), [(2, 2, 4, 5, 3), (3, 2, 2, 3, 2)]),
    ("conv_transpose3d", dict(padding=1, stride=2), [(2, 2, 4, 3, 3), (2, 3, 2, 3, 2)]),
    ("max_pool3d", dict(kernel_size=2, stride=1, return_indices=True), [(2, 2, 4, 5, 4)]),
    ("avg_pool3d", dict(kernel_size=3, stride=2, padding=1), [(2, 2, 4, 5, 4)]),
    ("adaptive_avg_pool3d", dict(output_size=(2, 3, 3)), [(2, 2, 4, 5, 4)]),
    ("adaptive_max_pool2d", dict(output_size=(3, 2), return_indices=True), [(2, 2, 7, 5)]),
    ("adaptive_max_pool2d", dict(output_size=(None, 3), return_indices=True), [(2, 2, 7, 5)]),
    ("adaptive_max_pool1d", dict(output_size=3, return_indices=True), [(2, 2, 7)]),
    ("lp_pool2d", dict(norm_type=2, kernel_size=2), [(2, 2, 6, 5)]),
    ("lp_pool1d", dict(norm_type=3, kernel_size=3, stride=2), [(2, 2, 6)]),
    ("unfold", dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
     [(2, 3, 6, 5)]),
    ("fold", dict(output_size=(5, 6), kernel_size=(2, 2), padding=1, stride=2), [(2, 12, 12)]),
    ("instance_norm", {}, [(2, 3, 5)]),
    ("local_response_norm", dict(size=3), [(2, 5, 4)]),
    ("local_response_norm", dict(size=2, alpha=0.1, k=2.), [(2, 5, 4, 3)]),
    ("pairwise_distance", dict(p=1.5, keepdim=True), [(4, 5), (4, 5)]),
    ("pdist", {}, [(5, 3)]), ("pdist", dict(p=3.), [(5, 3)]),
    ("channel_shuffle", dict(groups=3), [(2, 6, 3, 2)]),
    ("affine_grid", dict(size=(2, 3, 4, 5), align_corners=False), [(2, 2, 3)]),
    ("affine_grid", dict(size=(2, 3, 4, 5), align_corners=True), [(2, 2, 3)]),
    ("affine_grid", dict(size=(2, 3, 4, 5, 3), align_corners=False), [(2, 3, 4)]),
    ("triplet_margin_loss", dict(swap=True, p=1.5, reduction="none"), [(6, 4)] * 3),
    ("triplet_margin_with_distance_loss", dict(swap=True), [(6, 4)] * 3),
]
for _m in ("reflect", "replicate", "circular"):
    FUNCTIONAL += [("pad", dict(pad=(1, 2, 2, 1), mode=_m), [(2, 3, 5, 4)]),
                   ("pad", dict(pad=(3, 2), mode=_m), [(2, 3, 5)]),
                   ("pad", dict(pad=(1, 2, 2, 1, 1, 1), mode=_m), [(2, 3, 5, 4, 4)])]


@pytest.mark.parametrize("name,kw,shapes", FUNCTIONAL,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(FUNCTIONAL)])
def test_functional_forward_backward_match_torch(name, kw, shapes):
    _cmp(*_f(name, **kw), *shapes)


def test_hardsigmoid_and_celu_match_torch():
    # PyTorch's backwards round a constant to float32 even in float64
    # (hardsigmoid's 1/6, celu's 1/alpha)
    _cmp(tF.hardsigmoid, F.hardsigmoid, (3, 4), tol=1e-7)
    _cmp(*_f("celu", alpha=0.7), (3, 4), tol=1e-7)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align):
    grid = np.random.default_rng(1).uniform(-1.4, 1.4, (2, 3, 4, 2))
    if mode == "nearest":
        tg, cg = torch.tensor(grid), tracec.tensor(grid)
        _cmp(lambda x: tF.grid_sample(x, cg, mode, padding_mode, align),
             lambda x: F.grid_sample(x, tg, mode, padding_mode, align), (2, 3, 5, 6))
    else:
        kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align)
        _cmp(*_f("grid_sample", **kw), (2, 3, 5, 6), (2, 3, 4, 2))


def test_max_unpool_inverts_max_pool_like_torch():
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6))
    _, ti = F.max_pool2d(torch.tensor(x), 2, return_indices=True)
    _, ci = tF.max_pool2d(tracec.tensor(x), 2, return_indices=True)
    for size in (None, (7, 7)):
        _cmp(lambda a: tn.MaxUnpool2d(2)(a, ci, size), lambda a: torch.nn.MaxUnpool2d(2)(a, ti, size),
             (2, 3, 3, 3))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_matches_torch(mode, include_last_offset, padding_idx):
    idx, off = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 2, 5])
    kw = dict(mode=mode, include_last_offset=include_last_offset, padding_idx=padding_idx)
    _cmp(lambda w: tF.embedding_bag(tracec.tensor(idx), w, tracec.tensor(off), **kw),
         lambda w: F.embedding_bag(torch.tensor(idx), w, torch.tensor(off), **kw), (10, 3))


def test_embedding_bag_weights_and_2d_input():
    idx, off = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 2, 5])
    _cmp(lambda w, p: tF.embedding_bag(tracec.tensor(idx), w, tracec.tensor(off), mode="sum",
                                       per_sample_weights=p),
         lambda w, p: F.embedding_bag(torch.tensor(idx), w, torch.tensor(off), mode="sum",
                                      per_sample_weights=p), (10, 3), (8,))
    _cmp(lambda w: tF.embedding_bag(tracec.tensor(idx.reshape(2, 4)), w),
         lambda w: F.embedding_bag(torch.tensor(idx.reshape(2, 4)), w), (10, 3))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        tF.embedding_bag(tracec.tensor(idx), tracec.randn(10, 3), tracec.tensor(off),
                         mode="max", per_sample_weights=tracec.ones(8))


def test_instance_norm_running_stats_match_torch():
    t = torch.nn.InstanceNorm2d(3, track_running_stats=True, affine=True).double()
    c = tn.InstanceNorm2d(3, track_running_stats=True, affine=True).double()
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    for _ in range(2):
        _cmp(c, t, (2, 3, 4, 5))
    np.testing.assert_allclose(c.running_var.numpy(), t.running_var.numpy(), rtol=1e-6)
    np.testing.assert_allclose(c.running_mean.numpy(), t.running_mean.numpy(), rtol=1e-6)
    c.eval(), t.eval()
    np.testing.assert_allclose(c(tracec.tensor(x)).detach().numpy(),
                               t(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="expected 3D or 4D input"):
        c(tracec.randn(3, 4))


def test_errors_name_the_problem_like_torch():
    for lib_f, lib in ((tF, tracec), (F, torch)):
        with pytest.raises(RuntimeError, match="Halving dimension must be even"):
            lib_f.glu(lib.randn(3, 5))
        with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):
            lib_f.prelu(lib.randn(2, 3, 4), lib.randn(2))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        tn.CircularPad1d(1)(tracec.randn(2))
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
        tF.channel_shuffle(tracec.randn(1, 5, 2), 2)


def test_lazy_modules_materialize_in_place():
    lin = tn.LazyLinear(4)
    assert isinstance(lin.weight, tn.UninitializedParameter)
    opt = tracec.optim.SGD(lin.parameters(), lr=0.1)
    w = lin.weight
    y = lin(tracec.randn(2, 3))
    assert type(lin) is tn.Linear and lin.in_features == 3 and w is lin.weight
    assert type(w) is tn.Parameter and tuple(w.shape) == (4, 3) and w.requires_grad
    y.sum().backward()
    before = w.detach().numpy().copy()
    opt.step()
    assert not np.array_equal(before, w.detach().numpy())
    conv = tn.LazyConv2d(4, 3)
    assert tuple(conv(tracec.randn(1, 2, 5, 5)).shape) == (1, 4, 3, 3)
    assert repr(conv) == repr(torch.nn.Conv2d(2, 4, 3))
    lazy = tn.LazyLinear(4)
    lazy.load_state_dict(tn.Linear(3, 4).state_dict())
    assert tuple(lazy.weight.shape) == (4, 3)


def test_prelu_and_embedding_bag_init_like_torch():
    assert np.all(tn.PReLU(3, init=0.1).weight.detach().numpy() == np.float32(0.1))
    w = tn.EmbeddingBag(2000, 10, padding_idx=0).weight.detach().numpy()
    assert np.all(w[0] == 0)
    assert abs(w[1:].mean()) < 0.02 and abs(w[1:].std() - 1) < 0.02


def test_data_parallel_is_a_pass_through_with_torch_keys():
    inner = tn.Linear(2, 3)
    dp = tn.DataParallel(inner)
    x = tracec.randn(4, 2)
    np.testing.assert_array_equal(dp(x).detach().numpy(), inner(x).detach().numpy())
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]


def test_alpha_dropout_keeps_mean_and_variance():
    tracec.manual_seed(0)
    x = tracec.randn(200000)
    y = tF.alpha_dropout(tF.selu(x), 0.3, training=True).numpy()
    ref = tF.selu(x).numpy()
    assert abs(y.mean() - ref.mean()) < 0.02 and abs(y.std() - ref.std()) < 0.02
    assert tF.alpha_dropout(x, 0.3) is x                    # training=False by default


def test_layers_compiled_equal_eager():
    tracec.manual_seed(0)
    model = tn.Sequential(tn.ReflectionPad2d(1), tn.Conv2d(2, 4, 3), tn.InstanceNorm2d(4, affine=True),
                          tn.PReLU(4), tn.Hardswish(), tn.AdaptiveMaxPool2d((2, 3)),
                          tn.Flatten(), tn.SELU(), tn.Linear(24, 3))
    x = tracec.randn(2, 2, 5, 6)
    theta = tracec.randn(2, 2, 3)

    def f(x, theta):
        grid = tF.affine_grid(theta, (2, 2, 5, 6), align_corners=False)
        h = tF.grid_sample(x, grid, align_corners=False, padding_mode="border")
        loss = tF.multi_margin_loss(model(h), tracec.tensor([0, 2]))
        loss.backward()
        return loss

    eager = f(x, theta).item()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    got = tracec.compile(f)(x, theta).item()
    assert abs(got - eager) < 1e-5
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-5)


def test_public_nn_classes_subclass_each_other_as_torch():
    # isinstance checks in public code (torchvision counts nn.Hardswish modules,
    # model surgery replaces every nn.AdaptiveAvgPool1d) see torch's hierarchy:
    # Hardsigmoid is no Hardswish, AdaptiveAvgPool2d no AdaptiveAvgPool1d,
    # AvgPool3d no AvgPool2d, Softshrink no Hardshrink, a lazy norm no norm until
    # its first call; ReLU6 is a Hardtanh and ZeroPad2d a ConstantPad2d.
    import inspect
    names = [n for n in dir(torch.nn) if not n.startswith("_") and inspect.isclass(getattr(torch.nn, n))
             and inspect.isclass(getattr(tn, n, None))]
    assert len(names) > 150
    diff = [(a, b, issubclass(getattr(torch.nn, a), getattr(torch.nn, b)))
            for a in names for b in names
            if issubclass(getattr(torch.nn, a), getattr(torch.nn, b))
            != issubclass(getattr(tn, a), getattr(tn, b))]
    assert diff == []


def test_relu6_zeropad_and_lazy_norm_after_the_hierarchy_change():
    assert repr(tn.ReLU6()) == repr(torch.nn.ReLU6()) and repr(tn.ReLU6(True)) == repr(torch.nn.ReLU6(True))
    assert (tn.ReLU6().min_val, tn.ReLU6().max_val) == (torch.nn.ReLU6().min_val, torch.nn.ReLU6().max_val)
    x = np.array([-1.0, 3.0, 7.0], np.float32)
    assert tn.ReLU6()(tracec.tensor(x)).tolist() == torch.nn.ReLU6()(torch.tensor(x)).tolist()
    assert repr(tn.ZeroPad2d((1, 2, 0, 1))) == repr(torch.nn.ZeroPad2d((1, 2, 0, 1)))
    assert tn.ZeroPad2d(1).value == torch.nn.ZeroPad2d(1).value == 0.0
    assert repr(tn.Softshrink(0.3)) == repr(torch.nn.Softshrink(0.3))
    assert repr(tn.Hardsigmoid(True).inplace) == repr(torch.nn.Hardsigmoid(True).inplace)
    assert repr(tn.AvgPool3d(2, 1, 1)) == repr(torch.nn.AvgPool3d(2, 1, 1))
    for name, shape in (("LazyBatchNorm2d", (2, 3, 4, 4)), ("LazyInstanceNorm1d", (2, 3, 5))):
        a, b = getattr(tn, name)(), getattr(torch.nn, name)()
        base = name[len("Lazy"):]
        assert isinstance(a, getattr(tn, base)) == isinstance(b, getattr(torch.nn, base)) == False  # noqa: E712
        xa = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(a(tracec.tensor(xa)).detach().numpy(),
                                   b(torch.tensor(xa)).detach().numpy(), rtol=1e-5, atol=1e-5)
        assert type(a).__name__ == type(b).__name__ == base
        assert isinstance(a, getattr(tn, base))
    with pytest.raises(ValueError, match="expected 4D input"):
        tn.LazyBatchNorm2d()(tracec.ones(2, 3))
