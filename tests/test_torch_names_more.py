"""torch.* names public programs use that tracec lacked: ATen forms of
nn.functional ops, sampling (normal, poisson, binomial), windows and
logspace, index helpers, torch.testing, torch.autograd's submodules and
Variable, compatibility Tensor methods, legacy configuration, torch.hub
with a local hubconf."""
from __future__ import annotations

import numpy as np
import pytest

import tracec
from tests._torch_ref import rnd, run_both

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("case", [
    ("conv1d", lambda L, x, w: L.conv1d(x, w, None, 1, 1), [(2, 3, 7), (4, 3, 3)]),
    ("conv2d", lambda L, x, w: L.conv2d(x, w, stride=2), [(1, 2, 6, 6), (3, 2, 3, 3)]),
    ("conv_transpose2d", lambda L, x, w: L.conv_transpose2d(x, w, None, 2, 1, 1),
     [(1, 2, 4, 4), (2, 3, 3, 3)]),
    ("max_pool2d", lambda L, x: L.max_pool2d(x, 2), [(1, 2, 6, 6)]),
    ("max_pool1d", lambda L, x: L.max_pool1d(x, 3, 2, 1, 1, True), [(2, 3, 9)]),
    ("max_pool1d_with_indices", lambda L, x: L.max_pool1d_with_indices(x, 2)[0], [(2, 3, 8)]),
    ("adaptive_max_pool1d", lambda L, x: L.adaptive_max_pool1d(x, 3)[0], [(2, 3, 8)]),
    ("avg_pool1d", lambda L, x: L.avg_pool1d(x, 3, 2, 1), [(2, 3, 8)]),
    ("batch_norm", lambda L, x, w, b: L.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
     [(4, 3, 5), (3,), (3,)]),
    ("layer_norm", lambda L, x, w: L.layer_norm(x, (5,), w, None, 1e-5, True), [(4, 5), (5,)]),
    ("group_norm", lambda L, x: L.group_norm(x, 2), [(2, 4, 3)]),
    ("instance_norm", lambda L, x: L.instance_norm(x, None, None, None, None, True, 0.1,
                                                   1e-5, False), [(2, 3, 6)]),
    ("dropout_eval", lambda L, x: L.dropout(x, 0.5, False), [(3, 4)]),
    ("embedding", lambda L, w: L.embedding(w, L.tensor([[0, 2], [1, 1]])), [(4, 3)]),
    ("pixel_shuffle", lambda L, x: L.pixel_shuffle(x, 2), [(1, 8, 2, 2)]),
    ("prelu", lambda L, x, w: L.prelu(x, w), [(2, 3, 4), (3,)]),
    ("celu", lambda L, x: L.celu(x, 0.7), [(3, 4)]),
    ("selu", lambda L, x: L.selu(x), [(3, 4)]),
    ("threshold", lambda L, x: L.threshold(x, 0.1, -1.0), [(3, 4)]),
    ("hardshrink", lambda L, x: L.hardshrink(x, 0.6), [(3, 4)]),
    ("bilinear", lambda L, a, b, w: L.bilinear(a, b, w), [(2, 3), (2, 4), (5, 3, 4)]),
    ("cosine_similarity", lambda L, a, b: L.cosine_similarity(a, b), [(3, 4), (3, 4)]),
    ("pairwise_distance", lambda L, a, b: L.pairwise_distance(a, b), [(3, 4), (3, 4)]),
    ("pdist", lambda L, a: L.pdist(a), [(4, 3)]),
    ("kl_div_sum", lambda L, a, b: L.kl_div(a.log_softmax(1), b.softmax(1), 2), [(3, 4), (3, 4)]),
    ("bce_logits", lambda L, a, b: L.binary_cross_entropy_with_logits(a, b.sigmoid(), None,
                                                                       None, 0), [(3, 4), (3, 4)]),
    ("margin_ranking", lambda L, a, b: L.margin_ranking_loss(a, b, L.tensor([1., -1., 1.]), 0.1,
                                                             1), [(3,), (3,)]),
    ("hinge_embedding", lambda L, a: L.hinge_embedding_loss(a, L.tensor([1., -1., 1.]), 1.0, 2),
     [(3,)]),
    ("cosine_embedding", lambda L, a, b: L.cosine_embedding_loss(a, b, L.tensor([1., -1.]),
                                                                 0.0, 1), [(2, 4), (2, 4)]),
    ("poisson_nll", lambda L, a, b: L.poisson_nll_loss(a, b.abs(), True, False, 1e-8, 1),
     [(3, 4), (3, 4)]),
    ("triplet", lambda L, a, b, c: L.triplet_margin_loss(a, b, c), [(3, 4), (3, 4), (3, 4)]),
    ("constant_pad_nd", lambda L, x: L.constant_pad_nd(x, (1, 2), 0.5), [(2, 3)]),
], ids=lambda c: c[0])
def test_aten_forms_match_torch(case):
    _, fn, shapes = case
    run_both(fn, *[rnd(RNG, s) for s in shapes])


def test_aten_training_dropout_and_reduction_enum():
    x = tracec.ones(1000)
    y = tracec.dropout(x, 0.5, True)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0} and 0.3 < (y.numpy() == 0).mean() < 0.7
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        tracec.kl_div(x, x, 7)


def test_normal_overloads_shapes_dtypes_and_zero_gradient():
    tracec.manual_seed(0)
    assert tracec.normal(0.0, 1.0, (3, 2)).shape == (3, 2)
    assert tracec.normal(tracec.zeros(2, 1), tracec.ones(3)).shape == (2, 3)
    assert tracec.normal(tracec.zeros(2, dtype=tracec.float64), 1.0).dtype is tracec.float64
    assert tracec.normal(2, 3, size=(2,), dtype=tracec.float64).dtype is tracec.float64
    z = tracec.normal(3.0, 2.0, size=(20000,)).numpy()
    assert abs(z.mean() - 3.0) < 0.05 and abs(z.std() - 2.0) < 0.05
    m = tracec.zeros(3, requires_grad=True)
    s = tracec.ones(3, requires_grad=True)
    tracec.normal(m, s).sum().backward()
    assert m.grad.tolist() == [0.0, 0.0, 0.0] and s.grad.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        tracec.normal(0.0, -1.0, (2,))
    tracec.manual_seed(5)
    a = tracec.normal(tracec.zeros(4), 1.0)
    tracec.manual_seed(5)
    assert tracec.equal(a, tracec.normal(tracec.zeros(4), 1.0))


def test_poisson_and_binomial_statistics_seeding_and_refusal_in_compile():
    tracec.manual_seed(1)
    p = tracec.poisson(tracec.full((20000,), 4.0)).numpy()
    assert abs(p.mean() - 4.0) < 0.1 and abs(p.var() - 4.0) < 0.2 and (p == np.round(p)).all()
    tracec.manual_seed(1)
    assert (tracec.poisson(tracec.full((20000,), 4.0)).numpy() == p).all()
    b = tracec.binomial(tracec.full((20000,), 10.0), tracec.full((20000,), 0.3)).numpy()
    assert abs(b.mean() - 3.0) < 0.1 and b.max() <= 10
    with pytest.raises(RuntimeError, match="non-negative"):
        tracec.poisson(tracec.tensor([-1.0]))
    f = tracec.compile(lambda r: tracec.poisson(r))
    with pytest.raises(tracec.TraceError, match="poisson"):
        f(tracec.ones(3))


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, n, periodic):
    a = getattr(tracec, name)(n, periodic).numpy()
    b = getattr(torch, name)(n, periodic).numpy()
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_logspace_and_index_helpers_match_torch():
    for args in [(0, 2, 3), (-1, 1, 5, 2.0), (0, 3, 4, 10, )]:
        np.testing.assert_allclose(tracec.logspace(*args).numpy(), torch.logspace(*args).numpy(),
                                   rtol=1e-6)
    for fn in ("tril_indices", "triu_indices"):
        for args in [(3, 4, 1), (3, 3, -1), (4, 2, 0), (0, 0, 0)]:
            assert getattr(tracec, fn)(*args).tolist() == getattr(torch, fn)(*args).tolist()
    for idx, shape in [([5, 7, -1], (2, 4)), (5, (2, 4)), ([[1, 2]], 4), ([0, 23], (2, 3, 4))]:
        a = tracec.unravel_index(tracec.tensor(idx), shape)
        b = torch.unravel_index(torch.tensor(idx), shape)
        assert [t.tolist() for t in a] == [t.tolist() for t in b]
    with pytest.raises(TypeError, match="integer dtype"):
        tracec.unravel_index(tracec.tensor([1.0]), (2, 4))
    assert tracec.scalar_tensor(3).dtype is tracec.float32
    assert [t.tolist() for t in tracec.split_copy(tracec.arange(5), 2)] == [[0, 1], [2, 3], [4]]
    v = tracec.arange(4.0)
    c = tracec.view_copy(v, 2, 2)
    c[0, 0] = 9.0
    assert v[0].item() == 0.0 and tracec.slice_copy(tracec.arange(6), 0, 1, 5, 2).tolist() == [1, 3]


def test_assert_close_messages_and_tolerances():
    tracec.testing.assert_close(tracec.ones(2), tracec.ones(2) + 1e-7)
    tracec.testing.assert_close([1.0, {"a": tracec.ones(1)}], [1.0, {"a": tracec.ones(1)}])
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50.0%\)"):
        tracec.testing.assert_close(tracec.tensor([1.0, 2.0]), tracec.tensor([1.0, 2.1]))
    with pytest.raises(AssertionError, match="'dtype' do not match"):
        tracec.testing.assert_close(tracec.tensor([1.0]), tracec.tensor([1]))
    with pytest.raises(AssertionError, match="'shape' do not match"):
        tracec.testing.assert_close(tracec.ones(2), tracec.ones(3))
    tracec.testing.assert_close(tracec.tensor([1.0]), tracec.tensor([1]), check_dtype=False)
    t = tracec.testing.make_tensor(3, 4, dtype=tracec.float32, low=-1, high=1)
    assert t.shape == (3, 4) and t.abs().max().item() <= 1


def test_autograd_submodules_and_variable():
    from tracec.autograd import Variable
    from tracec.autograd.function import Function, once_differentiable
    from tracec.autograd.grad_mode import inference_mode, no_grad  # noqa: F401
    import tracec.autograd.anomaly_mode  # noqa: F401
    base = tracec.randn(3, 2)
    x = Variable(base, requires_grad=True)
    assert isinstance(x, Variable) and not isinstance(3, Variable)
    assert x.requires_grad and not base.requires_grad and x is not base

    class Square(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 2 * a * g

    Square.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * base.numpy(), rtol=1e-6)
    with tracec.autograd.inference_mode():
        assert not (x * 2).requires_grad


def test_fork_rng_restores_the_stream():
    tracec.manual_seed(3)
    with tracec.random.fork_rng():
        a = tracec.rand(2)
    assert tracec.equal(a, tracec.rand(2))


def test_compat_tensor_methods_match_torch():
    for shape, wrap in [((3, 4), False), ((7, 3), True), ((7, 3), False), ((2, 2, 2), False)]:
        a = tracec.zeros(*shape).fill_diagonal_(5.0, wrap=wrap)
        b = torch.zeros(*shape).fill_diagonal_(5.0, wrap=wrap)
        assert a.tolist() == b.tolist()
    with pytest.raises(RuntimeError, match="equal length"):
        tracec.zeros(2, 3, 4).fill_diagonal_(1)
    x = tracec.arange(6.0).view(2, 3)
    assert x.new(2, 3).shape == (2, 3) and x.new([1, 2]).dtype is tracec.float32
    assert x.long().new([1.5]).tolist() == [1] and x.new().shape == (0,)
    assert x.H.tolist() == torch.arange(6.0).view(2, 3).H.tolist() and x.mH.shape == (3, 2)
    assert not x.is_xpu and not x.is_mps
    r = tracec.zeros(5)
    r.resize_as_(x)
    assert r.shape == (2, 3)
    assert tracec.full((4,), 1.0).bernoulli().tolist() == [1.0] * 4
    y = tracec.zeros(3).apply_(lambda v: v + 1)
    assert y.tolist() == [1.0, 1.0, 1.0]
    assert y.map_(tracec.ones(3), lambda a, b: a + b).tolist() == [2.0, 2.0, 2.0]


def test_post_accumulate_grad_hook():
    p = tracec.ones(2, requires_grad=True)
    seen = []
    h = p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (p * 3).sum().backward()
    h.remove()
    (p * 3).sum().backward()
    assert seen == [[3.0, 3.0]]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tracec.ones(2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (p * 2).register_post_accumulate_grad_hook(print)


def test_legacy_configuration_names():
    prev = tracec.get_default_dtype()
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            tracec.set_default_tensor_type("torch.DoubleTensor")
        assert tracec.ones(1).dtype is tracec.float64
        with pytest.warns(UserWarning):
            tracec.set_default_tensor_type(tracec.FloatTensor)
        assert tracec.ones(1).dtype is tracec.float32
        with pytest.warns(UserWarning), pytest.raises(TypeError, match="floating-point"):
            tracec.set_default_tensor_type("torch.LongTensor")
    finally:
        tracec.set_default_dtype(prev)
    assert not tracec.xpu.is_available() and tracec.mps.device_count() == 0
    assert issubclass(tracec.OutOfMemoryError, RuntimeError) and tracec.has_lapack
    assert tracec.GradScaler is tracec.amp.GradScaler and not tracec.is_autocast_cpu_enabled()


def test_hub_loads_a_local_hubconf(tmp_path):
    (tmp_path / "hubconf.py").write_text(
        "import tracec as torch\n"
        "def tiny(width=3):\n"
        "    '''A tiny linear model.'''\n"
        "    return torch.nn.Linear(2, width)\n")
    m = tracec.hub.load(str(tmp_path), "tiny", source="local", width=5)
    assert isinstance(m, tracec.nn.Linear) and m.out_features == 5
    assert "tiny" in tracec.hub.list(str(tmp_path))
    assert tracec.hub.help(str(tmp_path), "tiny") == "A tiny linear model."
    with pytest.raises(RuntimeError, match="Cannot find callable"):
        tracec.hub.load(str(tmp_path), "missing", source="local")


def test_hub_state_dict_from_a_file_url(tmp_path):
    sd = {"w": torch.arange(3.0)}
    src = tmp_path / "weights-abc.pt"
    torch.save(sd, src)
    got = tracec.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(tmp_path / "cache"))
    assert got["w"].tolist() == [0.0, 1.0, 2.0]
    assert (tmp_path / "cache" / "weights-abc.pt").exists()
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".partial")]
    with pytest.raises(RuntimeError, match="invalid hash value"):
        tracec.hub.download_url_to_file(src.as_uri(), tmp_path / "x.pt", hash_prefix="ffff")
    assert not (tmp_path / "x.pt").exists()
    # the old name, torch.utils.model_zoo.load_url, reads the cached file
    from tracec.utils import model_zoo
    again = model_zoo.load_url(src.as_uri(), model_dir=str(tmp_path / "cache"))
    assert again["w"].tolist() == [0.0, 1.0, 2.0]


def test_aten_losses_default_to_no_reduction_as_torch():
    a, t = rnd(RNG, (3, 4)), np.ones(3, np.float32)
    for lib in (tracec, torch):
        A, T = lib.tensor(a), lib.tensor(t)
        shapes = [tuple(lib.kl_div(A, A.abs()).shape),
                  tuple(lib.margin_ranking_loss(T, T, T).shape),
                  tuple(lib.cosine_embedding_loss(A, A, T).shape),
                  tuple(lib.triplet_margin_loss(A, A, A).shape)]
        assert shapes == [(3, 4), (3,), (3,), (3,)], lib.__name__


def test_storage_stack_dataset_and_distributed_sampler_export():
    import warnings
    from tracec.utils.data import DistributedSampler, StackDataset, TensorDataset  # noqa: F401
    x = tracec.arange(6.0).view(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = x[1].storage()
        assert len(s) == 6 and s.data_ptr() == x.storage().data_ptr() and s.element_size() == 4
    a = TensorDataset(tracec.arange(3))
    st = StackDataset(a, a)
    assert len(st) == 3 and st[1][0][0].item() == 1 and len(st[1]) == 2
    assert set(StackDataset(x=a, y=a)[2]) == {"x", "y"}
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(a, TensorDataset(tracec.arange(4)))


def test_return_types_repr_and_tuple_behaviour():
    x = tracec.tensor([[3.0, 1.0, 4.0], [1.0, 5.0, 9.0]])
    r = tracec.topk(x, 2)
    assert repr(r).startswith("tracec.return_types.topk(\nvalues=tensor(")
    assert repr(x.max(1)).startswith("tracec.return_types.max(") and \
        repr(x.min(1)).startswith("tracec.return_types.min(")
    values, indices = x.max(1)
    assert values.tolist() == [4.0, 9.0] and x.max(1)._fields == ("values", "indices")
    assert isinstance(r, tuple) and tracec.return_types.topk is type(r)


def test_generator_methods():
    g = tracec.Generator(device="cpu")
    assert g.initial_seed() == 67280421310721 and str(g.device) == "cpu"
    s = g.seed()
    assert g.initial_seed() == s
    g.manual_seed(1)
    h = g.clone_state()
    assert tracec.equal(tracec.rand(3, generator=g), tracec.rand(3, generator=h))


def test_cholesky_ex_reports_info_instead_of_raising():
    for a in ([[[1.0, 2.0], [2.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]]],
              [[4.0, 2.0, 1.0], [2.0, -3.0, 0.5], [1.0, 0.5, 2.0]], [[2.0, 1.0], [1.0, 2.0]]):
        ours, theirs = tracec.linalg.cholesky_ex(tracec.tensor(a)), \
            torch.linalg.cholesky_ex(torch.tensor(a))
        np.testing.assert_allclose(ours.L.numpy(), theirs.L.numpy(), rtol=1e-6)
        assert ours.info.tolist() == theirs.info.tolist() and ours.info.dtype is tracec.int32
    with pytest.raises(RuntimeError, match=r"Batch element 0.*order 2"):
        tracec.linalg.cholesky_ex(tracec.tensor([[[1.0, 2.0], [2.0, 1.0]]]), check_errors=True)


def test_forward_ad_tangents_match_torch():
    import tracec.autograd.forward_ad as cfw
    import torch.autograd.forward_ad as tfw
    rng = np.random.default_rng(0)
    x, t, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    got = {}
    for lib, fw in ((torch, tfw), (tracec, cfw)):
        with fw.dual_level():
            d = fw.make_dual(lib.tensor(x), lib.tensor(t))
            y = (d.tanh() @ lib.tensor(w)).softmax(-1) * 3 + d.sum() + (2 * d)[:, :2]
            got[lib.__name__] = fw.unpack_dual(y).tangent.numpy()
            assert fw.unpack_dual(lib.tensor(w)).tangent is None
    np.testing.assert_allclose(got["tracec"], got["torch"], rtol=1e-10)
    with pytest.raises(RuntimeError, match="dual level"):
        cfw.make_dual(tracec.ones(2), tracec.ones(2))


def test_torch_C_log_api_usage_once_and_tracing_state(capfd, monkeypatch):
    # torchvision calls torch._C._log_api_usage_once in every model's constructor
    import torch
    assert tracec._C._log_api_usage_once("tracec.test.event") is torch._C._log_api_usage_once("t.e") is None
    assert tracec._C._get_tracing_state() is torch._C._get_tracing_state() is None
    for bad in ((3,), ()):
        with pytest.raises(TypeError) as a:
            tracec._C._log_api_usage_once(*bad)
        with pytest.raises(TypeError) as b:
            torch._C._log_api_usage_once(*bad)
        assert str(a.value) == str(b.value)
    monkeypatch.setenv("PYTORCH_API_USAGE_STDERR", "1")
    capfd.readouterr()
    tracec._C._log_api_usage_once("tracec.test.other")
    tracec._C._log_api_usage_once("tracec.test.other")
    assert capfd.readouterr().err == "PYTORCH_API_USAGE tracec.test.other\n"
