"""``tracec.vision.models`` against torchvision 0.28: the same state-dict
keys and shapes, and, with torchvision's weights copied in, the same
outputs (eval mode) and gradients.  ``weights=`` loads only from torch.hub's
cache and otherwise says where the file should be."""
import numpy as np
import pytest

import tracec
from tracec.vision import models
from vision_oracle import torchvision

tv = torchvision()
torch = pytest.importorskip("torch")


def copied(name, size, **kw):
    """(tracec model, torchvision model) of ``name`` with torchvision's
    weights, in eval mode, after checking the keys and shapes agree."""
    torch.manual_seed(0)
    theirs = getattr(tv.models, name)(**kw).eval()
    with tracec.device("meta"):      # (no initialization: the weights are copied)
        ours = getattr(models, name)(**kw).eval()
    sd_t, sd_o = theirs.state_dict(), ours.state_dict()
    assert list(sd_o) == list(sd_t)
    assert [tuple(v.shape) for v in sd_o.values()] == [tuple(v.shape) for v in sd_t.values()]
    ours.load_state_dict({k: tracec.from_numpy(v.numpy().copy()) for k, v in sd_t.items()},
                         assign=True)
    x = np.random.default_rng(0).standard_normal(size).astype(np.float32)
    return ours, theirs, x


@pytest.mark.parametrize("name,size,kw", [
    ("resnet18", (2, 3, 32, 32), {"num_classes": 7}),
    pytest.param("resnet50", (1, 3, 32, 32), {}, marks=pytest.mark.slow),
    ("resnext50_32x4d", (1, 3, 32, 32), {"num_classes": 5}),
    ("mobilenet_v2", (2, 3, 32, 32), {"num_classes": 4}),
    ("squeezenet1_0", (1, 3, 48, 48), {"num_classes": 6}),
    ("squeezenet1_1", (1, 3, 48, 48), {}),
    pytest.param("alexnet", (1, 3, 64, 64), {"num_classes": 3}, marks=pytest.mark.slow),
])
def test_outputs_match_torchvision(name, size, kw):
    ours, theirs, x = copied(name, size, **kw)
    with torch.no_grad():
        want = theirs(torch.from_numpy(x)).numpy()
    got = ours(tracec.from_numpy(x))
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-4, atol=1e-4)


def test_resnet18_training_step_gradients_match():
    """Train-mode batch norm over a batch of 4 makes these gradients ill
    conditioned: PyTorch's own float32 ones are ~1% off its float64 ones
    (and which float32 rounding a CPU's kernels pick moves them by as
    much).  So each gradient is compared with the float64 truth, and must
    be as close to it as PyTorch's float32 gradient is (within 2x + 1e-4)."""
    ours, theirs, x = copied("resnet18", (4, 3, 64, 64), num_classes=3)
    truth = getattr(tv.models, "resnet18")(num_classes=3).double()
    truth.load_state_dict({k: v.double() if v.is_floating_point() else v
                           for k, v in theirs.state_dict().items()})
    for m in (ours, theirs, truth):
        m.train()
    y = np.array([0, 2, 1, 1])
    loss_t = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y))
    loss_t.backward()
    torch.nn.functional.cross_entropy(truth(torch.from_numpy(x).double()),
                                      torch.from_numpy(y)).backward()
    loss_o = tracec.nn.functional.cross_entropy(ours(tracec.from_numpy(x)), tracec.from_numpy(y))
    loss_o.backward()
    np.testing.assert_allclose(loss_o.item(), loss_t.item(), rtol=1e-4)
    for (k, p), (_, q), (_, r) in zip(ours.named_parameters(), theirs.named_parameters(),
                                      truth.named_parameters()):
        exact = r.grad.numpy()
        ours_err = np.abs(p.grad.numpy() - exact).max()
        torch_err = np.abs(q.grad.numpy() - exact).max()
        assert ours_err <= 2 * torch_err + 1e-4, (k, ours_err, torch_err)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vgg11"])   # (vgg16_bn's layers: test_vgg_features_and_init)
def test_vgg_matches_torchvision(name):
    ours, theirs, x = copied(name, (1, 3, 32, 32), num_classes=5)
    with torch.no_grad():
        want = theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(tracec.from_numpy(x)).detach().numpy(), want,
                               rtol=1e-4, atol=1e-4)


def test_vgg_features_and_init():
    # the whole VGG holds a 25088x4096 layer (slow test above); its layers list is torchvision's
    for bn in (False, True):
        ours = models.vgg.make_layers(models.vgg.cfgs["A"], batch_norm=bn)
        theirs = tv.models.vgg.make_layers(tv.models.vgg.cfgs["A"], batch_norm=bn)
        assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
        assert list(ours.state_dict()) == list(theirs.state_dict())


def test_weights_enums_and_pretrained_loading(tmp_path, monkeypatch):
    assert models.ResNet50_Weights.DEFAULT is models.ResNet50_Weights.IMAGENET1K_V2
    for enum in ("ResNet18_Weights", "ResNet50_Weights", "VGG16_Weights", "AlexNet_Weights",
                 "MobileNet_V2_Weights", "SqueezeNet1_1_Weights"):
        for member in getattr(tv.models, enum):
            if member.name == "IMAGENET1K_FEATURES":   # VGG16's SSD backbone: not provided
                continue
            assert getattr(models, enum)[member.name].url == member.url
    monkeypatch.setattr(tracec.hub, "_HUB_DIR", str(tmp_path))
    cached = tmp_path / "checkpoints" / "resnet18-f37072fd.pth"
    with pytest.raises(RuntimeError, match="pretrained weights are not downloaded by tracec"):
        models.resnet18(weights="IMAGENET1K_V1")
    with pytest.raises(ValueError, match="expected value 1000 but got 10"):
        models.resnet18(weights=models.ResNet18_Weights.DEFAULT, num_classes=10)
    with pytest.raises(ValueError, match="Unknown weights"):
        models.resnet18(weights="IMAGENET9K")
    torch.manual_seed(1)
    theirs = tv.models.resnet18().eval()
    cached.parent.mkdir(parents=True)
    torch.save(theirs.state_dict(), cached)
    with pytest.warns(UserWarning, match="'pretrained' is deprecated"):
        legacy = models.resnet18(pretrained=True)
    for ours in (models.resnet18(weights=models.ResNet18_Weights.IMAGENET1K_V1), legacy):
        x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
        with torch.no_grad():
            want = theirs(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(ours.eval()(tracec.from_numpy(x)).detach().numpy(), want,
                                   rtol=1e-4, atol=1e-4)
    preset = models.ResNet18_Weights.DEFAULT.transforms()
    img = np.random.default_rng(3).integers(0, 256, (3, 300, 280), dtype=np.uint8)
    want = tv.models.ResNet18_Weights.DEFAULT.transforms()(torch.from_numpy(img)).numpy()
    # one uint8 level after normalization: torchvision resizes uint8 in fixed point
    np.testing.assert_allclose(preset(tracec.from_numpy(img)).numpy(), want, atol=0.018)
    pil = pytest.importorskip("PIL.Image").fromarray(img.transpose(1, 2, 0).copy())
    want = tv.models.ResNet18_Weights.DEFAULT.transforms()(pil).numpy()
    np.testing.assert_allclose(preset(pil).numpy(), want, atol=1e-6)


def test_model_registry():
    assert models.get_model("resnet18", num_classes=2).fc.out_features == 2
    assert {"resnet18", "vgg16", "mobilenet_v2"} <= set(models.list_models())
