"""Records torchvision 0.29's outputs for tracec's photometric functionals
and AutoAugment's ops (tests/test_vision_autoaugment.py compares with it):
tests/fixtures/torchvision/photometric.npz.

torchvision does not import beside the pinned torch 2.13, so run this with
a side virtual environment (local files on the dev machines):

    python3 -m venv /tmp/tvref && /tmp/tvref/bin/pip install torch==2.14.1 torchvision==0.29.1
    /tmp/tvref/bin/python scripts/record-torchvision-transforms.py
"""
import os

import numpy as np

from_here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                         "torchvision", "photometric.npz")


def images():
    rng = np.random.default_rng(0)
    return {"u8": rng.integers(0, 256, (3, 9, 11), dtype=np.uint8),
            "f32": rng.random((3, 9, 11)).astype(np.float32),
            "u8b": rng.integers(0, 256, (2, 3, 7, 8), dtype=np.uint8),
            "g1": rng.integers(30, 200, (1, 6, 6), dtype=np.uint8)}


OPS = [("ShearX", 0.3), ("ShearY", -0.2), ("TranslateX", 5.0), ("TranslateY", -4.0),
       ("Rotate", 25.0), ("Brightness", 0.4), ("Color", -0.5), ("Contrast", 0.6),
       ("Sharpness", 0.8), ("Posterize", 4.0), ("Solarize", 120.0), ("AutoContrast", 0.0),
       ("Equalize", 0.0), ("Invert", 0.0), ("Identity", 0.0)]


def record(T, F, apply_op, mode):
    out = {}
    for name, arr in images().items():
        x = T.tensor(arr)
        out[name + "_invert"] = F.invert(x)
        out[name + "_solarize"] = F.solarize(x, 128 if arr.dtype == np.uint8 else 0.5)
        out[name + "_sharp"] = F.adjust_sharpness(x, 1.7)
        out[name + "_sharp0"] = F.adjust_sharpness(x, 0.3)
        out[name + "_autoc"] = F.autocontrast(x)
        out[name + "_gamma"] = F.adjust_gamma(x, 0.7, 1.1)
        if arr.dtype == np.uint8:
            out[name + "_poster"] = F.posterize(x, 3)
            out[name + "_equal"] = F.equalize(x)
    x = T.tensor(np.random.default_rng(1).integers(0, 256, (3, 16, 16), dtype=np.uint8))
    for name, mag in OPS:
        for interp in ("nearest", "bilinear"):
            out[f"op_{name}_{interp}"] = apply_op(x, name, mag, mode(interp), None)
        out[f"op_{name}_fill"] = apply_op(x, name, mag, mode("nearest"), [10.0, 20.0, 30.0])
    return {k: v.numpy() for k, v in out.items()}


if __name__ == "__main__":
    import torch
    import torchvision.transforms.functional as F
    from torchvision.transforms.autoaugment import _apply_op
    from torchvision.transforms.functional import InterpolationMode
    np.savez_compressed(from_here, **record(torch, F, _apply_op,
                                            lambda m: InterpolationMode(m)))
    print("wrote", os.path.normpath(from_here))
