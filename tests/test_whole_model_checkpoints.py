"""Whole models saved with ``torch.save(model, f)`` cross between PyTorch
and tracec both ways: a model PyTorch pickled loads on tracec with
``torch.load(f, weights_only=False)`` (its classes resolved to tracec's by
``tracec.torch_names``) and runs as PyTorch runs it; a model a script
saves under ``tracec run`` is a PyTorch zip that the real ``torch.load``
rebuilds into PyTorch's own classes.  The models (``whole_model_zoo``)
cover convolutions, norms, pooling, recurrent layers, attention and
transformers, a user's class with containers, buffers and a functional
attribute, and torchvision's ResNet."""
import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import whole_model_zoo as zoo  # noqa: E402  (imports torch: PyTorch here)

HERE = pathlib.Path(__file__).resolve().parent

SCRIPT = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import torch, torchvision
    import whole_model_zoo as zoo
    d = sys.argv[1]
    for name in zoo.zoo():
        x = torch.load(f"{d}/x_{name}.pt")
        try:
            torch.load(f"{d}/torch_{name}.pt")          # weights_only=True: refused
            print("not refused", name)
        except pickle.UnpicklingError as e:
            assert "weights_only" in str(e), e
        m = torch.load(f"{d}/torch_{name}.pt", weights_only=False)
        np.save(f"{d}/tl_{name}.npy", zoo.run(m, x).numpy())
        print(name, type(m).__module__, type(m).__name__)
    for name, (m, x) in zoo.zoo().items():
        torch.save(m, f"{d}/tracec_{name}.pt")
        np.save(f"{d}/ts_{name}.npy", zoo.run(m, x).numpy())
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=5).eval()
    torch.save(net, f"{d}/tracec_resnet18.pt")
    with torch.no_grad():
        np.save(f"{d}/ts_resnet18.npy", net(torch.load(f"{d}/x_resnet18.pt")).numpy())
    t = torch.arange(4.0)
    torch.save({"a": t, "b": t, "both": [t, t[1:]]}, f"{d}/shared.pt")
""")


@pytest.fixture(scope="module")
def crossed(tmp_path_factory):
    d = tmp_path_factory.mktemp("whole")
    ref = {}
    for name, (m, x) in zoo.zoo().items():
        torch.save(m, d / f"torch_{name}.pt")
        torch.save(x, d / f"x_{name}.pt")
        ref[name] = zoo.run(m, x).numpy()
    torch.save(torch.randn(1, 3, 32, 32), d / "x_resnet18.pt")
    (d / "prog.py").write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "tracec.cli", "run", str(d / "prog.py"), str(d)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return d, ref, r.stdout


def test_a_model_pytorch_saved_whole_loads_and_runs_on_tracec(crossed):
    d, ref, out = crossed
    assert "not refused" not in out
    for name, want in ref.items():
        np.testing.assert_allclose(np.load(d / f"tl_{name}.npy"), want, rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    # PyTorch's classes became tracec's own (which, under tracec run, carry
    # PyTorch's module names, as tests/test_as_torch.py checks)
    assert "net whole_model_zoo Net" in out and "convnet torch.nn.modules.container" in out


def test_a_model_saved_whole_under_tracec_run_loads_in_pytorch(crossed):
    d, ref, _ = crossed
    for name, (_, x) in zoo.zoo().items():
        path = d / f"tracec_{name}.pt"
        assert zipfile.is_zipfile(path), name            # PyTorch's format
        with pytest.raises(Exception, match="weights_only"):
            torch.load(path)
        m = torch.load(path, weights_only=False)
        assert type(m).__module__.split(".")[0] in ("torch", "whole_model_zoo"), type(m)
        assert all(type(s).__module__.startswith("torch.") for s in m.modules()
                   if type(s).__name__ != "Net")
        got = zoo.run(m, x).numpy()
        np.testing.assert_allclose(got, np.load(d / f"ts_{name}.npy"), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
        # same seed, same initialization: the same model as PyTorch's
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_torchvision_model_saved_whole_under_tracec_run_loads_in_torchvision(crossed):
    d, _, _ = crossed
    import types
    for mod in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(mod, types.ModuleType(mod))
    m = torch.load(d / "tracec_resnet18.pt", weights_only=False)
    assert type(m).__module__ == "torchvision.models.resnet"
    with torch.no_grad():
        got = m(torch.load(d / "x_resnet18.pt")).numpy()
    np.testing.assert_allclose(got, np.load(d / "ts_resnet18.npy"), rtol=1e-4, atol=1e-5)


def test_shared_tensors_are_saved_once_and_load_weights_only(crossed):
    d, _, _ = crossed
    ck = torch.load(d / "shared.pt")       # weights_only=True: no POP opcode in the pickle
    assert ck["a"] is ck["b"] and ck["both"][0] is ck["a"]
    assert ck["both"][1].tolist() == [1.0, 2.0, 3.0]
    assert ck["both"][1].untyped_storage().data_ptr() == ck["a"].untyped_storage().data_ptr()


def test_the_names_table_is_the_pinned_torchs():
    """tracec/data/torch_names.json is what scripts/torch_names.py writes
    from the installed torch and torchvision."""
    import importlib.util
    import json
    spec = importlib.util.spec_from_file_location(
        "torch_names_script", HERE.parent / "scripts" / "torch_names.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with open(HERE.parent / "tracec" / "data" / "torch_names.json") as f:
        assert json.load(f) == script.names()


def test_functions_behind_dispatching_wrappers_keep_their_pytorch_names():
    # A Tensor subclass installs dispatching wrappers named after their
    # public location (tracec.relu): the table is keyed by the function
    # behind them, so a module holding F.relu still saves in PyTorch's format
    import tracec
    from tracec.torch_names import torch_name

    class Marked(tracec.Tensor):
        pass
    tracec.ones(1).as_subclass(Marked)
    assert torch_name(tracec.relu) == ["torch._C", "_VariableFunctionsClass", "relu"]
    assert torch_name(tracec.nn.functional.relu) == ["torch.nn.functional", "relu"]
    assert torch_name(tracec.nn.Linear) == ["torch.nn.modules.linear", "Linear"]
