"""Gaps the models21 programs (tests/programs/models21) found in tracec:
the detection ops of ``torchvision.ops`` that Faster R-CNN-style heads
use (``roi_align`` / ``RoIAlign``, ``MultiScaleRoIAlign``,
``sigmoid_focal_loss``), checked against torchvision 0.28 (whose CPU
oracle runs its pure-tensor ``_roi_align``: the compiled kernel cannot
load against the CPU torch) and, for the samples outside the map, against
a direct NumPy transcription of torchvision's C++ CPU kernel."""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tracec
from tracec.vision import ops
from vision_oracle import needs_torchvision, optional

tv, torch = optional()
if tv is not None:
    # torchvision runs its pure-tensor roi_align through torch.compile
    # (lazy_compile): the oracle runs the same function eagerly
    import sys as _sys
    _ra = _sys.modules["torchvision.ops.roi_align"]
    _ra._roi_align = getattr(_ra._roi_align, "__wrapped__", _ra._roi_align)

R = np.random.default_rng(0)
X = R.normal(size=(2, 3, 9, 11)).astype(np.float32)
ROIS = np.array([[0, 1.2, 0.5, 7.3, 6.1], [1, 0., 0., 10.9, 8.9], [1, 3.3, 2.2, 3.9, 2.4],
                 [0, 5.5, 4.4, 9.0, 8.0]], np.float32)


def kernel_roi_align(x, rois, ph_n, pw_n, scale, sr, aligned):
    """torchvision/csrc/ops/cpu/roi_align_kernel.cpp, loop for loop."""
    _, C, H, W = x.shape
    out = np.zeros((len(rois), C, ph_n, pw_n), np.float64)
    off = 0.5 if aligned else 0.0
    for k, (b, x1, y1, x2, y2) in enumerate(rois.astype(np.float64)):
        sw, sh, ew, eh = x1 * scale - off, y1 * scale - off, x2 * scale - off, y2 * scale - off
        rw, rh = ew - sw, eh - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph_n, rw / pw_n
        gh = sr if sr > 0 else math.ceil(rh / ph_n)
        gw = sr if sr > 0 else math.ceil(rw / pw_n)
        count = max(gh * gw, 1)
        for ph in range(ph_n):
            for pw in range(pw_n):
                acc = np.zeros(C)
                for iy in range(gh):
                    y = sh + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = sw + pw * bw + (ix + 0.5) * bw / gw
                        if y < -1.0 or y > H or xx < -1.0 or xx > W:
                            continue
                        yy, xc = max(y, 0.0), max(xx, 0.0)
                        yl, xl = int(yy), int(xc)
                        if yl >= H - 1:
                            yh = yl = H - 1
                            yy = float(yl)
                        else:
                            yh = yl + 1
                        if xl >= W - 1:
                            xh = xl = W - 1
                            xc = float(xl)
                        else:
                            xh = xl + 1
                        ly, lx = yy - yl, xc - xl
                        hy, hx = 1 - ly, 1 - lx
                        img = x[int(b)]
                        acc += hy * hx * img[:, yl, xl] + hy * lx * img[:, yl, xh] \
                            + ly * hx * img[:, yh, xl] + ly * lx * img[:, yh, xh]
                out[k, :, ph, pw] = acc / count
    return out


@pytest.mark.parametrize("sampling_ratio", [2, -1])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("scale", [1.0, 0.5])
@needs_torchvision
def test_roi_align_matches_torchvision(sampling_ratio, aligned, scale):
    xt = torch.from_numpy(X).requires_grad_()
    want = tv.ops.roi_align(xt, torch.from_numpy(ROIS), (3, 2), scale, sampling_ratio, aligned)
    xg = tracec.from_numpy(X).requires_grad_()
    got = ops.roi_align(xg, tracec.from_numpy(ROIS), (3, 2), scale, sampling_ratio, aligned)
    assert got.shape == (4, 3, 3, 2) and got.dtype == tracec.float32
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = np.arange(want.numel(), dtype=np.float32).reshape(tuple(want.shape)) / 10
    (want * torch.from_numpy(w)).sum().backward()
    (got * tracec.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


@needs_torchvision
def test_roi_align_box_list_and_module():
    boxes = [ROIS[[0, 3], 1:], ROIS[1:3, 1:]]
    want = tv.ops.roi_align(torch.from_numpy(X), [torch.from_numpy(b) for b in boxes], 2, 0.5, -1, True)
    got = ops.roi_align(tracec.from_numpy(X), [tracec.from_numpy(b) for b in boxes], 2, 0.5, -1, True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    m, tm = ops.RoIAlign((2, 2), 0.5, 2, aligned=True), tv.ops.RoIAlign((2, 2), 0.5, 2, aligned=True)
    assert repr(m) == repr(tm)
    np.testing.assert_allclose(m(tracec.from_numpy(X), tracec.from_numpy(ROIS)).numpy(),
                               tm(torch.from_numpy(X), torch.from_numpy(ROIS)).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match=r"not correct as Tensor\[K, 5\]"):
        ops.roi_align(tracec.from_numpy(X), tracec.from_numpy(ROIS[:, 1:]), 2)
    with pytest.raises(AssertionError, match=r"List\[Tensor\[L, 4\]\]"):
        ops.roi_align(tracec.from_numpy(X), [tracec.from_numpy(ROIS)], 2)


@pytest.mark.parametrize("sampling_ratio,aligned", [(2, False), (-1, True), (3, True)])
def test_roi_align_samples_outside_the_map_are_zero_as_in_the_kernel(sampling_ratio, aligned):
    # boxes reaching past the feature map: the CPU kernel drops samples
    # beyond [-1, H] x [-1, W] (they still count in the bin's mean)
    rois = np.array([[0, 8.0, 6.0, 16.0, 14.0], [1, -4.0, -3.0, 3.4, 2.5], [0, 20.0, 1.0, 30.0, 5.0],
                     [1, 2.0, 1.0, 6.0, 4.0]], np.float32)
    got = ops.roi_align(tracec.from_numpy(X), tracec.from_numpy(rois), (2, 3), 1.0, sampling_ratio, aligned)
    want = kernel_roi_align(X, rois, 2, 3, 1.0, sampling_ratio, aligned)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert np.all(got.numpy()[2] == 0)


@needs_torchvision
def test_multiscale_roi_align_matches_torchvision():
    feats = OrderedDict((k, R.normal(size=(2, 3, s, s)).astype(np.float32))
                        for k, s in (("feat1", 16), ("feat2", 8), ("feat3", 4), ("pool", 2)))
    bx = [np.array([[1, 2, 30, 40], [0, 0, 63, 63], [5, 5, 9, 12]], np.float32),
          np.array([[10, 10, 50, 33]], np.float32)]
    for names, kw in ((["feat1", "feat2", "feat3"], dict(canonical_scale=32, canonical_level=3)),
                      (["feat2"], {}), (["feat1", "feat3"], {})):
        m = tv.ops.MultiScaleRoIAlign(names, 3, 2, **kw)
        tm = ops.MultiScaleRoIAlign(names, 3, 2, **kw)
        want = m(OrderedDict((k, torch.from_numpy(v)) for k, v in feats.items()),
                 [torch.from_numpy(b) for b in bx], [(64, 64), (60, 50)])
        got = tm(OrderedDict((k, tracec.from_numpy(v)) for k, v in feats.items()),
                 [tracec.from_numpy(b) for b in bx], [(64, 64), (60, 50)])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        assert tm.scales == m.scales and repr(tm) == repr(m)
        assert (tm.map_levels.k_min, tm.map_levels.k_max) == (m.map_levels.k_min, m.map_levels.k_max)
        assert tm.map_levels([tracec.from_numpy(b) for b in bx]).tolist() == \
            m.map_levels([torch.from_numpy(b) for b in bx]).tolist()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("alpha,gamma", [(0.25, 2), (-1, 2), (0.5, 1.5)])
@needs_torchvision
def test_sigmoid_focal_loss_matches_torchvision(reduction, alpha, gamma):
    i = R.normal(size=(5, 4)).astype(np.float32) * 3
    t = (R.random((5, 4)) > 0.7).astype(np.float32)
    it, ig = torch.from_numpy(i).requires_grad_(), tracec.from_numpy(i).requires_grad_()
    want = tv.ops.sigmoid_focal_loss(it, torch.from_numpy(t), alpha, gamma, reduction)
    got = ops.sigmoid_focal_loss(ig, tracec.from_numpy(t), alpha, gamma, reduction)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-7)
    want.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(ig.grad.numpy(), it.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_sigmoid_focal_loss_bad_arguments():
    x = tracec.zeros(2)
    with pytest.raises(ValueError, match="Invalid alpha value: 2. alpha must be in the range"):
        ops.sigmoid_focal_loss(x, x, alpha=2)
    with pytest.raises(ValueError, match="Invalid Value for arg 'reduction': 'max"):
        ops.sigmoid_focal_loss(x, x, reduction="max")


def test_jit_script_if_tracing_wraps_and_calls_the_function():
    # torchvision/models/detection/_utils.py: @torch.jit._script_if_tracing
    # on encode_boxes (a decorator tracec.jit lacked)
    def encode(a, b):
        """doc"""
        return a * 2 + b

    for deco in (tracec.jit._script_if_tracing, tracec.jit.script_if_tracing):
        w = deco(encode)
        assert w(tracec.tensor(1.0), tracec.tensor(3.0)).item() == 5.0
        assert w.__name__ == "encode" and w.__doc__ == "doc" and w.__wrapped__ is encode
        assert getattr(w, "__original_fn") is encode
    if torch is not None:
        tw = torch.jit._script_if_tracing(encode)
        assert tw.__name__ == "encode" and getattr(tw, "__original_fn") is encode


def test_linalg_error_is_named_as_torchs_class():
    # the ANP program prints type(e).__name__ of a failed linalg.cholesky:
    # torch's class is torch._C._LinAlgError (torch.linalg.LinAlgError)
    with pytest.raises(tracec.linalg.LinAlgError) as e:
        tracec.linalg.cholesky(tracec.tensor([[1.0, 2.0], [2.0, 1.0]]))
    assert isinstance(e.value, RuntimeError)
    assert type(e.value).__name__ == "_LinAlgError"
    assert tracec._C._LinAlgError is tracec.linalg.LinAlgError
    assert repr(e.value).startswith("_LinAlgError('linalg.cholesky: The factorization could not be completed")
    if torch is not None:
        with pytest.raises(torch.linalg.LinAlgError) as te:
            torch.linalg.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
        assert type(te.value).__name__ == type(e.value).__name__
        assert str(te.value) == str(e.value)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("fn", ["linalg.cholesky", "cholesky"])
def test_cholesky_not_positive_definite_message_names_the_minor(fn, batched):
    a = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)
    if batched:
        a = np.stack([np.eye(2, dtype=np.float32), np.diag([1.0, 1.0]).astype(np.float32), a])
    call = (lambda m, x: m.linalg.cholesky(x)) if fn == "linalg.cholesky" else (lambda m, x: m.cholesky(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch.cholesky's deprecation, once
        with pytest.raises(tracec.linalg.LinAlgError) as e:
            call(tracec, tracec.from_numpy(a))
    where = "(Batch element 2): " if batched else ""
    assert str(e.value) == (f"{fn}: {where}The factorization could not be completed because the input is not "
                            "positive-definite (the leading minor of order 2 is not positive-definite).")
    if torch is not None:
        with pytest.raises(torch.linalg.LinAlgError) as te:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call(torch, torch.from_numpy(a))
        assert str(te.value) == str(e.value)


@pytest.mark.parametrize("aligned", [True, False])
def test_roi_align_adaptive_grid_larger_than_the_map(aligned):
    # a region much taller than the map over few bins: ceil(roi_h / bins)
    # samples per bin side exceed the map's size; the kernel takes them all
    rois = np.array([[0, 0.5, 0.5, 10.0, 40.0], [1, 1.0, 2.0, 30.0, 8.0], [0, 2.0, 2.0, 4.0, 4.0],
                     [1, 0.0, 0.0, 5.0, 19.8], [0, 0.0, 0.0, 23.0, 3.0]], np.float32)
    got = ops.roi_align(tracec.from_numpy(X), tracec.from_numpy(rois), (2, 1), 1.0, -1, aligned)
    want = kernel_roi_align(X, rois, 2, 1, 1.0, -1, aligned)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_roi_align_under_compile_matches_eager():
    # inside tracec.compile the adaptive grid keeps static candidate shapes
    rois = tracec.from_numpy(ROIS)

    def f(x):
        return ops.roi_align(x, rois, (3, 2), 0.5, -1, True).sum(dim=(2, 3))

    eager = f(tracec.from_numpy(X))
    cf = tracec.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(cf(tracec.from_numpy(X)).numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)


def _boxes(shape, seed):
    rng = np.random.default_rng(seed)
    xy = rng.random(shape + (2,), dtype=np.float32) * 20
    return np.concatenate([xy, xy + 0.5 + rng.random(shape + (2,), dtype=np.float32) * 10], -1)


@pytest.mark.parametrize("fn", ["box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou"])
@needs_torchvision
def test_pairwise_box_functions_batched_and_upcast_like_torchvision(fn):
    # torchvision 0.28: boxes [..., N, 4] x [..., M, 4] -> [..., N, M],
    # computed in at least 32 bits (half-precision boxes: float32 result)
    for shape1, shape2, dtype in (((5,), (3,), np.float32), ((2, 4), (2, 3), np.float32),
                                  ((4,), (6,), np.float16), ((3,), (2,), np.float64)):
        a, b = _boxes(shape1, 1).astype(dtype), _boxes(shape2, 2).astype(dtype)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        want = getattr(tv.ops, fn)(ta, tb)
        ga, gb = tracec.from_numpy(a), tracec.from_numpy(b)
        got = getattr(ops, fn)(ga, gb)
        assert got.dtype.name == str(want.dtype).replace("torch.", "") and got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    if fn in ("distance_box_iou", "complete_box_iou"):
        ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b)
        ga, gb = tracec.from_numpy(a).requires_grad_(), tracec.from_numpy(b)
        getattr(tv.ops, fn)(ta, tb, eps=1e-4).sum().backward()
        getattr(ops, fn)(ga, gb, eps=1e-4).sum().backward()
        np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-7)


@needs_torchvision
def test_box_area_and_iou_formats_like_torchvision():
    a, b = _boxes((4,), 3), _boxes((3,), 4)
    for fmt in ("xyxy", "xywh", "cxcywh"):
        np.testing.assert_allclose(ops.box_area(tracec.from_numpy(a), fmt=fmt).numpy(),
                                   tv.ops.box_area(torch.from_numpy(a), fmt=fmt).numpy(), rtol=1e-6)
        np.testing.assert_allclose(ops.box_iou(tracec.from_numpy(a), tracec.from_numpy(b), fmt=fmt).numpy(),
                                   tv.ops.box_iou(torch.from_numpy(a), torch.from_numpy(b), fmt=fmt).numpy(),
                                   rtol=1e-6, atol=1e-7)
    ia = (a * 3).astype(np.int16)
    got, want = ops.box_area(tracec.from_numpy(ia)), tv.ops.box_area(torch.from_numpy(ia))
    assert got.dtype == tracec.int32 and want.dtype == torch.int32 and got.tolist() == want.tolist()
    with pytest.raises(ValueError, match="Unsupported Bounding Box area for given format xyxyr"):
        ops.box_area(tracec.from_numpy(a), fmt="xyxyr")
    with pytest.raises(ValueError, match="Unsupported Bounding Box Conversions for given in_fmt xyz and out_fmt xyxy"):
        ops.box_convert(tracec.from_numpy(a), "xyz", "xyxy")
    with pytest.raises(ValueError, match=r"Unsupported format 'abc'. Supported axis-aligned formats: \('xyxy'"):
        ops.box_iou(tracec.from_numpy(a), tracec.from_numpy(b), fmt="abc")


@pytest.mark.parametrize("fn", ["generalized_box_iou_loss", "distance_box_iou_loss", "complete_box_iou_loss"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@needs_torchvision
def test_box_iou_losses_match_torchvision(fn, reduction):
    a, b = _boxes((6,), 5), _boxes((6,), 6)
    b[2] = a[2] + 40          # a pair that does not overlap
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    ga, gb = tracec.from_numpy(a).requires_grad_(), tracec.from_numpy(b).requires_grad_()
    want = getattr(tv.ops, fn)(ta, tb, reduction=reduction)
    got = getattr(ops, fn)(ga, gb, reduction=reduction)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    want.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-6)
    empty = getattr(ops, fn)(tracec.zeros(0, 4), tracec.zeros(0, 4), reduction="mean")
    assert empty.item() == 0.0 == getattr(tv.ops, fn)(torch.zeros(0, 4), torch.zeros(0, 4), reduction="mean").item()
    with pytest.raises(ValueError, match="Invalid Value for arg 'reduction': 'max"):
        getattr(ops, fn)(ga, gb, reduction="max")


@needs_torchvision
def test_masks_to_boxes_matches_torchvision():
    m = np.zeros((4, 7, 9), np.uint8)
    m[0, 2:5, 3:8] = 1
    m[1, 6, 0] = 1
    m[3, 1:7:2, 4] = 1            # m[2] is empty
    for arr in (m, m.astype(np.float32), m.astype(bool)):
        got, want = ops.masks_to_boxes(tracec.from_numpy(arr)), tv.ops.masks_to_boxes(torch.from_numpy(arr))
        assert got.dtype == tracec.float32 and got.tolist() == want.tolist()
    assert tuple(ops.masks_to_boxes(tracec.zeros(0, 3, 3)).shape) == (0, 4)


@pytest.mark.parametrize("extra,norm", [("none", False), ("pool", True), ("p6p7", False), ("p6p7_c5", False)])
@needs_torchvision
def test_feature_pyramid_network_matches_torchvision(extra, norm):
    from torchvision.ops import feature_pyramid_network as tfpn
    from tracec.vision.ops import feature_pyramid_network as gfpn

    def build(m, nn_):
        blocks = {"none": None, "pool": m.LastLevelMaxPool(), "p6p7": m.LastLevelP6P7(6, 6),
                  "p6p7_c5": m.LastLevelP6P7(12, 6)}[extra]
        return m.FeaturePyramidNetwork([3, 5, 12], 6, extra_blocks=blocks,
                                       norm_layer=nn_.BatchNorm2d if norm else None)

    want_m, got_m = build(tfpn, torch.nn), build(gfpn, tracec.nn)
    assert list(got_m.state_dict()) == list(want_m.state_dict())
    assert repr(got_m) == repr(want_m)
    sd = {k: v.detach().numpy() + R.normal(0, 0.1, tuple(v.shape)).astype(np.float32)
          if v.dtype == torch.float32 else v.numpy() for k, v in want_m.state_dict().items()}
    want_m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    got_m.load_state_dict({k: tracec.from_numpy(v) for k, v in sd.items()})
    feats = [R.normal(size=(2, c, s, s + 1)).astype(np.float32) for c, s in ((3, 16), (5, 8), (12, 3))]
    names = ["feat0", "feat1", "feat2"]
    tin = OrderedDict((n, torch.from_numpy(f).requires_grad_()) for n, f in zip(names, feats))
    gin = OrderedDict((n, tracec.from_numpy(f).requires_grad_()) for n, f in zip(names, feats))
    want, got = want_m(tin), got_m(gin)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k].detach().numpy(), want[k].detach().numpy(), rtol=1e-4, atol=1e-5)
    sum(v.square().sum() for v in want.values()).backward()
    sum(v.square().sum() for v in got.values()).backward()
    np.testing.assert_allclose(gin["feat0"].grad.numpy(), tin["feat0"].grad.numpy(), rtol=1e-4, atol=1e-4)


def test_feature_pyramid_network_loads_version_1_keys():
    from tracec.vision.ops.feature_pyramid_network import FeaturePyramidNetwork
    a, b = FeaturePyramidNetwork([3, 4], 5), FeaturePyramidNetwork([3, 4], 5)
    old = {k.replace(".0.", "."): v + 1 for k, v in a.state_dict().items()}
    assert "inner_blocks.0.weight" in old
    b.load_state_dict(old)          # no metadata: version 1, renamed on load
    np.testing.assert_array_equal(b.inner_blocks[1][0].bias.detach().numpy(),
                                  a.inner_blocks[1][0].bias.detach().numpy() + 1)
    with pytest.raises(TypeError, match="extra_blocks should be of type ExtraFPNBlock not"):
        FeaturePyramidNetwork([3], 5, extra_blocks=tracec.nn.ReLU())
    with pytest.raises(ValueError, match="in_channels=0 is currently not supported"):
        FeaturePyramidNetwork([3, 0], 5)


@needs_torchvision
def test_detection_box_coder_matches_torchvision():
    from torchvision.models.detection import _utils as tdu
    from tracec.vision.models.detection import _utils as gdu
    ref, prop = _boxes((7,), 11), _boxes((7,), 12)
    for w in ((1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)):
        tc, gc = tdu.BoxCoder(w), gdu.BoxCoder(w)
        assert gc.bbox_xform_clip == tc.bbox_xform_clip
        want = tc.encode([torch.from_numpy(ref[:3]), torch.from_numpy(ref[3:])],
                         [torch.from_numpy(prop[:3]), torch.from_numpy(prop[3:])])
        got = gc.encode([tracec.from_numpy(ref[:3]), tracec.from_numpy(ref[3:])],
                        [tracec.from_numpy(prop[:3]), tracec.from_numpy(prop[3:])])
        assert len(got) == len(want) == 2
        for g, t in zip(got, want):
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
        codes = R.normal(size=(7, 8)).astype(np.float32) * 3
        codes[0, 2] = 50.0                       # past bbox_xform_clip
        want = tc.decode(torch.from_numpy(codes), [torch.from_numpy(prop[:4]), torch.from_numpy(prop[4:])])
        got = gc.decode(tracec.from_numpy(codes), [tracec.from_numpy(prop[:4]), tracec.from_numpy(prop[4:])])
        assert tuple(got.shape) == tuple(want.shape) == (7, 2, 4)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-4)
    with pytest.raises(AssertionError, match="expects boxes of type list or tuple"):
        gdu.BoxCoder((1.0,) * 4).decode(tracec.zeros(2, 4), tracec.zeros(2, 4))


@pytest.mark.parametrize("low_quality", [False, True])
@needs_torchvision
def test_detection_matcher_matches_torchvision(low_quality):
    from torchvision.models.detection import _utils as tdu
    from tracec.vision.models.detection import _utils as gdu
    gt, pred = _boxes((3,), 13), _boxes((12,), 14)
    q = tv.ops.box_iou(torch.from_numpy(gt), torch.from_numpy(pred))
    q[1, 5] = q[1].max()                     # a tie for the best of ground truth 1
    want = tdu.Matcher(0.5, 0.2, low_quality)(q)
    got = gdu.Matcher(0.5, 0.2, low_quality)(tracec.from_numpy(q.numpy()))
    assert got.dtype == tracec.int64 and got.tolist() == want.tolist()
    assert gdu.Matcher.BELOW_LOW_THRESHOLD == -1 and gdu.Matcher.BETWEEN_THRESHOLDS == -2
    with pytest.raises(ValueError, match="No ground-truth boxes available"):
        gdu.Matcher(0.5, 0.2)(tracec.zeros(0, 4))
    with pytest.raises(ValueError, match="No proposal boxes available"):
        gdu.Matcher(0.5, 0.2)(tracec.zeros(2, 0))
    with pytest.raises(AssertionError, match="low_threshold should be <= high_threshold"):
        gdu.Matcher(0.2, 0.5)


def test_detection_sampler_takes_the_requested_counts():
    from tracec.vision.models.detection import _utils as gdu
    m = tracec.tensor([1, 0, -1, 2, 0, 0, 3, 0, -2, 0])
    pos, neg = gdu.BalancedPositiveNegativeSampler(100, 0.5)([m])
    assert pos[0].dtype == tracec.uint8
    assert pos[0].tolist() == [1, 0, 0, 1, 0, 0, 1, 0, 0, 0] and neg[0].tolist() == [0, 1, 0, 0, 1, 1, 0, 1, 0, 1]
    pos, neg = gdu.BalancedPositiveNegativeSampler(4, 0.25)([m, m])
    for p, n in zip(pos, neg):
        assert int(p.sum()) == 1 and int(n.sum()) == 3
        assert bool((m[p.bool()] >= 1).all()) and bool((m[n.bool()] == 0).all())


@needs_torchvision
def test_detection_anchor_generator_matches_torchvision():
    from torchvision.models.detection.anchor_utils import AnchorGenerator as TA
    from torchvision.models.detection.image_list import ImageList as TI
    from tracec.vision.models.detection.anchor_utils import AnchorGenerator as GA
    from tracec.vision.models.detection.image_list import ImageList as GI
    for kw in (dict(), dict(sizes=((16,), (32, 64)), aspect_ratios=((0.5, 1.0, 2.0), (1.0,))),
               dict(sizes=(8, 24), aspect_ratios=(0.5, 2.0))):
        ta, ga = TA(**kw), GA(**kw)
        assert ga.num_anchors_per_location() == ta.num_anchors_per_location()
        levels = [(10, 12), (5, 6)][:len(ta.sizes)]
        images = np.zeros((2, 3, 40, 48), np.float32)
        tf = [torch.zeros(2, 4, *s) for s in levels]
        gf = [tracec.zeros(2, 4, *s) for s in levels]
        want = ta(TI(torch.from_numpy(images), [(40, 48), (36, 40)]), tf)
        got = ga(GI(tracec.from_numpy(images), [(40, 48), (36, 40)]), gf)
        assert len(got) == len(want) == 2
        for g, t in zip(got, want):
            assert g.dtype == tracec.float32 and g.tolist() == t.tolist()
    assert GI(tracec.zeros(1, 3, 4, 4), [(4, 4)]).to("cpu").image_sizes == [(4, 4)]


def _greedy_nms_torch(boxes, scores, iou_threshold):
    # torchvision's CPU nms kernel (compiled code the CPU oracle cannot load)
    order = torch.sort(scores, descending=True, stable=True)[1]
    iou = tv.ops.box_iou(boxes, boxes)
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in order.tolist():
        if not suppressed[i]:
            keep.append(i)
            suppressed |= iou[i] > iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def _same_weights_and_features(tm, gm, training, std=0.3):
    """torchvision's module ``tm`` and tracec's ``gm`` with the same state
    (numpy weights) and mode; two levels of numpy features."""
    assert list(gm.state_dict()) == list(tm.state_dict())
    sd = {k: R.normal(0, std, tuple(v.shape)).astype(np.float32) for k, v in tm.state_dict().items()}
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    gm.load_state_dict({k: tracec.from_numpy(v) for k, v in sd.items()})
    tm.train(training)
    gm.train(training)
    return {"0": R.normal(size=(2, 4, 12, 12)).astype(np.float32), "1": R.normal(size=(2, 4, 6, 6)).astype(np.float32)}


@pytest.mark.parametrize("training", [True, False])
@needs_torchvision
def test_detection_region_proposal_network_matches_torchvision(training, monkeypatch):
    import torchvision.ops.boxes as tboxes
    from torchvision.models.detection import anchor_utils as tau, image_list as til, rpn as trpn
    from tracec.vision.models.detection import anchor_utils as gau, image_list as gil, rpn as grpn
    monkeypatch.setattr(tboxes, "nms", _greedy_nms_torch)

    def build(au, rpn):
        ag = au.AnchorGenerator(sizes=((12,), (24,)), aspect_ratios=((0.5, 1.0, 2.0),) * 2)
        head = rpn.RPNHead(4, 3, conv_depth=2)
        # samplers that take every positive and negative (their randperm
        # draws then do not matter)
        return rpn.RegionProposalNetwork(ag, head, 0.5, 0.3, 100000, 0.5, dict(training=40, testing=20),
                                         dict(training=16, testing=8), 0.7, score_thresh=0.05)

    tm, gm = build(tau, trpn), build(gau, grpn)
    feats = _same_weights_and_features(tm, gm, training)
    images = np.zeros((2, 3, 48, 48), np.float32)
    targets = [np.array([[4.0, 6.0, 30.0, 28.0], [26.0, 20.0, 46.0, 44.0]], np.float32),
               np.array([[10.0, 12.0, 40.0, 30.0]], np.float32)]
    tf = OrderedDict((k, torch.from_numpy(v).requires_grad_()) for k, v in feats.items())
    gf = OrderedDict((k, tracec.from_numpy(v).requires_grad_()) for k, v in feats.items())
    tboxes_, tlosses = tm(til.ImageList(torch.from_numpy(images), [(48, 48), (40, 44)]), tf,
                          [{"boxes": torch.from_numpy(t)} for t in targets] if training else None)
    gboxes_, glosses = gm(gil.ImageList(tracec.from_numpy(images), [(48, 48), (40, 44)]), gf,
                          [{"boxes": tracec.from_numpy(t)} for t in targets] if training else None)
    assert [len(b) for b in tboxes_] == ([16, 16] if training else [8, 8])
    for g, t in zip(gboxes_, tboxes_):
        assert tuple(g.shape) == tuple(t.shape)
        np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-3)
    assert sorted(glosses) == sorted(tlosses)
    if training:
        for k in tlosses:
            np.testing.assert_allclose(glosses[k].item(), tlosses[k].item(), rtol=1e-5)
        sum(tlosses.values()).backward()
        sum(glosses.values()).backward()
        np.testing.assert_allclose(gf["0"].grad.numpy(), tf["0"].grad.numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(gm.head.conv[0][0].weight.grad.numpy(), tm.head.conv[0][0].weight.grad.numpy(),
                                   rtol=1e-4, atol=1e-6)


def test_detection_rpn_head_loads_version_1_keys_and_refuses_missing_targets():
    from tracec.vision.models.detection import anchor_utils, rpn
    a, b = rpn.RPNHead(3, 2), rpn.RPNHead(3, 2)
    old = {k.replace("conv.0.0.", "conv."): v + 1 for k, v in a.state_dict().items()}
    assert "conv.weight" in old
    b.load_state_dict(old)
    np.testing.assert_array_equal(b.conv[0][0].bias.detach().numpy(), a.conv[0][0].bias.detach().numpy() + 1)
    m = rpn.RegionProposalNetwork(anchor_utils.AnchorGenerator(((8,),), ((1.0,),)), rpn.RPNHead(3, 1), 0.7, 0.3,
                                  16, 0.5, dict(training=4, testing=4), dict(training=2, testing=2), 0.7)
    from tracec.vision.models.detection.image_list import ImageList
    with pytest.raises(ValueError, match="targets should not be None"):
        m(ImageList(tracec.zeros(1, 3, 16, 16), [(16, 16)]), {"0": tracec.zeros(1, 3, 4, 4)})


@pytest.mark.parametrize("training", [True, False])
@needs_torchvision
def test_detection_roi_heads_match_torchvision(training, monkeypatch):
    import torchvision.ops.boxes as tboxes
    from torchvision.models.detection import faster_rcnn as tfr, roi_heads as trh
    from tracec.vision.models.detection import faster_rcnn as gfr, roi_heads as grh
    monkeypatch.setattr(tboxes, "nms", _greedy_nms_torch)

    def build(ops_, fr, rh):
        pool = ops_.MultiScaleRoIAlign(["0", "1"], 3, 2, canonical_scale=32, canonical_level=3)
        # samplers that take every proposal (their randperm draws then do not matter)
        return rh.RoIHeads(pool, fr.TwoMLPHead(4 * 9, 16), fr.FastRCNNPredictor(16, 3), 0.5, 0.5, 100000, 0.25,
                           None, 0.05, 0.5, 6)

    tm, gm = build(tv.ops, tfr, trh), build(ops, gfr, grh)
    feats = _same_weights_and_features(tm, gm, training)
    props = [_boxes((7,), 21) * 1.5, _boxes((5,), 22) * 1.5]
    targets = [(np.array([[4.0, 6.0, 30.0, 28.0], [26.0, 20.0, 46.0, 44.0]], np.float32), [1, 2]),
               (np.array([[10.0, 12.0, 40.0, 30.0]], np.float32), [2])]
    shapes = [(48, 48), (40, 44)]
    tf = OrderedDict((k, torch.from_numpy(v).requires_grad_()) for k, v in feats.items())
    gf = OrderedDict((k, tracec.from_numpy(v).requires_grad_()) for k, v in feats.items())
    tres, tloss = tm(tf, [torch.from_numpy(p) for p in props], shapes,
                     [{"boxes": torch.from_numpy(b), "labels": torch.tensor(l)} for b, l in targets]
                     if training else None)
    gres, gloss = gm(gf, [tracec.from_numpy(p) for p in props], shapes,
                     [{"boxes": tracec.from_numpy(b), "labels": tracec.tensor(l)} for b, l in targets]
                     if training else None)
    assert sorted(gloss) == sorted(tloss) and len(gres) == len(tres)
    if training:
        for k in tloss:
            np.testing.assert_allclose(gloss[k].item(), tloss[k].item(), rtol=1e-5)
        sum(tloss.values()).backward()
        sum(gloss.values()).backward()
        np.testing.assert_allclose(gf["0"].grad.numpy(), tf["0"].grad.numpy(), rtol=1e-4, atol=1e-6)
    else:
        assert sum(len(r["boxes"]) for r in tres) > 0
        for g, t in zip(gres, tres):
            assert g["labels"].tolist() == t["labels"].tolist()
            np.testing.assert_allclose(g["scores"].detach().numpy(), t["scores"].detach().numpy(), rtol=1e-5)
            np.testing.assert_allclose(g["boxes"].detach().numpy(), t["boxes"].detach().numpy(), rtol=1e-4,
                                       atol=1e-3)


def test_detection_heads_refuse_what_they_do_not_support():
    from tracec.vision.models.detection import faster_rcnn, roi_heads
    with pytest.raises(NotImplementedError, match="mask and keypoint branches"):
        roi_heads.RoIHeads(None, None, None, 0.5, 0.5, 8, 0.25, None, 0.05, 0.5, 4, mask_head=tracec.nn.ReLU())
    with pytest.raises(AssertionError, match=r"expecting the last two dimensions to be \[1,1\] instead of \[2, 2\]"):
        faster_rcnn.FastRCNNPredictor(3, 2)(tracec.zeros(1, 3, 2, 2))
    head = faster_rcnn.FastRCNNConvFCHead((3, 4, 4), [5], [6])
    assert tuple(head(tracec.zeros(2, 3, 4, 4)).shape) == (2, 6)
    if tv is not None:
        from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead
        assert [n for n, _ in head.named_parameters()] == \
            [n for n, _ in FastRCNNConvFCHead((3, 4, 4), [5], [6]).named_parameters()]


@needs_torchvision
def test_detection_transform_matches_torchvision():
    from torchvision.models.detection.transform import GeneralizedRCNNTransform as TT
    from tracec.vision.models.detection.transform import GeneralizedRCNNTransform as GT
    imgs = [R.random((3, 30, 41), dtype=np.float32), R.random((3, 37, 23), dtype=np.float32)]
    boxes = [np.array([[2.0, 3.0, 20.0, 25.0]], np.float32), np.array([[1.0, 1.0, 9.0, 30.0], [5, 6, 20, 33]], np.float32)]
    for kw in (dict(min_size=48, max_size=64), dict(min_size=(40,), max_size=50, size_divisible=16),
               dict(min_size=48, max_size=64, fixed_size=(40, 56))):
        tt, gt = TT(image_mean=[0.4, 0.5, 0.6], image_std=[0.2, 0.3, 0.25], **kw), \
            GT(image_mean=[0.4, 0.5, 0.6], image_std=[0.2, 0.3, 0.25], **kw)
        assert repr(gt) == repr(tt)
        for mode in (True, False):
            tt.train(mode)
            gt.train(mode)
            til, ttg = tt([torch.from_numpy(i) for i in imgs], [{"boxes": torch.from_numpy(b)} for b in boxes])
            gil, gtg = gt([tracec.from_numpy(i) for i in imgs], [{"boxes": tracec.from_numpy(b)} for b in boxes])
            assert gil.image_sizes == [tuple(s) for s in til.image_sizes]
            assert tuple(gil.tensors.shape) == tuple(til.tensors.shape)
            np.testing.assert_allclose(gil.tensors.numpy(), til.tensors.numpy(), rtol=1e-5, atol=1e-5)
            for g, t in zip(gtg, ttg):
                np.testing.assert_allclose(g["boxes"].numpy(), t["boxes"].numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="Expected input images to be of floating type"):
        gt([tracec.zeros(3, 4, 4, dtype=tracec.uint8)])


@pytest.mark.parametrize("training", [True, False])
@needs_torchvision
def test_detection_faster_rcnn_matches_torchvision(training, monkeypatch):
    import torchvision.ops.boxes as tboxes
    from torchvision.models.detection import anchor_utils as tau, faster_rcnn as tfr
    from tracec.vision.models.detection import anchor_utils as gau, faster_rcnn as gfr
    monkeypatch.setattr(tboxes, "nms", _greedy_nms_torch)

    def build(nn_, ops_, au, fr):
        backbone = nn_.Sequential(nn_.Conv2d(3, 6, 3, stride=2, padding=1), nn_.ReLU(),
                                  nn_.Conv2d(6, 6, 3, stride=2, padding=1))
        backbone.out_channels = 6
        # samplers that take every anchor and proposal (their randperm draws then do not matter)
        return fr.FasterRCNN(backbone, num_classes=3, min_size=48, max_size=64,
                             rpn_anchor_generator=au.AnchorGenerator(((12, 24),), ((0.5, 1.0, 2.0),)),
                             box_roi_pool=ops_.MultiScaleRoIAlign(["0"], 3, 2), rpn_pre_nms_top_n_train=50,
                             rpn_pre_nms_top_n_test=30, rpn_post_nms_top_n_train=20, rpn_post_nms_top_n_test=10,
                             rpn_batch_size_per_image=100000, box_batch_size_per_image=100000,
                             box_detections_per_img=5, box_score_thresh=0.01)

    tm, gm = build(torch.nn, tv.ops, tau, tfr), build(tracec.nn, ops, gau, gfr)
    # (small weights: small box offsets, so that proposals stay inside the images)
    _same_weights_and_features(tm, gm, training, std=0.05)
    imgs = [R.random((3, 40, 50), dtype=np.float32), R.random((3, 36, 44), dtype=np.float32)]
    targets = [(np.array([[4.0, 6.0, 30.0, 28.0], [20.0, 10.0, 46.0, 38.0]], np.float32), [1, 2]),
               (np.array([[10.0, 12.0, 40.0, 30.0]], np.float32), [2])]
    tout = tm([torch.from_numpy(i) for i in imgs],
              [{"boxes": torch.from_numpy(b), "labels": torch.tensor(l)} for b, l in targets] if training else None)
    gout = gm([tracec.from_numpy(i) for i in imgs],
              [{"boxes": tracec.from_numpy(b), "labels": tracec.tensor(l)} for b, l in targets] if training else None)
    if training:
        assert sorted(gout) == sorted(tout)
        for k in tout:
            np.testing.assert_allclose(gout[k].item(), tout[k].item(), rtol=1e-4, atol=1e-6)
        sum(tout.values()).backward()
        sum(gout.values()).backward()
        np.testing.assert_allclose(gm.backbone[0].weight.grad.numpy(), tm.backbone[0].weight.grad.numpy(),
                                   rtol=1e-3, atol=1e-6)
    else:
        assert [len(d["boxes"]) for d in gout] == [len(d["boxes"]) for d in tout] == [5, 5], \
            ([len(d["boxes"]) for d in gout], [len(d["boxes"]) for d in tout])
        for g, t in zip(gout, tout):
            assert g["labels"].tolist() == t["labels"].tolist()
            np.testing.assert_allclose(g["scores"].detach().numpy(), t["scores"].detach().numpy(), rtol=1e-4)
            np.testing.assert_allclose(g["boxes"].detach().numpy(), t["boxes"].detach().numpy(), rtol=1e-4,
                                       atol=1e-3)
    with pytest.raises(ValueError, match="num_classes should not be None when box_predictor is not specified"):
        gfr.FasterRCNN(tm.backbone if False else gm.backbone)


@needs_torchvision
def test_detection_fasterrcnn_resnet50_fpn_matches_torchvision(monkeypatch):
    import torchvision.ops.boxes as tboxes
    from torchvision.models.detection import faster_rcnn as tfr
    from tracec.vision.models.detection import faster_rcnn as gfr
    monkeypatch.setattr(tboxes, "nms", _greedy_nms_torch)
    # every anchor reaches NMS (no top-n cut among near-equal objectness)
    # and the RoI heads see the best 30 proposals
    kw = dict(weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=96,
              rpn_pre_nms_top_n_test=100000, rpn_post_nms_top_n_test=30, box_detections_per_img=3,
              box_score_thresh=0.0)
    torch.manual_seed(0)
    tm, gm = tfr.fasterrcnn_resnet50_fpn(**kw), gfr.fasterrcnn_resnet50_fpn(**kw)
    assert list(gm.state_dict()) == list(tm.state_dict())
    assert [n for n, p in gm.named_parameters() if p.requires_grad] == \
        [n for n, p in tm.named_parameters() if p.requires_grad]
    assert repr(gm.transform) == repr(tm.transform)
    gm.load_state_dict({k: tracec.from_numpy(v.numpy().copy()) for k, v in tm.state_dict().items()})
    tm.eval()
    gm.eval()
    img = R.random((3, 60, 80), dtype=np.float32)
    with torch.no_grad():
        want = tm([torch.from_numpy(img)])[0]
        tfeat = tm.backbone(tm.transform([torch.from_numpy(img)])[0].tensors)
    with tracec.no_grad():
        got = gm([tracec.from_numpy(img)])[0]
        gfeat = gm.backbone(gm.transform([tracec.from_numpy(img)])[0].tensors)
    assert list(gfeat) == list(tfeat) == ["0", "1", "2", "3", "pool"]
    for k in tfeat:
        # (features of magnitude ~20 after ResNet-50 + FPN in float32: an
        # element that cancels to ~1e-4 carries ~1e-4 of rounding)
        np.testing.assert_allclose(gfeat[k].numpy(), tfeat[k].numpy(), rtol=1e-3, atol=1e-3)
    # (a random network's scores lie close together: the top detection only)
    assert len(got["boxes"]) == len(want["boxes"]) == 3
    assert got["labels"][0].item() == want["labels"][0].item()
    np.testing.assert_allclose(got["scores"][0].item(), want["scores"][0].item(), rtol=1e-3)
    np.testing.assert_allclose(got["boxes"][0].numpy(), want["boxes"][0].numpy(), rtol=1e-3, atol=1e-2)
    # without weights the backbone keeps BatchNorm2d; resnet_fpn_backbone's
    # default FrozenBatchNorm2d and its trainable layers as torchvision's
    assert isinstance(gm.backbone.body.bn1, tracec.nn.BatchNorm2d)
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone as tbb
    from tracec.vision.models.detection.backbone_utils import resnet_fpn_backbone as gbb
    for layers, returned in ((2, None), (5, [2, 4]), (0, [1])):
        tb = tbb(backbone_name="resnet18", weights=None, trainable_layers=layers, returned_layers=returned)
        gb = gbb(backbone_name="resnet18", weights=None, trainable_layers=layers, returned_layers=returned)
        assert type(gb.body.bn1).__name__ == type(tb.body.bn1).__name__ == "FrozenBatchNorm2d"
        assert [n for n, p in gb.named_parameters() if p.requires_grad] == \
            [n for n, p in tb.named_parameters() if p.requires_grad]
        assert list(gb.state_dict()) == list(tb.state_dict()) and gb.out_channels == tb.out_channels
    assert gfr.FasterRCNN_ResNet50_FPN_Weights.COCO_V1.meta["categories"] == \
        tfr.FasterRCNN_ResNet50_FPN_Weights.COCO_V1.meta["categories"]
    assert gfr.FasterRCNN_ResNet50_FPN_Weights.COCO_V1.url == tfr.FasterRCNN_ResNet50_FPN_Weights.COCO_V1.url
    with pytest.raises(ValueError, match="Trainable backbone layers should be in the range"):
        gfr.fasterrcnn_resnet50_fpn(weights=None, weights_backbone="IMAGENET1K_V1", trainable_backbone_layers=6)


@needs_torchvision
def test_intermediate_layer_getter_and_backbone_with_fpn_match_torchvision():
    from torchvision.models._utils import IntermediateLayerGetter as TI
    from tracec.vision.models._utils import IntermediateLayerGetter as GI
    tnet = torch.nn.Sequential(OrderedDict(a=torch.nn.Conv2d(2, 3, 3), b=torch.nn.ReLU(), c=torch.nn.Conv2d(3, 4, 1),
                                           d=torch.nn.ReLU()))
    gnet = tracec.nn.Sequential(OrderedDict(a=tracec.nn.Conv2d(2, 3, 3), b=tracec.nn.ReLU(),
                                            c=tracec.nn.Conv2d(3, 4, 1), d=tracec.nn.ReLU()))
    gnet.load_state_dict({k: tracec.from_numpy(v.detach().numpy().copy()) for k, v in tnet.state_dict().items()})
    ti, gi = TI(tnet, {"a": "first", "c": "last"}), GI(gnet, {"a": "first", "c": "last"})
    assert list(gi.keys()) == list(ti.keys()) == ["a", "b", "c"]
    x = R.normal(size=(1, 2, 6, 6)).astype(np.float32)
    want, got = ti(torch.from_numpy(x)), gi(tracec.from_numpy(x))
    assert list(got) == list(want) == ["first", "last"]
    np.testing.assert_allclose(got["last"].detach().numpy(), want["last"].detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="return_layers are not present in model"):
        GI(gnet, {"z": "0"})


def test_nms_of_thousands_of_boxes_is_fast_and_greedy():
    # the RPN's NMS sees thousands of proposals per image: nms took 3 s
    # for 3000 boxes as a pairwise Python loop; one vector pass per kept box
    import time
    rng = np.random.default_rng(7)
    xy = rng.random((3000, 2), dtype=np.float32) * 200
    b = np.concatenate([xy, xy + 5 + rng.random((3000, 2), dtype=np.float32) * 40], 1)
    s = rng.random(3000, dtype=np.float32)
    s[10:20] = s[0]                              # ties keep the earlier box first
    order, keep, alive = list(np.argsort(-s, kind="stable")), [], np.ones(3000, bool)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    for i in order:
        if alive[i]:
            keep.append(int(i))
            wh = np.clip(np.minimum(b[i, 2:], b[:, 2:]) - np.maximum(b[i, :2], b[:, :2]), 0, None)
            inter = wh[:, 0] * wh[:, 1]
            over = inter / (area[i] + area - inter) > 0.5
            alive &= ~over | (np.arange(3000) == i)
            alive[i] = False
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        got = ops.nms(tracec.from_numpy(b), tracec.from_numpy(s), 0.5)
        best = min(best, time.process_time() - t)
    assert got.tolist() == keep
    assert best < 1.5, best


@needs_torchvision
def test_detection_weights_transforms_are_object_detection():
    from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights as TW
    from tracec.vision.models.detection import FasterRCNN_ResNet50_FPN_Weights as GW
    t, g = TW.DEFAULT.transforms(), GW.DEFAULT.transforms()
    assert repr(g) == repr(t) == "ObjectDetection()"
    img = (R.random((3, 5, 6)) * 255).astype(np.uint8)
    got, want = g(tracec.from_numpy(img)), t(torch.from_numpy(img))
    assert got.dtype == tracec.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert GW.DEFAULT.meta["num_classes"] == 91 and GW.DEFAULT.meta["min_size"] == TW.DEFAULT.meta["min_size"]


def kernel_roi_pool(x, rois, ph_n, pw_n, scale):
    """torchvision/csrc/ops/cpu/roi_pool_kernel.cpp, loop for loop: the
    output and each bin's argmax (flat index in the map, -1 when empty)."""
    _, C, H, W = x.shape
    out = np.zeros((len(rois), C, ph_n, pw_n), x.dtype)
    arg = -np.ones((len(rois), C, ph_n, pw_n), np.int64)
    f = np.float32
    for k, roi in enumerate(rois):
        b = int(roi[0])
        sw, sh, ew, eh = (int(np.sign(v * f(scale)) * np.floor(abs(v * f(scale)) + f(0.5))) for v in roi[1:])
        rw, rh = max(ew - sw + 1, 1), max(eh - sh + 1, 1)
        bh, bw = f(rh) / f(ph_n), f(rw) / f(pw_n)
        for ph in range(ph_n):
            for pw in range(pw_n):
                hs = min(max(int(np.floor(f(ph) * bh)) + sh, 0), H)
                he = min(max(int(np.ceil(f(ph + 1) * bh)) + sh, 0), H)
                ws = min(max(int(np.floor(f(pw) * bw)) + sw, 0), W)
                we = min(max(int(np.ceil(f(pw + 1) * bw)) + sw, 0), W)
                for c in range(C):
                    if he <= hs or we <= ws:
                        continue
                    best, idx = -np.finfo(np.float32).max, -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if x[b, c, h, w] > best:
                                best, idx = x[b, c, h, w], h * W + w
                    out[k, c, ph, pw], arg[k, c, ph, pw] = best, idx
    return out, arg


@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25])
def test_roi_pool_matches_the_kernel(scale):
    rois = np.concatenate([ROIS, np.array([[0, 30.0, 30.0, 40.0, 40.0], [1, 3.5, 2.5, 3.5, 2.5],
                                           [0, -6.0, -4.0, 25.0, 3.0]], np.float32)])
    xg = tracec.from_numpy(X).requires_grad_()
    got = ops.roi_pool(xg, tracec.from_numpy(rois), (3, 2), scale)
    want, arg = kernel_roi_pool(X, rois, 3, 2, scale)
    assert got.shape == (len(rois), 3, 3, 2) and got.dtype == tracec.float32
    np.testing.assert_array_equal(got.detach().numpy(), want)
    w = R.normal(size=want.shape).astype(np.float32)
    (got * tracec.from_numpy(w)).sum().backward()
    grad = np.zeros_like(X)
    for k, c, ph, pw in np.ndindex(*arg.shape):
        if arg[k, c, ph, pw] >= 0:
            grad[int(rois[k, 0]), c].reshape(-1)[arg[k, c, ph, pw]] += w[k, c, ph, pw]
    np.testing.assert_allclose(xg.grad.numpy(), grad, rtol=1e-6, atol=1e-6)
    listed = ops.roi_pool(tracec.from_numpy(X), [tracec.from_numpy(rois[rois[:, 0] == 0, 1:]),
                                                 tracec.from_numpy(rois[rois[:, 0] == 1, 1:])], 2, scale)
    assert tuple(listed.shape) == (len(rois), 3, 2, 2)
    if tv is not None:
        assert repr(ops.RoIPool((3, 2), scale)) == repr(tv.ops.RoIPool((3, 2), scale))
