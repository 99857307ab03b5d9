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


_ARRAY_OPERATORS = ["t * a", "t + a", "t - a", "t / a", "t // a", "t % a", "t ** a", "t @ m",
                    "t == a", "t != a", "a == t", "t > a", "a < t", "a * t", "a - t",
                    "t * z", "i / a", "h * f", "t * s", "a / t", "a / i", "z / t", "a // t"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("expr", _ARRAY_OPERATORS)
def test_operators_with_a_numpy_array_defer_to_numpy(expr):
    """PyTorch's tensor operators return NotImplemented for a NumPy array
    (``__eq__`` alone takes it), so NumPy computes ``t * arr`` with its own
    type promotion (float32 tensor * int64 array is float64) and wraps the
    result back into a tensor, and ``arr * t`` / ``t > arr`` are TypeErrors
    while ``arr / t`` is ``t.reciprocal() * arr`` (torch's ``__rdiv__``:
    float32 reciprocals in a float64 product); tracec converted the array
    and promoted as for two tensors (float32)."""
    got = []
    for lib in (torch, tracec):
        env = dict(t=lib.ones(2), i=lib.tensor([3, 4]), h=lib.ones(2, dtype=lib.float16),
                   a=np.array([1, 2]), m=np.eye(2), z=np.array(2), f=np.array([1.5], np.float32),
                   s=np.float64(2.5))
        try:
            r = eval(expr, {}, env)
        except Exception as e:      # noqa: BLE001 - the error is the result compared
            got.append(type(e).__name__)
            continue
        got.append((type(r).__name__, str(r.dtype).split(".")[-1], np.asarray(r).tolist())
                   if hasattr(r, "dtype") else r)
    assert got[1] == got[0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "//=", "%=", "**="])
def test_inplace_operators_with_a_numpy_array_rebind(op):
    """``t += arr`` in PyTorch is ``t = t + arr`` through NumPy: a new
    (float64) tensor, the original left unchanged; tracec wrote in place."""
    got = []
    for lib in (torch, tracec):
        t = lib.ones(2)
        env = {"t": t, "a": np.array([1, 3])}
        exec(f"t {op} a", {}, env)
        got.append((env["t"] is t, str(env["t"].dtype).split(".")[-1], env["t"].tolist(), t.tolist()))
        w = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="requires grad"):
            exec(f"w {op} a", {}, {"w": w, "a": np.array([1, 3])})
    assert got[1] == got[0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("expr", ["t * a", "t + a", "t - a", "t / a", "t // a", "t % a",
                                  "t ** a", "t @ m", "i / a", "i * a", "h * f", "t == a",
                                  "a / t", "a / i"])
def test_traced_operators_with_a_numpy_array_give_numpys_result(expr):
    """Inside tracec.compile NumPy cannot read a traced tensor, so the
    operator computes NumPy's result in tensor ops (its dtypes): the
    compiled call returns what eager tracec and PyTorch return."""
    def env(lib):
        return dict(t=lib.arange(1.0, 3.0), i=lib.tensor([3, 4]), h=lib.ones(2, dtype=lib.float16),
                    a=np.array([1, 2]), m=np.eye(2), f=np.array([1.5], np.float32))

    def run(lib, **kw):
        e = env(lib)
        return eval(expr, {}, {**e, **kw})

    want = run(torch)
    eager = run(tracec)
    f = tracec.compile(lambda t, i, h: run(tracec, t=t, i=i, h=h))
    e = env(tracec)
    compiled = [f(e["t"], e["i"], e["h"]) for _ in range(2)][-1]
    for got in (eager, compiled):
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
