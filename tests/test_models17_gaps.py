"""Gaps found by the models17 public programs, each compared with torch."""
import random
import warnings

import numpy as np
import pytest
import torch

import tracec
import tracec.nn.functional as TFn


def _error(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    return str(e.value)


@pytest.mark.parametrize("lib", [torch, tracec])
def test_autograd_grad_checks_outputs_before_inputs_like_torch(lib):
    # HNN's time_derivative under no_grad: neither the output nor the input
    # has a graph, and torch names the output
    x = lib.ones(2)
    with lib.no_grad():
        y = (lib.ones(2, requires_grad=True) * x).sum()
    assert _error(lambda: lib.autograd.grad(y, x)) == \
        "element 0 of tensors does not require grad and does not have a grad_fn"
    w = lib.ones(2, requires_grad=True)
    assert _error(lambda: lib.autograd.grad((w * 2).sum(), x)) == \
        "One of the differentiated Tensors does not require grad"
    # the index of the first output without a graph
    assert _error(lambda: lib.autograd.grad([(w * 2).sum(), x.sum()], [w, x])) == \
        "element 1 of tensors does not require grad and does not have a grad_fn"
    assert _error(lambda: lib.autograd.backward([(w * 2).sum(), x.sum()])) == \
        "element 1 of tensors does not require grad and does not have a grad_fn"


def test_legacy_contiguous_format_is_contiguous_format_like_torch():
    assert torch.legacy_contiguous_format is torch.contiguous_format
    assert tracec.legacy_contiguous_format is tracec.contiguous_format
    assert repr(tracec.legacy_contiguous_format) == repr(torch.legacy_contiguous_format)
    # F.gumbel_softmax's straight-through branch, as public code copies it
    for lib in (torch, tracec):
        x = lib.ones(1, 3, 4, 4).contiguous(memory_format=lib.channels_last)
        z = lib.zeros_like(x, memory_format=lib.legacy_contiguous_format)
        assert z.stride() == (48, 16, 4, 1)
        y = lib.zeros_like(lib.ones(2, 3), memory_format=lib.legacy_contiguous_format)
        assert y.scatter_(1, lib.tensor([[1], [2]]), 1.0).tolist() == [[0, 1, 0], [0, 0, 1]]


@pytest.mark.parametrize("lib,F", [(torch, torch.nn.functional), (tracec, TFn)])
def test_loss_size_warning_names_the_callers_line_like_torch(lib, F):
    # F.mse_loss / F.l1_loss: the broadcasting warning points at the line
    # that called the loss, not at a wrapper inside the library
    for loss in (F.mse_loss, F.l1_loss):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loss(lib.zeros(2, 3, requires_grad=True), lib.zeros(1, 3))
        assert len(w) == 1 and "Using a target size" in str(w[0].message)
        assert w[0].filename == __file__, w[0].filename


GEN = np.random.default_rng(0)
PYGEN = random.Random(0)


def _noise(shape):
    return tracec.from_numpy(GEN.random(shape).astype(np.float32))


def _with_numpy_noise(x):
    return x + _noise(tuple(x.shape))


def _with_python_noise(x):
    return x * PYGEN.random()


def test_compiled_function_drawing_from_a_numpy_generator_object_is_not_baked_in():
    # a global np.random.Generator (not np.random's global state) drawn from
    # inside the compiled function: the trace must not replay its first draw
    ref = np.random.default_rng(0)
    GEN.bit_generator.state = np.random.default_rng(0).bit_generator.state
    cf = tracec.compile(_with_numpy_noise, fallback="eager")
    x = tracec.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cf(x).tolist() for _ in range(4)]
    assert outs == [ref.random(3).astype(np.float32).tolist() for _ in range(4)]
    GEN.bit_generator.state = np.random.default_rng(0).bit_generator.state
    strict = tracec.compile(_with_numpy_noise)
    with pytest.raises(Exception, match="global 'GEN'.*changed during the call"):
        for _ in range(4):
            strict(x)


def test_compiled_function_drawing_from_a_random_instance_is_not_baked_in():
    ref = random.Random(0)
    PYGEN.seed(0)
    cf = tracec.compile(_with_python_noise, fallback="eager")
    x = tracec.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cf(x).tolist()[0] for _ in range(4)]
    assert outs == pytest.approx([ref.random() for _ in range(4)], rel=1e-6)


@pytest.mark.parametrize("lib", [torch, tracec])
def test_inference_tensors_like_torch(lib):
    # the segmentation reference's ConfusionMatrix: its matrix is made under
    # inference_mode, so it is an inference tensor, as are its views and
    # aliases; tensors made outside (or under inference_mode(False)) are not
    n = lib.zeros(3)
    with lib.inference_mode():
        a = lib.full((3,), 3.0)
        v = n[:2]
        n += 1                      # a normal tensor may be updated inside
        with lib.inference_mode(False):
            b = lib.zeros(2)
        c = a + 1
    assert [a.is_inference(), v.is_inference(), b.is_inference(), c.is_inference(),
            a[:1].is_inference(), a.detach().is_inference(), a.data.is_inference(),
            a.clone().is_inference(), lib.is_inference(a), n.is_inference()] == \
        [True, False, False, True, True, True, True, False, True, False]
    assert n.tolist() == [1.0, 1.0, 1.0]
    msg = "Inplace update to inference tensor outside InferenceMode is not allowed"
    # outside inference_mode every in-place update is refused, after the
    # write (PyTorch bumps the version after the kernel ran)
    for fn, after in [(lambda t: t.zero_(), [0.0, 0.0, 0.0]),
                      (lambda t: t.add_(1), [4.0, 4.0, 4.0]),
                      (lambda t: t.__setitem__(0, 5.0), [5.0, 3.0, 3.0]),
                      (lambda t: t.copy_(lib.full((3,), 7.0)), [7.0, 7.0, 7.0]),
                      (lambda t: lib.add(lib.ones(3), 1, out=t), [2.0, 2.0, 2.0]),
                      (lambda t: t[:2].mul_(2), [6.0, 6.0, 3.0]),
                      (lambda t: t.index_add_(0, lib.tensor([0]), lib.ones(1)), [4.0, 3.0, 3.0]),
                      (lambda t: t.masked_fill_(t > 0, 9.0), [9.0, 9.0, 9.0]),
                      (lambda t: lib.nn.init.zeros_(t), [0.0, 0.0, 0.0]),
                      (lambda t: t.resize_(2), [3.0, 3.0])]:
        with lib.inference_mode():
            t = lib.full((3,), 3.0)
        with pytest.raises(RuntimeError, match=msg):
            fn(t)
        assert t.tolist() == after
        with lib.no_grad(), pytest.raises(RuntimeError, match=msg):
            t.zero_()
    with lib.inference_mode():
        a.add_(1)                   # inside: allowed
    assert a.tolist() == [4.0, 4.0, 4.0]


@pytest.mark.parametrize("lib", [torch, tracec])
def test_resize_counts_as_a_write_when_the_shape_changes_like_torch(lib):
    a = lib.zeros(3)
    versions = []
    for size in [(3,), (1, 3), (2,), (5,)]:
        a.resize_(*size)
        versions.append(a._version)
    assert versions == [0, 1, 2, 3]


def _outcome(fn):
    try:
        out = fn()
    except Exception as e:      # noqa: BLE001 - the exception is the outcome compared
        return type(e).__name__, str(e)
    return out.dtype.__repr__().split(".")[-1], out.tolist()


@pytest.mark.parametrize("case", [
    lambda lib: lib.bincount(lib.tensor([0.0, 1.0])),
    lambda lib: lib.bincount(lib.tensor([True, False])),
    lambda lib: lib.bincount(lib.tensor([0.0, 1.0]), minlength=-1),
    lambda lib: lib.bincount(lib.tensor([0, 1]), minlength=-1),
    lambda lib: lib.bincount(lib.tensor([[0, 1]]), minlength=-1),
    lambda lib: lib.bincount(lib.tensor([0, -1])),
    lambda lib: lib.bincount(lib.tensor([0, 1]), weights=lib.ones(3)),
    lambda lib: lib.bincount(lib.tensor([0, 1]), weights=lib.ones(2, 1)),
    lambda lib: lib.bincount(lib.tensor([0, 1]), weights=lib.ones(2, dtype=lib.float16)),
    lambda lib: lib.bincount(lib.tensor([0, 2, 2]), weights=lib.tensor([0.5, 1.0, 2.0]), minlength=4),
    lambda lib: lib.bincount(lib.tensor([0, 1, 1], dtype=lib.int32), weights=lib.tensor([1, 2, 3])),
])
def test_bincount_checks_and_weight_dtypes_like_torch(case):
    # the segmentation reference's ConfusionMatrix counts with bincount
    assert _outcome(lambda: case(tracec)) == _outcome(lambda: case(torch))


@pytest.mark.parametrize("case", [
    lambda lib, F: F.cross_entropy(lib.zeros(2, 4, 5), lib.full((2, 5), 7)),
    lambda lib, F: F.cross_entropy(lib.zeros(3, 4), lib.tensor([0, 4, 1]), label_smoothing=0.1),
    lambda lib, F: F.cross_entropy(lib.zeros(3, 4), lib.tensor([0, 255, 9]), ignore_index=255),
    lambda lib, F: F.cross_entropy(lib.zeros(3, 4), lib.tensor([0, 6, 1]), weight=lib.ones(4)),
    lambda lib, F: F.nll_loss(lib.zeros(3, 4), lib.tensor([0, 9, 1]), reduction="none"),
    lambda lib, F: F.cross_entropy(lib.zeros(4), lib.tensor(4)),
    lambda lib, F: F.cross_entropy(lib.zeros(3, 4), lib.tensor([0, 255, 3]), ignore_index=255),
])
def test_class_target_out_of_bounds_like_torch(case):
    assert _outcome(lambda: case(tracec, TFn)) == _outcome(lambda: case(torch, torch.nn.functional))


def test_softmax_of_a_slice_holding_inf_is_nan_like_torch():
    # F.gumbel_softmax at tau -> 0 divides by ~0: a +inf logit makes
    # torch's softmax slice NaN (it shifts by the +inf max); -inf is masked
    inf = float("inf")
    rows = [[inf, 1.0], [-inf, 1.0], [inf, inf], [-inf, -inf], [inf, -inf], [2.0, 1.0]]
    for lib, F in ((torch, torch.nn.functional), (tracec, TFn)):
        x = lib.tensor(rows)
        got = [F.softmax(x, -1), F.log_softmax(x, -1), x.softmax(1), (x * 1.0).log_softmax(1)]
        if lib is torch:
            want = [np.asarray(t.tolist()) for t in got]
        else:
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g.tolist()), w, rtol=1e-6)


@pytest.mark.parametrize("lambd", [0.0, -1.5, -1e-7, -123456789.0, float("nan")])
def test_exponential_lambda_error_formats_the_number_like_torch(lambd):
    # F.gumbel_softmax draws its noise with exponential_
    msgs = []
    for lib in (torch, tracec):
        with pytest.raises(RuntimeError) as e:
            lib.empty(2).exponential_(lambd=lambd)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("shape,mode,dtype,aa", [
    ((1, 1, 4, 4), "nearest", "int64", False), ((2, 3, 4, 4), "bilinear", "int64", False),
    ((1, 3, 4, 4), "bicubic", "int32", False), ((1, 3, 4, 4), "nearest-exact", "bool", False),
    ((1, 3, 4, 4), "area", "uint8", False), ((1, 1, 2, 4, 4), "area", "int64", False),
    ((1, 3, 4), "linear", "uint8", False), ((1, 3, 4), "nearest", "int8", False),
    ((1, 1, 2, 4, 4), "trilinear", "int64", False), ((1, 1, 2, 4, 4), "nearest", "int64", False),
    ((1, 1, 4, 4), "bilinear", "int64", True), ((1, 1, 4, 4), "bicubic", "float16", True),
])
def test_interpolate_refuses_the_dtypes_torch_refuses(shape, mode, dtype, aa):
    # segmentation code resizing an integer label map: torch refuses it
    # (hence the public `interpolate(target.float(), ...).long()`)
    outs = []
    for lib, F in ((torch, torch.nn.functional), (tracec, TFn)):
        size = (8,) * (len(shape) - 2) if not aa else (2, 2)
        outs.append(_outcome(lambda: F.interpolate(lib.zeros(shape, dtype=getattr(lib, dtype)),
                                                   size=size, mode=mode, antialias=aa)))
    assert outs[0] == outs[1]
    assert outs[0][0] == "NotImplementedError"


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [dict(size=(7, 5)), dict(size=(13, 17)), dict(size=(9, 20)),
                                dict(size=(3, 2), antialias=True),
                                dict(size=(4, 4), antialias=True, align_corners=True),
                                dict(scale_factor=(0.5, 1.7), antialias=True),
                                dict(scale_factor=0.4, recompute_scale_factor=True)])
def test_interpolate_uint8_bilinear_bicubic_like_torch(mode, kw):
    # was: float results from wrong taps (bilinear) and zeros (antialiased)
    a = (np.arange(2 * 3 * 9 * 11) * 37 % 256).astype(np.uint8).reshape(2, 3, 9, 11)
    kw = {"align_corners": False, **kw}
    want = torch.nn.functional.interpolate(torch.from_numpy(a), mode=mode, **kw)
    got = TFn.interpolate(tracec.from_numpy(a), mode=mode, **kw)
    assert got.dtype is tracec.uint8
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("kw", [dict(mode="bilinear", size=(4, 4), align_corners=True),
                                dict(mode="bicubic", scale_factor=2.0)])
def test_interpolate_uint8_taps_not_implemented_are_refused(kw):
    # torch computes these; tracec refuses them rather than compute others
    torch.nn.functional.interpolate(torch.zeros(1, 1, 4, 4, dtype=torch.uint8), **kw)
    with pytest.raises(NotImplementedError, match="uint8 tensor"):
        TFn.interpolate(tracec.zeros(1, 1, 4, 4, dtype=tracec.uint8), **kw)


@pytest.mark.parametrize("case", [
    lambda lib, F: F.conv2d(lib.zeros(1, 1, 5, 5), lib.zeros(1, 1, 3, 3), dilation=6),
    lambda lib, F: F.conv1d(lib.zeros(1, 1, 5), lib.zeros(1, 1, 3), dilation=3),
    lambda lib, F: F.conv2d(lib.zeros(1, 1, 5, 5), lib.zeros(1, 1, 3, 3), dilation=(3, 1)),
    lambda lib, F: F.conv2d(lib.zeros(1, 1, 2, 2), lib.zeros(1, 1, 3, 3)),
])
def test_dilated_conv_too_big_names_the_dilated_kernel_like_torch(case):
    # ASPP's atrous convolutions on a too-small feature map
    assert _outcome(lambda: case(tracec, TFn)) == _outcome(lambda: case(torch, torch.nn.functional))


@pytest.mark.parametrize("case", [
    lambda lib, F: lib.mean(lib.tensor([1, 2])),
    lambda lib, F: lib.tensor([True]).mean(),
    lambda lib, F: lib.nanmean(lib.tensor([1, 2])),
    lambda lib, F: F.adaptive_avg_pool2d(lib.zeros(1, 2, 4, 4, dtype=lib.int64), 1),
    lambda lib, F: F.adaptive_avg_pool2d(lib.zeros(1, 2, 4, 4, dtype=lib.int64), 2),
    lambda lib, F: F.adaptive_avg_pool1d(lib.zeros(1, 2, 4, dtype=lib.uint8), 2),
    lambda lib, F: F.adaptive_avg_pool3d(lib.zeros(1, 2, 4, 4, 4, dtype=lib.int32), 2),
    lambda lib, F: F.adaptive_avg_pool2d(lib.ones(1, 2, 4, 4), (None, 2)),
])
def test_integer_means_and_adaptive_pools_refused_like_torch(case):
    # ASPP's image-pooling branch (AdaptiveAvgPool2d) fed an integer map
    assert _outcome(lambda: case(tracec, TFn)) == _outcome(lambda: case(torch, torch.nn.functional))


@pytest.mark.parametrize("case", [
    lambda lib, F, x: F.avg_pool2d(x, 2),
    lambda lib, F, x: F.avg_pool2d(x, 2, 1),
    lambda lib, F, x: F.avg_pool2d(x, 2, 2, 1),
    lambda lib, F, x: F.avg_pool2d(x, 2, 2, 1, count_include_pad=False),
    lambda lib, F, x: F.avg_pool2d(x, 3, 1, 1, divisor_override=2),
    lambda lib, F, x: F.avg_pool2d(x, 2, ceil_mode=True),
    lambda lib, F, x: F.avg_pool1d(x[0, 0], 2),
    lambda lib, F, x: F.avg_pool3d(x[None].repeat(1, 1, 2, 1, 1), 2),
    lambda lib, F, x: F.avg_pool2d(x.to(lib.int32), 2),
    lambda lib, F, x: F.avg_pool3d(x[None].to(lib.uint8), 1),
    lambda lib, F, x: F.avg_pool1d(x[0].bool(), 2),
])
def test_integer_avg_pool_like_torch(case):
    # int64 windows average as C++ integers (truncated toward zero); other
    # integer dtypes are refused by torch's kernels
    outs = []
    for lib, F in ((torch, torch.nn.functional), (tracec, TFn)):
        x = lib.tensor([[[[1, 2, -7], [3, 5, 0], [9, -4, 2]]]])
        outs.append(_outcome(lambda: case(lib, F, x)))
    assert outs[0] == outs[1]


FWD_GEN = np.random.default_rng(0)


class _NoisyLayer(tracec.nn.Module):
    def forward(self, x):
        return x + tracec.from_numpy(FWD_GEN.random(3).astype(np.float32))


def test_a_generator_read_by_a_modules_forward_is_not_baked_in():
    """The draw is made inside the module's forward (a global generator the
    compiled function never names): its state is guarded too."""
    ref = np.random.default_rng(0)
    FWD_GEN.bit_generator.state = np.random.default_rng(0).bit_generator.state
    model = tracec.nn.Sequential(tracec.nn.Identity(), _NoisyLayer())
    cf = tracec.compile(lambda x: model(x) * 2, fallback="eager")
    x = tracec.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cf(x).tolist() for _ in range(4)]
    assert outs == [(ref.random(3).astype(np.float32) * 2).tolist() for _ in range(4)]
