"""``tracec.vision.models`` against torchvision 0.29 recordings
(tests/fixtures/torchvision, written by scripts/torchvision_fixtures.py in a
side environment, since torchvision cannot be imported next to the
project's torch).

- ``structure.json.gz``: every torchvision classifier's state-dict keys,
  shapes and ``repr`` at default arguments (built on the meta device here),
  and torchvision's ``list_models()``.
- one file per case: keys, shapes, dtypes, the statistics of the default
  initialization, ``repr``, and the outputs in eval mode (and in train mode,
  dropout off) after loading the same NumPy-generated weights on both sides.
  Small configurations of the big architectures run by default; the
  full-size networks (tens of millions of parameters) only with
  TRACEC_TEST_VISION_FULL=1."""
import gzip
import hashlib
import importlib.util
import json
import os
import pathlib

import numpy as np
import pytest

import tracec
from tracec.vision import models, ops

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "torchvision"
_spec = importlib.util.spec_from_file_location("torchvision_fixtures",
                                               ROOT / "scripts" / "torchvision_fixtures.py")
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)

FULL = os.environ.get("TRACEC_TEST_VISION_FULL") == "1"
# torchvision 0.29 classifiers tracec.vision does not build
NOT_BUILT = set()


def _load(name):
    with gzip.open(FIXTURES / f"{name}.json.gz", "rt") as f:
        return json.load(f)


STRUCTURE = _load("structure")


def _dtype_name(dtype):
    return str(dtype).replace("tracec.", "").replace("torch.", "")


def test_every_case_is_recorded():
    missing = [c[0] for c in recorder.CASES if not (FIXTURES / f"{c[0]}.json.gz").exists()]
    assert not missing, f"run scripts/torchvision_fixtures.py {' '.join(missing)}"


def test_list_models_is_torchvisions():
    theirs = set(STRUCTURE["list_models"])
    assert set(models.list_models()) == theirs - NOT_BUILT
    assert set(models.list_models(module=models)) == theirs - NOT_BUILT
    assert models.list_models(include="efficientnet_v2*") == [
        "efficientnet_v2_l", "efficientnet_v2_m", "efficientnet_v2_s"]
    assert models.list_models(include=["vit_b*", "swin_t"], exclude="*32") == [
        "swin_t", "vit_b_16"]
    assert "resnet18" not in models.list_models(exclude="resnet*")
    with pytest.raises(ValueError, match="Unknown model"):
        models.get_model("no_such_net")


@pytest.mark.filterwarnings("ignore:The default weight initialization")   # (as torchvision's)
@pytest.mark.parametrize("name", sorted(set(STRUCTURE["list_models"]) - NOT_BUILT))
def test_structure_matches_torchvision(name):
    """Keys, shapes and repr at default arguments (meta device: nothing is
    allocated or initialized, so vit_h_14 and regnet_y_128gf are instant)."""
    want = STRUCTURE["models"][name]
    with tracec.device("meta"):
        model = models.get_model(name)
    got = [[k, list(v.shape)] for k, v in model.state_dict().items()]
    assert [k for k, _ in got] == [k for k, _ in want["keys"]]
    assert got == want["keys"]
    text = repr(model)
    assert hashlib.sha256(text.encode()).hexdigest() == want["repr_sha256"], text[:2000]


def _cases():
    out = []
    for case in recorder.CASES:
        marks = [pytest.mark.slow] if case[5] else []
        out.append(pytest.param(case[0], marks=marks, id=case[0]))
    return out


def _build(rec):
    tracec.manual_seed(0)
    return recorder.build(models, rec["builder"], rec["kwargs"])


def _load_recorded_weights(model, rec):
    sd = model.state_dict()
    new = type(sd)()
    new._metadata = sd._metadata      # (MNASNet checks its checkpoint version)
    for k, shape, dtype in rec["keys"]:
        a = recorder.weights_for(k, shape, dtype)
        new[k] = sd[k] if a is None else tracec.from_numpy(a)
    model.load_state_dict(new)


def _outputs(out):
    if isinstance(out, tuple):
        return [o.detach().numpy() for o in out if o is not None]
    return [out.detach().numpy()]


def _no_dropout(model):
    for m in model.modules():
        if isinstance(m, (tracec.nn.Dropout, ops.StochasticDepth)):
            m.p = 0.0


def _check_init(rec, sd):
    """The initialization scheme: per-tensor mean and std as torchvision's
    (exactly for constant tensors, statistically for random ones)."""
    for (k, _, _), v, st in zip(rec["keys"], sd.values(), rec["init_stats"]):
        if st is None:
            continue
        a = v.detach().numpy().astype(np.float64)
        mean, std = a.mean(), (a.std(ddof=1) if a.size > 1 else 0.0)
        if st[1] == 0.0:
            assert std == 0.0 and np.isclose(mean, st[0], rtol=1e-3, atol=1e-6), k
        elif a.size >= 64:
            assert std == pytest.approx(st[1], rel=0.35), (k, std, st)
            assert abs(mean - st[0]) <= 6 * st[1] * np.sqrt(2 / a.size) + 1e-6, (k, mean, st)


@pytest.mark.parametrize("cid", _cases())
def test_matches_torchvision(cid):
    rec = _load(cid)
    if rec["heavy"] and not FULL:
        pytest.skip("full-size network: set TRACEC_TEST_VISION_FULL=1")
    model = _build(rec)
    sd = model.state_dict()
    got = [[k, list(v.shape), _dtype_name(v.dtype)] for k, v in sd.items()]
    assert [k for k, _, _ in got] == [k for k, _, _ in rec["keys"]]
    assert got == rec["keys"]
    text = repr(model)
    assert hashlib.sha256(text.encode()).hexdigest() == rec["repr_sha256"], text[:3000]
    _check_init(rec, sd)
    _load_recorded_weights(model, rec)
    x = tracec.from_numpy(recorder.input_for(rec["input_shape"]))
    if "interpolated" in rec:
        kw = rec["kwargs"]
        state = models.vision_transformer.interpolate_embeddings(
            kw["image_size"] * 3 // 2, kw["patch_size"], model.state_dict(), reset_heads=True)
        assert list(state) == rec["interpolated"]["keys"]
        np.testing.assert_allclose(state["encoder.pos_embedding"].detach().numpy(),
                                   np.array(rec["interpolated"]["pos_embedding"], np.float32),
                                   rtol=1e-5, atol=1e-5)
    model.eval()
    with tracec.no_grad():
        ev = _outputs(model(x))
    assert [list(o.shape) for o in ev] == rec["eval_shapes"]
    for o, want in zip(ev, rec["eval"]):
        np.testing.assert_allclose(o, np.array(want, np.float32), rtol=1e-4, atol=1e-4)
    if "train" in rec:
        _no_dropout(model)
        model.train()
        out = model(x)
        # (train-mode batch norm normalizes over few values in the last
        # stages, 8 per channel at 2x2: float32 rounding differences grow
        # there ~10x, as between two PyTorch CPU kernels)
        for o, want in zip(_outputs(out), rec["train"]):
            np.testing.assert_allclose(o, np.array(want, np.float32), rtol=1e-3, atol=1e-3)
        # and a backward pass reaches every parameter
        first = out[0] if isinstance(out, tuple) else out
        (first ** 2).mean().backward()
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("cid", ["swin_small_cfg", "vit_small"])
def test_compiled_forward_matches_recording(cid):
    """``tracec.compile`` of an eval-mode forward gives torchvision's output
    (Swin: shifted windows, rolls, masks, relative position bias gathers;
    ViT: nn.MultiheadAttention, class token, position embedding)."""
    rec = _load(cid)
    model = _build(rec)
    _load_recorded_weights(model, rec)
    model.eval()
    forward = tracec.compile(lambda x: model(x))
    x = tracec.from_numpy(recorder.input_for(rec["input_shape"]))
    want = np.array(rec["eval"][0], np.float32)
    with tracec.no_grad():
        # the first call runs eagerly while tracing; later ones the native code
        for _ in range(2):
            np.testing.assert_allclose(forward(x).numpy(), want, rtol=1e-4, atol=1e-4)
    assert forward.cache_info().traces == 1


def test_ops_reprs_and_keys_match_torchvision():
    want = STRUCTURE["ops"]
    built = recorder.ops_examples(ops, tracec.nn)
    for name, m in built.items():
        assert repr(m) == want[name]["repr"], name
        assert [[k, list(v.shape)] for k, v in m.state_dict().items()] == want[name]["keys"], name


def test_stochastic_depth():
    x = tracec.ones(2000, 3)
    with pytest.raises(ValueError, match="drop probability"):
        ops.stochastic_depth(x, 1.5, "row")
    with pytest.raises(ValueError, match="mode"):
        ops.stochastic_depth(x, 0.5, "col")
    assert ops.stochastic_depth(x, 0.5, "row", training=False) is x
    assert ops.stochastic_depth(x, 0.0, "row") is x
    tracec.manual_seed(0)
    y = ops.stochastic_depth(x, 0.25, "row").numpy()
    rows = y[:, 0]
    assert (y == rows[:, None]).all()                       # whole rows kept or dropped
    assert set(np.unique(rows)) == {0.0, np.float32(1 / 0.75)}
    assert abs((rows == 0).mean() - 0.25) < 0.05
    z = ops.stochastic_depth(x, 0.5, "batch").numpy()
    assert len(np.unique(z)) == 1                           # one draw for the batch
    m = ops.StochasticDepth(1.0, "row")
    assert (m(x).numpy() == 0).all()
    m.eval()
    assert m(x) is x


def test_weights_enums_match_torchvision():
    """Each builder's weights enum (``get_model_weights``, ``get_weight``):
    member names, URLs (so a checkpoint in
    torch.hub's cache is found under torchvision's file name), the DEFAULT,
    the image size ViT builders take from it, and ``weights.transforms()``
    (each checkpoint's evaluation sizes and interpolation)."""
    for name in sorted(set(STRUCTURE["list_models"]) - NOT_BUILT):
        want = STRUCTURE["models"][name]["weights"]
        enum = models.get_model_weights(name)
        assert enum is getattr(models, want["enum"]) is models.get_model_weights(
            models.get_model_builder(name)), name
        assert models.get_weight(f"{want['enum']}.DEFAULT") is enum.DEFAULT
        # (VGG16's SSD-backbone features are not provided)
        theirs = [m[:2] for m in want["members"] if m[0] != "IMAGENET1K_FEATURES"]
        assert [[w.name, w.url] for w in enum] == theirs, name
        assert enum.DEFAULT.name == want["default"], name
        for member, _, size, transform in want["members"]:
            if size and name.startswith("vit"):
                assert list(enum[member].meta["min_size"]) == size, (name, member)
            if member != "IMAGENET1K_FEATURES":
                t = enum[member].transforms()
                got = {"crop_size": t.crop_size, "resize_size": t.resize_size,
                       "interpolation": t.interpolation.name, "mean": t.mean, "std": t.std,
                       "antialias": t.antialias}
                assert got == transform, (name, member)


def _cache_checkpoint(tmp_path, monkeypatch, url, state_dict):
    monkeypatch.setattr(tracec.hub, "_HUB_DIR", str(tmp_path))
    cached = tmp_path / "checkpoints" / url.rsplit("/", 1)[1]
    cached.parent.mkdir(parents=True, exist_ok=True)
    tracec.save(state_dict, str(cached))


def test_pretrained_densenet_and_googlenet_builders(tmp_path, monkeypatch):
    """DenseNet's checkpoints name layers "norm.1" (renamed on load);
    GoogLeNet's pretrained builder turns on transform_input and drops the
    untrained auxiliary heads unless aux_logits=True is asked for."""
    with pytest.raises(RuntimeError, match="pretrained weights are not downloaded"):
        models.densenet121(weights="DEFAULT")
    tracec.manual_seed(0)
    src = models.get_model("densenet121").eval()
    old = {(k if k.endswith("num_batches_tracked")
             else k.replace("norm1", "norm.1").replace("conv2", "conv.2")): v
           for k, v in src.state_dict().items()}
    assert "features.denseblock1.denselayer1.norm.1.weight" in old
    _cache_checkpoint(tmp_path, monkeypatch, models.DenseNet121_Weights.DEFAULT.url, old)
    loaded = models.densenet121(weights=models.DenseNet121_Weights.IMAGENET1K_V1).eval()
    x = tracec.from_numpy(recorder.input_for((1, 3, 32, 32)))
    with tracec.no_grad():
        np.testing.assert_allclose(loaded(x).numpy(), src(x).numpy(), rtol=1e-5, atol=1e-6)

    tracec.manual_seed(0)
    src = models.googlenet(aux_logits=True, init_weights=False)
    _cache_checkpoint(tmp_path, monkeypatch, models.GoogLeNet_Weights.DEFAULT.url,
                      src.state_dict())
    plain = models.googlenet(weights="DEFAULT")
    assert plain.transform_input and not plain.aux_logits
    assert plain.aux1 is None and plain.aux2 is None
    assert not any(k.startswith("aux") for k in plain.state_dict())
    with pytest.warns(UserWarning, match="auxiliary heads"):
        with_aux = models.googlenet(weights="DEFAULT", aux_logits=True, transform_input=False)
    assert not with_aux.transform_input and with_aux.aux1 is not None
    with pytest.raises(ValueError, match="expected value 1000 but got 10"):
        models.googlenet(weights="DEFAULT", num_classes=10)


def test_densenet_memory_efficient_gradients():
    """``memory_efficient=True`` recomputes each bottleneck in backward
    (checkpointing): the same loss and gradients as the plain model."""
    grads = []
    x = tracec.from_numpy(recorder.input_for((2, 3, 32, 32)))
    for efficient in (False, True):
        tracec.manual_seed(0)
        model = models.densenet.DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8,
                                         bn_size=2, num_classes=3, memory_efficient=efficient)
        (model(x) ** 2).mean().backward()
        grads.append([p.grad.numpy() for p in model.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
