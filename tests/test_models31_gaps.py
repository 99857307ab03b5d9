"""Gaps the models31 programs (tests/programs/models31) found in tracec,
each checked against torch 2.13."""
import pickle

import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_numpy_scalars_in_a_checkpoint_load_only_when_allowed(lib, tmp_path):
    # SwAV writes lr_schedule[iteration], a numpy float64, into
    # param_group["lr"]; the optimizer's state_dict in a checkpoint then
    # holds it.  torch pickles it, so torch.load's default (weights_only)
    # refuses it, naming numpy's scalar global; allowed (or with
    # weights_only=False) it loads back as a numpy float64.  tracec stored
    # it as a Python float and loaded it whatever weights_only said.
    obj = {"param_groups": [{"lr": np.float64(0.25), "step": np.int64(3)}], "ok": np.bool_(True),
           "w": lib.ones(2)}
    lib.save(obj, tmp_path / "ck.pth")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed") as e:
        lib.load(tmp_path / "ck.pth")
    assert "GLOBAL numpy._core.multiarray.scalar was not an allowed global by default" in str(e.value)
    assert "add_safe_globals([numpy._core.multiarray.scalar])" in str(e.value)
    back = lib.load(tmp_path / "ck.pth", weights_only=False)
    allowed = [np._core.multiarray.scalar, np.dtype, np.dtypes.Float64DType, np.dtypes.Int64DType,
               np.dtypes.BoolDType]
    with lib.serialization.safe_globals(allowed):
        safe = lib.load(tmp_path / "ck.pth")
    for d in (back, safe):
        g = d["param_groups"][0]
        assert type(g["lr"]) is np.float64 and g["lr"] == 0.25
        assert type(g["step"]) is np.int64 and g["step"] == 3
        assert type(d["ok"]) is np.bool_ and d["ok"]
        assert d["w"].tolist() == [1.0, 1.0]


def test_an_optimizer_state_dict_with_a_numpy_lr_round_trips_like_torch(tmp_path):
    # the restart: SGD's state_dict saved after lr = np.float64, loaded
    # with weights_only=False into a fresh optimizer, keeps the numpy type
    types = []
    for lib in (tracec, pt):
        w = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        opt.param_groups[0]["lr"] = np.linspace(0.0, 0.6, 4)[2]
        (w * w).sum().backward()
        opt.step()
        lib.save({"optimizer": opt.state_dict()}, tmp_path / "o.pth")
        fresh = lib.optim.SGD([lib.nn.Parameter(lib.ones(3))], lr=0.1, momentum=0.9)
        fresh.load_state_dict(lib.load(tmp_path / "o.pth", weights_only=False)["optimizer"])
        lr = fresh.param_groups[0]["lr"]
        types.append((type(lr), lr, fresh.state_dict()["state"][0]["momentum_buffer"].tolist()))
    assert types[0] == types[1]
