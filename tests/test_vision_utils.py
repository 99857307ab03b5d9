"""``tracec.vision.utils`` (make_grid, save_image) and ``tracec.vision.ops``
box functions against torchvision 0.28; ``nms`` (whose torchvision kernel
is compiled code the CPU oracle cannot load) against a direct NumPy
transcription of the greedy rule.  And ``import torchvision`` under
``tracec run``."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracec
from tracec.vision import ops, utils
from vision_oracle import needs_torchvision, optional

tv, torch = optional()
Image = pytest.importorskip("PIL.Image")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = np.random.default_rng(0).random((5, 3, 6, 7), dtype=np.float32) * 1.4 - 0.2


@pytest.mark.parametrize("kw", [{}, {"nrow": 2, "padding": 1, "pad_value": 0.5},
                                {"normalize": True}, {"normalize": True, "scale_each": True},
                                {"normalize": True, "value_range": (0.0, 0.5)}])
@needs_torchvision
def test_make_grid(kw):
    got = utils.make_grid(tracec.from_numpy(BATCH), **kw)
    want = tv.utils.make_grid(torch.from_numpy(BATCH), **kw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)
    one = utils.make_grid([tracec.from_numpy(BATCH[0, :1])])
    np.testing.assert_allclose(one.numpy(), tv.utils.make_grid(
        [torch.from_numpy(BATCH[0, :1])]).numpy())


@needs_torchvision
def test_save_image(tmp_path):
    utils.save_image(tracec.from_numpy(BATCH), tmp_path / "a.png", nrow=3)
    tv.utils.save_image(torch.from_numpy(BATCH), tmp_path / "b.png", nrow=3)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "a.png")),
                                  np.asarray(Image.open(tmp_path / "b.png")))


def boxes(n, seed):
    rng = np.random.default_rng(seed)
    xy = rng.random((n, 2), dtype=np.float32) * 20
    return np.concatenate([xy, xy + 1 + rng.random((n, 2), dtype=np.float32) * 10], 1)


@needs_torchvision
def test_box_functions_match_torchvision():
    a, b = boxes(6, 1), boxes(4, 2)
    for fn in ("box_iou", "generalized_box_iou"):
        np.testing.assert_allclose(
            getattr(ops, fn)(tracec.from_numpy(a), tracec.from_numpy(b)).numpy(),
            getattr(tv.ops, fn)(torch.from_numpy(a), torch.from_numpy(b)).numpy(), atol=1e-6)
    np.testing.assert_allclose(ops.box_area(tracec.from_numpy(a)).numpy(),
                               tv.ops.box_area(torch.from_numpy(a)).numpy())
    for i, o in (("xyxy", "cxcywh"), ("cxcywh", "xywh"), ("xywh", "xyxy")):
        np.testing.assert_allclose(
            ops.box_convert(tracec.from_numpy(a), i, o).numpy(),
            tv.ops.box_convert(torch.from_numpy(a), i, o).numpy(), atol=1e-5)
    np.testing.assert_allclose(ops.clip_boxes_to_image(tracec.from_numpy(a), (9, 12)).numpy(),
                               tv.ops.clip_boxes_to_image(torch.from_numpy(a), (9, 12)).numpy())
    np.testing.assert_array_equal(
        ops.remove_small_boxes(tracec.from_numpy(a), 5.0).numpy(),
        tv.ops.remove_small_boxes(torch.from_numpy(a), 5.0).numpy())


def greedy_nms(b, scores, thr):
    order, keep = list(np.argsort(-scores, kind="stable")), []
    while order:
        i = order.pop(0)
        keep.append(i)
        x1, y1 = np.maximum(b[i, :2], b[order, :2]).T if order else ([], [])
        x2, y2 = np.minimum(b[i, 2:], b[order, 2:]).T if order else ([], [])
        inter = np.clip(np.asarray(x2) - x1, 0, None) * np.clip(np.asarray(y2) - y1, 0, None)
        area = lambda z: (z[..., 2] - z[..., 0]) * (z[..., 3] - z[..., 1])  # noqa: E731
        iou = inter / (area(b[i]) + area(b[order]) - inter) if order else []
        order = [j for j, v in zip(order, iou) if v <= thr]
    return keep


@pytest.mark.parametrize("thr", [0.1, 0.3, 0.7])
def test_nms_and_batched_nms(thr):
    b = boxes(30, 3)
    s = np.random.default_rng(4).random(30, dtype=np.float32)
    got = ops.nms(tracec.from_numpy(b), tracec.from_numpy(s), thr)
    assert got.dtype == tracec.int64 and got.tolist() == greedy_nms(b, s, thr)
    cls = np.random.default_rng(5).integers(0, 3, 30)
    got = ops.batched_nms(tracec.from_numpy(b), tracec.from_numpy(s), tracec.from_numpy(cls), thr)
    want = []
    for c in range(3):
        idx = np.nonzero(cls == c)[0]
        want += [int(idx[k]) for k in greedy_nms(b[idx], s[idx], thr)]
    assert got.tolist() == sorted(want, key=lambda i: -s[i])
    assert ops.nms(tracec.zeros(0, 4), tracec.zeros(0), 0.5).tolist() == []


def test_import_torchvision_under_tracec_run(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch, torchvision
        import torchvision.transforms as T
        from torchvision import datasets, models, utils
        from torchvision.transforms import functional as TF
        import tracec.vision
        assert torchvision is tracec.vision and T is tracec.vision.transforms
        assert models.resnet18 is tracec.vision.models.resnet18
        x = torch.rand(3, 10, 12)
        print(tuple(T.Resize(5)(x).shape), type(datasets.MNIST).__name__)
        try:
            import torchvision.tv_tensors
        except ModuleNotFoundError as e:
            print(e.name, '|', e)
        try:
            import torch.vision
        except ModuleNotFoundError as e:
            print(e.name)
        """))
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-m", "tracec.cli", "run", str(script)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "(3, 5, 6) type",
        "torchvision.tv_tensors | No module named 'torchvision.tv_tensors': tracec (installed "
        "as torchvision by tracec.install_as_torch) has no 'tracec.vision.tv_tensors'",
        "torch.vision"]
