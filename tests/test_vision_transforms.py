"""``tracec.vision.transforms`` against torchvision 0.28 on the same inputs:
PIL paths equal exactly (both call Pillow), tensor paths up to float
rounding; random transforms draw from tracec's generator, so each is
checked as "the functional op at the parameters ``get_params`` draws after
the same seed"."""
import numpy as np
import pytest

import tracec
from tracec.vision import transforms as T
from tracec.vision.transforms import functional as F
from vision_oracle import torchvision

tv = torchvision()
torch = pytest.importorskip("torch")
TF = tv.transforms.functional
Image = pytest.importorskip("PIL.Image")

RNG = np.random.default_rng(0)
IMG_U8 = RNG.integers(0, 256, size=(17, 23, 3), dtype=np.uint8)
IMG_F = RNG.random((3, 17, 23), dtype=np.float32)


def pil(mode="RGB"):
    img = Image.fromarray(IMG_U8)
    return img if mode == "RGB" else img.convert(mode)


def same(a, b, atol=0.0):
    a = a.numpy() if hasattr(a, "numpy") else np.asarray(a)
    b = b.numpy() if hasattr(b, "numpy") else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=0)


def both(fn, *args, **kw):
    """fn of tracec.vision and of torchvision on the same image (tensor
    arguments given as NumPy arrays), results as NumPy arrays."""
    ours = [tracec.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    theirs = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    return getattr(F, fn)(*ours, **kw), getattr(TF, fn)(*theirs, **kw)


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA", "F", "I", "1"])
def test_to_tensor_of_pil_images(mode):
    same(F.to_tensor(pil(mode)), TF.to_tensor(pil(mode)))
    if mode not in ("F", "I"):
        same(F.pil_to_tensor(pil(mode)), TF.pil_to_tensor(pil(mode)))


def test_to_tensor_of_arrays():
    for arr in (IMG_U8, IMG_U8[:, :, 0], IMG_F.transpose(1, 2, 0).copy()):
        same(F.to_tensor(arr), TF.to_tensor(arr))
    with pytest.raises(TypeError, match="pic should be PIL Image or ndarray"):
        F.to_tensor([1, 2])


@pytest.mark.parametrize("src", ["float3", "float1", "uint8", "ndarray"])
def test_to_pil_image(src):
    arr = {"float3": IMG_F, "float1": IMG_F[:1], "uint8": IMG_U8.transpose(2, 0, 1).copy(),
           "ndarray": IMG_U8}[src]
    if src == "ndarray":
        a, b = F.to_pil_image(arr), TF.to_pil_image(arr)
    else:
        a, b = both("to_pil_image", arr)
    assert a.mode == b.mode and a.size == b.size
    same(np.asarray(a), np.asarray(b))


def test_normalize_and_convert_image_dtype():
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    same(*both("normalize", IMG_F, mean, std), atol=1e-6)
    with pytest.raises(ValueError, match="std evaluated to zero"):
        F.normalize(tracec.from_numpy(IMG_F), mean, (1.0, 0.0, 1.0))
    u8 = IMG_U8.transpose(2, 0, 1).copy()
    same(F.convert_image_dtype(tracec.from_numpy(u8), tracec.float32),
         TF.convert_image_dtype(torch.from_numpy(u8), torch.float32), atol=1e-7)
    same(F.convert_image_dtype(tracec.from_numpy(IMG_F), tracec.uint8),
         TF.convert_image_dtype(torch.from_numpy(IMG_F), torch.uint8))


@pytest.mark.parametrize("size", [8, [9, 30], (40,), 23])
@pytest.mark.parametrize("interp", ["bilinear", "bicubic", "nearest"])
def test_resize_pil_and_tensor(size, interp):
    mode = getattr(F.InterpolationMode, interp.upper())
    tvmode = getattr(TF.InterpolationMode, interp.upper())
    a, b = F.resize(pil(), size, mode), TF.resize(pil(), size, tvmode)
    same(np.asarray(a), np.asarray(b))
    for antialias in (True, False):
        a = F.resize(tracec.from_numpy(IMG_F), size, mode, antialias=antialias)
        b = TF.resize(torch.from_numpy(IMG_F), size, tvmode, antialias=antialias)
        same(a, b, atol=2e-5)
    u8 = IMG_U8.transpose(2, 0, 1).copy()
    a = F.resize(tracec.from_numpy(u8), size, mode)
    b = TF.resize(torch.from_numpy(u8), size, tvmode)
    same(a, b, atol=1)   # torchvision rounds uint8 in fixed point on the CPU


def test_resize_max_size_and_errors():
    same(np.asarray(F.resize(pil(), 10, max_size=12)), np.asarray(TF.resize(pil(), 10,
                                                                            max_size=12)))
    with pytest.raises(ValueError, match="max_size should only be passed"):
        F.resize(pil(), [4, 5], max_size=12)


@pytest.mark.parametrize("args", [("center_crop", [7, 9]), ("center_crop", 30),
                                  ("center_crop", [20, 10]), ("crop", -2, 3, 9, 25),
                                  ("crop", 2, 3, 5, 6), ("hflip",), ("vflip",),
                                  ("pad", [1, 2, 3, 4]), ("pad", 3, 7),
                                  ("pad", [2, 3], 0, "reflect"), ("pad", [2, 1], 0, "edge"),
                                  ("pad", [2, 3, 1, 4], 0, "symmetric")])
def test_geometry_pil_and_tensor(args):
    fn, rest = args[0], args[1:]
    same(np.asarray(getattr(F, fn)(pil(), *rest)), np.asarray(getattr(TF, fn)(pil(), *rest)))
    same(*both(fn, IMG_F, *rest))


@pytest.mark.parametrize("angle", [30.0, -75.5, 90.0])
def test_rotate_and_affine(angle):
    for interp in ("NEAREST", "BILINEAR"):
        mode, tvmode = getattr(F.InterpolationMode, interp), getattr(TF.InterpolationMode, interp)
        same(np.asarray(F.rotate(pil(), angle, mode)), np.asarray(TF.rotate(pil(), angle, tvmode)))
        same(np.asarray(F.rotate(pil(), angle, mode, expand=True, fill=(9, 8, 7))),
             np.asarray(TF.rotate(pil(), angle, tvmode, expand=True, fill=(9, 8, 7))))
        same(F.rotate(tracec.from_numpy(IMG_F), angle, mode),
             TF.rotate(torch.from_numpy(IMG_F), angle, tvmode), atol=1e-4)
        args = (angle, [2, -1], 0.9, [5.0, 3.0])
        same(np.asarray(F.affine(pil(), *args, interpolation=mode)),
             np.asarray(TF.affine(pil(), *args, interpolation=tvmode)))
    a = F.rotate(tracec.from_numpy(IMG_F), angle, F.InterpolationMode.BILINEAR, center=[4, 6])
    b = TF.rotate(torch.from_numpy(IMG_F), angle, TF.InterpolationMode.BILINEAR, center=[4, 6])
    same(a, b, atol=1e-4)
    for fill in ([0.0] * 3, [0.2, 0.5, 1.0], 0.3):
        for interp in ("NEAREST", "BILINEAR"):
            a = F.rotate(tracec.from_numpy(IMG_F), angle, getattr(F.InterpolationMode, interp),
                         fill=fill)
            b = TF.rotate(torch.from_numpy(IMG_F), angle, getattr(TF.InterpolationMode, interp),
                          fill=fill)
            same(a, b, atol=1e-4)
    a = F.affine(tracec.from_numpy(IMG_F), angle, [2, -1], 0.9, [5.0, 3.0],
                 interpolation=F.InterpolationMode.BILINEAR)
    b = TF.affine(torch.from_numpy(IMG_F), angle, [2, -1], 0.9, [5.0, 3.0],
                  interpolation=TF.InterpolationMode.BILINEAR)
    same(a, b, atol=1e-4)


@pytest.mark.parametrize("fn,factor", [("adjust_brightness", 1.4), ("adjust_contrast", 0.6),
                                       ("adjust_saturation", 1.7), ("adjust_hue", 0.23),
                                       ("adjust_hue", -0.4), ("rgb_to_grayscale", 3),
                                       ("rgb_to_grayscale", 1)])
def test_colour_pil_and_tensor(fn, factor):
    same(np.asarray(getattr(F, fn)(pil(), factor)), np.asarray(getattr(TF, fn)(pil(), factor)))
    same(*both(fn, IMG_F, factor), atol=1e-5)
    u8 = IMG_U8.transpose(2, 0, 1).copy()
    same(*both(fn, u8, factor), atol=1)


def _seeded(transform, img):
    tracec.manual_seed(3)
    return transform(img)


def _params(get_params, *args):
    tracec.manual_seed(3)
    return get_params(*args)


def test_random_crop_and_flips_use_tracec_rng():
    img = tracec.from_numpy(IMG_F)
    t = T.RandomCrop(12, padding=2)
    i, j, h, w = _params(T.RandomCrop.get_params, F.pad(img, 2), (12, 12))
    same(_seeded(t, img), TF.crop(TF.pad(torch.from_numpy(IMG_F), 2), i, j, h, w))
    same(np.asarray(_seeded(t, pil())), np.asarray(TF.crop(TF.pad(pil(), 2), i, j, h, w)))
    flips = [bool(_seeded(T.RandomHorizontalFlip(p), img).equal(img.flip(-1)))
             for p in (0.0, 1.0)]
    assert flips == [False, True]
    assert bool(_seeded(T.RandomVerticalFlip(1.0), img).equal(img.flip(-2)))
    a, b = _seeded(T.RandomCrop(9), img), _seeded(T.RandomCrop(9), img)
    assert a.equal(b)


def test_random_resized_crop_and_rotation():
    img = tracec.from_numpy(IMG_F)
    t = T.RandomResizedCrop(10, scale=(0.3, 1.0))
    i, j, h, w = _params(T.RandomResizedCrop.get_params, img, (0.3, 1.0), (3 / 4, 4 / 3))
    same(_seeded(t, img), TF.resized_crop(torch.from_numpy(IMG_F), i, j, h, w, [10, 10]),
         atol=2e-5)
    same(np.asarray(_seeded(t, pil())), np.asarray(TF.resized_crop(pil(), i, j, h, w, [10, 10])))
    angle = _params(T.RandomRotation.get_params, [-40.0, 40.0])
    assert -40 <= angle <= 40
    same(np.asarray(_seeded(T.RandomRotation(40), pil())), np.asarray(TF.rotate(pil(), angle)))
    same(_seeded(T.RandomRotation(40, fill=0.5), img),
         TF.rotate(torch.from_numpy(IMG_F), angle, fill=[0.5] * 3), atol=1e-4)


def test_color_jitter_draws_and_applies_like_torchvision():
    t = T.ColorJitter(0.4, 0.4, 0.4, 0.1)
    order, b, c, s, h = _params(t.get_params, t.brightness, t.contrast, t.saturation, t.hue)
    assert sorted(order.tolist()) == [0, 1, 2, 3]
    ref = pil()
    for k in order.tolist():
        ref = [lambda x: TF.adjust_brightness(x, b), lambda x: TF.adjust_contrast(x, c),
               lambda x: TF.adjust_saturation(x, s), lambda x: TF.adjust_hue(x, h)][k](ref)
    same(np.asarray(_seeded(t, pil())), np.asarray(ref))


def test_compose_pipeline_and_repr():
    ours = T.Compose([T.Resize(12), T.CenterCrop(10), T.Grayscale(3), T.ToTensor(),
                      T.Normalize((0.5,) * 3, (0.25,) * 3), T.Lambda(lambda x: x * 2),
                      T.ConvertImageDtype(tracec.float64)])
    theirs = tv.transforms.Compose([
        tv.transforms.Resize(12), tv.transforms.CenterCrop(10), tv.transforms.Grayscale(3),
        tv.transforms.ToTensor(), tv.transforms.Normalize((0.5,) * 3, (0.25,) * 3),
        tv.transforms.Lambda(lambda x: x * 2), tv.transforms.ConvertImageDtype(torch.float64)])
    same(ours(pil()), theirs(pil()), atol=1e-6)
    simple = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    assert repr(simple) == repr(tv.transforms.Compose([
        tv.transforms.ToTensor(), tv.transforms.Normalize((0.1307,), (0.3081,))]))


def test_tensor_transforms_are_differentiable():
    x = tracec.from_numpy(IMG_F.copy()).requires_grad_()
    y = F.resize(F.normalize(x, (0.5,) * 3, (0.2,) * 3), [8, 8])
    y.sum().backward()
    xt = torch.from_numpy(IMG_F.copy()).requires_grad_()
    TF.resize(TF.normalize(xt, (0.5,) * 3, (0.2,) * 3), [8, 8]).sum().backward()
    same(x.grad, xt.grad, atol=1e-5)


def test_v2_single_image_pipeline():
    from torchvision.transforms import v2 as tv2
    from tracec.vision.transforms import v2
    ours = v2.Compose([v2.ToImage(), v2.Resize(10), v2.CenterCrop(8),
                       v2.ToDtype(tracec.float32, scale=True), v2.Normalize([0.5] * 3, [0.2] * 3)])
    theirs = tv2.Compose([tv2.ToImage(), tv2.Resize(10), tv2.CenterCrop(8),
                          tv2.ToDtype(torch.float32, scale=True), tv2.Normalize([0.5] * 3,
                                                                                [0.2] * 3)])
    for img in (pil(), IMG_U8):
        same(ours(img), theirs(img).as_subclass(torch.Tensor), atol=1e-5)
    same(v2.functional.to_image(IMG_U8[:, :, 0]), tv2.functional.to_image(IMG_U8[:, :, 0]))
    u8 = IMG_U8.transpose(2, 0, 1).copy()
    for size, interp, aa in (([7, 30], "BILINEAR", True), (9, "BILINEAR", False),
                             ([40, 11], "BICUBIC", True), (6, "BICUBIC", False),
                             (5, "NEAREST", True)):
        mode, tvmode = getattr(F.InterpolationMode, interp), getattr(TF.InterpolationMode, interp)
        same(v2.Resize(size, mode, antialias=aa)(tracec.from_numpy(u8)),   # uint8: bit for bit
             tv2.Resize(size, tvmode, antialias=aa)(torch.from_numpy(u8)))
    same(v2.ToDtype(tracec.float64)(tracec.from_numpy(IMG_F)),
         tv2.ToDtype(torch.float64)(torch.from_numpy(IMG_F)))


def test_random_affine_and_erasing():
    img = tracec.from_numpy(IMG_F)
    t = T.RandomAffine(25, translate=(0.2, 0.1), scale=(0.8, 1.2), shear=(-5, 5, -3, 3))
    params = _params(T.RandomAffine.get_params, t.degrees, t.translate, t.scale, t.shear,
                     [23, 17])
    same(np.asarray(_seeded(t, pil())), np.asarray(TF.affine(pil(), *params, fill=0)))
    same(_seeded(t, img), TF.affine(torch.from_numpy(IMG_F), *params, fill=[0.0] * 3),
         atol=1e-4)
    for value in (0, (0.1, 0.2, 0.3), "random"):
        e = T.RandomErasing(p=1.0, value=value)
        tracec.manual_seed(3)
        assert tracec.rand(1) < 1.0      # the p draw
        v = None if value == "random" else ([float(value)] if value == 0 else list(value))
        i, j, h, w, fill = e.get_params(img, e.scale, e.ratio, v)
        want = TF.erase(torch.from_numpy(IMG_F), i, j, h, w, torch.from_numpy(fill.numpy()))
        same(_seeded(e, img), want)
        assert not _seeded(e, img).equal(img)


def test_gaussian_blur_crops_and_python_random_choices():
    for ks, sigma in ((3, None), ([5, 3], [1.5, 0.7]), (7, 2.0)):
        same(*both("gaussian_blur", IMG_F, ks, sigma), atol=1e-5)
        same(*both("gaussian_blur", IMG_U8.transpose(2, 0, 1).copy(), ks, sigma))
        same(np.asarray(F.gaussian_blur(pil(), ks, sigma)),
             np.asarray(TF.gaussian_blur(pil(), ks, sigma)))
    s = _params(T.GaussianBlur.get_params, 0.1, 2.0)
    same(_seeded(T.GaussianBlur(5), tracec.from_numpy(IMG_F)),
         TF.gaussian_blur(torch.from_numpy(IMG_F), [5, 5], [s, s]), atol=1e-5)
    for ours, theirs in zip(T.TenCrop(8, vertical_flip=True)(pil()),
                            tv.transforms.TenCrop(8, vertical_flip=True)(pil())):
        same(np.asarray(ours), np.asarray(theirs))
    import random
    pick = [T.Lambda(lambda x: x + 1), T.Lambda(lambda x: x * 10)]
    random.seed(4)
    got = [T.RandomChoice(pick, p=[0.3, 0.7])(1) for _ in range(6)] + [T.RandomOrder(pick)(1)]
    random.seed(4)
    tpick = [tv.transforms.Lambda(lambda x: x + 1), tv.transforms.Lambda(lambda x: x * 10)]
    want = [tv.transforms.RandomChoice(tpick, p=[0.3, 0.7])(1) for _ in range(6)] + [
        tv.transforms.RandomOrder(tpick)(1)]
    assert got == want
