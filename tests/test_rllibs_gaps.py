"""Gaps that Stable-Baselines3 / Gymnasium programs (``tests/programs/rllibs``)
found in tracec, each checked against torch without the libraries."""
import os

import numpy as np
import pytest
import torch

import tracec

_NUMPY_OF_GRAD = "Can't call numpy() on Tensor that requires grad"


def _numpy_conversions():
    return {
        "asarray": lambda t: np.asarray(t),
        "asarray_dtype": lambda t: np.asarray(t, dtype=np.float64),
        "array_of_elements": lambda t: np.array([t[0], t[1]]),
        "ufunc": lambda t: np.isfinite(t),
        "numpy_scalar": lambda t: np.float32(t[0]),
    }


@pytest.mark.parametrize("how", list(_numpy_conversions()))
def test_numpy_conversion_of_a_tensor_that_requires_grad(how):
    """NumPy's ``__array__`` conversions go through ``numpy()`` in PyTorch,
    so they refuse a tensor that requires grad while grad mode is on, and
    allow it under ``no_grad`` (SB3's docs export a policy whose traced
    outputs require grad: ``np.asarray(values)`` raises)."""
    f = _numpy_conversions()[how]
    for lib in (torch, tracec):
        w = lib.nn.Linear(2, 2)(lib.ones(1, 2))[0]
        assert w.requires_grad
        with pytest.raises(RuntimeError, match=_NUMPY_OF_GRAD.replace("(", r"\(").replace(")", r"\)")):
            f(w)
    got = []
    for lib in (torch, tracec):
        w = lib.arange(2.0).requires_grad_()
        with lib.no_grad():
            got.append(np.asarray(f(w)))
        got.append(np.asarray(f(w.detach())))
    np.testing.assert_array_equal(got[0], got[2])
    np.testing.assert_array_equal(got[1], got[3])


def _hparam_protos(lib):
    from importlib import import_module
    summary = import_module(lib.__name__ + ".utils.tensorboard.summary")
    hp = {"algorithm": "A2C", "learning rate": 7e-4, "gamma": 0.99, "n": 5, "flag": True,
          "skip": None, "t": lib.tensor([0.25])}
    exp, ssi, sei = summary.hparams(hp, {"rollout/ep_len_mean": 0, "train/value_loss": 0.0},
                                    hparam_domain_discrete={"algorithm": ["A2C", "PPO"]})
    return [p.SerializeToString(deterministic=True) for p in (exp, ssi, sei)]


def test_tensorboard_hparams_protos_match_torch():
    """``torch.utils.tensorboard.summary.hparams`` exists and makes PyTorch's
    three protos, and ``SummaryWriter.file_writer.add_summary`` writes them
    (Stable-Baselines3's logger imports ``hparams`` with ``SummaryWriter``
    and took tensorboard for not installed when it failed)."""
    pytest.importorskip("tensorboard")
    assert _hparam_protos(tracec) == _hparam_protos(torch)


def test_tensorboard_add_hparams_and_file_writer(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    from tracec.utils.tensorboard import SummaryWriter
    from tracec.utils.tensorboard.summary import hparams

    def tags(folder):
        out = []
        for root, _, files in sorted(os.walk(folder)):
            for f in sorted(files):
                for e in EventFileLoader(os.path.join(root, f)).Load():
                    out += [(os.path.relpath(root, folder), e.step, v.tag,
                             v.metadata.plugin_data.content) for v in e.summary.value]
        return sorted(out)

    for lib, writer in (("torch", TorchWriter), ("tracec", SummaryWriter)):
        with writer(log_dir=str(tmp_path / lib)) as w:
            w.add_hparams({"lr": 0.1, "bs": 4}, {"hparam/acc": 0.5}, run_name="run", global_step=3)
            for s in hparams({"lr": 0.2}, {"m": 1.0}):
                w.file_writer.add_summary(s)
            assert w.file_writer.get_logdir() == str(tmp_path / lib)
    assert tags(tmp_path / "tracec") == tags(tmp_path / "torch")
