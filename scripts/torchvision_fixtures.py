"""Record torchvision's classifiers for tests/test_vision_models_more.py.

For each case in ``CASES`` it writes ``tests/fixtures/torchvision/<id>.json.gz``:
the builder and its keyword arguments, the ordered state-dict keys with
shapes and dtypes, per-key mean/std of torchvision's own initialization
(``torch.manual_seed(0)``), a SHA-256 of ``repr(model)``, and the outputs
for a deterministic input after loading deterministic weights (``weights_for``:
every floating entry regenerated from NumPy, seeded by the key, so no weights
are stored), in eval mode and, where ``train`` is set, in train mode with
every Dropout / StochasticDepth at ``p = 0`` (so the output is deterministic).

torchvision cannot be imported next to the project's torch, so this runs in
a side virtual environment (no tracec needed)::

    python3 -m venv /tmp/tvref
    /tmp/tvref/bin/pip install torch==2.14.1 torchvision==0.29.1 numpy
    /tmp/tvref/bin/python scripts/torchvision_fixtures.py [case-id ...]

With no arguments every case is recorded (and ``structure``: every
torchvision classifier's keys and repr at default arguments).  The helpers below import neither
torch nor tracec: the test imports this file for ``CASES``, ``weights_for``
and ``input_for``.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "torchvision")

# (id, builder, kwargs, input shape, train-mode output recorded, heavy).
# ``builder``: a ``get_model`` name, or ``module.Class`` of torchvision.models
# for small configurations of the big architectures (same code, a fraction
# of the parameters).  Keyword values {"@": "module.Name", "args": [...]}
# stand for that object (``args`` present: called with them), built from the
# same module on each side.  Heavy cases (full-size networks, tens of
# millions of parameters) are compared only with TRACEC_TEST_VISION_FULL=1.
def _obj(path, *args):
    return {"@": path, "args": list(args)} if args else {"@": path}


_CN = "convnext.CNBlockConfig"
_FUSED, _MB = "efficientnet.FusedMBConvConfig", "efficientnet.MBConvConfig"
CASES = [
    ("alexnet", "alexnet", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("squeezenet1_0", "squeezenet1_0", {"num_classes": 10}, (2, 3, 48, 48), True, False),
    ("squeezenet1_1", "squeezenet1_1", {"num_classes": 10}, (2, 3, 48, 48), True, False),
    ("densenet_small", "densenet.DenseNet",
     {"growth_rate": 8, "block_config": [2, 2, 2, 2], "num_init_features": 16, "bn_size": 2,
      "num_classes": 10}, (2, 3, 64, 64), True, False),
    ("densenet121", "densenet121", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("densenet161", "densenet161", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("densenet169", "densenet169", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("densenet201", "densenet201", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("resnext50_32x4d", "resnext50_32x4d", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("wide_resnet50_2", "wide_resnet50_2", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("googlenet", "googlenet", {"num_classes": 10, "aux_logits": True, "init_weights": True},
     (2, 3, 64, 64), False, True),
    ("googlenet_noaux", "googlenet",
     {"num_classes": 10, "aux_logits": False, "transform_input": True, "init_weights": True,
      "dropout": 0.0}, (2, 3, 64, 64), True, False),
    ("inception_v3", "inception_v3",
     {"num_classes": 10, "aux_logits": False, "init_weights": True}, (2, 3, 107, 107), True, True),
    ("inception_v3_aux", "inception_v3",
     {"num_classes": 10, "aux_logits": True, "transform_input": True, "init_weights": True},
     (1, 3, 75, 75), False, True),
    ("mobilenet_v3_small", "mobilenet_v3_small", {"num_classes": 10}, (2, 3, 64, 64), True, False),
    ("mobilenet_v3_large", "mobilenet_v3_large", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("efficientnet_b0", "efficientnet_b0", {"num_classes": 10}, (2, 3, 64, 64), True, False),
    ("efficientnet_v2_small", "efficientnet.EfficientNet",
     {"inverted_residual_setting": [_obj(_FUSED, 1, 3, 1, 16, 16, 1),
                                    _obj(_FUSED, 4, 3, 2, 16, 24, 2),
                                    _obj(_MB, 4, 3, 2, 24, 32, 2)],
      "dropout": 0.1, "num_classes": 10, "last_channel": 64}, (2, 3, 32, 32), True, False),
    ("efficientnet_b1", "efficientnet_b1", {"num_classes": 10}, (1, 3, 64, 64), False, True),
    ("efficientnet_b3", "efficientnet_b3", {"num_classes": 10}, (1, 3, 64, 64), False, True),
    ("efficientnet_b7", "efficientnet_b7", {"num_classes": 10}, (1, 3, 64, 64), False, True),
    ("efficientnet_v2_s", "efficientnet_v2_s", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("shufflenet_v2_x0_5", "shufflenet_v2_x0_5", {"num_classes": 10}, (2, 3, 64, 64), True, False),
    ("shufflenet_v2_x1_0", "shufflenet_v2_x1_0", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("shufflenet_v2_x2_0", "shufflenet_v2_x2_0", {"num_classes": 10}, (1, 3, 64, 64), False, True),
    ("mnasnet0_5", "mnasnet0_5", {"num_classes": 10}, (2, 3, 64, 64), True, False),
    ("mnasnet1_0", "mnasnet1_0", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("regnet_y_400mf", "regnet_y_400mf", {"num_classes": 10}, (2, 3, 64, 64), True, False),
    ("regnet_x_400mf", "regnet_x_400mf", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("regnet_y_800mf", "regnet_y_800mf", {"num_classes": 10}, (1, 3, 64, 64), False, True),
    ("vit_small", "vision_transformer.VisionTransformer",
     {"image_size": 32, "patch_size": 8, "num_layers": 2, "num_heads": 4, "hidden_dim": 64,
      "mlp_dim": 128, "num_classes": 10}, (2, 3, 32, 32), True, False),
    ("vit_small_convstem", "vision_transformer.VisionTransformer",
     {"image_size": 32, "patch_size": 8, "num_layers": 1, "num_heads": 2, "hidden_dim": 32,
      "mlp_dim": 64, "num_classes": 10, "representation_size": 24,
      "conv_stem_configs": [_obj("vision_transformer.ConvStemConfig", 8, 3, 2),
                            _obj("vision_transformer.ConvStemConfig", 16, 3, 2),
                            _obj("vision_transformer.ConvStemConfig", 16, 3, 2)]},
     (2, 3, 32, 32), True, False),
    ("vit_b_16_small", "vit_b_16", {"num_classes": 10, "image_size": 32}, (2, 3, 32, 32), True,
     True),
    ("vit_b_32", "vit_b_32", {"num_classes": 10, "image_size": 64}, (1, 3, 64, 64), False, True),
    ("convnext_small_cfg", "convnext.ConvNeXt",
     {"block_setting": [_obj(_CN, 16, 32, 1), _obj(_CN, 32, 64, 1), _obj(_CN, 64, None, 2)],
      "stochastic_depth_prob": 0.1, "num_classes": 10}, (2, 3, 32, 32), True, False),
    ("convnext_tiny", "convnext_tiny", {"num_classes": 10}, (2, 3, 64, 64), True, True),
    ("convnext_small", "convnext_small", {"num_classes": 10}, (1, 3, 64, 64), False, True),
    ("swin_small_cfg", "swin_transformer.SwinTransformer",
     {"patch_size": [4, 4], "embed_dim": 16, "depths": [2, 2, 2, 2], "num_heads": [1, 2, 2, 4],
      "window_size": [4, 4], "num_classes": 10}, (2, 3, 64, 64), True, False),
    ("swin_v2_small_cfg", "swin_transformer.SwinTransformer",
     {"patch_size": [4, 4], "embed_dim": 16, "depths": [2, 2, 2, 2], "num_heads": [1, 2, 2, 4],
      "window_size": [4, 4], "num_classes": 10,
      "block": _obj("swin_transformer.SwinTransformerBlockV2"),
      "downsample_layer": _obj("swin_transformer.PatchMergingV2")}, (2, 3, 64, 64), True, False),
    ("maxvit_small_cfg", "maxvit.MaxVit",
     {"input_size": [32, 32], "stem_channels": 8, "partition_size": 2, "block_channels": [8, 16],
      "block_layers": [1, 2], "head_dim": 4, "stochastic_depth_prob": 0.1, "num_classes": 10},
     (2, 3, 32, 32), True, False),
    ("maxvit_t", "maxvit_t", {"num_classes": 10}, (1, 3, 224, 224), False, True),
    ("swin_t", "swin_t", {"num_classes": 10}, (1, 3, 64, 64), True, True),
    ("swin_v2_t", "swin_v2_t", {"num_classes": 10}, (1, 3, 64, 64), True, True),
]


def resolve_kwargs(value, models):
    """``value`` with each {"@": "module.Name", "args": [...]} replaced by
    that object of the ``models`` package (torchvision.models or
    tracec.vision.models)."""
    if isinstance(value, dict) and "@" in value:
        mod, name = value["@"].split(".")
        obj = getattr(_submodule(models, mod), name)
        if "args" in value:
            return obj(*[resolve_kwargs(a, models) for a in value["args"]])
        return obj
    if isinstance(value, dict):
        return {k: resolve_kwargs(v, models) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_kwargs(v, models) for v in value]
    return value


def _submodule(models, name):
    import importlib
    return importlib.import_module(f"{models.__name__}.{name}")


def build(models, builder, kwargs):
    """The model of a case from ``models`` (torchvision.models or
    tracec.vision.models)."""
    kwargs = resolve_kwargs(kwargs, models)
    if "." in builder:
        mod, name = builder.split(".")
        return getattr(_submodule(models, mod), name)(**kwargs)
    return models.get_model(builder, **kwargs)


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def weights_for(key: str, shape, dtype: str):
    """The float32 array loaded into state-dict entry ``key`` on both sides
    (None: keep the model's own value, for integer buffers).  Scales keep
    activations O(1) through deep networks: weights of variance 1/fan_in,
    norm scales and variances near 1, small biases and means."""
    if not dtype.startswith("float"):
        return None
    rng = np.random.default_rng(_seed(key))
    shape = tuple(shape)
    if key.endswith("running_var"):
        a = rng.uniform(0.5, 1.5, shape)
    elif key.endswith("running_mean") or (len(shape) <= 1 and not key.endswith("weight")):
        a = 0.1 * rng.standard_normal(shape)
    elif len(shape) == 1:
        a = rng.uniform(0.5, 1.5, shape)
    else:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        a = rng.uniform(-1.0, 1.0, shape) * np.sqrt(3.0 / max(fan_in, 1))
    return a.astype(np.float32)


def input_for(shape):
    return np.random.default_rng(12345).standard_normal(shape).astype(np.float32)


def _outputs(out):
    """A model's output as a list of arrays (namedtuples of GoogLeNet /
    Inception in train mode give several; None entries are skipped)."""
    if isinstance(out, tuple):
        return [o.detach().numpy() for o in out if o is not None]
    return [out.detach().numpy()]


def record(case):
    import torch
    import torchvision
    cid, builder, kwargs, shape, train, heavy = case
    torch.manual_seed(0)
    model = build(torchvision.models, builder, kwargs)
    sd = model.state_dict()
    stats = [[float("%.4g" % v.double().mean()),
              float("%.4g" % v.double().std()) if v.numel() > 1 else 0.0]
             if v.is_floating_point() else None for v in sd.values()]
    keys = [[k, list(v.shape), str(v.dtype).replace("torch.", "")] for k, v in sd.items()]
    new = type(sd)()
    new._metadata = sd._metadata      # (MNASNet reads its version from it)
    for k, s, d in keys:
        a = weights_for(k, s, d)
        new[k] = sd[k] if a is None else torch.from_numpy(a)
    model.load_state_dict(new)
    x = torch.from_numpy(input_for(shape))
    rec = {}
    if builder.endswith("VisionTransformer"):
        # the position embeddings resized for 1.5x the image size
        from torchvision.models.vision_transformer import interpolate_embeddings
        state = interpolate_embeddings(kwargs["image_size"] * 3 // 2, kwargs["patch_size"],
                                       model.state_dict(), reset_heads=True)
        rec["interpolated"] = {"keys": list(state),
                               "pos_embedding": state["encoder.pos_embedding"].tolist()}
    model.eval()
    with torch.no_grad():
        ev = _outputs(model(x))
    rec.update({"id": cid, "builder": builder, "kwargs": kwargs, "input_shape": list(shape),
                "heavy": heavy, "keys": keys, "init_stats": stats,
                "repr_sha256": hashlib.sha256(repr(model).encode()).hexdigest(),
                "eval": [o.tolist() for o in ev],
                "eval_shapes": [list(o.shape) for o in ev]})
    if train:
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth":
                m.p = 0.0
        model.train()
        with torch.no_grad():
            tr = _outputs(model(x))
        rec["train"] = [o.tolist() for o in tr]
    os.makedirs(OUT, exist_ok=True)
    data = json.dumps(rec, separators=(",", ":")).encode()
    with open(os.path.join(OUT, cid + ".json.gz"), "wb") as f:
        f.write(gzip.compress(data, mtime=0))      # (same bytes when nothing changed)
    return rec


def ops_examples(ops, nn):
    """torchvision.ops layers whose repr and keys are recorded, built from
    ``ops`` / ``nn`` (torchvision's and torch's, or tracec's)."""
    return {
        "Conv2dNormActivation": ops.Conv2dNormActivation(3, 8, kernel_size=3, stride=2),
        "Conv2dNormActivation_nonorm": ops.Conv2dNormActivation(
            3, 8, kernel_size=(1, 3), norm_layer=None, activation_layer=nn.SiLU),
        "Conv3dNormActivation": ops.Conv3dNormActivation(2, 4, kernel_size=3),
        "SqueezeExcitation": ops.SqueezeExcitation(8, 2),
        "MLP": ops.MLP(4, [8, 8, 2], norm_layer=nn.LayerNorm, dropout=0.1),
        "Permute": ops.Permute([0, 2, 3, 1]),
        "StochasticDepth": ops.StochasticDepth(0.25, "row"),
        "FrozenBatchNorm2d": ops.FrozenBatchNorm2d(4),
    }


def _build_uninitialized(get_model, name):
    """get_model(name) on the CPU with torch.nn.init's functions as no-ops
    (only keys, shapes and repr are wanted)."""
    import contextlib
    from unittest import mock

    import torch
    with contextlib.ExitStack() as stack:
        for n in dir(torch.nn.init):
            if n.endswith("_") and not n.startswith("_"):
                stack.enter_context(mock.patch.object(torch.nn.init, n, lambda t, *a, **k: t))
        return get_model(name)


def _transforms_record(t):
    """A weights' evaluation transform (torchvision's ImageClassification)
    as plain values."""
    return {"crop_size": list(t.crop_size), "resize_size": list(t.resize_size),
            "interpolation": t.interpolation.name, "mean": list(t.mean), "std": list(t.std),
            "antialias": t.antialias}


def record_structure():
    """``structure.json.gz``: torchvision's classification builders (
    ``list_models(torchvision.models)``) and, for each, the state-dict keys
    with shapes, the repr hash at default arguments and its weights enum, built on the meta
    device (no initialization, so even vit_h_14 is instant)."""
    import torch
    import torchvision
    names = torchvision.models.list_models(module=torchvision.models)
    out = {"list_models": names, "models": {}}
    for name in names:
        try:
            with torch.device("meta"):
                model = torchvision.models.get_model(name)
        except NotImplementedError:      # (RegNet computes its widths with .tolist())
            model = _build_uninitialized(torchvision.models.get_model, name)
        enum = torchvision.models.get_model_weights(name)
        out["models"][name] = {
            "keys": [[k, list(v.shape)] for k, v in model.state_dict().items()],
            "repr_sha256": hashlib.sha256(repr(model).encode()).hexdigest(),
            "weights": {"enum": enum.__name__, "default": enum.DEFAULT.name,
                        "members": [[w.name, w.url, list(w.meta.get("min_size", ())),
                                     _transforms_record(w.transforms())] for w in enum]}}
    built = ops_examples(torchvision.ops, torch.nn)
    out["ops"] = {name: {"repr": repr(m),
                         "keys": [[k, list(v.shape)] for k, v in m.state_dict().items()]}
                  for name, m in built.items()}
    data = json.dumps(out, separators=(",", ":")).encode()
    with open(os.path.join(OUT, "structure.json.gz"), "wb") as f:
        f.write(gzip.compress(data, mtime=0))


def main(argv):
    import torch
    torch.set_num_threads(1)
    wanted = set(argv)
    if not wanted or "structure" in wanted:
        record_structure()
        print("recorded structure")
    for case in CASES:
        if not wanted or case[0] in wanted:
            record(case)
            print("recorded", case[0])


if __name__ == "__main__":
    main(sys.argv[1:])
