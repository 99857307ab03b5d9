"""``tracec.vision.models`` against torchvision 0.29 recordings
(tests/fixtures/torchvision, written by scripts/torchvision_fixtures.py in a
side environment): for each architecture the ordered state-dict keys, shapes
and dtypes, the statistics of the default initialization, ``repr``, and the
outputs in eval mode (and in train mode, dropout off) after loading the same
NumPy-generated weights on both sides."""
import gzip
import hashlib
import importlib.util
import json
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


def _load(cid):
    with gzip.open(FIXTURES / f"{cid}.json.gz", "rt") as f:
        return json.load(f)


def _cases():
    """One test per recorded case (slow cases marked so)."""
    out = []
    for case in recorder.CASES:
        if not (FIXTURES / f"{case[0]}.json.gz").exists():
            continue
        marks = [pytest.mark.slow] if case[5] else []
        out.append(pytest.param(case[0], marks=marks, id=case[0]))
    return out


def _build(rec):
    tracec.manual_seed(0)
    return models.get_model(rec["builder"], **rec["kwargs"])


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


@pytest.mark.parametrize("cid", _cases())
def test_matches_torchvision(cid):
    rec = _load(cid)
    model = _build(rec)
    sd = model.state_dict()
    got = [[k, list(v.shape), str(v.dtype).replace("tracec.", "").replace("torch.", "")]
           for k, v in sd.items()]
    assert [k for k, _, _ in got] == [k for k, _, _ in rec["keys"]]
    assert got == rec["keys"]
    text = repr(model)
    assert hashlib.sha256(text.encode()).hexdigest() == rec["repr_sha256"], text[:3000]
    # the initialization scheme: per-tensor mean and std as torchvision's
    # (exact for constants, statistically for random tensors)
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
    _load_recorded_weights(model, rec)
    x = tracec.from_numpy(recorder.input_for(rec["input_shape"]))
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
        tr = _outputs(out)
        # (train-mode batch norm normalizes over few values in the last
        # stages, 8 per channel at 2x2: float32 rounding differences grow
        # there ~10x, as between two PyTorch CPU kernels)
        for o, want in zip(tr, rec["train"]):
            np.testing.assert_allclose(o, np.array(want, np.float32), rtol=1e-3, atol=1e-3)
        # and a backward pass reaches every parameter
        first = out[0] if isinstance(out, tuple) else out
        (first ** 2).mean().backward()
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
