"""torchvision's photometric functionals (invert, posterize, solarize,
adjust_sharpness, autocontrast, equalize, adjust_gamma) and each op of
AutoAugment / RandAugment / TrivialAugmentWide / AugMix, against outputs
recorded from torchvision 0.29 (scripts/record-torchvision-transforms.py);
the augmentation classes themselves on tensors and PIL images."""
import importlib.util
import os

import numpy as np
import pytest

import tracec
import tracec.vision.transforms as T
import tracec.vision.transforms.functional as F
from tracec.vision.transforms.autoaugment import _apply_op

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "torchvision", "photometric.npz")


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_tv", os.path.join(HERE, "..", "scripts", "record-torchvision-transforms.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def outputs():
    rec = _recorder()
    got = rec.record(tracec, F, _apply_op, lambda m: F.InterpolationMode(m))
    return got, dict(np.load(FIXTURE))


def test_every_recorded_output_is_covered(outputs):
    got, want = outputs
    assert sorted(got) == sorted(want)


@pytest.mark.parametrize("kind", ["functional", "op"])
def test_outputs_equal_torchvisions(outputs, kind):
    got, want = outputs
    for k in sorted(want):
        if k.startswith("op_") != (kind == "op"):
            continue
        g, w = got[k], want[k]
        assert g.shape == w.shape and g.dtype == w.dtype, k
        if w.dtype == np.float32:
            np.testing.assert_allclose(g, w, atol=1e-6, err_msg=k)
        elif k.endswith("_bilinear"):
            # grid_sample of a float copy, rounded back to uint8: a grid
            # coordinate one float ulp apart can round a .5 the other way
            d = np.abs(g.astype(int) - w.astype(int))
            assert d.max() <= 1 and (d > 0).mean() < 0.01, k
        else:
            np.testing.assert_array_equal(g, w, err_msg=k)


def test_uint8_bitwise_with_a_negative_python_int_wraps():
    x = tracec.tensor([255, 7], dtype=tracec.uint8)
    assert (x & -32).tolist() == [224, 0] and (x ^ 300).tolist() == [211, 43]


@pytest.mark.parametrize("make", [
    lambda: T.AutoAugment(), lambda: T.AutoAugment(T.AutoAugmentPolicy.CIFAR10),
    lambda: T.AutoAugment(T.AutoAugmentPolicy.SVHN), lambda: T.RandAugment(num_ops=3),
    lambda: T.TrivialAugmentWide(), lambda: T.AugMix(), lambda: T.RandomInvert(1.0),
    lambda: T.RandomPosterize(3, 1.0), lambda: T.RandomSolarize(100, 1.0),
    lambda: T.RandomAdjustSharpness(2, 1.0), lambda: T.RandomAutocontrast(1.0),
    lambda: T.RandomEqualize(1.0)])
def test_augmentations_run_on_tensors_and_pil(make):
    tracec.manual_seed(0)
    t = make()
    img = tracec.tensor(np.random.default_rng(0).integers(0, 256, (3, 24, 24), dtype=np.uint8))
    for _ in range(4):
        out = t(img)
        assert tuple(out.shape) == (3, 24, 24) and out.dtype == tracec.uint8
    pytest.importorskip("PIL")
    from PIL import Image
    pil = Image.fromarray(img.permute(1, 2, 0).numpy())
    for _ in range(4):
        assert t(pil).size == (24, 24)
    assert type(t).__name__ in repr(t)
